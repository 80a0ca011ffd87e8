//! Security properties (docs/SECURITY.md): a private store directory, the lock, secrets that never
//! reach memory items, keys, search snippets or reads, workspace isolation of search, read and
//! recall, provider state that is never rendered, logged or copied, and incognito sessions that
//! never feed extraction.
#![allow(clippy::unwrap_used, reason = "a test fails loudly on the first unexpected error")]

use std::os::unix::fs::PermissionsExt;

use mnemo::history::{HistoryContext, HistoryReadRequest, HistorySearchRequest};
use mnemo::memory::{ItemInput, KeyInput, RecallMemory};
use mnemo::records::{OperationId, Position, SessionId};
use mnemo::{Config, ErrorCategory, Mnemo};
use mnemo_core::{
    KeyOrigin, KeyType, MemoryKind, MemoryOrigin, MemoryScope, SourcePointer, StatementType, TemporalType,
    WorkspaceId,
};

/// Real-looking credentials of several kinds. None is live.
const SECRETS: &[&str] = &[
    "sk-proj-Xq3vT9mB2nK7pL4wR8sY1zA6cD0fG5hJ",
    "sk-ant-api03-Zr4Qe8Tn2Vb6Xm1Lp9Kd3Hs7Jf5Gw0Ca",
    "AKIAQ3EGRTYKZP4W7XNM",
    "ghp_R8s2Lk4Jh6Gf8Ds0Aq2Wz4Xc6Vb8Nm1Po3Iu",
    "xoxb-2048-4096-Tq8Wr3Ey6Ui9Op2As5Df",
    "AIzaSyD-9tSrke72PouQMnMX-a7eZSW0jkFMBWY",
    "sk_live_51HqLyjWDarjtT1zdp7dcQxR",
    "glpat-Vx7Yw2Kq9Lm4Np6Rs8Tu",
    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiJ1c2VyLTQyIiwiaWF0IjoxNzAwMDAwMDAwfQ.Qm9nVXNTaWduYXR1cmVCeXRlczEyMzQ1Ng",
    "MIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gunVTLw7onLRnrq0",
    "Pg-Sup3rS3cret-2026",
];

