//! History assembly latency versus session length: a session of 1k, 10k and 100k events with a
//! checkpoint over all but its latest turn. Assembly reads the checkpoint and the tail only, so the
//! times should be nearly flat. (`cargo test --benches` runs the 1k and 10k cases once; `cargo
//! bench` adds 100k.)

use std::time::Duration;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use mnemo::compaction::{CompactOptions, ContextOptions, Decision};
use mnemo::records::SessionId;
use mnemo::{Config, Mnemo};

/// A transcript of `events` events: turns of a request, a tool call, its result and a reply.
fn transcript(events: usize) -> String {
    // Memory is off: compacting would otherwise extract memories over every folded turn, which is
    // measured by the memory workloads, not here.
    let mut out = String::from("{\"kind\":\"session\",\"session\":\"bench\",\"memory\":\"disabled\"}\n");
    for i in 0..events / 4 {
        let t = format!("t{i:06}");
        out.push_str(&format!("{{\"session\":\"bench\",\"turn\":\"{t}\",\"role\":\"user\",\"parts\":[{{\"type\":\"text\",\"text\":\"Step {i}: fix src/part_{i}.rs\"}}]}}\n"));
        out.push_str(&format!("{{\"session\":\"bench\",\"turn\":\"{t}\",\"role\":\"model\",\"parts\":[{{\"type\":\"tool_call\",\"id\":\"c{i}\",\"name\":\"shell\",\"args\":{{\"cmd\":\"cargo test part_{i}\"}}}}]}}\n"));
        out.push_str(&format!("{{\"session\":\"bench\",\"turn\":\"{t}\",\"role\":\"tool\",\"parts\":[{{\"type\":\"tool_result\",\"id\":\"c{i}\",\"name\":\"shell\",\"result\":\"ok: {i} passed\"}}]}}\n"));
        out.push_str(&format!("{{\"session\":\"bench\",\"turn\":\"{t}\",\"role\":\"model\",\"parts\":[{{\"type\":\"text\",\"text\":\"Fixed src/part_{i}.rs.\"}}]}}\n"));
    }
    out
}

fn compacted_store(events: usize) -> (tempfile::TempDir, Mnemo) {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let mnemo = Mnemo::open(&dir.path().join("store"), Config::default()).unwrap_or_else(|e| panic!("{e}"));
    mnemo.import_transcript(transcript(events).as_bytes(), "bench").unwrap_or_else(|e| panic!("{e}"));
    let session = SessionId::new("bench").unwrap_or_else(|e| panic!("{e}"));
    let runtime =
        tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap_or_else(|e| panic!("{e}"));
    let outcome = runtime
        .block_on(mnemo.compaction().compact(&session, &CompactOptions::default()))
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(outcome.recorded.is_some(), "{:?}", outcome.history.diagnostics);
    (dir, mnemo)
}

fn assembly(c: &mut Criterion) {
    let full = std::env::args().any(|arg| arg == "--bench");
    let sizes: &[usize] = if full { &[1_000, 10_000, 100_000] } else { &[1_000, 10_000] };
    let mut group = c.benchmark_group("assembly_with_checkpoint");
    group.sample_size(20).measurement_time(Duration::from_secs(3)).warm_up_time(Duration::from_secs(1));
    let session = SessionId::new("bench").unwrap_or_else(|e| panic!("{e}"));
    for &events in sizes {
        let (_dir, mnemo) = compacted_store(events);
        let check = mnemo
            .compaction()
            .context(&session, &ContextOptions::default())
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(check.diagnostics.decision, Decision::Replaced);
        assert_eq!(check.diagnostics.events_read, 4, "only the tail is read");
        group.bench_function(BenchmarkId::new("events", events), |b| {
            b.iter(|| {
                mnemo
                    .compaction()
                    .context(&session, &ContextOptions::default())
                    .unwrap_or_else(|e| panic!("{e}"))
            });
        });
    }
    group.finish();
}

criterion_group!(benches, assembly);
criterion_main!(benches);
