//! The faithfulness check (beyond the reference system, which proves only that a summary is
//! present): every path, command, identifier, number and quoted string a summary states is looked
//! up in the events it covers. What is not found there is listed on the checkpoint, and a policy
//! may refuse summaries above a share of unsupported claims.
//!
//! Summaries are redacted before they are checked, so a claim may hold [`REDACTED`] where the
//! events hold a secret; the marker stands for the text it hid (see [`supported`]), and a redaction
//! is never counted as a changed claim.

use mnemo_core::redaction::REDACTED;
use mnemo_core::{Content, FaithfulnessReport, RuntimeEvent};
use serde::Serialize;
use serde_json::Value;

use crate::claims::claims;

/// The text a summary's claims are looked up in: every text, thinking, call name and argument,
/// result and error of the covered events, with JSON strings both escaped and raw.
pub fn evidence_text(covered: &[RuntimeEvent]) -> String {
    let mut out = String::new();
    for event in covered {
        match &event.content {
            Some(Content::Text(text)) => push(&mut out, &text.text),
            Some(Content::Thinking(thinking)) => push(&mut out, &thinking.text),
            Some(Content::FunctionCall(call)) => {
                push(&mut out, &call.name);
                push(&mut out, call.id.as_str());
                push_json(&mut out, &call.args);
            }
            Some(Content::FunctionResponse(response)) => {
                push(&mut out, &response.name);
                push_json(&mut out, &response.result);
                if let Some(output) = &response.provider_output {
                    push_json(&mut out, output);
                }
            }
            Some(Content::Error(error)) => push(&mut out, &error.message),
            _ => {}
        }
    }
    out
}

fn push(out: &mut String, text: &str) {
    out.push_str(text);
    out.push('\n');
}

fn push_json(out: &mut String, value: &Value) {
    push(out, &value.to_string());
    let mut strings = Vec::new();
    collect_strings(value, &mut strings);
    for text in strings {
        push(out, text);
    }
}

fn collect_strings<'a>(value: &'a Value, out: &mut Vec<&'a str>) {
    match value {
        Value::String(text) => out.push(text),
        Value::Array(items) => items.iter().for_each(|item| collect_strings(item, out)),
        Value::Object(map) => map.iter().for_each(|(key, item)| {
            out.push(key);
            collect_strings(item, out);
        }),
        _ => {}
    }
}

/// Checks `summary` against the covered events.
pub fn check_faithfulness(summary: &str, covered: &[RuntimeEvent]) -> FaithfulnessReport {
    let evidence = evidence_text(covered);
    let found = claims(summary);
    let unsupported =
        found.iter().filter(|(_, claim)| !supported(claim, &evidence)).map(|(_, c)| c.clone()).collect();
    FaithfulnessReport { checked: found.len() as u64, unsupported }
}

/// Most supporting events [`claim_support`] names for one claim (the count of all is kept).
pub const CLAIM_EVENTS_MAX: usize = 20;

/// One claim of a summary and where the covered events support it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ClaimSupport {
    /// The claim as the summary states it.
    pub claim: String,
    /// `path`, `code`, `identifier`, `number` or `quoted`.
    pub kind: &'static str,
    /// Whether the covered events support it, as [`check_faithfulness`] decides.
    pub supported: bool,
    /// Indexes (into the covered events) of the first [`CLAIM_EVENTS_MAX`] events whose own text
    /// supports it. A supported claim may have none: found only across two events' texts.
    pub events: Vec<usize>,
    /// How many covered events support it on their own.
    pub event_count: usize,
}

/// Every claim of `summary`, in the order [`check_faithfulness`] finds them, each with the covered
/// events that support it: the report of [`check_faithfulness`] with its evidence.
pub fn claim_support(summary: &str, covered: &[RuntimeEvent]) -> Vec<ClaimSupport> {
    let evidence = evidence_text(covered);
    let per_event: Vec<String> =
        covered.iter().map(|event| evidence_text(std::slice::from_ref(event))).collect();
    claims(summary)
        .into_iter()
        .map(|(kind, claim)| {
            let supported = supported(&claim, &evidence);
            let mut events = Vec::new();
            let mut event_count = 0;
            if supported {
                for (index, text) in per_event.iter().enumerate() {
                    if self::supported(&claim, text) {
                        event_count += 1;
                        if events.len() < CLAIM_EVENTS_MAX {
                            events.push(index);
                        }
                    }
                }
            }
            ClaimSupport { claim, kind: kind.name(), supported, events, event_count }
        })
        .collect()
}

/// Whether `claim` occurs in `evidence`, each [`REDACTED`] marker in it standing for at least one
/// character of the same line: `PGPASSWORD=[redacted] psql` is supported by
/// `PGPASSWORD=hunter2 psql`, while `PGPASSWORD=[redacted] mysql` is not. Token trimming may cut a
/// marker's bracket at either end of a claim (`PGPASSWORD=[redacted`); a cut marker counts too.
fn supported(claim: &str, evidence: &str) -> bool {
    if evidence.contains(claim) {
        return true;
    }
    let cut_head = &REDACTED[1..];
    let cut_tail = &REDACTED[..REDACTED.len() - 1];
    let inner = claim.strip_prefix(cut_head).unwrap_or(claim);
    let inner = inner.strip_suffix(cut_tail).unwrap_or(inner);
    if inner.len() == claim.len() && !claim.contains(REDACTED) {
        return false;
    }
    let pieces: Vec<&str> = inner.split(REDACTED).filter(|piece| !piece.is_empty()).collect();
    let Some((first, rest)) = pieces.split_first() else {
        // Nothing but redactions: the claim states nothing the events could contradict.
        return true;
    };
    let mut from = 0;
    while let Some(found) = evidence[from..].find(first) {
        let start = from + found;
        if rest_follows(rest, evidence, start + first.len()) {
            return true;
        }
        from = start + evidence[start..].chars().next().map_or(1, char::len_utf8);
    }
    false
}