/// A transcript in which a user and a tool hand over each secret in a different form.
fn leaky_transcript(session: &str, workspace: &str) -> String {
    let mut lines = vec![format!(r#"{{"kind":"session","session":"{session}","workspace":"{workspace}"}}"#)];
    let texts = [
        format!("please remember my openai key is {} for the deploy script", SECRETS[0]),
        format!("remember that anthropic uses {} in staging", SECRETS[1]),
        format!("the aws access key id is {} and github token {}", SECRETS[2], SECRETS[3]),
        format!("slack bot token {} and google key {}", SECRETS[4], SECRETS[5]),
        format!("stripe key {} and gitlab token {}", SECRETS[6], SECRETS[7]),
        format!("the session cookie jwt is {}", SECRETS[8]),
        format!(
            "here is the deploy key:\n-----BEGIN RSA PRIVATE KEY-----\n{}\n-----END RSA PRIVATE KEY-----",
            SECRETS[9]
        ),
        format!("connect with postgres://deploy:{}@db.internal:5432/payments", SECRETS[10]),
    ];
    for (turn, text) in texts.iter().enumerate() {
        let text = serde_json::to_string(text).unwrap();
        lines.push(format!(
            r#"{{"session":"{session}","turn":"t{turn}","role":"user","parts":[{{"type":"text","text":{text}}}]}}"#
        ));
        lines.push(format!(
            r#"{{"session":"{session}","turn":"t{turn}","role":"model","parts":[{{"type":"tool_call","id":"c{turn}","name":"shell","args":{{"cmd":"deploy"}}}}]}}"#
        ));
        lines.push(format!(
            r#"{{"session":"{session}","turn":"t{turn}","role":"tool","parts":[{{"type":"tool_result","id":"c{turn}","name":"shell","result":{{"stdout":{text}}}}}]}}"#
        ));
        lines.push(format!(
            r#"{{"session":"{session}","turn":"t{turn}","kind":"turn_end","status":"completed"}}"#
        ));
    }
    lines.join("\n") + "\n"
}

fn input(content: &str, keys: &[&str], scope: MemoryScope) -> ItemInput {
    ItemInput {
        content: content.to_owned(),
        kind: MemoryKind::Preference,
        statement_type: StatementType::Fact,
        temporal_type: TemporalType::Undated,
        scope,
        event_started_at: None,
        event_ended_at: None,
        observed_at: 0,
        origin: MemoryOrigin::UserRequested,
        keys: keys
            .iter()
            .map(|k| KeyInput {
                key: (*k).to_owned(),
                key_type: KeyType::Concept,
                key_origin: KeyOrigin::User,
            })
            .collect(),
        sources: vec![SourcePointer {
            session: SessionId::new("s1").unwrap(),
            run: mnemo_core::RunId::new("t0").unwrap(),
            turn: mnemo_core::TurnId::new("t0").unwrap(),
            event: mnemo_core::EventId::new("e1").unwrap(),
        }],
    }
}

fn sid(text: &str) -> SessionId {
    SessionId::new(text).unwrap()
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap()
}

fn assert_no_secret(what: &str, text: &str) {
    for secret in SECRETS {
        assert!(!text.contains(secret), "{what} leaks {secret}:\n{text}");
    }
}

fn context_in(session: &SessionId) -> HistoryContext<'_> {
    HistoryContext {
        current_session: Some(session),
        current_turn: None,
        incognito_active: false,
        abort: None,
        workspace: None,
    }
}

#[test]
fn the_store_is_private_to_its_owner_and_nothing_else_is_chmodded() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    {
        let mnemo = Mnemo::open(&store, Config::default()).unwrap();
        mnemo.import_transcript(leaky_transcript("s1", "w1").as_bytes(), "leaky.jsonl").unwrap();
    }
    // The store directory is created owner-only, and so is every file Mnemo itself writes there; the
    // storage engine's files follow the host's umask inside that directory no other user can enter.
    assert_eq!(std::fs::metadata(&store).unwrap().permissions().mode() & 0o777, 0o700);
    for name in [mnemo::log::STORE_MARKER_FILE_NAME, "mnemo.lock", mnemo::log::LOG_SOURCE_FILE_NAME] {
        let mode = std::fs::metadata(store.join(name)).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "{name} is {mode:o}");
    }
    // A reopen changes no mode: a mode the owner set on purpose stays.
    std::fs::set_permissions(&store, std::fs::Permissions::from_mode(0o750)).unwrap();
    drop(Mnemo::open(&store, Config::default()).unwrap());
    assert_eq!(std::fs::metadata(&store).unwrap().permissions().mode() & 0o777, 0o750);
}

#[test]
fn a_second_open_of_a_store_is_refused_while_the_first_holds_it() {
    let dir = tempfile::tempdir().unwrap();
    let first = Mnemo::open(dir.path(), Config::default()).unwrap();
    let error = Mnemo::open(dir.path(), Config::default()).unwrap_err();
    assert!(error.to_string().contains("store is locked by another process"), "{error}");
    assert_eq!(error.category(), ErrorCategory::Failure);
    drop(first);
    drop(Mnemo::open(dir.path(), Config::default()).unwrap());
}

