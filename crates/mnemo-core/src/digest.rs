//! SHA-256 digests and the canonical JSON encoding that records, checkpoints and memory
//! commits are hashed and stored in.
//!
//! Canonical JSON here means: object keys sorted by their UTF-8 bytes, no insignificant
//! whitespace, strings escaped the way `serde_json` escapes them (raw UTF-8 otherwise), integers
//! written as integers, floats in their shortest round-trip form, and no NaN or infinity.
//! Keys are sorted by this module itself rather than by relying on `serde_json`'s map type, so the
//! encoding stays the same even if another crate in the build turns on `preserve_order`.

use std::fmt;
use std::str::FromStr;

use serde::ser::{self, Serialize};
use serde::{Deserialize, Deserializer, Serializer};
use serde_json::Value;
use sha2::{Digest as _, Sha256};

/// The text every digest starts with in its string form.
const DIGEST_PREFIX: &str = "sha256:";

/// A SHA-256 digest. Its text form is `sha256:<64 lowercase hex>`, which is also its serde form.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Digest([u8; 32]);

impl Digest {
    /// The digest of `bytes`.
    pub fn sha256(bytes: &[u8]) -> Digest {
        Digest(Sha256::digest(bytes).into())
    }

    /// Wraps 32 raw digest bytes.
    pub fn from_bytes(bytes: [u8; 32]) -> Digest {
        Digest(bytes)
    }

    /// The raw 32 bytes.
    pub fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }

    /// The 64 lowercase hex characters, without the `sha256:` prefix.
    pub fn to_hex(&self) -> String {
        hex::encode(self.0)
    }
}

impl fmt::Display for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{DIGEST_PREFIX}{}", self.to_hex())
    }
}

impl fmt::Debug for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Digest({self})")
    }
}

/// Why a string was refused as a digest.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DigestParseError {
    /// The text did not start with `sha256:`. Only SHA-256 digests are supported.
    #[error("digest must start with \"sha256:\"")]
    MissingPrefix,
    /// The hex part was not exactly 64 lowercase hex characters.
    #[error("digest must be \"sha256:\" followed by 64 lowercase hex characters")]
    BadHex,
}

impl FromStr for Digest {
    type Err = DigestParseError;

    /// Parses `sha256:<64 lowercase hex>`. Uppercase hex is refused so that every digest has
    /// exactly one text form, which matters when the text itself is hashed or compared.
    fn from_str(text: &str) -> Result<Digest, DigestParseError> {
        let hex_part = text.strip_prefix(DIGEST_PREFIX).ok_or(DigestParseError::MissingPrefix)?;
        if hex_part.len() != 64 || !hex_part.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        {
            return Err(DigestParseError::BadHex);
        }
        let mut bytes = [0u8; 32];
        hex::decode_to_slice(hex_part, &mut bytes).map_err(|_| DigestParseError::BadHex)?;
        Ok(Digest(bytes))
    }
}

impl Serialize for Digest {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Digest {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Digest, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

/// Why a value could not be encoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum EncodeError {
    /// A float was NaN or infinite, which JSON cannot carry. The caller must supply finite numbers.
    #[error("cannot encode a non-finite number")]
    NonFiniteNumber,
    /// The value could not be represented as JSON (for example a map with non-string keys).
    #[error("cannot encode as json: {0}")]
    Json(String),
    /// The encoded record is larger than [`crate::limits::RECORD_BYTES_MAX`]. The caller should
    /// split the fact or store less in it.
    #[error("encoded record is {len} bytes, the limit is {max} bytes")]
    TooLarge {
        /// The encoded length in bytes.
        len: usize,
        /// The limit in bytes.
        max: usize,
    },
    /// The record failed validation; nothing invalid is ever encoded, so it can never be decoded.
    #[error("invalid record: {0}")]
    Invalid(crate::ValidationError),
}

/// Encodes `value` as canonical JSON (see the module docs).
pub fn canonical_json(value: &impl Serialize) -> Result<Vec<u8>, EncodeError> {
    // NOTE: the finiteness check must run on the typed value: converting to `serde_json::Value`
    // silently turns NaN and infinities into `null`.
    value.serialize(FiniteCheck)?;
    let tree = serde_json::to_value(value).map_err(|e| EncodeError::Json(e.to_string()))?;
    let mut out = Vec::new();
    write_canonical(&tree, &mut out)?;
    Ok(out)
}

fn write_canonical(value: &Value, out: &mut Vec<u8>) -> Result<(), EncodeError> {
    match value {
        Value::Null | Value::Bool(_) | Value::Number(_) | Value::String(_) => {
            serde_json::to_writer(&mut *out, value).map_err(|e| EncodeError::Json(e.to_string()))
        }
        Value::Array(items) => {
            out.push(b'[');
            for (index, item) in items.iter().enumerate() {
                if index > 0 {
                    out.push(b',');
                }
                write_canonical(item, out)?;
            }
            out.push(b']');
            Ok(())
        }
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
            out.push(b'{');
            for (index, (key, item)) in entries.into_iter().enumerate() {
                if index > 0 {
                    out.push(b',');
                }
                serde_json::to_writer(&mut *out, key).map_err(|e| EncodeError::Json(e.to_string()))?;
                out.push(b':');
                write_canonical(item, out)?;
            }
            out.push(b'}');
            Ok(())
        }
    }
}

