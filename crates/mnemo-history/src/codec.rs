//! Value encodings the history stages share: canonical JSON records and big-endian integers, with a
//! value that does not decode reported as damaged state of the stage that stored it.

use mnemo_pipeline::PipelineError;
use serde::Serialize;
use serde::de::DeserializeOwned;

/// Encodes and decodes one stage's values.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Codec {
    stage: &'static str,
}

impl Codec {
    pub(crate) const fn new(stage: &'static str) -> Codec {
        Codec { stage }
    }

    /// The error for state this stage cannot read: rebuild the stage.
    pub(crate) fn damaged(self, reason: impl Into<String>) -> PipelineError {
        PipelineError::DamagedState { stage: self.stage.to_owned(), reason: reason.into() }
    }

    /// Canonical JSON, so equal states have equal bytes and digests.
    pub(crate) fn encode<T: Serialize>(self, value: &T) -> Result<Vec<u8>, PipelineError> {
        mnemo_core::canonical_json(value).map_err(|e| self.damaged(e.to_string()))
    }

    pub(crate) fn decode<T: DeserializeOwned>(self, bytes: &[u8]) -> Result<T, PipelineError> {
        serde_json::from_slice(bytes).map_err(|e| self.damaged(e.to_string()))
    }

    pub(crate) fn decode_u64(self, bytes: &[u8]) -> Result<u64, PipelineError> {
        let array: [u8; 8] =
            bytes.try_into().map_err(|_| self.damaged(format!("expected 8 bytes, found {}", bytes.len())))?;
        Ok(u64::from_be_bytes(array))
    }

    pub(crate) fn decode_u32(self, bytes: &[u8]) -> Result<u32, PipelineError> {
        let array: [u8; 4] =
            bytes.try_into().map_err(|_| self.damaged(format!("expected 4 bytes, found {}", bytes.len())))?;
        Ok(u32::from_be_bytes(array))
    }
}
