//! Pipeline specs (`pipelines/*.toml`): which stages run, with what configuration, and the registry
//! that turns a stage name into a projector.

use std::collections::BTreeMap;
use std::path::Path;

use mnemo_core::Digest;
use serde::Deserialize;

use crate::error::PipelineError;
use crate::projector::Projector;

/// The spec a plain open uses: `pipelines/default.toml`, built in.
pub const DEFAULT_SPEC_TOML: &str = include_str!("../../../pipelines/default.toml");

/// Longest stage name in bytes (it becomes a keyspace name).
pub const STAGE_NAME_BYTES_MAX: usize = 64;

/// A parsed pipeline spec.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PipelineSpec {
    /// The stages, in the order they are listed.
    #[serde(rename = "stage")]
    pub stages: Vec<StageSpec>,
    /// Where the log is, when the spec names it (`[log] url = "nats://HOST:PORT[/STREAM]"`); a host
    /// that passes a log location itself overrides it. Absent: the store's embedded log.
    #[serde(default)]
    pub log: Option<LogSpec>,
}

/// The `[log]` table of a spec: the log the store follows. Projections stay local either way.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LogSpec {
    /// `local` (the embedded log), or `nats://HOST:PORT[,nats://HOST:PORT...][/STREAM]`.
    pub url: String,
}

/// One stage of a spec.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StageSpec {
    /// The registered stage name.
    pub name: String,
    /// The stage's configuration, passed to its constructor and hashed into its meta.
    #[serde(default)]
    pub config: toml::Table,
}

impl StageSpec {
    /// Hash of the configuration: SHA-256 of its canonical JSON form.
    pub fn config_hash(&self) -> Result<[u8; 32], PipelineError> {
        let bytes = mnemo_core::canonical_json(&self.config)
            .map_err(|e| self.invalid(format!("configuration does not encode: {e}")))?;
        Ok(*Digest::sha256(&bytes).as_bytes())
    }

    fn invalid(&self, reason: String) -> PipelineError {
        PipelineError::InvalidSpec { origin: format!("stage {:?}", self.name), reason }
    }
}

/// Largest pipeline spec file read, in bytes.
pub const PIPELINE_SPEC_BYTES_MAX: u64 = 1024 * 1024;

impl PipelineSpec {
    /// The built-in default spec.
    pub fn default_spec() -> Result<PipelineSpec, PipelineError> {
        Self::parse(DEFAULT_SPEC_TOML, "pipelines/default.toml (built in)")
    }

    /// Reads a spec file of at most [`PIPELINE_SPEC_BYTES_MAX`] bytes.
    pub fn load(path: &Path) -> Result<PipelineSpec, PipelineError> {
        use std::io::Read as _;
        let invalid =
            |reason: String| PipelineError::InvalidSpec { origin: path.display().to_string(), reason };
        let mut bytes = Vec::new();
        // NOTE: read through a limit, never to the end: `--pipeline /dev/zero` has no end.
        std::fs::File::open(path)
            .and_then(|file| file.take(PIPELINE_SPEC_BYTES_MAX + 1).read_to_end(&mut bytes))
            .map_err(|e| invalid(format!("cannot read: {e}")))?;
        if bytes.len() as u64 > PIPELINE_SPEC_BYTES_MAX {
            return Err(invalid(format!(
                "the file is larger than {PIPELINE_SPEC_BYTES_MAX} bytes, the limit for a pipeline spec"
            )));
        }
        let text = String::from_utf8(bytes).map_err(|e| invalid(format!("not valid UTF-8: {e}")))?;
        Self::parse(&text, &path.display().to_string())
    }

    /// Parses spec text; `origin` names it in errors. The text lists its stages, or overlays the
    /// built-in default (`extends = "default"` and a `[config.<stage>]` table per stage it changes).
    pub fn parse(text: &str, origin: &str) -> Result<PipelineSpec, PipelineError> {
        let invalid = |reason: String| PipelineError::InvalidSpec { origin: origin.to_owned(), reason };
        let file: SpecFile = toml::from_str(text).map_err(|e| invalid(e.to_string()))?;
        let spec = file.resolve().map_err(invalid)?;
        let mut seen = BTreeMap::new();
        for stage in &spec.stages {
            check_stage_name(&stage.name).map_err(invalid)?;
            if seen.insert(stage.name.as_str(), ()).is_some() {
                return Err(invalid(format!("stage {:?} is listed twice", stage.name)));
            }
        }
        Ok(spec)
    }
}

