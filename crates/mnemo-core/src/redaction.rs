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
//!   flags, the values of sensitive long flags (`--password VALUE`, `--api-key VALUE`), the
//!   password glued to a MySQL / MariaDB client's `-p`, the passwords of `sshpass -p`, `redis-cli -a`,
//!   `docker login -p` and the password half of `curl -u user:password`, passwords stated in words ("my password is
//!   ...", "the password for the admin account was ...", "I changed my password to ..."), and
//!   free-standing tokens: `sk-` / `sk-ant-` + at least 8 characters, `AIza` + 20, `gh[pousr]_` + 20,
//!   `xox[abprs]-` + 10, and runs of at least 40 hex digits.
//!
//! A key is sensitive when, split at camelCase and separator boundaries and lowercased, its last
//! segment is `auth`, `authorization`, `credential(s)`, `passphrase`, `passwd`, `password`, `secret`
//! or `token`, or ends in `password` / `passwd` (`PGPASSWORD`); or it is `pwd` or `pass` after another
//! segment (`MYSQL_PWD`, `DB_PASS`, while `PWD` alone is the working directory); or it is `key` alone or `key`
//! after `api`, `private`, `secret` or `ssh`; or it ends in `service_account_key` or
//! `secret_access_key`.
//!
//! The rules lean towards redacting, but ordinary text stays: `-p 8080` outside a MySQL client,
//! `mysql -u root -p` (which prompts), "the password policy", "the password is incorrect", and code
//! that names a secret without holding one: a call (`token = issue_token(&user)`), a path
//! (`Token::new`), a field (`self.secret`) or a type (`password: Option<String>`) assigned to a
//! sensitive name, and shell variables (`-p $PASS`).

use std::borrow::Cow;
use std::sync::LazyLock;

use regex::{Captures, Regex};
use serde_json::Value;

/// What a secret is replaced with.
pub const REDACTED: &str = "[redacted]";

const SENSITIVE_LAST_SEGMENTS: [&str; 10] = [
    "auth",
    "authorization",
    "credential",
    "credentials",
    "passphrase",
    "passwd",
    "password",
    "secret",
    "token",
    "key",
];
/// Endings that make one glued segment a password (`PGPASSWORD`, `DBPASSWD`).
const PASSWORD_ENDINGS: [&str; 2] = ["password", "passwd"];
const KEY_QUALIFIERS: [&str; 4] = ["api", "private", "secret", "ssh"];