#[test]
fn secrets_never_reach_memory_search_snippets_or_reads() {
    let dir = tempfile::tempdir().unwrap();
    let mnemo = Mnemo::open(dir.path(), Config::default()).unwrap();
    mnemo.import_transcript(leaky_transcript("s1", "w1").as_bytes(), "leaky.jsonl").unwrap();
    let session = sid("s1");
    let rt = runtime();
    rt.block_on(mnemo.memory().remember(&session, None)).unwrap();
    rt.block_on(mnemo.memory().extract(&session, None)).unwrap();

    // Memory: no memory record in the log (items, keys, evidence, receipts) holds a secret.
    let scope = MemoryScope::Workspace(WorkspaceId::new("w1").unwrap());
    let item = input("deploys go through the staging cluster first", &["deploy"], scope.clone());
    mnemo.memory().create(OperationId::new("op-plain").unwrap(), item).unwrap();
    let memory_records: Vec<String> = mnemo
        .log_entries(Position(1), 100_000)
        .unwrap()
        .into_iter()
        .filter(|entry| entry.stream.starts_with("memory/"))
        .map(|entry| entry.record.to_string())
        .collect();
    assert!(!memory_records.is_empty(), "nothing reached memory, so nothing was checked");
    assert_no_secret("memory records", &memory_records.join("\n"));
    let recalled =
        mnemo.memory().recall(&session, &RecallMemory { query: "key token deploy".to_owned(), limit: None });
    assert_no_secret("recall", &format!("{recalled:?}"));
    // A host writing a secret directly is refused, in content and in keys.
    for (content, key) in
        [(format!("deploy key is {}", SECRETS[0]), "deploy"), ("the deploy key".to_owned(), SECRETS[3])]
    {
        let item = input(&content, &[key], scope.clone());
        let error = mnemo.memory().create(OperationId::new("op-secret").unwrap(), item).unwrap_err();
        assert_eq!(error.category(), ErrorCategory::Input, "{error}");
        assert!(error.to_string().contains("credential material"), "{error}");
    }

    // Search: snippets of every row for words around each secret hold no secret.
    let mut rows = 0;
    for query in [
        "openai key",
        "anthropic staging",
        "aws access key",
        "slack bot token",
        "stripe key",
        "jwt cookie",
        "deploy key",
        "postgres connect",
    ] {
        let found =
            mnemo.history().search(&HistorySearchRequest::new(query), &context_in(&session), None).unwrap();
        let found = found.unwrap_or_else(|e| panic!("{query}: {e:?}"));
        rows += found.rows.len();
        assert_no_secret(&format!("search {query:?}"), &serde_json::to_string(&found).unwrap());
    }
    assert!(rows > 0, "the searches found nothing, so they checked nothing");
    // Searching for a secret itself is refused before anything is read.
    for secret in SECRETS.iter().take(9) {
        let refused =
            mnemo.history().search(&HistorySearchRequest::new(*secret), &context_in(&session), None).unwrap();
        assert!(refused.is_err(), "a search for {secret} was not refused");
    }

    // Read: every turn of the session reads back without a secret.
    for turn in 0..8 {
        let request = HistoryReadRequest {
            session_id: "s1".to_owned(),
            turn_id: Some(format!("t{turn}")),
            ..HistoryReadRequest::default()
        };
        let read = mnemo.history().read(&request, &HistoryContext::default(), None).unwrap();
        let read = read.unwrap_or_else(|e| panic!("turn {turn}: {e:?}"));
        assert_no_secret(&format!("read t{turn}"), &serde_json::to_string(&read).unwrap());
    }
}

#[test]
fn search_read_and_recall_stay_inside_the_callers_workspace() {
    let dir = tempfile::tempdir().unwrap();
    let mnemo = Mnemo::open(dir.path(), Config::default()).unwrap();
    let transcript = |session: &str, workspace: &str, text: &str| {
        format!(
            "{{\"kind\":\"session\",\"session\":\"{session}\",\"workspace\":\"{workspace}\"}}\n\
             {{\"session\":\"{session}\",\"turn\":\"t1\",\"role\":\"user\",\"parts\":[{{\"type\":\"text\",\"text\":\"{text}\"}}]}}\n"
        )
    };
    mnemo
        .import_transcript(
            transcript("alpha-1", "alpha", "the quarterly migration plan for billing").as_bytes(),
            "a1",
        )
        .unwrap();
    mnemo
        .import_transcript(transcript("alpha-2", "alpha", "where we left the migration").as_bytes(), "a2")
        .unwrap();
    mnemo
        .import_transcript(
            transcript("beta-1", "beta", "beta confidential migration of payroll").as_bytes(),
            "b1",
        )
        .unwrap();
    let alpha = sid("alpha-2");
    let found = mnemo
        .history()
        .search(&HistorySearchRequest::new("migration"), &context_in(&alpha), None)
        .unwrap()
        .unwrap();
    let sessions: Vec<&str> = found.rows.iter().map(|r| r.session_id.as_str()).collect();
    assert!(sessions.contains(&"alpha-1"), "{sessions:?}");
    assert!(!sessions.contains(&"beta-1"), "a search in alpha shows beta: {sessions:?}");
    // Without a current session (an operator's search) every workspace is searched.
    let all = mnemo
        .history()
        .search(&HistorySearchRequest::new("migration"), &HistoryContext::default(), None)
        .unwrap()
        .unwrap();
    assert!(all.rows.iter().any(|r| r.session_id == "beta-1"));
    // Reading another workspace's session answers exactly as for a session that does not exist.
    let read = |target: &str| {
        let request = HistoryReadRequest {
            session_id: target.to_owned(),
            turn_id: Some("t1".to_owned()),
            ..HistoryReadRequest::default()
        };
        mnemo.history().read(&request, &context_in(&alpha), None).unwrap()
    };
    assert!(read("alpha-1").is_ok());
    let refused = format!("{:?}", read("beta-1").unwrap_err());
    assert_eq!(refused, format!("{:?}", read("no-such-session").unwrap_err()));
    // Recall: items of beta's workspace never reach alpha's sessions.
    let beta_scope = MemoryScope::Workspace(WorkspaceId::new("beta").unwrap());
    let mut item = input("payroll migration runs on fridays", &["payroll migration"], beta_scope);
    item.sources[0].session = sid("beta-1");
    mnemo.memory().create(OperationId::new("op-beta").unwrap(), item).unwrap();
    let in_beta = mnemo
        .memory()
        .recall(&sid("beta-1"), &RecallMemory { query: "payroll migration".to_owned(), limit: None })
        .unwrap();
    assert_eq!(in_beta.len(), 1, "the item is recallable in its own workspace");
    let in_alpha = mnemo
        .memory()
        .recall(&alpha, &RecallMemory { query: "payroll migration".to_owned(), limit: None })
        .unwrap();
    assert!(in_alpha.is_empty(), "{in_alpha:?}");
    let block = mnemo.memory().recall_block(&alpha, Some("payroll migration")).unwrap();
    assert!(!format!("{block:?}").contains("payroll"), "{block:?}");
}

