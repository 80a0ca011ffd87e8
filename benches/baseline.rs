//! The SQLite baseline: the same RuntimeEvents stored the way the reference runtime stores them.
//!
//! Schema (the reference's `runtime_events` and `runtime_session_event_ordinals`, plus the two
//! tables the read-side queries need):
//!
//! ```sql
//! runtime_events(event_id TEXT PRIMARY KEY, session_id, invocation_id, run_id, turn_id,
//!                event_seq INTEGER > 0, event_kind TEXT, payload_json TEXT, committed_at INTEGER,
//!                UNIQUE(invocation_id, event_seq))
//!   INDEX (session_id, run_id, event_seq), INDEX (session_id, committed_at, event_id)
//! runtime_session_event_ordinals(session_id, ordinal > 0, event_id UNIQUE, PRIMARY KEY(session_id, ordinal))
//!   WITHOUT ROWID
//! checkpoints(checkpoint_id TEXT PRIMARY KEY, session_id, created_at, through_ordinal, payload_json)
//!   INDEX (session_id, created_at)
//! memory_keys(key TEXT, item_id TEXT, PRIMARY KEY(key, item_id)) WITHOUT ROWID
//! ```
//!
//! Connections use WAL, `synchronous=FULL`, `busy_timeout=5000` and `foreign_keys=ON`, as the
//! reference does. An append is one `BEGIN IMMEDIATE` transaction that computes the next
//! `event_seq` within the invocation and the next session ordinal, as the reference's append path
//! does; a batch import is one transaction per batch (`importRuntimeEventsBatch`).

use std::path::Path;

use mnemo::records::RuntimeEvent;
use rusqlite::{Connection, OptionalExtension, params};

/// How many times an append whose `busy_timeout` ran out is retried before it fails.
pub const BUSY_RETRIES_MAX: u32 = 100;

fn is_busy(error: &rusqlite::Error) -> bool {
    matches!(
        error.sqlite_error_code(),
        Some(rusqlite::ErrorCode::DatabaseBusy) | Some(rusqlite::ErrorCode::DatabaseLocked)
    )
}

