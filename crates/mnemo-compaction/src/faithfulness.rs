//! The faithfulness check (beyond the reference system, which proves only that a summary is
//! present): every path, command, identifier, number and quoted string a summary states is looked
//! up in the events it covers. What is not found there is listed on the checkpoint, and a policy
//! may refuse summaries above a share of unsupported claims.

use mnemo_core::{Content, FaithfulnessReport, RuntimeEvent};
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
    let unsupported = found
        .iter()
        .filter(|(_, claim)| !evidence.contains(claim.as_str()))
        .map(|(_, c)| c.clone())
        .collect();
    FaithfulnessReport { checked: found.len() as u64, unsupported }
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
}