#[test]
fn incognito_sessions_never_feed_extraction() {
    let dir = tempfile::tempdir().unwrap();
    let mnemo = Mnemo::open(dir.path(), Config::default()).unwrap();
    let transcript = "{\"kind\":\"session\",\"session\":\"private\",\"workspace\":\"w1\",\"incognito\":true}\n\
        {\"session\":\"private\",\"turn\":\"t1\",\"role\":\"user\",\"parts\":[{\"type\":\"text\",\"text\":\"remember that I prefer tabs over spaces and my name is Ada\"}]}\n";
    mnemo.import_transcript(transcript.as_bytes(), "private.jsonl").unwrap();
    let session = sid("private");
    let rt = runtime();
    let remembered = rt.block_on(mnemo.memory().remember(&session, None)).unwrap();
    let extracted = rt.block_on(mnemo.memory().extract(&session, None)).unwrap();
    let memory: Vec<String> = mnemo
        .log_entries(Position(1), 100_000)
        .unwrap()
        .into_iter()
        .filter(|entry| entry.stream.starts_with("memory/"))
        .map(|entry| entry.record.to_string())
        .collect();
    assert!(
        memory.iter().all(|r| !r.contains("tabs") && !r.contains("Ada")),
        "incognito content reached memory: {memory:?} ({remembered:?}, {extracted:?})"
    );
    let recalled = mnemo.memory().recall(&session, &RecallMemory { query: "tabs".to_owned(), limit: None });
    assert!(recalled.map(|r| r.is_empty()).unwrap_or(true));
}

/// A shared buffer that tracing writes into.
#[derive(Clone, Default)]
struct Captured(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

const PROVIDER_STATE: &str = "ZW5jcnlwdGVkLXByb3ZpZGVyLXN0YXRlLW5ldmVyLXNob3du";

/// A provider compactor that answers with one opaque, encrypted compaction item.
#[derive(Debug)]
struct Opaque;

impl mnemo::compaction::ProviderCompactor for Opaque {
    fn identity(&self) -> mnemo::compaction::SummarizerIdentity {
        mnemo::compaction::SummarizerIdentity { name: "opaque".to_owned(), prompt_version: "v1".to_owned() }
    }
    fn connection(&self) -> mnemo::compaction::Connection {
        mnemo::compaction::Connection {
            provider_type: "openai-codex".to_owned(),
            slug: "codex".to_owned(),
            model: "gpt-5".to_owned(),
        }
    }
    fn compact<'a>(
        &'a self,
        _: &'a mnemo::compaction::ProviderCompactionRequest,
    ) -> mnemo::memory::BoxFuture<'a, Result<Vec<serde_json::Value>, mnemo::compaction::SummarizeError>> {
        let part = serde_json::json!({"type": "custom", "kind": "openai.compaction",
            "providerMetadata": {"openai": {"itemId": "it-1", "encryptedContent": PROVIDER_STATE}}});
        Box::pin(async move { Ok(vec![part]) })
    }
}