/// A spec file as written: its own list of stages, or an overlay of the built-in default spec, so
/// that a variant states only what it changes and follows the default in everything else.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SpecFile {
    /// `"default"`: the stages of `pipelines/default.toml`, with `config` overlaid.
    #[serde(default)]
    extends: Option<String>,
    #[serde(default, rename = "stage")]
    stages: Option<Vec<StageSpec>>,
    /// Per stage of the extended spec, keys that replace (or add to) its configuration.
    #[serde(default)]
    config: BTreeMap<String, toml::Table>,
    #[serde(default)]
    log: Option<LogSpec>,
}

impl SpecFile {
    fn resolve(self) -> Result<PipelineSpec, String> {
        let stages = match (self.extends.as_deref(), self.stages) {
            (None, Some(stages)) if self.config.is_empty() => stages,
            (None, Some(_)) => {
                return Err("[config.<stage>] overlays need `extends = \"default\"`".to_owned());
            }
            (None, None) => {
                return Err("a spec lists its [[stage]]s or says `extends = \"default\"`".to_owned());
            }
            (Some("default"), None) => overlay(default_stages()?, self.config)?,
            (Some("default"), Some(_)) => {
                return Err(
                    "a spec that extends the default overlays [config.<stage>], not [[stage]]".to_owned()
                );
            }
            (Some(other), _) => return Err(format!("extends {other:?}: only \"default\" can be extended")),
        };
        Ok(PipelineSpec { stages, log: self.log })
    }
}

fn default_stages() -> Result<Vec<StageSpec>, String> {
    let file: SpecFile =
        toml::from_str(DEFAULT_SPEC_TOML).map_err(|e| format!("the built-in default: {e}"))?;
    file.stages.ok_or_else(|| "the built-in default lists no stages".to_owned())
}

/// The stages with each overlay's keys written over its stage's configuration.
fn overlay(
    mut stages: Vec<StageSpec>,
    overlays: BTreeMap<String, toml::Table>,
) -> Result<Vec<StageSpec>, String> {
    for (name, keys) in overlays {
        let Some(stage) = stages.iter_mut().find(|stage| stage.name == name) else {
            let known: Vec<&str> = stages.iter().map(|stage| stage.name.as_str()).collect();
            return Err(format!(
                "[config.{name}]: the default has no such stage; its stages: {}",
                known.join(", ")
            ));
        };
        stage.config.extend(keys);
    }
    Ok(stages)
}

fn check_stage_name(name: &str) -> Result<(), String> {
    let valid = !name.is_empty()
        && name.len() <= STAGE_NAME_BYTES_MAX
        && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
    if valid {
        Ok(())
    } else {
        Err(format!("stage name {name:?} must be 1..={STAGE_NAME_BYTES_MAX} of a-z, 0-9 and -"))
    }
}

/// Builds a projector from its configuration.
pub type StageFactory = Box<dyn Fn(&toml::Table) -> Result<Box<dyn Projector>, String> + Send + Sync>;

/// The stages this build knows, by name.
#[derive(Default)]
pub struct StageRegistry {
    factories: BTreeMap<String, StageFactory>,
}

impl std::fmt::Debug for StageRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.factories.keys()).finish()
    }
}

impl StageRegistry {
    /// A registry with the stages this crate provides.
    pub fn with_builtin() -> Self {
        let mut registry = StageRegistry::default();
        registry
            .register(crate::stages::session_catalog::STAGE_NAME, crate::stages::session_catalog::factory);
        registry
    }

    /// Adds (or replaces) a stage.
    pub fn register(
        &mut self,
        name: &str,
        factory: impl Fn(&toml::Table) -> Result<Box<dyn Projector>, String> + Send + Sync + 'static,
    ) {
        self.factories.insert(name.to_owned(), Box::new(factory));
    }

    /// Builds the projector for one stage of a spec.
    pub fn build(&self, stage: &StageSpec) -> Result<Box<dyn Projector>, PipelineError> {
        let factory = self.factories.get(&stage.name).ok_or_else(|| {
            let known: Vec<_> = self.factories.keys().cloned().collect();
            stage.invalid(format!("no such stage; known stages: {}", known.join(", ")))
        })?;
        let projector = factory(&stage.config).map_err(|reason| stage.invalid(reason))?;
        debug_assert_eq!(projector.name(), stage.name, "a factory builds the stage it is registered as");
        Ok(projector)
    }
}
