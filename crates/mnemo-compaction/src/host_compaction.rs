//! A compaction the host made of its own conversation (decision 0215).
//!
//! Claude Code compacts its conversation when it runs out of context: from then on its model gets
//! the host's summary (a user message that begins with [`CLAUDE_CODE_CONTINUATION`]) and what
//! follows, never the history before it. The importer keeps that summary as a system event written
//! by the host. Assembly starts the next request at the latest such summary when no checkpoint of
//! Mnemo's own stands on a later point: the history before it is not what the model saw, and on a
//! long session it does not fit the window. The log keeps every event; only assembly leaves the
//! earlier ones out, and says so.

use mnemo_core::{Author, Content, Position, Role, RuntimeEvent};
use serde::Serialize;

use crate::ledger::LoggedEvent;
use crate::projection::estimate_events_tokens;

/// How Claude Code's continuation after its own compaction begins (its `isCompactSummary` user
/// line), word for word.
pub const CLAUDE_CODE_CONTINUATION: &str = "This session is being continued from a previous conversation";

/// Where an assembled request starts because the host compacted its conversation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HostCompactionStart {
    /// The host's summary event, the request's first message.
    pub event: String,
    /// Its log position.
    pub position: Position,
    /// Prior events before it that the request leaves out.
    pub left_out_events: u64,
    /// Their size, in tokens.
    pub left_out_tokens: u64,
}

/// Whether `event` is the summary a host gave its model after compacting its conversation: a
/// system event written by the host whose text is Claude Code's continuation.
pub fn is_host_compaction(event: &RuntimeEvent) -> bool {
    event.role == Role::System
        && event.author == Author::Host
        && matches!(&event.content, Some(Content::Text(text))
            if text.text.trim_start().starts_with(CLAUDE_CODE_CONTINUATION))
}

/// The index of the latest host compaction among `events`, if any.
pub(crate) fn latest_host_compaction(events: &[LoggedEvent]) -> Option<usize> {
    events.iter().rposition(|e| is_host_compaction(&e.event))
}

/// Splits `events` at their latest host compaction: what assembly starts from, and where it
/// starts (none when the host never compacted).
pub(crate) fn start_at_host_compaction(
    events: Vec<LoggedEvent>,
    chars_per_token: u64,
) -> (Vec<LoggedEvent>, Option<HostCompactionStart>) {
    let Some(index) = latest_host_compaction(&events) else {
        return (events, None);
    };
    let start = start_at(&events, index, chars_per_token);
    let kept = events[index..].to_vec();
    (kept, Some(start))
}

/// The start at the host compaction `events[index]`, every event before it left out.
pub(crate) fn start_at(events: &[LoggedEvent], index: usize, chars_per_token: u64) -> HostCompactionStart {
    assert!(is_host_compaction(&events[index].event), "a request starts only at a host compaction");
    let left_out = &events[..index];
    HostCompactionStart {
        event: events[index].event.id.to_string(),
        position: events[index].position,
        left_out_events: left_out.len() as u64,
        left_out_tokens: estimate_events_tokens(left_out.iter().map(|e| &e.event), chars_per_token),
    }
}

#[cfg(test)]
mod tests {
    use mnemo_core::StreamRevision;

    use super::*;
    use crate::testing::text_event;

    fn logged(event: RuntimeEvent, at: u64) -> LoggedEvent {
        LoggedEvent { position: Position(at), revision: StreamRevision(at - 1), event }
    }

    fn host_system(id: &str, turn: &str, text: &str) -> RuntimeEvent {
        let mut event = text_event(id, turn, "user", text);
        event.role = Role::System;
        event.author = Author::Host;
        event
    }

    #[test]
    fn only_the_hosts_system_summary_is_a_host_compaction() {
        let text = format!("{CLAUDE_CODE_CONTINUATION} that ran out of context.");
        assert!(is_host_compaction(&host_system("e1", "t1", &text)));
        // The same words typed by the user are the user's.
        assert!(!is_host_compaction(&text_event("e2", "t1", "user", &text)));
        // The boundary note the importer writes before the summary is not the summary.
        assert!(!is_host_compaction(&host_system("e3", "t1", "Claude Code compacted the conversation.")));
    }

    #[test]
    fn assembly_starts_at_the_latest_host_compaction() {
        let summary = format!("{CLAUDE_CODE_CONTINUATION}.");
        let events = vec![
            logged(text_event("e1", "t1", "user", "first request"), 1),
            logged(host_system("e2", "t1", &summary), 2),
            logged(text_event("e3", "t2", "user", "second request"), 3),
            logged(host_system("e4", "t2", &summary), 4),
            logged(text_event("e5", "t2", "model", "answer"), 5),
        ];
        let (kept, start) = start_at_host_compaction(events, 4);
        let start = start.unwrap_or_else(|| panic!("a host compaction was expected"));
        assert_eq!(start.event, "e4");
        assert_eq!((start.position, start.left_out_events), (Position(4), 3));
        assert!(start.left_out_tokens > 0);
        let ids: Vec<String> = kept.iter().map(|e| e.event.id.to_string()).collect();
        assert_eq!(ids, ["e4", "e5"]);
    }

    #[test]
    fn without_a_host_compaction_every_event_is_kept() {
        let events = vec![logged(text_event("e1", "t1", "user", "request"), 1)];
        let (kept, start) = start_at_host_compaction(events.clone(), 4);
        assert_eq!((kept, start), (events, None));
    }
}
