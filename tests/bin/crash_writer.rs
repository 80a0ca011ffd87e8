//! Appends to a store with `SyncData` from several threads and prints each acknowledged position on
//! its own line, flushed, until it is killed. The crash test reads these lines.

use std::io::Write;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use mnemo::log::{Durability, ExpectedRevision};
use mnemo::records::StreamId;
use mnemo::{Config, Mnemo};

fn main() {
    let mut args = std::env::args().skip(1);
    let (Some(dir), Some(seed)) = (args.next(), args.next()) else {
        eprintln!("usage: crash-writer STORE_DIR SEED");
        std::process::exit(2);
    };
    let seed: u64 = seed.parse().unwrap_or(1);
    let config = Config { durability: Durability::SyncData, ..Config::default() };
    let mnemo = match Mnemo::open(&PathBuf::from(dir), config) {
        Ok(mnemo) => Arc::new(mnemo),
        Err(error) => {
            eprintln!("crash-writer: cannot open: {error}");
            std::process::exit(1);
        }
    };
    let stdout = Arc::new(Mutex::new(std::io::stdout()));
    let writers: Vec<_> = (0..4u64)
        .map(|thread| {
            let mnemo = Arc::clone(&mnemo);
            let stdout = Arc::clone(&stdout);
            std::thread::spawn(move || {
                let mut rng = mnemo_acceptance::sim::Rng::new(seed ^ (thread + 1).wrapping_mul(0x9E37_79B9));
                for n in 0.. {
                    let session = format!("crash-{seed}-{thread}-{}", rng.below(4));
                    let count = 1 + rng.below(3) as usize;
                    let records = mnemo_acceptance::sim::event_records(&mut rng, &session, n, count);
                    let stream =
                        StreamId::new(format!("session/{session}")).unwrap_or_else(|e| panic!("{e}"));
                    match mnemo.append(&stream, ExpectedRevision::Any, &records) {
                        Ok(appended) => {
                            let mut out = stdout.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                            for position in appended.first_position.0..=appended.last_position.0 {
                                let _ = writeln!(out, "{position}");
                            }
                            let _ = out.flush();
                        }
                        Err(error) => {
                            eprintln!("crash-writer: append failed: {error}");
                            std::process::exit(1);
                        }
                    }
                }
            })
        })
        .collect();
    for writer in writers {
        let _ = writer.join();
    }
}