#[test]
fn provider_state_is_never_rendered_logged_or_copied() {
    let captured = Captured::default();
    let writer = captured.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_writer(move || writer.clone())
        .finish();
    // Global, so the log's writer thread and the stage threads are captured too.
    tracing::subscriber::set_global_default(subscriber).unwrap();

    let dir = tempfile::tempdir().unwrap();
    let mnemo = Mnemo::open(dir.path(), Config::default()).unwrap();
    let long = concat!(env!("CARGO_MANIFEST_DIR"), "/../crates/mnemo-cli/samples/long-session.jsonl");
    let report = mnemo.import_transcript(&std::fs::read(long).unwrap(), "long.jsonl").unwrap();
    let session = mnemo.history().sessions().unwrap()[0].session.clone();
    let codex = mnemo::compaction::ProviderCompactor::connection(&Opaque);
    let options = mnemo::compaction::CompactOptions {
        context: mnemo::compaction::ContextOptions {
            connection: codex.clone(),
            ..mnemo::compaction::ContextOptions::default()
        },
        provider_compactor: Some(std::sync::Arc::new(Opaque)),
        ..mnemo::compaction::CompactOptions::default()
    };
    let outcome = runtime().block_on(mnemo.compaction().compact(&session, &options)).unwrap();
    let recorded = outcome.recorded.unwrap_or_else(|| panic!("nothing was compacted: {report:?}"));
    assert_eq!(recorded.checkpoint.version(), 3);
    // The state is in the log (it must replay), so the log is where it is allowed to be.
    let in_log = mnemo.log_entries(Position(1), 100_000).unwrap();
    assert!(
        in_log.iter().any(|e| e.record.to_string().contains(PROVIDER_STATE)),
        "the state was not recorded"
    );

    // Rendered: only as a provider item to its own connection, never as text; not at all to another.
    let own = mnemo
        .compaction()
        .context(
            &session,
            &mnemo::compaction::ContextOptions {
                connection: codex.clone(),
                ..mnemo::compaction::ContextOptions::default()
            },
        )
        .unwrap();
    for item in &own.items {
        if !matches!(item, mnemo::compaction::HistoryItem::ProviderState { .. }) {
            assert!(
                !format!("{item:?}").contains(PROVIDER_STATE),
                "rendered outside a provider item: {item:?}"
            );
        }
    }
    let other = mnemo::compaction::Connection { model: "gpt-4".to_owned(), ..codex };
    let theirs = mnemo
        .compaction()
        .context(
            &session,
            &mnemo::compaction::ContextOptions {
                connection: other,
                ..mnemo::compaction::ContextOptions::default()
            },
        )
        .unwrap();
    assert!(!format!("{theirs:?}").contains(PROVIDER_STATE), "rendered to another connection");
    let shown = mnemo.history().transcript(&session, None).unwrap();
    assert!(!format!("{shown:?}").contains(PROVIDER_STATE));

    // Copied: the copy's records never carry it.
    let copy = mnemo.compaction().copy(&session, None, None).unwrap();
    assert_eq!(copy.checkpoints_dropped, 1);
    let copied: Vec<String> = mnemo
        .log_entries(copy.positions.0, 100_000)
        .unwrap()
        .into_iter()
        .filter(|e| e.stream == format!("session/{}", copy.session))
        .map(|e| e.record.to_string())
        .collect();
    assert!(!copied.is_empty());
    assert!(copied.iter().all(|r| !r.contains(PROVIDER_STATE)), "the copy carries provider state");

    // Logged: nothing traced at any level carries it.
    let log = String::from_utf8_lossy(&captured.0.lock().unwrap()).into_owned();
    assert!(log.len() > 100, "tracing captured nothing, so nothing was checked");
    assert!(!log.contains(PROVIDER_STATE), "tracing logged provider state");
}
