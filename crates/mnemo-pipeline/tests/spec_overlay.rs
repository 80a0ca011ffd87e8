//! Pipeline specs that extend the built-in default: a variant states only what it changes.
#![allow(clippy::unwrap_used, reason = "a test fails loudly on the first unexpected error")]

use std::path::Path;

use mnemo_pipeline::{PipelineError, PipelineSpec};

fn default() -> PipelineSpec {
    PipelineSpec::default_spec().unwrap()
}

fn refusal(text: &str) -> String {
    match PipelineSpec::parse(text, "test.toml") {
        Err(PipelineError::InvalidSpec { origin, reason }) => {
            assert_eq!(origin, "test.toml");
            reason
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[test]
fn an_overlay_changes_only_the_keys_it_names() {
    let spec = PipelineSpec::parse(
        "extends = \"default\"\n[config.history-search]\nb = 0.5\nstem = false\n",
        "test.toml",
    )
    .unwrap();
    let base = default();
    assert_eq!(spec.stages.len(), base.stages.len());
    for (stage, base) in spec.stages.iter().zip(&base.stages) {
        assert_eq!(stage.name, base.name);
        if stage.name == "history-search" {
            assert_eq!(stage.config["b"].as_float(), Some(0.5));
            assert_eq!(stage.config["stem"].as_bool(), Some(false));
            assert_eq!(stage.config["k1"], base.config["k1"], "a key the overlay leaves out keeps its value");
        } else {
            assert_eq!(stage.config, base.config);
        }
    }
}

#[test]
fn the_variants_in_the_repository_extend_the_default() {
    let pipelines = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../pipelines");
    for (file, stage) in
        [("history-search.toml", "latest-checkpoint"), ("search-baseline.toml", "history-search")]
    {
        let spec = PipelineSpec::load(&pipelines.join(file)).unwrap();
        let base = default();
        let names = |spec: &PipelineSpec| spec.stages.iter().map(|s| s.name.clone()).collect::<Vec<_>>();
        assert_eq!(names(&spec), names(&base), "{file}");
        for (variant, base) in spec.stages.iter().zip(&base.stages) {
            assert_eq!(
                variant.config == base.config,
                variant.name != stage,
                "{file}: stage {}",
                variant.name
            );
        }
    }
}

#[test]
fn an_overlay_of_a_stage_the_default_lacks_is_refused_with_the_stages_it_has() {
    let reason = refusal("extends = \"default\"\n[config.histroy-search]\nb = 0.5\n");
    assert!(reason.contains("[config.histroy-search]") && reason.contains("history-search"), "{reason}");
}

#[test]
fn a_spec_is_either_a_list_of_stages_or_an_overlay() {
    let both = refusal("extends = \"default\"\n[[stage]]\nname = \"session-catalog\"\n");
    assert!(both.contains("not [[stage]]"), "{both}");
    let neither = refusal("[log]\nurl = \"local\"\n");
    assert!(neither.contains("lists its [[stage]]s"), "{neither}");
    let overlay_alone = refusal("[[stage]]\nname = \"session-catalog\"\n[config.session-catalog]\nx = 1\n");
    assert!(overlay_alone.contains("extends"), "{overlay_alone}");
    let other = refusal("extends = \"history-search\"\n");
    assert!(other.contains("only \"default\""), "{other}");
}