/// Whether a key name holds a secret (see the module docs).
pub fn is_sensitive_key(key: &str) -> bool {
    let segments = key_segments(key);
    if segments.last().is_some_and(|last| PASSWORD_ENDINGS.iter().any(|ending| last.ends_with(ending))) {
        return true;
    }
    match segments.as_slice() {
        [] => false,
        [only] => SENSITIVE_LAST_SEGMENTS.contains(&only.as_str()),
        [.., _, last] if last == "pwd" || last == "pass" => true,
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
/// Bare words that, assigned to a sensitive name, are code rather than a secret
/// (`const credentials = await load()`, `token = None`).
const CODE_VALUES: [&str; 15] = [
    "await",
    "new",
    "null",
    "nil",
    "None",
    "undefined",
    "true",
    "false",
    "self",
    "this",
    "yield",
    "function",
    "lambda",
    "typeof",
    "require",
];

/// A call (`issue_token(`, `hasher.hash(`), a path (`Token::new`) or a field of `self` / `this`:
/// code that computes a secret, not the secret.
static CODE_EXPRESSION: LazyLock<Regex> = LazyLock::new(|| {
    regex(
        r"^(?:[A-Za-z_$][\w$]*(?:(?:::|\.)[A-Za-z_$][\w$]*)*\(|[A-Za-z_]\w*(?:::[A-Za-z_]\w*)+|(?:self|this)\.)",
    )
});
/// A type after `name:` (`token: String`, `password: Option<String>`, `secret: Vec<u8>`).
static TYPE_ANNOTATION: LazyLock<Regex> = LazyLock::new(|| {
    regex(concat!(
        r"^(?:[A-Z]\w*<.*|String|Str|Bytes|SecretString|Secret|Token|Password|ApiKey|Credentials|str|string",
        r"|number|boolean|bool|[ui](?:8|16|32|64|128|size))$",
    ))
});

/// Whether the bare value of an assignment to a sensitive name is code rather than a secret:
/// a code word, a call, a path, a field of `self`, or (after `:`) a type. A quoted value is data.
fn is_code_value(separator: &str, value: &str) -> bool {
    CODE_VALUES.contains(&value)
        || CODE_EXPRESSION.is_match(value)
        || (!separator.contains('=') && TYPE_ANNOTATION.is_match(value))
}

/// The password given to a tool as a short flag: `sshpass -p PASS` (or `-pPASS`),
/// `redis-cli -a PASS` and `docker login -p PASS`. A shell variable (`-p $PASS`) stays.
static TOOL_PASSWORD_FLAG: LazyLock<Regex> = LazyLock::new(|| {
    regex(concat!(
        r"((?:\bsshpass\b[^\n;|&]*?\s-p[ \t]*|\bredis-cli\b[^\n;|&]*?\s-a[ \t]+",
        r"|\bdocker\s+login\b[^\n;|&]*?\s-p[ \t]+))",
        r#"("[^"]*"|'[^']*'|[^\s"'$\-][^\s"']*)"#,
    ))
});
/// curl's `-u user:password` and `--user user:password` (`-u user` alone prompts).
static CURL_USER: LazyLock<Regex> =
    LazyLock::new(|| regex(r#"(\bcurl\b[^\n;|&]*?\s(?:-u|--user)(?:[ \t]+|=))("[^"]*"|'[^']*'|[^\s"']+)"#));

/// `user:password` with the password hidden, quotes kept; `None` without a password or when it
/// is a shell variable.
fn curl_credential(credential: &str) -> Option<String> {
    let quote = credential.chars().next().filter(|q| matches!(q, '"' | '\''));
    let inner = match quote {
        Some(_) => credential.get(1..credential.len().saturating_sub(1))?,
        None => credential,
    };
    let (user, password) = inner.split_once(':')?;
    if password.is_empty() || password.starts_with('$') || password == REDACTED {
        return None;
    }
    let q = quote.map(String::from).unwrap_or_default();
    Some(format!("{q}{user}:{REDACTED}{q}"))
}

/// A long flag and its value, separated by spaces (`--password hunter2`); whether the flag names a
/// secret is decided by [`is_sensitive_flag`]. The `=` form is an [`ASSIGNMENT`].
static LONG_FLAG: LazyLock<Regex> = LazyLock::new(|| {
    regex(r#"((?:^|\s)--([A-Za-z][A-Za-z0-9_\-]*)[ \t]+)("[^"]*"|'[^']*'|[^\s"'\-$/~.<\\][^\s]*)"#)
});
/// The MySQL and MariaDB clients' `-pPASSWORD` (the password glued to `-p`; `-p` alone prompts,
/// and a word after it is the database). `-P` is the port and stays.
static MYSQL_PASSWORD: LazyLock<Regex> = LazyLock::new(|| {
    regex(concat!(
        r"((?i:\b(?:mysql(?:dump|admin|import|show|check|slap|pump|sh)?|mariadb(?:-dump|-admin|-import|-show|-check|-slap)?))\b",
        r#"[^\n;|&]*?\s-p)("[^"]*"|'[^']*'|[^\s"']+)"#,
    ))
});
/// A password stated in words: "my password is ...", "the password for the admin account was ...",
/// "the api key is ...". The value is checked by [`stated_secret`].
static STATED_PASSWORD: LazyLock<Regex> = LazyLock::new(|| {
    regex(concat!(
        r"(?i)(\b(?:password|passwd|passphrase|passcode|pass\s+phrase|api[\s_\-]?key|secret[\s_\-]?key",
        r"|(?:client|app|api|shared|webhook)[\s_\-]?secret",
        r"|(?:access|auth|api|bearer|refresh|session)[\s_\-]?token)",
        r"(?:\s+(?:for|of|to|on|at)(?:\s+[^\s,;:.]+){1,3}?)?",
        r"(?:\s+(?:is|was|will\s+be|becomes|remains)|'s|’s)\s+(?:(?:now|still|just|actually|simply)\s+)?)",
        r#"("[^"]*"|'[^']*'|`[^`]*`|[^\s"'`]+)"#,
    ))
});
/// A password being set in words: "I changed my password to ...", "set the root password to ...".
static PASSWORD_SET_TO: LazyLock<Regex> = LazyLock::new(|| {
    regex(concat!(
        r"(?i)(\b(?:set|change|changed|reset|update|updated)\s+(?:(?:my|the|your|his|her|our|their|its)\s+)?",
        r"(?:[\w\-]+\s+)?(?:password|passwd|passphrase|passcode)\s+(?:for\s+\S+\s+)?to\s+)",
        r#"("[^"]*"|'[^']*'|`[^`]*`|[^\s"'`]+)"#,
    ))
});
/// Words that follow "the password is" in ordinary prose about passwords rather than in a
/// statement of one: "the password is incorrect", "the api key is required".
const STATED_NOT_SECRET: [&str; 58] = [
    "a",
    "an",
    "the",
    "not",
    "no",
    "required",
    "incorrect",
    "wrong",
    "invalid",
    "correct",
    "valid",
    "expired",
    "missing",
    "empty",
    "blank",
    "set",
    "unset",
    "stored",
    "saved",
    "hashed",
    "encrypted",
    "needed",
    "optional",
    "mandatory",
    "changed",
    "reset",
    "too",
    "very",
    "being",
    "in",
    "on",
    "at",
    "to",
    "from",
    "of",
    "for",
    "with",
    "by",
    "that",
    "this",
    "it",
    "what",
    "how",
    "where",
    "which",
    "used",
    "sent",
    "hidden",
    "weak",
    "strong",
    "only",
    "also",
    "same",
    "different",
    "case",
    "rotated",
    "revoked",
    "ignored",
];

/// The value of a stated password, or `None` when the phrase is prose about passwords. A bare value
/// keeps its trailing sentence punctuation outside the redaction.
fn stated_secret(value: &str) -> Option<(&str, &str)> {
    if value.starts_with(['"', '\'', '`']) {
        return Some((value, ""));
    }
    let secret = value.trim_end_matches(['.', ',', ';', ':', '!', '?', ')']);
    let word = secret.to_lowercase();
    if secret.is_empty() || STATED_NOT_SECRET.contains(&word.as_str()) {
        return None;
    }
    Some((secret, &value[secret.len()..]))
}

/// Whether a long flag's value is a secret: its name is a sensitive key, except `--auth` and
/// `--authorization` (a scheme or a header, as in assignments), `--key` alone (a file, as in
/// `curl --key`) and a negation (`--no-password`).
fn is_sensitive_flag(name: &str) -> bool {
    let segments = key_segments(name);
    let excluded = matches!(segments.as_slice(), [only] if only == "key")
        || segments.first().is_some_and(|first| first == "no")
        || matches!(segments.last().map(String::as_str), Some("auth" | "authorization"));
    !excluded && is_sensitive_key(name)
}

/// A quoted value keeps its quotes around the redaction.
fn redacted_value(value: &str) -> String {
    match value.chars().next().filter(|q| matches!(q, '"' | '\'' | '`')) {
        Some(q) => format!("{q}{REDACTED}{q}"),
        None => REDACTED.to_owned(),
    }
}

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
    current = replace_or_rescan(current, &ASSIGNMENT, 4, |c| {
        let key = &c[2];
        let header = matches!(key_segments(key).last().map(String::as_str), Some("auth" | "authorization"));
        let secret = is_sensitive_key(key) && !header && !is_code_value(&c[3], &c[4]);
        secret.then(|| format!("{}{}{}{}", &c[1], key, &c[3], redacted_value(&c[4])))
    });
    current = replace(current, &AWS_FLAG, |c| format!("{}{REDACTED}", &c[1]));
    current = replace_or_rescan(current, &LONG_FLAG, 3, |c| {
        is_sensitive_flag(&c[2]).then(|| format!("{}{}", &c[1], redacted_value(&c[3])))
    });
    current = replace(current, &MYSQL_PASSWORD, |c| format!("{}{}", &c[1], redacted_value(&c[2])));
    current = replace(current, &TOOL_PASSWORD_FLAG, |c| format!("{}{}", &c[1], redacted_value(&c[2])));
    current = replace(current, &CURL_USER, |c| match curl_credential(&c[2]) {
        Some(hidden) => format!("{}{hidden}", &c[1]),
        None => c[0].to_owned(),
    });
    for stated in [&STATED_PASSWORD, &PASSWORD_SET_TO] {
        current = replace(current, stated, |c| match stated_secret(&c[2]) {
            Some((secret, rest)) => format!("{}{}{rest}", &c[1], redacted_value(secret)),
            None => c[0].to_owned(),
        });
    }
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

/// Applies a rule whose match may be no secret (`with` returns `None`): the search then resumes
/// at capture group `value` when it is bare, so a secret inside an ordinary value
/// (`Command: PGPASSWORD=x`, where `Command` is the key) is still found instead of being passed
/// over with it. A quoted value is passed over whole: a search resumed inside it would take its
/// closing quote for the opening quote of a value (`message: 'Enter API key:', next: '...'`).
fn replace_or_rescan<'a>(
    text: Cow<'a, str>,
    pattern: &Regex,
    value: usize,
    with: impl Fn(&Captures<'_>) -> Option<String>,
) -> Cow<'a, str> {
    let mut out = String::new();
    let (mut copied, mut at) = (0, 0);
    while let Some(captures) = pattern.captures_at(&text, at) {
        let (Some(whole), Some(rescan)) = (captures.get(0), captures.get(value)) else {
            break;
        };
        match with(&captures) {
            Some(replacement) => {
                out.push_str(&text[copied..whole.start()]);
                out.push_str(&replacement);
                copied = whole.end();
                at = whole.end();
            }
            None if rescan.as_str().starts_with(['"', '\'']) => at = whole.end(),
            None => at = rescan.start(),
        }
        if at >= text.len() {
            break;
        }
    }
    if copied == 0 {
        return text;
    }
    out.push_str(&text[copied..]);
    if out == *text { text } else { Cow::Owned(out) }
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
        check(
            "const credentials = await setup.getCredentials();",
            "const credentials = await setup.getCredentials();",
        );
        check("token = None; password: null", "token = None; password: null");
        check("- Command: `PGPASSWORD=hunter2 psql`", "- Command: `PGPASSWORD=[redacted] psql`");
        check("note: password=x, user: token=y", "note: password=[redacted], user: token=[redacted]");
        check(
            "message: 'Enter API key:', check: 'key is required'",
            "message: 'Enter API key:', check: 'key is required'",
        );
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
    fn glued_password_variables_are_redacted() {
        check("PGPASSWORD=hunter2 psql -h db -U app", "PGPASSWORD=[redacted] psql -h db -U app");
        check("export PGPASSWORD='x y z'", "export PGPASSWORD='[redacted]'");
        check("MYSQL_PWD=s3cr3t mysql -u root", "MYSQL_PWD=[redacted] mysql -u root");
        check(r#"{"env":{"PGPASSWORD":"hunter2"}}"#, r#"{"env":{"PGPASSWORD":"[redacted]"}}"#);
        // The working directory variables are not passwords.
        check("PWD=/home/me OLDPWD=/tmp", "PWD=/home/me OLDPWD=/tmp");
        assert!(
            is_sensitive_key("PGPASSWORD") && is_sensitive_key("db_pwd") && is_sensitive_key("passphrase")
        );
        assert!(
            !is_sensitive_key("PWD") && !is_sensitive_key("OLDPWD") && !is_sensitive_key("password_policy")
        );
    }

    #[test]
    fn mysql_passwords_are_redacted_and_ports_and_prompts_stay() {
        check("mysql -u root -pS3cret shop", "mysql -u root -p[redacted] shop");
        check("mysqldump -uroot -p'S3 cret' shop > d.sql", "mysqldump -uroot -p'[redacted]' shop > d.sql");
        check("MYSQL -h db -P 3306 -p\"pw\"", "MYSQL -h db -P 3306 -p\"[redacted]\"");
        check("mariadb-dump -pS3cret shop", "mariadb-dump -p[redacted] shop");
        check("mysql --password=S3cret shop", "mysql --password=[redacted] shop");
        check("mysql -u root", "mysql -u root");
        check("mysql -u root -p", "mysql -u root -p");
        check("mysql -u root -p shop", "mysql -u root -p shop");
        check("mysql -h db -P 3306 shop", "mysql -h db -P 3306 shop");
        check("docker run -p 8080:80 nginx", "docker run -p 8080:80 nginx");
        check(
            "ssh -p 2222 host; python -m http.server -p 8080",
            "ssh -p 2222 host; python -m http.server -p 8080",
        );
        check("mkdir -p src/mysql && ls -p", "mkdir -p src/mysql && ls -p");
    }

    #[test]
    fn sensitive_long_flags_are_redacted() {
        check("docker login -u me --password hunter2 reg", "docker login -u me --password [redacted] reg");
        check(
            "tool --api-key abc123 --client-secret 'x y'",
            "tool --api-key [redacted] --client-secret '[redacted]'",
        );
        check("gh auth login --with-token --token ghx1", "gh auth login --with-token --token [redacted]");
        for kept in [
            "docker login --password-stdin",
            "psql --no-password shop",
            "tool --token-file ~/.token",
            "curl --key client.pem --cert c.pem",
            "tool --password $DB_PASSWORD",
            "tool --password <your-password>",
            "tool --auth basic",
            "tool --password --verbose",
        ] {
            check(kept, kept);
        }
    }

    #[test]
    fn passwords_stated_in_words_are_redacted() {
        check("my password is hunter2.", "my password is [redacted].");
        check("My password's swordfish, don't tell", "My password's [redacted], don't tell");
        check(
            "the password for the admin account was Tr0ub4dor&3 until today",
            "the password for the admin account was [redacted] until today",
        );
        check("Our API key is now abc123xyz!", "Our API key is now [redacted]!");
        check("the client secret is \"q w e\"", "the client secret is \"[redacted]\"");
        check("I changed my password to hunter3 yesterday", "I changed my password to [redacted] yesterday");
        check("set the root password to 'pw1'", "set the root password to '[redacted]'");
        for kept in [
            "the password policy requires 12 characters",
            "Password is required.",
            "the password is incorrect, try again",
            "your password is too short",
            "the api key is missing from the config",
            "the access token is expired",
            "the secret is out",
            "the token is counted once",
            "password reset link sent",
            "the password is stored in the vault",
        ] {
            check(kept, kept);
        }
    }

    #[test]
    fn redaction_is_idempotent() {
        for text in [
            "my password is hunter2. PGPASSWORD=x mysql -pS3cret --token abc sk-abcdefgh12",
            "Authorization: Bearer abc and postgres://u:p@h/db",
            r#"{"password":"x","note":"my password is y"}"#,
        ] {
            let once = redact_secrets(text).into_owned();
            assert_eq!(redact_secrets(&once), once, "input: {text}");
            assert!(matches!(redact_secrets(&once), Cow::Borrowed(_)), "input: {text}");
        }
    }

    #[test]
    fn unchanged_text_is_borrowed() {
        assert!(matches!(redact_secrets("plain words"), Cow::Borrowed(_)));
        assert!(matches!(redact_secrets(r#"{"a": 1}"#), Cow::Borrowed(_)));
    }
}
