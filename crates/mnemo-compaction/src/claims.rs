//! Spotting the concrete claims in text: file paths, commands, identifiers, numbers and quoted
//! strings. The extractive summarizer uses it to pick critical context; the faithfulness check uses
//! it to find what a summary states.

/// File extensions that make a bare `name.ext` token a path.
const PATH_EXTENSIONS: [&str; 24] = [
    "rs", "toml", "md", "py", "js", "ts", "tsx", "json", "yaml", "yml", "txt", "lock", "sh", "go", "c", "h",
    "cpp", "java", "rb", "sql", "html", "css", "cfg", "ini",
];

/// Longest claim kept, in bytes.
pub const CLAIM_BYTES_MAX: usize = 200;

/// What kind of claim a token is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum ClaimKind {
    /// A file path or URL.
    Path,
    /// An inline code span (commands, code).
    Code,
    /// An identifier: snake_case, camelCase, `a::b`, or letters mixed with digits.
    Identifier,
    /// A number.
    Number,
    /// A double-quoted string.
    Quoted,
}

impl ClaimKind {
    /// Its name in reports: `path`, `code`, `identifier`, `number`, `quoted`.
    pub fn name(self) -> &'static str {
        match self {
            ClaimKind::Path => "path",
            ClaimKind::Code => "code",
            ClaimKind::Identifier => "identifier",
            ClaimKind::Number => "number",
            ClaimKind::Quoted => "quoted",
        }
    }
}

/// `token` without the punctuation and marks around it, which may nest (`` `a/b.rs`. ``,
/// `` (`x`), ``): trimmed until none is left.
fn trim_token(token: &str) -> &str {
    let mut token = token;
    loop {
        let trimmed = trim_token_once(token);
        if trimmed.len() == token.len() {
            return trimmed;
        }
        token = trimmed;
    }
}

fn trim_token_once(token: &str) -> &str {
    token
        .trim_matches(|c: char| {
            matches!(
                c,
                '(' | ')'
                    | '['
                    | ']'
                    | '{'
                    | '}'
                    | '<'
                    | '>'
                    | '"'
                    | '\''
                    | ','
                    | ';'
                    | ':'
                    | '!'
                    | '?'
                    | '*'
                    | '`'
            )
        })
        .trim_end_matches('.')
}

/// Whether a token is a file path (or URL).
pub fn is_path(token: &str) -> bool {
    let token = trim_token(token);
    if token.len() < 3 || token.len() > CLAIM_BYTES_MAX || !token.chars().any(char::is_alphanumeric) {
        return false;
    }
    if token.contains('/') {
        return token.chars().all(|c| !c.is_whitespace()) && !token.starts_with("//") && token != "n/a";
    }
    match token.rsplit_once('.') {
        Some((stem, ext)) => {
            !stem.is_empty()
                && PATH_EXTENSIONS.contains(&ext)
                && stem.chars().all(|c| c.is_alphanumeric() || matches!(c, '_' | '-' | '.'))
        }
        None => false,
    }
}

fn is_identifier(token: &str) -> bool {
    let token = trim_token(token);
    if token.len() < 3 || token.len() > CLAIM_BYTES_MAX {
        return false;
    }
    if !token.chars().all(|c| c.is_alphanumeric() || c == '_' || c == ':')
        || !token.chars().any(char::is_alphabetic)
    {
        return false;
    }
    let snake = token.contains('_') && !token.starts_with('_');
    let path = token.contains("::");
    let camel = token.chars().skip(1).any(char::is_uppercase) && token.chars().any(char::is_lowercase);
    let mixed = token.chars().any(|c| c.is_ascii_digit());
    snake || path || camel || mixed
}

fn is_number(token: &str) -> bool {
    let token = trim_token(token);
    !token.is_empty()
        && token.chars().next().is_some_and(|c| c.is_ascii_digit())
        && token.chars().all(|c| c.is_ascii_digit() || c == '.' || c == ',')
}