/// A serializer that produces nothing and fails on the first non-finite float. It walks the
/// whole value so that a NaN nested anywhere is found.
struct FiniteCheck;

impl ser::Error for EncodeError {
    fn custom<T: fmt::Display>(msg: T) -> Self {
        EncodeError::Json(msg.to_string())
    }
}

impl ser::Serializer for FiniteCheck {
    type Ok = ();
    type Error = EncodeError;
    type SerializeSeq = FiniteCheck;
    type SerializeTuple = FiniteCheck;
    type SerializeTupleStruct = FiniteCheck;
    type SerializeTupleVariant = FiniteCheck;
    type SerializeMap = FiniteCheck;
    type SerializeStruct = FiniteCheck;
    type SerializeStructVariant = FiniteCheck;

    fn serialize_bool(self, _: bool) -> Result<(), EncodeError> {
        Ok(())
    }
    fn serialize_i8(self, _: i8) -> Result<(), EncodeError> {
        Ok(())
    }
    fn serialize_i16(self, _: i16) -> Result<(), EncodeError> {
        Ok(())
    }
    fn serialize_i32(self, _: i32) -> Result<(), EncodeError> {
        Ok(())
    }
    fn serialize_i64(self, _: i64) -> Result<(), EncodeError> {
        Ok(())
    }
    fn serialize_i128(self, _: i128) -> Result<(), EncodeError> {
        Ok(())
    }
    fn serialize_u8(self, _: u8) -> Result<(), EncodeError> {
        Ok(())
    }
    fn serialize_u16(self, _: u16) -> Result<(), EncodeError> {
        Ok(())
    }
    fn serialize_u32(self, _: u32) -> Result<(), EncodeError> {
        Ok(())
    }
    fn serialize_u64(self, _: u64) -> Result<(), EncodeError> {
        Ok(())
    }
    fn serialize_u128(self, _: u128) -> Result<(), EncodeError> {
        Ok(())
    }
    fn serialize_f32(self, v: f32) -> Result<(), EncodeError> {
        self.serialize_f64(f64::from(v))
    }
    fn serialize_f64(self, v: f64) -> Result<(), EncodeError> {
        if v.is_finite() { Ok(()) } else { Err(EncodeError::NonFiniteNumber) }
    }
    fn serialize_char(self, _: char) -> Result<(), EncodeError> {
        Ok(())
    }
    fn serialize_str(self, _: &str) -> Result<(), EncodeError> {
        Ok(())
    }
    fn serialize_bytes(self, _: &[u8]) -> Result<(), EncodeError> {
        Ok(())
    }
    fn serialize_none(self) -> Result<(), EncodeError> {
        Ok(())
    }
    fn serialize_some<T: ?Sized + Serialize>(self, value: &T) -> Result<(), EncodeError> {
        value.serialize(FiniteCheck)
    }
    fn serialize_unit(self) -> Result<(), EncodeError> {
        Ok(())
    }
    fn serialize_unit_struct(self, _: &'static str) -> Result<(), EncodeError> {
        Ok(())
    }
    fn serialize_unit_variant(self, _: &'static str, _: u32, _: &'static str) -> Result<(), EncodeError> {
        Ok(())
    }
    fn serialize_newtype_struct<T: ?Sized + Serialize>(
        self,
        _: &'static str,
        value: &T,
    ) -> Result<(), EncodeError> {
        value.serialize(FiniteCheck)
    }
    fn serialize_newtype_variant<T: ?Sized + Serialize>(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        value: &T,
    ) -> Result<(), EncodeError> {
        value.serialize(FiniteCheck)
    }
    fn serialize_seq(self, _: Option<usize>) -> Result<FiniteCheck, EncodeError> {
        Ok(FiniteCheck)
    }
    fn serialize_tuple(self, _: usize) -> Result<FiniteCheck, EncodeError> {
        Ok(FiniteCheck)
    }
    fn serialize_tuple_struct(self, _: &'static str, _: usize) -> Result<FiniteCheck, EncodeError> {
        Ok(FiniteCheck)
    }
    fn serialize_tuple_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<FiniteCheck, EncodeError> {
        Ok(FiniteCheck)
    }
    fn serialize_map(self, _: Option<usize>) -> Result<FiniteCheck, EncodeError> {
        Ok(FiniteCheck)
    }
    fn serialize_struct(self, _: &'static str, _: usize) -> Result<FiniteCheck, EncodeError> {
        Ok(FiniteCheck)
    }
    fn serialize_struct_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<FiniteCheck, EncodeError> {
        Ok(FiniteCheck)
    }
}

impl ser::SerializeSeq for FiniteCheck {
    type Ok = ();
    type Error = EncodeError;
    fn serialize_element<T: ?Sized + Serialize>(&mut self, value: &T) -> Result<(), EncodeError> {
        value.serialize(FiniteCheck)
    }
    fn end(self) -> Result<(), EncodeError> {
        Ok(())
    }
}

