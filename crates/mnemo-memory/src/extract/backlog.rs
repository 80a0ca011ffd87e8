//! The extraction backlog: the sessions whose events no extraction has read yet, found by each
//! session's extraction cursor (the watermark every extraction commit moves). A background pass
//! extracts exactly these, so a range is never read twice and nothing a session said is left.

use mnemo_core::{SessionId, WorkspaceId};
use mnemo_pipeline::StateStore;
use mnemo_pipeline::stages::session_catalog::SessionSummary;
use serde::Serialize;

use crate::eligibility::session_gate;
use crate::error::MemoryError;
use crate::extract::GateReason;
use crate::state::MemoryView;

/// One session with events past its extraction cursor, or a failed range awaiting its retry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SessionBacklog {
    /// The session.
    pub session: SessionId,
    /// Its workspace, when recorded.
    pub workspace: Option<WorkspaceId>,
    /// Its runtime events.
    pub events: u64,
    /// Events an extraction has read (the cursor).
    pub processed: u64,
    /// Events no extraction has read yet.
    pub unprocessed: u64,
    /// A failed range (first and last ordinal) that the next extraction retries once.
    pub failed_range: Option<(u64, u64)>,
    /// Why no extraction may read the session now (incognito, memory off, a sub-agent's or an
    /// archived session, a draining store); `None` when a background pass extracts it.
    pub gate: Option<GateReason>,
}

impl SessionBacklog {
    /// Whether a background pass extracts this session now.
    pub fn extractable(&self) -> bool {
        self.gate.is_none()
    }
}

/// The backlog of `sessions` (in the order given): each session with events past its cursor or a
/// failed range, with the gate that keeps it from extraction, if one does.
pub fn extraction_backlog<'s>(
    store: &dyn StateStore,
    sessions: impl IntoIterator<Item = &'s SessionSummary>,
    draining: bool,
) -> Result<Vec<SessionBacklog>, MemoryError> {
    let view = MemoryView::new(store);
    let mut backlog = Vec::new();
    for summary in sessions {
        let processed = view.cursor(&summary.session)?.map_or(0, |c| c.processed_ordinal);
        let failed_range = view.pending_failure(&summary.session)?.map(|p| (p.from, p.through));
        let unprocessed = summary.event_count.saturating_sub(processed);
        if unprocessed == 0 && failed_range.is_none() {
            continue;
        }
        backlog.push(SessionBacklog {
            session: summary.session.clone(),
            workspace: summary.workspace.clone(),
            events: summary.event_count,
            processed,
            unprocessed,
            failed_range,
            gate: session_gate(Some(summary), draining),
        });
    }
    Ok(backlog)
}
