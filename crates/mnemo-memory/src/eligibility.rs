//! Which sessions memory may learn from (memory.md §3.1): the one rule behind both extraction's
//! gate and the extraction decision an automatic checkpoint freezes.

use mnemo_core::{BoundaryDisposition, MemoryMode};
use mnemo_pipeline::stages::session_catalog::SessionSummary;

use crate::extract::GateReason;

/// Why a session's memory gate is closed, or `None` when it is open. In order: a session the
/// catalog does not know is `unavailable`; an incognito one `incognito`; one with memory off
/// `disabled`; any session while the store is `draining` `unavailable`; a subagent's or an
/// archived session `ineligible`.
pub fn session_gate(summary: Option<&SessionSummary>, draining: bool) -> Option<GateReason> {
    let Some(summary) = summary else {
        return Some(GateReason::Unavailable);
    };
    if summary.incognito {
        Some(GateReason::Incognito)
    } else if summary.memory == MemoryMode::Disabled {
        Some(GateReason::Disabled)
    } else if draining {
        Some(GateReason::Unavailable)
    } else if summary.subagent || summary.archived {
        Some(GateReason::Ineligible)
    } else {
        None
    }
}

/// The extraction decision an automatic checkpoint freezes: `policy_denied` when a policy closes
/// the gate (incognito, memory disabled, a subagent's or an archived session), `eligible`
/// otherwise. Availability is not policy: a session the catalog does not know yet, or a store that
/// is draining, freezes `eligible`, and the extraction it triggers meets the gate when it runs.
pub fn boundary_disposition(summary: Option<&SessionSummary>) -> BoundaryDisposition {
    match session_gate(summary, false) {
        Some(GateReason::Incognito | GateReason::Disabled | GateReason::Ineligible) => {
            BoundaryDisposition::PolicyDenied
        }
        _ => BoundaryDisposition::Eligible,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mnemo_core::{SessionId, TimestampMs};

    fn summary(edit: impl FnOnce(&mut SessionSummary)) -> SessionSummary {
        let mut summary = SessionSummary {
            session: SessionId::new("s1").unwrap(),
            workspace: None,
            opened: true,
            incognito: false,
            memory: MemoryMode::Enabled,
            subagent: false,
            parent: None,
            source: None,
            title: None,
            event_count: 0,
            turn_count: 0,
            last_turn: None,
            first_timestamp: TimestampMs(0),
            last_timestamp: TimestampMs(0),
            archived: false,
        };
        edit(&mut summary);
        summary
    }

    #[test]
    fn the_gate_and_the_frozen_decision_follow_one_rule() {
        use BoundaryDisposition::{Eligible, PolicyDenied};
        use GateReason::{Disabled, Incognito, Ineligible, Unavailable};
        let open = summary(|_| {});
        let incognito = summary(|s| s.incognito = true);
        let disabled = summary(|s| s.memory = MemoryMode::Disabled);
        let subagent = summary(|s| s.subagent = true);
        let archived = summary(|s| s.archived = true);
        let both = summary(|s| {
            s.incognito = true;
            s.subagent = true;
        });
        let cases: [(Option<&SessionSummary>, bool, Option<GateReason>, BoundaryDisposition); 9] = [
            (Some(&open), false, None, Eligible),
            (Some(&open), true, Some(Unavailable), Eligible),
            (None, false, Some(Unavailable), Eligible),
            (Some(&incognito), false, Some(Incognito), PolicyDenied),
            (Some(&disabled), true, Some(Disabled), PolicyDenied),
            (Some(&subagent), false, Some(Ineligible), PolicyDenied),
            (Some(&archived), false, Some(Ineligible), PolicyDenied),
            // Draining is checked before subagent and archived, after incognito and disabled.
            (Some(&archived), true, Some(Unavailable), PolicyDenied),
            (Some(&both), false, Some(Incognito), PolicyDenied),
        ];
        for (summary, draining, reason, disposition) in cases {
            assert_eq!(session_gate(summary, draining), reason, "{summary:?} draining={draining}");
            assert_eq!(boundary_disposition(summary), disposition, "{summary:?}");
        }
    }
}
