//! Secret detection for memory admission (memory.md §3.8): a text is sensitive exactly when the
//! shared redaction of search and read ([`mnemo_core::redaction`]) would change it, so what
//! memory refuses to store and what history hides are decided by one set of rules.

use mnemo_core::redaction::redact_secrets;

pub use mnemo_core::redaction::is_sensitive_key;

/// Whether `text` holds a secret by the rules of memory.md §3.8: `redact_secrets(text) != text`.
pub fn is_sensitive(text: &str) -> bool {
    redact_secrets(text) != text
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
