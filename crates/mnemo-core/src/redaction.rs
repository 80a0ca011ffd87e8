//! Secret redaction (spec §3.8): the one implementation that history search and read, memory
//! admission and checkpoint summaries share.
//!
//! [`redact_secrets`] replaces credentials in text with [`REDACTED`]:
//! - text that parses as a JSON object, array or string is redacted structurally: the whole value
//!   of a sensitive key is replaced, strings are redacted as text, and the JSON is re-serialised
//!   only if something changed;
//! - otherwise, in plain text: values of sensitive keys in `key=value` and `key: value`
//!   assignments (except `auth` / `authorization`, which are headers), sensitive URL query
//!   parameters, the credential of `Authorization: Bearer|Basic|Token ...` headers, AWS secret key
//!   flags, and free-standing tokens: `sk-` / `sk-ant-` + at least 8 characters, `AIza` + 20,
//!   `gh[pousr]_` + 20, `xox[abprs]-` + 10, and runs of at least 40 hex digits.
//!
//! A key is sensitive when, split at camelCase and separator boundaries and lowercased, its last
//! segment is `auth`, `authorization`, `credential(s)`, `passwd`, `password`, `secret` or `token`;
//! or it is `key` alone or `key` after `api`, `private`, `secret` or `ssh`; or it ends in
//! `service_account_key` or `secret_access_key`.

use std::borrow::Cow;
use std::sync::LazyLock;

use regex::{Captures, Regex};
use serde_json::Value;

/// What a secret is replaced with.
pub const REDACTED: &str = "[redacted]";

const SENSITIVE_LAST_SEGMENTS: [&str; 9] =
    ["auth", "authorization", "credential", "credentials", "passwd", "password", "secret", "token", "key"];
const KEY_QUALIFIERS: [&str; 4] = ["api", "private", "secret", "ssh"];

/// Whether a key name holds a secret (see the module docs).
pub fn is_sensitive_key(key: &str) -> bool {
    let segments = key_segments(key);
    match segments.as_slice() {
        [] => false,
        [only] => SENSITIVE_LAST_SEGMENTS.contains(&only.as_str()),
        [.., previous, last] => {
            if last == "key" {
                KEY_QUALIFIERS.contains(&previous.as_str())
                    || ends_with(&segments, &["service", "account", "key"])
                    || ends_with(&segments, &["secret", "access", "key"])
            } else {
                SENSITIVE_LAST_SEGMENTS.contains(&last.as_str())
            }
        }
    }
}

fn ends_with(segments: &[String], tail: &[&str]) -> bool {
    segments.len() >= tail.len()
        && segments[segments.len() - tail.len()..].iter().zip(tail).all(|(a, b)| a == b)
}

/// Splits a key at separators and camelCase boundaries (`APIKey` is `api`, `key`), lowercased.
fn key_segments(key: &str) -> Vec<String> {
    let chars: Vec<char> = key.chars().collect();
    let mut segments = Vec::new();
    let mut current = String::new();
    for (i, &c) in chars.iter().enumerate() {
        if !c.is_alphanumeric() {
            if !current.is_empty() {
                segments.push(std::mem::take(&mut current));
            }
            continue;
        }
        let previous = i.checked_sub(1).map(|p| chars[p]);
        let next = chars.get(i + 1).copied();
        let boundary = c.is_uppercase()
            && previous.is_some_and(|p| {
                p.is_lowercase()
                    || p.is_ascii_digit()
                    || (p.is_uppercase() && next.is_some_and(char::is_lowercase))
            });
        if boundary && !current.is_empty() {
            segments.push(std::mem::take(&mut current));
        }
        current.extend(c.to_lowercase());
    }
    if !current.is_empty() {
        segments.push(current);
    }
    segments
}

/// Redacts secrets in `text`; borrows when nothing changed.
pub fn redact_secrets(text: &str) -> Cow<'_, str> {
    if let Some(redacted) = redact_json_text(text) {
        return redacted;
    }
    redact_plain(text)
}

