//! Secret detection (memory.md §3.8): a text is sensitive when redaction would change it.
//!
//! Only detection is needed here (memory never stores a redacted text; a sensitive text is
//! refused or turns a remember request into a no-op), so the rules report a match instead of
//! rewriting. The rules follow the reference redactor: JSON values under sensitive keys,
//! URL query parameters, quoted pairs, authorization headers, AWS CLI secrets, generic
//! assignments, and token shapes.

use std::sync::OnceLock;

use regex::Regex;

struct Rules {
    query: Regex,
    quoted_pair: Regex,
    authorization: Regex,
    aws_cli: Regex,
    aws_env: Regex,
    assignment: Regex,
    tokens: Vec<Regex>,
}

fn rules() -> Option<&'static Rules> {
    static RULES: OnceLock<Option<Rules>> = OnceLock::new();
    RULES
        .get_or_init(|| {
            Some(Rules {
                query: Regex::new(r"[?&]([A-Za-z0-9_.\-]+)=([^&#\s]+)").ok()?,
                quoted_pair: Regex::new(r#""([^"\\]{1,128})"\s*:\s*"([^"]+)""#).ok()?,
                authorization: Regex::new(
                    r#"(?i)\b(?:proxy-)?authorization["']?\s*:\s*["']?\s*(?:bearer|basic|token)\s+\S+"#,
                )
                .ok()?,
                aws_cli: Regex::new(
                    r"(?i)(?:aws\s+configure\s+set\s+aws_secret_access_key(?:\s|\\\n)+\S+|--secret-access-key(?:[\s=]|\\\n)+\S+)",
                )
                .ok()?,
                aws_env: Regex::new(r#"(?i)\bAWS_SECRET_ACCESS_KEY["']?\s*[:=]\s*\S+"#).ok()?,
                assignment: Regex::new(r#"([A-Za-z][A-Za-z0-9_.\-]*)["']?\s*[:=]\s*["']?([^\s"']+)"#).ok()?,
                tokens: [
                    r"(?i)\bsk-(?:ant-)?[a-z0-9_\-]{8,}",
                    r"\bAIza[0-9A-Za-z_\-]{20,}",
                    r"\bgh[pousr]_[A-Za-z0-9_]{20,}",
                    r"\bxox[abprs]-[A-Za-z0-9\-]{10,}",
                    r"[0-9a-fA-F]{40,}",
                ]
                .iter()
                .map(|p| Regex::new(p).ok())
                .collect::<Option<Vec<_>>>()?,
            })
        })
        .as_ref()
}

/// Splits a key name into lower-case segments at camelCase humps, `_`, `-`, `.` and spaces.
fn segments(name: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut current = String::new();
    let mut previous_lower = false;
    for c in name.chars() {
        if !c.is_alphanumeric() {
            if !current.is_empty() {
                out.push(std::mem::take(&mut current));
            }
            previous_lower = false;
            continue;
        }
        if c.is_uppercase() && previous_lower && !current.is_empty() {
            out.push(std::mem::take(&mut current));
        }
        previous_lower = c.is_lowercase() || c.is_ascii_digit();
        current.extend(c.to_lowercase());
    }
    if !current.is_empty() {
        out.push(current);
    }
    out
}

/// Whether a key name names a secret (`password`, `apiKey`, `secret_access_key`, ...; not
/// `cache_key`, `public_key` or `tokenCount`).
pub fn is_sensitive_key(name: &str) -> bool {
    let parts = segments(name);
    let Some(last) = parts.last().map(String::as_str) else {
        return false;
    };
    if matches!(
        last,
        "auth" | "authorization" | "credential" | "credentials" | "passwd" | "password" | "secret" | "token"
    ) {
        return true;
    }
    if last == "key" {
        if parts.len() == 1 {
            return true;
        }
        let before = parts[parts.len() - 2].as_str();
        if matches!(before, "api" | "private" | "secret" | "ssh") {
            return true;
        }
    }
    let tail: Vec<&str> = parts.iter().rev().take(3).rev().map(String::as_str).collect();
    tail == ["service", "account", "key"] || tail == ["secret", "access", "key"]
}

fn json_is_sensitive(value: &serde_json::Value) -> bool {
    match value {
        serde_json::Value::Object(map) => map.iter().any(|(key, value)| {
            let present =
                !matches!(value, serde_json::Value::Null) && value.as_str().is_none_or(|s| !s.is_empty());
            (is_sensitive_key(key) && present) || json_is_sensitive(value)
        }),
        serde_json::Value::Array(values) => values.iter().any(json_is_sensitive),
        serde_json::Value::String(text) => text_is_sensitive(text),
        _ => false,
    }
}

fn text_is_sensitive(text: &str) -> bool {
    let Some(rules) = rules() else {
        // The patterns are constants; if they ever failed to compile, refusing everything is
        // the safe direction for a secret filter.
        return true;
    };
    let keyed =
        |re: &Regex| re.captures_iter(text).any(|c| c.get(1).is_some_and(|k| is_sensitive_key(k.as_str())));
    if keyed(&rules.query) || keyed(&rules.quoted_pair) {
        return true;
    }
    if rules.authorization.is_match(text) || rules.aws_cli.is_match(text) || rules.aws_env.is_match(text) {
        return true;
    }
    let assignment = rules.assignment.captures_iter(text).any(|c| {
        c.get(1).is_some_and(|name| {
            let parts = segments(name.as_str());
            let last = parts.last().map(String::as_str);
            is_sensitive_key(name.as_str()) && !matches!(last, Some("auth") | Some("authorization"))
        })
    });
    assignment || rules.tokens.iter().any(|re| re.is_match(text))
}

/// Whether `text` holds a secret by the rules of memory.md §3.8.
pub fn is_sensitive(text: &str) -> bool {
    match serde_json::from_str::<serde_json::Value>(text) {
        Ok(
            value @ (serde_json::Value::Object(_)
            | serde_json::Value::Array(_)
            | serde_json::Value::String(_)),
        ) => json_is_sensitive(&value),
        _ => text_is_sensitive(text),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_names() {
        for name in [
            "password",
            "apiKey",
            "api_key",
            "secret_access_key",
            "SSH-KEY",
            "key",
            "authToken",
            "service_account_key",
        ] {
            assert!(is_sensitive_key(name), "{name}");
        }
        for name in ["cache_key", "public_key", "issue_key", "tokenCount", "monkey", "name"] {
            assert!(!is_sensitive_key(name), "{name}");
        }
    }

    #[test]
    fn text_rules() {
        for text in [
            "my password: hunter2",
            "the secret: x",
            "use https://x.test/a?token=abc&b=1",
            r#"{"apiKey": "abc"}"#,
            r#"send "client_secret": "zzz" along"#,
            "Authorization: Bearer abc.def",
            "aws configure set aws_secret_access_key AKIAXYZ",
            "run with --secret-access-key=abc",
            "AWS_SECRET_ACCESS_KEY=abc",
            "key sk-abcdefgh12345",
            "AIzaSyA1234567890abcdefghij",
            "ghp_abcdefghijklmnopqrstuvwxyz",
            "xoxb-1234567890-abc",
            "commit 0123456789abcdef0123456789abcdef01234567",
        ] {
            assert!(is_sensitive(text), "{text}");
        }
        for text in [
            "I prefer tabs over spaces",
            "cache_key = 12",
            "the token count is 3",
            "sk-short",
            "auth: basic flow",
        ] {
            assert!(!is_sensitive(text), "{text}");
        }
    }
}