/// The file name of the baseline's database.
pub const DATABASE_FILE: &str = "baseline.sqlite";

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS runtime_events (
  event_id TEXT PRIMARY KEY,
  session_id TEXT NOT NULL,
  invocation_id TEXT NOT NULL,
  run_id TEXT NOT NULL,
  turn_id TEXT NOT NULL,
  event_seq INTEGER NOT NULL CHECK (event_seq > 0),
  event_kind TEXT NOT NULL,
  payload_json TEXT NOT NULL,
  committed_at INTEGER NOT NULL,
  UNIQUE (invocation_id, event_seq)
);
CREATE INDEX IF NOT EXISTS runtime_events_session_run ON runtime_events (session_id, run_id, event_seq);
CREATE INDEX IF NOT EXISTS runtime_events_session_time ON runtime_events (session_id, committed_at, event_id);
CREATE TABLE IF NOT EXISTS runtime_session_event_ordinals (
  session_id TEXT NOT NULL,
  ordinal INTEGER NOT NULL CHECK (ordinal > 0),
  event_id TEXT NOT NULL UNIQUE REFERENCES runtime_events (event_id) ON DELETE CASCADE,
  PRIMARY KEY (session_id, ordinal)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS checkpoints (
  checkpoint_id TEXT PRIMARY KEY,
  session_id TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  through_ordinal INTEGER NOT NULL,
  payload_json TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS checkpoints_session ON checkpoints (session_id, created_at);
CREATE TABLE IF NOT EXISTS memory_keys (
  key TEXT NOT NULL,
  item_id TEXT NOT NULL,
  PRIMARY KEY (key, item_id)
) WITHOUT ROWID;
";

/// One connection to the baseline database.
#[derive(Debug)]
pub struct Baseline {
    connection: Connection,
}

impl Baseline {
    /// Opens (creating if needed) the baseline database in `dir`, configured as the reference does.
    pub fn open(dir: &Path) -> rusqlite::Result<Baseline> {
        let connection = Connection::open(dir.join(DATABASE_FILE))?;
        connection.busy_timeout(std::time::Duration::from_millis(5000))?;
        connection.pragma_update(None, "journal_mode", "WAL")?;
        connection.pragma_update(None, "synchronous", "FULL")?;
        connection.pragma_update(None, "foreign_keys", "ON")?;
        connection.execute_batch(SCHEMA)?;
        Ok(Baseline { connection })
    }

    /// Appends one event in its own transaction, as the reference's `appendRuntimeEvent` does.
    /// Under heavy write contention `busy_timeout` can run out; the append is then retried, as a
    /// host would, so the baseline measures throughput rather than failing.
    pub fn append(&mut self, event: &RuntimeEvent, payload: &str) -> rusqlite::Result<()> {
        let mut attempts = 0;
        loop {
            match self.try_append(event, payload) {
                Err(error) if is_busy(&error) && attempts < BUSY_RETRIES_MAX => attempts += 1,
                result => return result,
            }
        }
    }

    fn try_append(&mut self, event: &RuntimeEvent, payload: &str) -> rusqlite::Result<()> {
        let tx = self.connection.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        insert(&tx, event, payload)?;
        tx.commit()
    }

    /// Appends a batch of one session's events in one transaction (`importRuntimeEventsBatch`).
    pub fn append_batch(&mut self, events: &[(RuntimeEvent, String)]) -> rusqlite::Result<()> {
        let tx = self.connection.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        for (event, payload) in events {
            insert(&tx, event, payload)?;
        }
        tx.commit()
    }

    /// A session's events in ordinal order: the read behind its visible messages.
    pub fn session_events(&self, session: &str) -> rusqlite::Result<Vec<String>> {
        let mut statement = self.connection.prepare_cached(
            "SELECT e.payload_json FROM runtime_session_event_ordinals o
             JOIN runtime_events e ON e.event_id = o.event_id
             WHERE o.session_id = ?1 ORDER BY o.ordinal",
        )?;
        let rows = statement.query_map(params![session], |row| row.get(0))?;
        rows.collect()
    }

    /// Records a checkpoint covering the session's events up to `through_ordinal`.
    pub fn record_checkpoint(
        &mut self,
        session: &str,
        id: &str,
        through_ordinal: i64,
        payload: &str,
    ) -> rusqlite::Result<()> {
        self.connection.execute(
            "INSERT INTO checkpoints (checkpoint_id, session_id, created_at, through_ordinal, payload_json)
             VALUES (?1, ?2, 0, ?3, ?4)",
            params![id, session, through_ordinal, payload],
        )?;
        Ok(())
    }

    /// The history for the next request as the reference assembles it: the latest checkpoint and
    /// the session's events after it, in ordinal order.
    pub fn assemble(&self, session: &str) -> rusqlite::Result<(Option<String>, Vec<String>)> {
        let checkpoint: Option<(String, i64)> = self
            .connection
            .prepare_cached(
                "SELECT payload_json, through_ordinal FROM checkpoints WHERE session_id = ?1
                 ORDER BY created_at DESC, through_ordinal DESC LIMIT 1",
            )?
            .query_row(params![session], |row| Ok((row.get(0)?, row.get(1)?)))
            .optional()?;
        let after = checkpoint.as_ref().map_or(0, |(_, through)| *through);
        let mut statement = self.connection.prepare_cached(
            "SELECT e.payload_json FROM runtime_session_event_ordinals o
             JOIN runtime_events e ON e.event_id = o.event_id
             WHERE o.session_id = ?1 AND o.ordinal > ?2 ORDER BY o.ordinal",
        )?;
        let tail =
            statement.query_map(params![session, after], |row| row.get(0))?.collect::<Result<_, _>>()?;
        Ok((checkpoint.map(|(payload, _)| payload), tail))
    }

    /// How many events hold `needle` (the reference's substring search, case-insensitive for ASCII).
    pub fn substring_search(&self, needle: &str, limit: u32) -> rusqlite::Result<Vec<String>> {
        let mut statement = self.connection.prepare_cached(
            "SELECT event_id FROM runtime_events WHERE instr(lower(payload_json), lower(?1)) > 0
             ORDER BY committed_at DESC LIMIT ?2",
        )?;
        let rows = statement.query_map(params![needle, limit], |row| row.get(0))?;
        rows.collect()
    }

    /// Adds `(key, item id)` pairs to the key table in one transaction, as the reference's memory
    /// writer stores an item's keys.
    pub fn insert_memory_keys(&mut self, pairs: &[(String, String)]) -> rusqlite::Result<()> {
        let tx = self.connection.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        {
            let mut statement =
                tx.prepare_cached("INSERT OR IGNORE INTO memory_keys (key, item_id) VALUES (?1, ?2)")?;
            for (key, item) in pairs {
                statement.execute(params![key, item])?;
            }
        }
        tx.commit()
    }

    /// The items holding exactly `key`, at most `limit` (the reference's key search).
    pub fn key_search(&self, key: &str, limit: u32) -> rusqlite::Result<Vec<String>> {
        let mut statement = self
            .connection
            .prepare_cached("SELECT item_id FROM memory_keys WHERE key = ?1 ORDER BY item_id LIMIT ?2")?;
        let rows = statement.query_map(params![key, limit], |row| row.get(0))?;
        rows.collect()
    }

    /// The underlying connection, for workloads that need their own statements.
    pub fn connection(&self) -> &Connection {
        &self.connection
    }
}

fn insert(tx: &rusqlite::Transaction<'_>, event: &RuntimeEvent, payload: &str) -> rusqlite::Result<()> {
    let next_seq: i64 = tx.query_row(
        "SELECT COALESCE(MAX(event_seq), 0) + 1 FROM runtime_events WHERE invocation_id = ?1",
        params![event.invocation_id.as_str()],
        |row| row.get(0),
    )?;
    let kind = event.content.as_ref().map_or("runtime_fact", |c| c.kind().as_str());
    tx.execute(
        "INSERT INTO runtime_events (event_id, session_id, invocation_id, run_id, turn_id, event_seq,
                                     event_kind, payload_json, committed_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
        params![
            event.id.as_str(),
            event.session_id.as_str(),
            event.invocation_id.as_str(),
            event.run_id.as_str(),
            event.turn_id.as_str(),
            next_seq,
            kind,
            payload,
            event.ts.0 as i64,
        ],
    )?;
    let next_ordinal: i64 = tx.query_row(
        "SELECT COALESCE(MAX(ordinal), 0) + 1 FROM runtime_session_event_ordinals WHERE session_id = ?1",
        params![event.session_id.as_str()],
        |row| row.get(0),
    )?;
    tx.execute(
        "INSERT INTO runtime_session_event_ordinals (session_id, ordinal, event_id) VALUES (?1, ?2, ?3)",
        params![event.session_id.as_str(), next_ordinal, event.id.as_str()],
    )?;
    Ok(())
}
