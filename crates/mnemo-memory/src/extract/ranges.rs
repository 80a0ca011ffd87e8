//! Where a background extraction over a long stretch of a session is cut into ranges that fit
//! (an imported session of hundreds of prompts), and where a remember request's turn starts.

use mnemo_core::{Author, Content, EventId, Role, SessionId, ToolCallId};

use super::ExtractionHost;
use crate::error::MemoryError;
use crate::state::MemoryView;

/// Most user events one background extraction range holds when `extract` runs over a long
/// stretch (an imported session of hundreds of prompts): the rest go in the next ranges. The
/// evidence of a range must render in 12,000 JSON characters with every user text at least 64
/// code points (memory.md §3.7): about 200 characters a record with ids of Claude Code's length,
/// so 32 fit with room; a range that cannot fit fails, and its retry only grows.
pub const EXTRACT_USER_EVENTS_PER_RANGE_MAX: usize = 32;

/// The boundaries a background extraction through `terminal_event` (the session's last event
/// when `None`) runs in: an event before every [`EXTRACT_USER_EVENTS_PER_RANGE_MAX`] user
/// events past the cursor, then the terminal event. Empty when the terminal event is not the
/// session's or nothing follows the cursor (the engine answers those).
pub fn extraction_boundaries<H: ExtractionHost + ?Sized>(
    host: &H,
    session: &SessionId,
    terminal_event: Option<&EventId>,
) -> Result<Vec<EventId>, MemoryError> {
    let events = host.session_events(session)?;
    let end = match terminal_event {
        Some(id) => events.iter().position(|e| &e.event.id == id),
        None => events.len().checked_sub(1),
    };
    let Some(end) = end else { return Ok(Vec::new()) };
    let store = host.state()?;
    let cursor = MemoryView::new(store.as_ref()).cursor(session)?.map_or(0, |c| c.processed_ordinal);
    let mut boundaries = Vec::new();
    // A compaction checkpoint's range is the engine's to settle whole (a policy-denied one is
    // skipped, never extracted): no range ends inside one. The stretch through the latest
    // checkpoint boundary is one range, as before; only what follows it is split.
    let checkpoint_end = host
        .checkpoints(session)?
        .iter()
        .filter_map(|c| c.extraction_boundary.as_ref())
        .filter_map(|b| events.iter().position(|e| e.event.id == b.event))
        .filter(|at| *at <= end && events[*at].ordinal > cursor)
        .max();
    if let Some(at) = checkpoint_end {
        boundaries.push(events[at].event.id.clone());
    }
    let mut users = 0;
    for (index, entry) in events.iter().enumerate().take(end + 1) {
        if entry.ordinal <= cursor || checkpoint_end.is_some_and(|at| index <= at) {
            continue;
        }
        if is_user(&entry.event) {
            if users == EXTRACT_USER_EVENTS_PER_RANGE_MAX && index > 0 {
                boundaries.push(events[index - 1].event.id.clone());
                users = 0;
            }
            users += 1;
        }
    }
    if events[end].ordinal > cursor && checkpoint_end != Some(end) {
        boundaries.push(events[end].event.id.clone());
    }
    Ok(boundaries)
}

/// Whether `event` is one the user wrote (what a window's size is counted in).
pub(crate) fn is_user(event: &mnemo_core::RuntimeEvent) -> bool {
    event.role == Role::User && event.author == Author::User
}

/// The event just before the turn a remember request is in (the turn of `tool_call`, else the
/// session's last turn); `None` when that turn opens the session or is not found.
pub fn turn_start_before<H: ExtractionHost + ?Sized>(
    host: &H,
    session: &SessionId,
    tool_call: Option<&ToolCallId>,
) -> Result<Option<EventId>, MemoryError> {
    let events = host.session_events(session)?;
    let turn = match tool_call {
        Some(call) => events
            .iter()
            .find(|e| {
                matches!(&e.event.content, Some(Content::FunctionCall(c)) if c.id.as_str() == call.as_str())
            })
            .map(|e| e.event.turn_id.clone()),
        None => events.last().map(|e| e.event.turn_id.clone()),
    };
    let first = turn.and_then(|turn| events.iter().position(|e| e.event.turn_id == turn));
    Ok(first.filter(|at| *at > 0).map(|at| events[at - 1].event.id.clone()))
}