/// Redacts a JSON value in place: sensitive keys' values become [`REDACTED`], strings are redacted
/// as text. Returns whether anything changed.
pub fn redact_json_value(value: &mut Value) -> bool {
    match value {
        Value::Object(map) => {
            let mut changed = false;
            for (key, inner) in map.iter_mut() {
                if is_sensitive_key(key) {
                    if inner.as_str() != Some(REDACTED) {
                        *inner = Value::String(REDACTED.to_owned());
                        changed = true;
                    }
                } else {
                    changed |= redact_json_value(inner);
                }
            }
            changed
        }
        Value::Array(items) => {
            items.iter_mut().fold(false, |changed, item| redact_json_value(item) | changed)
        }
        Value::String(text) => match redact_plain(text) {
            Cow::Borrowed(_) => false,
            Cow::Owned(redacted) => {
                *text = redacted;
                true
            }
        },
        _ => false,
    }
}

/// `Some` when `text` is a JSON object, array or string: the redacted text (borrowed if unchanged).
fn redact_json_text(text: &str) -> Option<Cow<'_, str>> {
    let first = text.trim_start().chars().next()?;
    if !matches!(first, '{' | '[' | '"') {
        return None;
    }
    let mut value: Value = serde_json::from_str(text).ok()?;
    if !redact_json_value(&mut value) {
        return Some(Cow::Borrowed(text));
    }
    // A value that parsed always serialises; should it not, the plain-text rules still apply.
    serde_json::to_string(&value).ok().map(Cow::Owned)
}

#[expect(clippy::expect_used, reason = "the patterns are constants; a bad one fails every test at once")]
fn regex(pattern: &str) -> Regex {
    Regex::new(pattern).expect("redaction pattern compiles")
}