impl ser::SerializeTuple for FiniteCheck {
    type Ok = ();
    type Error = EncodeError;
    fn serialize_element<T: ?Sized + Serialize>(&mut self, value: &T) -> Result<(), EncodeError> {
        value.serialize(FiniteCheck)
    }
    fn end(self) -> Result<(), EncodeError> {
        Ok(())
    }
}

impl ser::SerializeTupleStruct for FiniteCheck {
    type Ok = ();
    type Error = EncodeError;
    fn serialize_field<T: ?Sized + Serialize>(&mut self, value: &T) -> Result<(), EncodeError> {
        value.serialize(FiniteCheck)
    }
    fn end(self) -> Result<(), EncodeError> {
        Ok(())
    }
}

impl ser::SerializeTupleVariant for FiniteCheck {
    type Ok = ();
    type Error = EncodeError;
    fn serialize_field<T: ?Sized + Serialize>(&mut self, value: &T) -> Result<(), EncodeError> {
        value.serialize(FiniteCheck)
    }
    fn end(self) -> Result<(), EncodeError> {
        Ok(())
    }
}

impl ser::SerializeMap for FiniteCheck {
    type Ok = ();
    type Error = EncodeError;
    fn serialize_key<T: ?Sized + Serialize>(&mut self, key: &T) -> Result<(), EncodeError> {
        key.serialize(FiniteCheck)
    }
    fn serialize_value<T: ?Sized + Serialize>(&mut self, value: &T) -> Result<(), EncodeError> {
        value.serialize(FiniteCheck)
    }
    fn end(self) -> Result<(), EncodeError> {
        Ok(())
    }
}

impl ser::SerializeStruct for FiniteCheck {
    type Ok = ();
    type Error = EncodeError;
    fn serialize_field<T: ?Sized + Serialize>(
        &mut self,
        _: &'static str,
        value: &T,
    ) -> Result<(), EncodeError> {
        value.serialize(FiniteCheck)
    }
    fn end(self) -> Result<(), EncodeError> {
        Ok(())
    }
}

impl ser::SerializeStructVariant for FiniteCheck {
    type Ok = ();
    type Error = EncodeError;
    fn serialize_field<T: ?Sized + Serialize>(
        &mut self,
        _: &'static str,
        value: &T,
    ) -> Result<(), EncodeError> {
        value.serialize(FiniteCheck)
    }
    fn end(self) -> Result<(), EncodeError> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    #[test]
    fn digest_text_form_round_trips() {
        let digest = Digest::sha256(b"abc");
        let text = digest.to_string();
        assert_eq!(text, "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
        assert_eq!(text.parse::<Digest>(), Ok(digest));
        let json = serde_json::to_string(&digest).ok();
        assert_eq!(json, Some(format!("\"{text}\"")));
        let back: Option<Digest> = json.and_then(|j| serde_json::from_str(&j).ok());
        assert_eq!(back, Some(digest));
    }

    #[test]
    fn digest_parse_refuses_other_forms() {
        let hex = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";
        assert_eq!(hex.parse::<Digest>(), Err(DigestParseError::MissingPrefix));
        assert_eq!(format!("sha256:{}", hex.to_uppercase()).parse::<Digest>(), Err(DigestParseError::BadHex));
        assert_eq!(format!("sha256:{}", &hex[1..]).parse::<Digest>(), Err(DigestParseError::BadHex));
        assert_eq!("sha256:zz".parse::<Digest>(), Err(DigestParseError::BadHex));
        let bad: Result<Digest, _> = serde_json::from_str("\"sha1:00\"");
        assert!(bad.is_err());
    }

    #[test]
    fn canonical_json_sorts_keys_by_bytes_and_drops_whitespace() {
        let value = serde_json::json!({
            "b": [1, 2.5, {"z": null, "a": true}],
            "a": "é\n",
            "B": -3,
        });
        let bytes = canonical_json(&value).unwrap_or_default();
        assert_eq!(
            String::from_utf8(bytes).unwrap_or_default(),
            "{\"B\":-3,\"a\":\"é\\n\",\"b\":[1,2.5,{\"a\":true,\"z\":null}]}"
        );
    }

    #[test]
    fn canonical_json_refuses_non_finite_floats_anywhere() {
        let mut map = BTreeMap::new();
        map.insert("x", vec![1.0, f64::NAN]);
        assert_eq!(canonical_json(&map), Err(EncodeError::NonFiniteNumber));
        assert_eq!(canonical_json(&Some(f64::INFINITY)), Err(EncodeError::NonFiniteNumber));
        assert!(canonical_json(&1.5f64).is_ok());
    }

    #[test]
    fn canonical_json_is_stable_through_a_parse() {
        let value = serde_json::json!({"k": [0.1, 1e300, -0.0, 12345678901234567890u64, "\u{1f600}"]});
        let first = canonical_json(&value).unwrap_or_default();
        let parsed: Value = serde_json::from_slice(&first).unwrap_or(Value::Null);
        assert_eq!(parsed, value);
        assert_eq!(canonical_json(&parsed).unwrap_or_default(), first);
    }
}
