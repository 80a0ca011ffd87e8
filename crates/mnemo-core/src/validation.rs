//! The one validation error every record and event check returns, and the small checks they share.

use crate::limits::JSON_SAFE_INTEGER_MAX;

/// A value broke a rule of its schema. `field` is a dotted path into the JSON form of the value
/// (for example `content.text`, `refs.sourceMessageDigest` or `items[2].keys[0].key`), so a
/// caller can point at the exact input that was wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("field `{field}`: {reason}")]
#[non_exhaustive]
pub struct ValidationError {
    /// Dotted path of the offending field.
    pub field: String,
    /// What is wrong with it, lowercase, without a trailing period.
    pub reason: String,
}

impl ValidationError {
    /// A new error for `field`.
    pub fn new(field: impl Into<String>, reason: impl Into<String>) -> Self {
        Self { field: field.into(), reason: reason.into() }
    }

    /// The same error seen from an enclosing value: `prefix` is prepended to the path.
    pub fn within(mut self, prefix: &str) -> Self {
        self.field = if self.field.is_empty() {
            prefix.to_owned()
        } else if self.field.starts_with('[') {
            format!("{prefix}{}", self.field)
        } else {
            format!("{prefix}.{}", self.field)
        };
        self
    }
}

/// Shorthand for a failed check.
pub(crate) fn fail<T>(field: impl Into<String>, reason: impl Into<String>) -> Result<T, ValidationError> {
    Err(ValidationError::new(field, reason))
}

/// A string that must carry something.
pub(crate) fn non_empty(field: &str, text: &str) -> Result<(), ValidationError> {
    if text.is_empty() {
        return fail(field, "must not be empty");
    }
    Ok(())
}

/// A string that must carry something and stay under a byte limit.
pub(crate) fn bounded_bytes(field: &str, text: &str, max: usize) -> Result<(), ValidationError> {
    non_empty(field, text)?;
    if text.len() > max {
        return fail(field, format!("is {} bytes, the limit is {max} bytes", text.len()));
    }
    Ok(())
}

/// An integer a JavaScript reader can hold exactly; several fields of the reference system are
/// "safe integers" and Mnemo keeps that bound so its JSON stays readable there.
pub(crate) fn safe_integer(field: &str, value: u64) -> Result<(), ValidationError> {
    if value > JSON_SAFE_INTEGER_MAX {
        return fail(field, format!("must be at most {JSON_SAFE_INTEGER_MAX}"));
    }
    Ok(())
}

/// Length in UTF-16 code units: the reference system measures text with JavaScript's
/// `.length`, so limits and offsets taken from it are in these units.
pub(crate) fn utf16_len(text: &str) -> usize {
    text.encode_utf16().count()
}

/// Length in Unicode scalar values (code points).
pub(crate) fn code_points(text: &str) -> usize {
    text.chars().count()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_names_the_field() {
        let error = ValidationError::new("text", "must not be empty").within("content");
        assert_eq!(error.to_string(), "field `content.text`: must not be empty");
        let indexed = ValidationError::new("[2].key", "bad").within("keys");
        assert_eq!(indexed.field, "keys[2].key");
        let whole = ValidationError::new("", "bad").within("refs");
        assert_eq!(whole.field, "refs");
    }

    #[test]
    fn shared_checks() {
        assert!(non_empty("f", "").is_err());
        assert!(bounded_bytes("f", "abc", 2).is_err());
        assert!(bounded_bytes("f", "ab", 2).is_ok());
        assert!(safe_integer("f", JSON_SAFE_INTEGER_MAX).is_ok());
        assert!(safe_integer("f", JSON_SAFE_INTEGER_MAX + 1).is_err());
        assert_eq!(utf16_len("a\u{1f600}"), 3);
    }
}
