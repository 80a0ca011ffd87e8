//! The `session-catalog` stage: one summary per session (workspace, flags, title, counts, first and
//! last timestamps, archived).
//!
//! Keys: `s` 0x00 session -> the summary as canonical JSON; `t` 0x00 session 0x00 turn -> empty,
//! one per turn seen, so that turns are counted once however many events they hold.

use std::collections::BTreeMap;
use std::collections::btree_map::Entry;

use mnemo_core::{MemoryMode, Record, SessionId, TimestampMs, TurnId, WorkspaceId};
use serde::{Deserialize, Serialize};

use crate::error::PipelineError;
use crate::projector::{LoggedRecord, Projector};
use crate::store::StateStore;
use crate::txn::StateTxn;

/// The stage's registered name.
pub const STAGE_NAME: &str = "session-catalog";

/// Bumped whenever what the stage writes changes; a new version rebuilds the stage.
const VERSION: u32 = 4;

const SUMMARY_TAG: &[u8] = b"s\0";
const TURN_TAG: &[u8] = b"t\0";

/// What the catalog knows of one session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionSummary {
    /// The session.
    pub session: SessionId,
    /// Its workspace, if it was opened with one.
    pub workspace: Option<WorkspaceId>,
    /// Whether it was opened with a session record (imports of bare events may not have one).
    pub opened: bool,
    /// Incognito sessions never feed memory extraction.
    pub incognito: bool,
    /// Whether memory is enabled for it.
    pub memory: MemoryMode,
    /// Whether it is a subagent's session.
    pub subagent: bool,
    /// The session that started it, when its session record names one.
    #[serde(default)]
    pub parent: Option<SessionId>,
    /// The format it was imported from (`claude-code`, `codex`, ...), when its session record
    /// names one.
    #[serde(default)]
    pub source: Option<String>,
    /// Its title, if any.
    pub title: Option<String>,
    /// RuntimeEvents recorded.
    pub event_count: u64,
    /// Distinct turns seen.
    pub turn_count: u64,
    /// The turn of the latest event.
    pub last_turn: Option<TurnId>,
    /// Append time of its first record.
    pub first_timestamp: TimestampMs,
    /// Append time of its last record.
    pub last_timestamp: TimestampMs,
    /// Whether it is archived.
    pub archived: bool,
}

impl SessionSummary {
    fn new(session: SessionId, at: TimestampMs) -> Self {
        SessionSummary {
            session,
            workspace: None,
            opened: false,
            incognito: false,
            memory: MemoryMode::Enabled,
            subagent: false,
            parent: None,
            source: None,
            title: None,
            event_count: 0,
            turn_count: 0,
            last_turn: None,
            first_timestamp: at,
            last_timestamp: at,
            archived: false,
        }
    }
}

/// Builds the stage; it takes no configuration.
pub fn factory(config: &toml::Table) -> Result<Box<dyn Projector>, String> {
    if let Some(key) = config.keys().next() {
        return Err(format!("session-catalog takes no configuration, found key {key:?}"));
    }
    Ok(Box::new(SessionCatalog::default()))
}

/// The projector. It keeps the summaries it changed since the last commit decoded, and writes
/// them just before the commit.
#[derive(Debug, Default)]
pub struct SessionCatalog {
    changed: BTreeMap<SessionId, SessionSummary>,
}

impl Projector for SessionCatalog {
    fn name(&self) -> &str {
        STAGE_NAME
    }

    fn version(&self) -> u32 {
        VERSION
    }

    fn apply(&mut self, state: &mut StateTxn<'_>, logged: &LoggedRecord) -> Result<(), PipelineError> {
        // Memory streams do not belong to a session.
        let Some(session) = logged.stream.session_id() else {
            return Ok(());
        };
        let summary = match self.changed.entry(session.clone()) {
            Entry::Occupied(entry) => entry.into_mut(),
            Entry::Vacant(entry) => {
                let stored = state.get(&summary_key(&session))?;
                let summary = match stored {
                    Some(bytes) => decode(&bytes)?,
                    None => SessionSummary::new(session.clone(), logged.timestamp),
                };
                entry.insert(summary)
            }
        };
        summary.last_timestamp = logged.timestamp;
        match &logged.record {
            Record::SessionOpened(opened) => {
                summary.opened = true;
                summary.workspace = opened.workspace.clone();
                summary.incognito = opened.incognito;
                summary.memory = opened.memory;
                summary.subagent = opened.subagent;
                summary.parent = opened.parent.clone();
                summary.source = opened.source.clone();
                summary.title = opened.title.clone();
            }
            Record::SessionFlagsChanged(changed) => {
                if let Some(incognito) = changed.incognito {
                    summary.incognito = incognito;
                }
                if let Some(memory) = changed.memory {
                    summary.memory = memory;
                }
                if let Some(title) = &changed.title {
                    summary.title = Some(title.clone());
                }
            }
            Record::SessionArchived(archived) => summary.archived = archived.archived,
            Record::RuntimeEvent(event) => {
                summary.event_count += 1;
                // Events of one turn mostly arrive together: only a change of turn needs the
                // turn index, which keeps the common case to one read per event.
                if summary.last_turn.as_ref() != Some(&event.turn_id) {
                    let turn_key = turn_key(&session, event.turn_id.as_str());
                    if state.get(&turn_key)?.is_none() {
                        state.put(turn_key, Vec::new());
                        summary.turn_count += 1;
                    }
                    summary.last_turn = Some(event.turn_id.clone());
                }
            }
            _ => {}
        }
        Ok(())
    }

    fn before_commit(&mut self, state: &mut StateTxn<'_>) -> Result<(), PipelineError> {
        for (session, summary) in std::mem::take(&mut self.changed) {
            state.put(summary_key(&session), encode(&summary)?);
        }
        Ok(())
    }
}

fn summary_key(session: &SessionId) -> Vec<u8> {
    [SUMMARY_TAG, session.as_str().as_bytes()].concat()
}

fn turn_key(session: &SessionId, turn: &str) -> Vec<u8> {
    [TURN_TAG, session.as_str().as_bytes(), b"\0", turn.as_bytes()].concat()
}

/// Summaries are JSON in the struct's field order: deterministic (serde writes fields in
/// declaration order) and much cheaper than canonical JSON, which this hot path does not need.
fn encode(summary: &SessionSummary) -> Result<Vec<u8>, PipelineError> {
    serde_json::to_vec(summary).map_err(|e| damaged(e.to_string()))
}

fn decode(bytes: &[u8]) -> Result<SessionSummary, PipelineError> {
    serde_json::from_slice(bytes).map_err(|e| damaged(e.to_string()))
}

fn damaged(reason: String) -> PipelineError {
    PipelineError::DamagedState { stage: STAGE_NAME.to_owned(), reason }
}

/// Every session in the catalog, in session-id order.
pub fn list(store: &dyn StateStore) -> Result<Vec<SessionSummary>, PipelineError> {
    let mut sessions = Vec::new();
    let mut failure = None;
    store.scan_prefix(SUMMARY_TAG, &mut |_, value| match decode(value) {
        Ok(summary) => {
            sessions.push(summary);
            true
        }
        Err(error) => {
            failure = Some(error);
            false
        }
    })?;
    failure.map_or(Ok(sessions), Err)
}

/// One session's summary.
pub fn get(store: &dyn StateStore, session: &SessionId) -> Result<Option<SessionSummary>, PipelineError> {
    store.get(&summary_key(session))?.map(|bytes| decode(&bytes)).transpose()
}