/// Every claim in `text`, in order of appearance, without repeats. A numbered-list marker at the
/// start of a line (`1.`) is layout, not a claim.
pub fn claims(text: &str) -> Vec<(ClaimKind, String)> {
    let mut found: Vec<(ClaimKind, String)> = Vec::new();
    let mut push = |kind: ClaimKind, value: &str| {
        let value = value.trim();
        if !value.is_empty() && value.len() <= CLAIM_BYTES_MAX && !found.iter().any(|(_, v)| v == value) {
            found.push((kind, value.to_owned()));
        }
    };
    for line in text.lines() {
        let line = without_marks(line);
        let line = line.as_str();
        for (index, span) in line.split('`').enumerate() {
            if index % 2 == 1 && !span.trim().is_empty() {
                push(ClaimKind::Code, span);
            }
        }
        for (index, span) in line.split('"').enumerate() {
            if index % 2 == 1 && span.trim().len() >= 3 {
                push(ClaimKind::Quoted, span);
            }
        }
        let body = strip_list_marker(line);
        for token in body.split_whitespace() {
            let token = token.trim_matches('`');
            if is_path(token) {
                push(ClaimKind::Path, trim_token(token));
            } else if is_number(token) {
                push(ClaimKind::Number, trim_token(token));
            } else if is_identifier(token) {
                push(ClaimKind::Identifier, trim_token(token));
            }
        }
    }
    found
}

fn strip_list_marker(line: &str) -> &str {
    let trimmed = line.trim_start();
    let digits = trimmed.bytes().take_while(u8::is_ascii_digit).count();
    if digits > 0 && trimmed[digits..].starts_with(". ") {
        return &trimmed[digits + 2..];
    }
    trimmed
}

/// The summary's own truncation mark: `[…]`, or `[… what was left out]`. What it says is about the
/// summary, not the session, so it is never a claim.
pub const TRUNCATION_MARK_OPEN: &str = "[…";

/// `line` without the summary's own truncation marks.
fn without_marks(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut rest = line;
    while let Some(start) = rest.find(TRUNCATION_MARK_OPEN) {
        out.push_str(&rest[..start]);
        rest = &rest[start..];
        match rest.find(']') {
            Some(end) => rest = &rest[end + 1..],
            None => rest = "",
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spots_paths_code_identifiers_numbers_and_quotes() {
        let found = claims(
            "1. Edit src/lib.rs and Cargo.toml, run `cargo test` for parse_line (E0308) on 42 \"exact words\"",
        );
        let values: Vec<&str> = found.iter().map(|(_, v)| v.as_str()).collect();
        for expected in ["src/lib.rs", "Cargo.toml", "cargo test", "parse_line", "E0308", "42", "exact words"]
        {
            assert!(values.contains(&expected), "{expected} in {values:?}");
        }
        assert!(!values.contains(&"1"), "a list marker is not a claim");
        assert!(!values.contains(&"Edit"));
    }

    #[test]
    fn a_path_in_backticks_before_a_full_stop_is_one_claim_without_a_backtick() {
        // It was two: the code span, and the path with its closing backtick kept (the full stop
        // after the backtick was trimmed last).
        let found = claims("The old cache lived in `src/legacy_cache.rs`. See (`docs/A.md`), too.");
        let values: Vec<&str> = found.iter().map(|(_, v)| v.as_str()).collect();
        assert_eq!(values, vec!["src/legacy_cache.rs", "docs/A.md"]);
    }

    #[test]
    fn the_summarys_own_truncation_marks_are_not_claims() {
        let found = claims("- Ran `cargo test -p a` [… 12 more runs in src/x.rs]\n- Request: fix it […]");
        let values: Vec<&str> = found.iter().map(|(_, v)| v.as_str()).collect();
        assert_eq!(values, vec!["cargo test -p a"]);
    }
}