/// Whether `pieces` occur in order after `at`, each after a gap of at least one character and with
/// no line break before it. Placing each piece at its leftmost occurrence is enough: a later one
/// leaves less room for the rest and crosses at least as many line breaks.
fn rest_follows(pieces: &[&str], evidence: &str, mut at: usize) -> bool {
    for piece in pieces {
        let Some(gap) = evidence[at..].chars().next().filter(|&c| c != '\n') else {
            return false;
        };
        let search = at + gap.len_utf8();
        let Some(found) = evidence[search..].find(piece) else {
            return false;
        };
        if evidence[search..search + found].contains('\n') {
            return false;
        }
        at = search + found + piece.len();
    }
    true
}

/// Whether a report exceeds the policy's share of unsupported claims.
pub fn exceeds(report: &FaithfulnessReport, max_unsupported_ratio: Option<f64>) -> bool {
    match max_unsupported_ratio {
        Some(ratio) if report.checked > 0 => report.unsupported.len() as f64 / report.checked as f64 > ratio,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::testing::{call, result, text_event};

    #[test]
    fn unsupported_claims_are_listed_and_a_threshold_rejects() {
        let covered = vec![
            text_event("e1", "t1", "user", "fix src/lib.rs please"),
            call("e2", "t1", "c1", "shell", json!({"cmd": "cargo test -p \"mnemo\""})),
            result("e3", "t1", "c1", "shell", json!("error[E0308]: mismatched types at line 42")),
        ];
        let good = "Edited src/lib.rs, ran `cargo test -p \"mnemo\"`, saw E0308 at 42.";
        let report = check_faithfulness(good, &covered);
        assert!(report.checked >= 4);
        assert_eq!(report.unsupported, Vec::<String>::new());
        let invented = "Edited src/main.rs, ran `cargo bench`, saw E0599 at 7.";
        let report = check_faithfulness(invented, &covered);
        assert_eq!(report.unsupported, vec!["cargo bench", "src/main.rs", "E0599", "7"]);
        assert!(exceeds(&report, Some(0.5)));
        assert!(!exceeds(&report, None));
    }

    #[test]
    fn each_claim_names_the_events_that_state_it_and_agrees_with_the_report() {
        let covered = vec![
            text_event("e1", "t1", "user", "fix src/lib.rs please"),
            call("e2", "t1", "c1", "shell", json!({"cmd": "cargo test"})),
            result("e3", "t1", "c1", "shell", json!("src/lib.rs:42: error[E0308]")),
        ];
        let summary = "Fixed src/lib.rs after `cargo test` failed with E0308; see E0599.";
        let support = claim_support(summary, &covered);
        let report = check_faithfulness(summary, &covered);
        assert_eq!(support.len() as u64, report.checked);
        let unsupported: Vec<&str> =
            support.iter().filter(|c| !c.supported).map(|c| c.claim.as_str()).collect();
        assert_eq!(unsupported, report.unsupported);
        let of = |claim: &str| support.iter().find(|c| c.claim == claim).unwrap();
        assert_eq!(of("src/lib.rs").events, [0, 2]);
        assert_eq!(of("src/lib.rs").event_count, 2);
        assert_eq!(of("src/lib.rs").kind, "path");
        assert_eq!(of("cargo test").events, [1]);
        assert_eq!(of("E0308").events, [2]);
        assert!(!of("E0599").supported && of("E0599").events.is_empty());
    }

    #[test]
    fn a_redaction_in_a_summary_is_not_an_unsupported_claim() {
        let covered = vec![
            call("e1", "t1", "c1", "shell", json!({"cmd": "PGPASSWORD=hunter2 psql -h db -U app"})),
            text_event("e2", "t1", "user", "my api key is sk-ant-abcdefgh12345, use it for tools/upload.py"),
        ];
        let summary = "Ran `PGPASSWORD=[redacted] psql -h db -U app`, used \"key [redacted] for tools\" \
                       in tools/upload.py.";
        let report = check_faithfulness(summary, &covered);
        assert_eq!(report.checked, 3, "the code span, the quote and the path: {report:?}");
        assert_eq!(report.unsupported, Vec::<String>::new());
        // A redaction does not cover a claim that changed around it.
        let changed = "Ran `PGPASSWORD=[redacted] psql -h other -U app` and `[redacted] mysql`.";
        let report = check_faithfulness(changed, &covered);
        assert_eq!(
            report.unsupported,
            vec!["PGPASSWORD=[redacted] psql -h other -U app", "[redacted] mysql"]
        );
    }

    #[test]
    fn a_redaction_stands_for_text_on_one_line_only() {
        assert!(supported("a=[redacted] b", "x a=1 b y"));
        assert!(!supported("a=[redacted] b", "a=1\n b"), "a secret does not span lines");
        assert!(!supported("a=[redacted] b", "a= b"), "a redaction hid at least one character");
        assert!(supported("a=[redacted] b", "a= a=2 b"), "a later start can match");
        assert!(supported("PGPASSWORD=[redacted", "PGPASSWORD=x"));
        assert!(supported("redacted]@db.internal", "postgres://u:pw@db.internal"));
        assert!(supported("[redacted]", "anything"));
        assert!(!supported("src/main.rs", "src/lib.rs"));
    }
}