/// `Authorization: Bearer <credential>` (and `Basic`, `Token`).
static AUTH_HEADER: LazyLock<Regex> = LazyLock::new(|| {
    regex(r#"(?i)\b((?:proxy-)?authorization["']?\s*[:=]\s*["']?(?:bearer|basic|token)\s+)([^\s"',;]+)"#)
});
/// `?key=value` and `&key=value` in URLs.
static URL_PARAM: LazyLock<Regex> = LazyLock::new(|| regex(r"([?&])([A-Za-z0-9_.\-]+)=([^&#\s]+)"));
/// `key=value` and `key: value`, the key optionally quoted, the value quoted or bare. A value never
/// starts with `:`, `=`, `<` or `>`, so paths (`Token::new`) and comparisons (`token == x`) stay.
static ASSIGNMENT: LazyLock<Regex> = LazyLock::new(|| {
    regex(
        r#"(["']?)([A-Za-z_][A-Za-z0-9_.\-]*)(["']?\s*[:=]\s*)("[^"]*"|'[^']*'|[^\s,;&"'})\]\[:=<>][^\s,;&"'})\]]*)"#,
    )
});
/// AWS secret key flags: `--aws-secret-access-key VALUE`, and the CLI's
/// `aws configure set aws_secret_access_key VALUE`; POSIX line continuations (`\` + newline) may
/// separate the flag from its value.
static AWS_FLAG: LazyLock<Regex> = LazyLock::new(|| {
    regex(
        r"(?i)((?:--(?:aws-)?secret-access-key|\baws\s+configure\s+set\s+aws_secret_access_key)(?:(?:\s|\\\n)+|=))([^\s\-\\][^\s]*)",
    )
});
/// A PEM private key block, whole (an unterminated block runs to the end of the text).
static PRIVATE_KEY_BLOCK: LazyLock<Regex> = LazyLock::new(|| {
    regex(
        r"(?s)-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY( BLOCK)?-----.*?(?:-----END (?:[A-Z0-9]+ )*PRIVATE KEY( BLOCK)?-----|\z)",
    )
});
/// The password of a URL's user info (`postgres://user:password@host`): the user stays.
static URL_PASSWORD: LazyLock<Regex> =
    LazyLock::new(|| regex(r"(\b[A-Za-z][A-Za-z0-9+.\-]*://[^\s:/@]*:)([^\s@/]+)(@)"));
/// Free-standing credentials.
static TOKENS: LazyLock<Regex> = LazyLock::new(|| {
    regex(concat!(
        r"\bsk-(?:ant-)?[A-Za-z0-9_\-]{8,}",
        r"|\b[sr]k_(?:live|test)_[0-9A-Za-z]{10,}",
        r"|\b(?:AKIA|ASIA)[0-9A-Z]{16}\b",
        r"|\bglpat-[0-9A-Za-z_\-]{20,}",
        r"|\bhf_[A-Za-z0-9]{30,}",
        r"|\beyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]*",
        r"|\bAIza[0-9A-Za-z_\-]{20,}",
        r"|\bgh[pousr]_[A-Za-z0-9]{20,}",
        r"|\bxox[abprs]-[A-Za-z0-9\-]{10,}",
        r"|\b[0-9A-Fa-f]{40,}\b",
    ))
});

fn redact_plain(text: &str) -> Cow<'_, str> {
    let mut current = Cow::Borrowed(text);
    current = replace(current, &PRIVATE_KEY_BLOCK, |_| REDACTED.to_owned());
    current = replace(current, &URL_PASSWORD, |c| format!("{}{REDACTED}{}", &c[1], &c[3]));
    current = replace(current, &AUTH_HEADER, |c| format!("{}{REDACTED}", &c[1]));
    current = replace(current, &URL_PARAM, |c| {
        if is_sensitive_key(&c[2]) { format!("{}{}={REDACTED}", &c[1], &c[2]) } else { c[0].to_owned() }
    });
    current = replace(current, &ASSIGNMENT, |c| {
        let key = &c[2];
        let header = matches!(key_segments(key).last().map(String::as_str), Some("auth" | "authorization"));
        if !is_sensitive_key(key) || header {
            return c[0].to_owned();
        }
        let value = &c[4];
        let quote = value.chars().next().filter(|q| matches!(q, '"' | '\''));
        let redacted = match quote {
            Some(q) => format!("{q}{REDACTED}{q}"),
            None => REDACTED.to_owned(),
        };
        format!("{}{}{}{redacted}", &c[1], key, &c[3])
    });
    current = replace(current, &AWS_FLAG, |c| format!("{}{REDACTED}", &c[1]));
    replace(current, &TOKENS, |_| REDACTED.to_owned())
}

