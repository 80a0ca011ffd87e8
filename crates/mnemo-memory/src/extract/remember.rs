//! What a `remember` call answers (memory.md §3.10): every item the call stored, with its kind and
//! scope, or why it stored none. The answer is read off the commit's receipt, which lists what the
//! store applied, so what the caller is told and what the store holds cannot disagree.

use std::fmt::Write as _;

use mnemo_core::{MemoryKind, MemoryScope, NoOpReason};
use serde::Serialize;

use crate::extract::{ExtractionOutcome, ExtractionReport, GateReason};
use crate::state::{MutationOutcome, StoredItem};

/// The result returned to a `remember` call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RememberResult {
    /// `remembered` when `items` holds anything, `not_applicable` when the request was read and
    /// nothing came of it, `unavailable` when it could not be served now.
    pub status: RememberStatus,
    /// Every item the call created, updated or archived, as the store holds it.
    pub items: Vec<StoredItem>,
    /// Why nothing was stored; absent when something was.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<NotStored>,
    /// What the extraction engine said when the reason is `unavailable` and no gate explains it
    /// (a pending range waiting for another trigger, a model seam's configuration error, ...).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

/// The status of a remember call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum RememberStatus {
    /// At least one item was stored (or was already held and is reported as such).
    Remembered,
    /// The request was read and nothing was stored.
    NotApplicable,
    /// The request could not be served now.
    Unavailable,
}

/// Why a remember call stored nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum NotStored {
    /// Nothing in the request reads as a fact, a preference or a standing instruction.
    NothingToKeep,
    /// The request holds a credential or another secret, which memory never stores.
    SensitiveInformation,
    /// What the request states holds only in a project, and its session belongs to no workspace.
    NoWorkspace,
    /// Everything up to the request had been read already.
    NothingNew,
    /// The session is incognito.
    Incognito,
    /// Memory is turned off for the session.
    Disabled,
    /// A subagent's or an archived session.
    Ineligible,
    /// The request could not be read into a memory this time; the next request retries it.
    RetryLater,
    /// The request could not be read into a memory on its retry either and was given up.
    GaveUp,
    /// Memory is shutting down, or the session or its request is not in the store as asked.
    Unavailable,
}

impl NotStored {
    /// The reason in words a user understands, with what to do next.
    pub fn explanation(self) -> &'static str {
        match self {
            NotStored::NothingToKeep => {
                "nothing in the request reads as a fact, a preference or a standing instruction to keep. \
                 Say what should hold from now on, for example \"remember that we deploy with make release\"."
            }
            NotStored::SensitiveInformation => {
                "the request holds a password, key or token, and memory never stores one. \
                 Ask again without the secret (say where it is kept instead)."
            }
            NotStored::NoWorkspace => {
                "what the request states holds only in a project, and this session belongs to no workspace. \
                 Record the session with its workspace, or say that it holds everywhere (\"in every project\")."
            }
            NotStored::NothingNew => {
                "everything up to this request had been read already. Make the request in a new message."
            }
            NotStored::Incognito => "this session is incognito, so nothing from it is remembered.",
            NotStored::Disabled => "memory is turned off for this session. Turn it on, then ask again.",
            NotStored::Ineligible => {
                "this session is a subagent's or archived, so nothing from it is remembered. \
                 Ask in the main session."
            }
            NotStored::RetryLater => {
                "the request could not be read into a memory this time. Ask again to retry it."
            }
            NotStored::GaveUp => {
                "the request could not be read into a memory, on its retry either. \
                 Rephrase it as one plain statement and ask again."
            }
            NotStored::Unavailable => {
                "memory cannot take the request now (it is shutting down, or the session or the request \
                 is not in the store yet). Try again in a moment."
            }
        }
    }
}

impl From<GateReason> for NotStored {
    fn from(reason: GateReason) -> Self {
        match reason {
            GateReason::Incognito => NotStored::Incognito,
            GateReason::Disabled => NotStored::Disabled,
            GateReason::Ineligible => NotStored::Ineligible,
            GateReason::Unavailable => NotStored::Unavailable,
        }
    }
}

impl RememberResult {
    fn nothing(status: RememberStatus, reason: NotStored) -> Self {
        RememberResult { status, items: Vec::new(), reason: Some(reason), detail: None }
    }

    /// The answer in words: each item stored, its kind and where it holds; or why nothing was.
    /// Item ids are left to the structured result.
    pub fn text(&self) -> String {
        if self.items.is_empty() {
            let reason = self.reason.unwrap_or(NotStored::NothingToKeep);
            let detail = self.detail.as_deref().map(|d| format!(" (Memory said: {d}.)")).unwrap_or_default();
            return format!("Nothing was stored: {}{detail}", reason.explanation());
        }
        let kept: Vec<&StoredItem> =
            self.items.iter().filter(|i| i.outcome != MutationOutcome::Archived).collect();
        let replaced: Vec<&StoredItem> =
            self.items.iter().filter(|i| i.outcome == MutationOutcome::Archived).collect();
        let mut out = String::new();
        let (asked, beside): (Vec<&StoredItem>, Vec<&StoredItem>) = kept.iter().partition(|i| i.requested);
        let mut section = |heading: &str, items: &[&StoredItem]| {
            if items.is_empty() {
                return;
            }
            if !out.is_empty() {
                out.push('\n');
            }
            out.push_str(heading);
            for item in items {
                let _ = write!(out, "\n- {} ({})", item.content, describe(item));
            }
        };
        section(&format!("Remembered {}:", count(asked.len())), &asked);
        let beside_heading = if asked.is_empty() {
            format!("Stored {}:", count(beside.len()))
        } else {
            format!("Also stored {}, from what else the session said:", count(beside.len()))
        };
        section(&beside_heading, &beside);
        section(&format!("Replaced {}, which the above contradicts:", count(replaced.len())), &replaced);
        out
    }
}

