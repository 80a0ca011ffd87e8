//! The mnemo transcript format as an importer: its lines are parsed as they are, by the format's
//! own parser ([`crate::format`]).

use serde_json::{Map, Value};

use super::ImportFormat;
use super::importer::{Conversion, Importer, Way};

/// The importer of the mnemo format.
pub(crate) struct Native;

impl Importer for Native {
    fn format(&self) -> ImportFormat {
        ImportFormat::Mnemo
    }

    fn about(&self) -> &'static str {
        "The mnemo transcript format (JSON Lines)"
    }

    fn detects_line(&self, object: &Map<String, Value>) -> bool {
        object.get("session").is_some_and(Value::is_string)
    }

    fn conversion(&self) -> Conversion {
        Conversion(Way::Native)
    }
}
