//! The compaction policy (compaction.md §3.1): its defaults, and the overrides a pipeline spec
//! gives in the `latest-checkpoint` stage's `[stage.config]`.

use serde::{Deserialize, Serialize};

use crate::projection::CHARS_PER_TOKEN_DEFAULT;

/// The reserve when nothing else decides it, and the most a known window's quarter may reserve.
pub const RESERVE_TOKENS_DEFAULT: u64 = 16_384;
/// The history budget when no window is known.
pub const MAX_HISTORY_TOKENS_DEFAULT: u64 = 32_000;
/// Turns the general budget always keeps.
pub const BUDGET_MIN_RECENT_TURNS_DEFAULT: u64 = 2;
/// `historyCompact.minRecentTurns`: under the V2 seam only 0 (fold everything) changes anything.
pub const COMPACT_MIN_RECENT_TURNS_DEFAULT: u64 = 3;
/// Events a mid-turn compaction always leaves uncovered at the end.
pub const MID_TURN_RESERVE_TAIL_EVENTS_DEFAULT: u64 = 1;
/// Manual compaction's high-water ratio: almost any history compacts.
pub const MANUAL_HIGH_WATER_RATIO: f64 = 0.000_001;
/// Context-budget history search (events-and-history.md §3.10): hits taken, by default
/// (`MAKA_CONTEXT_HISTORY_SEARCH_MAX_RESULTS`).
pub const HISTORY_SEARCH_RESULTS_DEFAULT: u64 = 5;
/// The most hits a request may take: one ranked page of SearchHistory (`SEARCH_LIMIT_MAX`).
pub const HISTORY_SEARCH_RESULTS_MAX: u64 = 10;
/// Neighbouring events taken on each side of a hit, by default (`_AROUND`).
pub const HISTORY_SEARCH_AROUND_DEFAULT: u64 = 1;
/// The most neighbours on each side a policy may ask for.
pub const HISTORY_SEARCH_AROUND_MAX: u64 = 8;
/// Tokens the retrieved events may take at most, by default (`_MAX_TOKENS`).
pub const HISTORY_SEARCH_TOKENS_DEFAULT: u64 = 4096;

/// Whether compaction writes checkpoints or only replays existing ones.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum CompactMode {
    /// Replay and write.
    #[default]
    ReadWrite,
    /// Replay only; a selection that would compact skips with `lookup_miss`.
    Lookup,
}

/// The policy, as written in a pipeline spec. Every field is optional there.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CompactionPolicy {
    /// The whole context budget; off means raw history, untouched.
    pub enabled: bool,
    /// History compaction (checkpoint replay and writes).
    pub history_compact: bool,
    /// Write or only replay.
    pub mode: CompactMode,
    /// The model's context window in tokens, when known.
    pub context_window: Option<u64>,
    /// An explicit reserve for the answer, in tokens.
    pub reserve_tokens: Option<u64>,
    /// An explicit history budget, in tokens.
    pub max_history_tokens: Option<u64>,
    /// Characters per token of every estimate.
    pub chars_per_token: u64,
    /// Compaction starts once compactable history passes this share of the budget.
    pub high_water_ratio: f64,
    /// `historyCompact.minRecentTurns` (0 folds every turn).
    pub min_recent_turns: u64,
    /// Turns the general budget always keeps when it trims.
    pub budget_min_recent_turns: u64,
    /// Most turns the general budget keeps.
    pub max_history_turns: Option<u64>,
    /// Mid-turn capacity compaction.
    pub mid_turn: bool,
    /// Events a mid-turn compaction leaves uncovered at the end.
    pub mid_turn_reserve_tail_events: u64,
    /// Reject a summary whose share of unsupported claims is above this (0 to 1); none accepts all
    /// and only records them.
    pub faithfulness_max_unsupported_ratio: Option<f64>,
    /// Context-budget history search (§3.10): earlier events of the session that the ranked
    /// search index finds for the request's text are added to the history. Off unless a pipeline
    /// spec switches it on.
    pub history_search: bool,
    /// Hits taken, best first (1..=[`HISTORY_SEARCH_RESULTS_MAX`]).
    pub history_search_max_results: u64,
    /// Neighbouring events taken on each side of a hit (0..=[`HISTORY_SEARCH_AROUND_MAX`]).
    pub history_search_around: u64,
    /// Tokens the retrieved events may take (also never more than the history budget leaves).
    pub history_search_max_tokens: u64,
}

impl Default for CompactionPolicy {
    fn default() -> Self {
        CompactionPolicy {
            enabled: true,
            history_compact: true,
            mode: CompactMode::ReadWrite,
            context_window: None,
            reserve_tokens: None,
            max_history_tokens: None,
            chars_per_token: CHARS_PER_TOKEN_DEFAULT,
            high_water_ratio: 1.0,
            min_recent_turns: COMPACT_MIN_RECENT_TURNS_DEFAULT,
            budget_min_recent_turns: BUDGET_MIN_RECENT_TURNS_DEFAULT,
            max_history_turns: None,
            mid_turn: true,
            mid_turn_reserve_tail_events: MID_TURN_RESERVE_TAIL_EVENTS_DEFAULT,
            faithfulness_max_unsupported_ratio: None,
            history_search: false,
            history_search_max_results: HISTORY_SEARCH_RESULTS_DEFAULT,
            history_search_around: HISTORY_SEARCH_AROUND_DEFAULT,
            history_search_max_tokens: HISTORY_SEARCH_TOKENS_DEFAULT,
        }
    }
}