/// Applies one rule, keeping the borrow when the rule changes nothing.
fn replace<'a>(text: Cow<'a, str>, pattern: &Regex, with: impl Fn(&Captures<'_>) -> String) -> Cow<'a, str> {
    if !pattern.is_match(&text) {
        return text;
    }
    let replaced = pattern.replace_all(&text, |c: &Captures<'_>| with(c)).into_owned();
    if replaced == *text { text } else { Cow::Owned(replaced) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(input: &str, expected: &str) {
        assert_eq!(redact_secrets(input), expected, "input: {input}");
    }

    #[test]
    fn sensitive_keys() {
        for key in [
            "password",
            "PASSWORD",
            "db_password",
            "accessToken",
            "api_key",
            "apiKey",
            "APIKey",
            "x-api-key",
            "key",
            "private_key",
            "sshKey",
            "client-secret",
            "credentials",
            "gcpServiceAccountKey",
            "AWS_SECRET_ACCESS_KEY",
            "authorization",
            "auth",
            "passwd",
        ] {
            assert!(is_sensitive_key(key), "{key} should be sensitive");
        }
        for key in ["keyboard", "monkey", "public_key", "keys", "token_count", "author", "secretary", "path"]
        {
            assert!(!is_sensitive_key(key), "{key} should not be sensitive");
        }
    }

    #[test]
    fn assignments_headers_urls_and_flags() {
        check("export OPENAI_API_KEY=abc123", "export OPENAI_API_KEY=[redacted]");
        check("password: hunter2, user: bob", "password: [redacted], user: bob");
        check(r#"config "token": "t0k3n" end"#, r#"config "token": "[redacted]" end"#);
        check("auth=yes stays", "auth=yes stays");
        check("call Token::new(); if token == other {}", "call Token::new(); if token == other {}");
        check("Authorization: Bearer abc.def.ghi", "Authorization: Bearer [redacted]");
        check(
            "curl https://x.test/a?user=1&access_token=zzz#f",
            "curl https://x.test/a?user=1&access_token=[redacted]#f",
        );
        check("aws s3 ls --aws-secret-access-key AKIAxyz", "aws s3 ls --aws-secret-access-key [redacted]");
        check(
            "aws configure set aws_secret_access_key AKIAxyz",
            "aws configure set aws_secret_access_key [redacted]",
        );
        check(
            "aws s3 ls --secret-access-key \\\n  AKIAxyz",
            "aws s3 ls --secret-access-key \\\n  [redacted]",
        );
        check("nothing secret here", "nothing secret here");
    }

    #[test]
    fn free_standing_tokens() {
        check("key sk-ant-abcdefgh123 used", "key [redacted] used");
        check("sk-abcdefgh", "[redacted]");
        check("sk-short", "sk-short");
        check("risk-assessment-plan", "risk-assessment-plan");
        check("AIzaSyA1234567890abcdefghij", "[redacted]");
        check("ghp_abcdefghijklmnopqrstuv", "[redacted]");
        check("xoxb-1234567890-abc", "[redacted]");
        check(&format!("commit {}", "a1".repeat(20)), "commit [redacted]");
        check(&"a1".repeat(19), &"a1".repeat(19));
    }

    #[test]
    fn keys_of_more_providers_key_blocks_and_connection_strings() {
        check("AKIAIOSFODNN7EXAMPLE in env", "[redacted] in env");
        check("stripe sk_live_4eC39HqLyjWDarjtT1zdp7dc", "stripe [redacted]");
        check("glpat-xxxxxxxxxxxxxxxxxxxx1 ok", "[redacted] ok");
        check("hf_abcdefghijklmnopqrstuvwxyz0123456789", "[redacted]");
        check(
            "jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U end",
            "jwt [redacted] end",
        );
        check(
            "key:\n-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA\nabc\n-----END RSA PRIVATE KEY-----\nafter",
            "key:\n[redacted]\nafter",
        );
        check("-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjE", "[redacted]");
        check(
            "postgres://app:s3cr3t-Pa55@db.internal:5432/prod",
            "postgres://app:[redacted]@db.internal:5432/prod",
        );
        check(
            "see https://example.com/docs and user@example.com",
            "see https://example.com/docs and user@example.com",
        );
    }

    #[test]
    fn json_is_redacted_structurally() {
        let redacted = redact_secrets(r#"{"user":"bob","password":"x","nested":{"apiKey":[1,2]}}"#);
        let value: Value = serde_json::from_str(&redacted).unwrap();
        assert_eq!(
            value,
            serde_json::json!({"user":"bob","password":"[redacted]","nested":{"apiKey":"[redacted]"}})
        );
        check(r#"["see sk-abcdefgh12"]"#, r#"["see [redacted]"]"#);
        check(r#"{"user":"bob"}"#, r#"{"user":"bob"}"#);
        check(r#""token=abc""#, r#""token=[redacted]""#);
    }

    #[test]
    fn unchanged_text_is_borrowed() {
        assert!(matches!(redact_secrets("plain words"), Cow::Borrowed(_)));
        assert!(matches!(redact_secrets(r#"{"a": 1}"#), Cow::Borrowed(_)));
    }
}