fn count(items: usize) -> String {
    if items == 1 { "1 item".to_owned() } else { format!("{items} items") }
}

/// An item's kind and where it holds, and what became of it when it was held already.
fn describe(item: &StoredItem) -> String {
    let kind = match item.kind {
        MemoryKind::Preference => "preference",
        MemoryKind::Identity => "identity",
        MemoryKind::Context => "context",
        MemoryKind::Knowledge => "knowledge",
        MemoryKind::Failure => "failure",
        _ => "note",
    };
    let scope = match &item.scope {
        MemoryScope::Global => "global, for every project".to_owned(),
        MemoryScope::Workspace(workspace) => format!("workspace {workspace}"),
        _ => item.scope.as_text(),
    };
    let held = match item.outcome {
        MutationOutcome::Noop => ", already remembered",
        MutationOutcome::Updated => ", merged into what was remembered",
        _ => "",
    };
    format!("{kind}, {scope}{held}")
}

impl ExtractionReport {
    /// The remember result this report stands for.
    pub fn remember_result(&self) -> RememberResult {
        use RememberStatus::{NotApplicable, Unavailable};
        match &self.outcome {
            ExtractionOutcome::Committed { receipt, .. } if !receipt.items.is_empty() => RememberResult {
                status: RememberStatus::Remembered,
                items: receipt.items.clone(),
                reason: None,
                detail: None,
            },
            ExtractionOutcome::Committed { receipt, .. } => {
                let reason = match receipt.no_op_reason {
                    None => NotStored::NothingToKeep,
                    Some(NoOpReason::NoWorkspace) => NotStored::NoWorkspace,
                    Some(_) => NotStored::SensitiveInformation,
                };
                RememberResult::nothing(NotApplicable, reason)
            }
            ExtractionOutcome::NothingToProcess => {
                RememberResult::nothing(NotApplicable, NotStored::NothingNew)
            }
            ExtractionOutcome::RetryLater { .. } => {
                RememberResult::nothing(Unavailable, NotStored::RetryLater)
            }
            ExtractionOutcome::Discarded { .. } => RememberResult::nothing(Unavailable, NotStored::GaveUp),
            ExtractionOutcome::Blocked { reason } | ExtractionOutcome::Unavailable { reason } => {
                let gate = [
                    GateReason::Incognito,
                    GateReason::Disabled,
                    GateReason::Ineligible,
                    GateReason::Unavailable,
                ]
                .into_iter()
                .find(|g| g.name() == reason);
                match gate {
                    Some(gate) => RememberResult::nothing(Unavailable, NotStored::from(gate)),
                    None => RememberResult {
                        detail: Some(reason.clone()),
                        ..RememberResult::nothing(Unavailable, NotStored::Unavailable)
                    },
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mnemo_core::{ItemId, WorkspaceId};

    fn report(outcome: ExtractionOutcome) -> ExtractionReport {
        ExtractionReport {
            operation: None,
            retried: None,
            outcome,
            model_calls: 0,
            rejections: Vec::new(),
            stored: 0,
        }
    }

    fn stored(content: &str, scope: MemoryScope, requested: bool, outcome: MutationOutcome) -> StoredItem {
        let item = ItemId::new(format!("mem_{}", content.len())).unwrap();
        StoredItem {
            item,
            content: content.to_owned(),
            kind: MemoryKind::Preference,
            scope,
            requested,
            outcome,
        }
    }

    #[test]
    fn the_text_names_every_item_and_what_became_of_it() {
        let here = MemoryScope::Workspace(WorkspaceId::new("acme/api").unwrap());
        let result = RememberResult {
            status: RememberStatus::Remembered,
            items: vec![
                stored("Use spaces.", here.clone(), true, MutationOutcome::Created),
                stored("Answer in French.", MemoryScope::Global, true, MutationOutcome::Noop),
                stored("The user likes turtles.", here.clone(), false, MutationOutcome::Created),
                stored("Use tabs, always.", here, false, MutationOutcome::Archived),
            ],
            reason: None,
            detail: None,
        };
        assert_eq!(
            result.text(),
            "Remembered 2 items:\n\
             - Use spaces. (preference, workspace acme/api)\n\
             - Answer in French. (preference, global, for every project, already remembered)\n\
             Also stored 1 item, from what else the session said:\n\
             - The user likes turtles. (preference, workspace acme/api)\n\
             Replaced 1 item, which the above contradicts:\n\
             - Use tabs, always. (preference, workspace acme/api)"
        );
    }

    #[test]
    fn an_unavailable_request_keeps_what_the_engine_said() {
        let waiting = "the failed range waits for another trigger";
        let result = report(ExtractionOutcome::Unavailable { reason: waiting.to_owned() }).remember_result();
        assert_eq!(
            (result.status, result.reason, result.detail.as_deref()),
            (RememberStatus::Unavailable, Some(NotStored::Unavailable), Some(waiting))
        );
        assert!(result.text().ends_with("(Memory said: the failed range waits for another trigger.)"));
        let closed = report(ExtractionOutcome::Blocked { reason: "incognito".to_owned() }).remember_result();
        assert_eq!((closed.reason, closed.detail), (Some(NotStored::Incognito), None));
        let nothing = report(ExtractionOutcome::NothingToProcess).remember_result();
        assert_eq!(
            nothing.text(),
            "Nothing was stored: everything up to this request had been read already. Make the request in \
             a new message."
        );
    }
}