impl CompactionPolicy {
    /// Reads the policy from a stage configuration table; unknown keys are refused.
    pub fn from_table(table: &toml::Table) -> Result<CompactionPolicy, String> {
        let policy: CompactionPolicy =
            toml::Value::Table(table.clone()).try_into().map_err(|e: toml::de::Error| e.to_string())?;
        policy.check()?;
        Ok(policy)
    }

    fn check(&self) -> Result<(), String> {
        if self.chars_per_token == 0 {
            return Err("chars_per_token must be at least 1".to_owned());
        }
        if !(self.high_water_ratio.is_finite() && self.high_water_ratio > 0.0) {
            return Err("high_water_ratio must be a positive number".to_owned());
        }
        if let Some(ratio) = self.faithfulness_max_unsupported_ratio
            && !(0.0..=1.0).contains(&ratio)
        {
            return Err("faithfulness_max_unsupported_ratio must be between 0 and 1".to_owned());
        }
        if !(1..=HISTORY_SEARCH_RESULTS_MAX).contains(&self.history_search_max_results) {
            return Err(format!("history_search_max_results must be 1 to {HISTORY_SEARCH_RESULTS_MAX}"));
        }
        if self.history_search_around > HISTORY_SEARCH_AROUND_MAX {
            return Err(format!("history_search_around must be at most {HISTORY_SEARCH_AROUND_MAX}"));
        }
        if self.history_search_max_tokens == 0 {
            return Err("history_search_max_tokens must be at least 1".to_owned());
        }
        Ok(())
    }

    /// The same policy with another context window (the CLI's `--window`).
    pub fn with_window(mut self, window: Option<u64>) -> Self {
        if window.is_some() {
            self.context_window = window;
        }
        self
    }

    /// The reserve: explicit, else a quarter of a known window capped at 16,384, else 16,384.
    pub fn reserve(&self) -> u64 {
        match (self.reserve_tokens, self.context_window) {
            (Some(reserve), _) => reserve,
            (None, Some(window)) => RESERVE_TOKENS_DEFAULT.min((window / 4).max(1)),
            (None, None) => RESERVE_TOKENS_DEFAULT,
        }
    }

    /// The history budget: explicit, else the window less the reserve, else 32,000.
    pub fn max_history(&self) -> u64 {
        match (self.max_history_tokens, self.context_window) {
            (Some(budget), _) => budget,
            (None, Some(window)) => window.saturating_sub(self.reserve()).max(1),
            (None, None) => MAX_HISTORY_TOKENS_DEFAULT,
        }
    }

    /// The high-water mark in tokens: `max(1, floor(budget × ratio))`.
    pub fn high_water(&self) -> u64 {
        ((self.max_history() as f64 * self.high_water_ratio).floor() as u64).max(1)
    }

    /// Mid-turn capacity: the window, else budget plus reserve (`policy_fallback`).
    pub fn capacity(&self) -> (u64, CapacitySource) {
        match self.context_window {
            Some(window) => (window, CapacitySource::SelectedModel),
            None => (self.max_history() + self.reserve(), CapacitySource::PolicyFallback),
        }
    }

    /// Whether replay and writes of checkpoints are on.
    pub fn compaction_on(&self) -> bool {
        self.enabled && self.history_compact
    }
}

/// Where mid-turn capacity came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CapacitySource {
    /// The selected model's window.
    SelectedModel,
    /// Budget plus reserve.
    PolicyFallback,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_follow_the_spec() {
        let policy = CompactionPolicy::default();
        assert_eq!((policy.reserve(), policy.max_history()), (16_384, 32_000));
        let big = policy.clone().with_window(Some(200_000));
        assert_eq!((big.reserve(), big.max_history()), (16_384, 183_616));
        let small = policy.clone().with_window(Some(8_000));
        assert_eq!((small.reserve(), small.max_history()), (2_000, 6_000));
        let small = policy.with_window(Some(8_192));
        assert_eq!((small.reserve(), small.max_history()), (2_048, 6_144));
    }

    #[test]
    fn a_table_overrides_and_unknown_keys_fail() {
        let table: toml::Table =
            "max_history_tokens = 900\nhigh_water_ratio = 0.5".parse().unwrap_or_default();
        let policy = CompactionPolicy::from_table(&table);
        assert_eq!(policy.as_ref().map(CompactionPolicy::high_water).ok(), Some(450));
        let bad: toml::Table = "bogus = 1".parse().unwrap_or_default();
        assert!(CompactionPolicy::from_table(&bad).is_err());
        let zero: toml::Table = "chars_per_token = 0".parse().unwrap_or_default();
        assert!(CompactionPolicy::from_table(&zero).is_err());
    }
}
