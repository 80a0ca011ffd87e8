//! The continuation summary of a V2 checkpoint: its mandated format and the rules that decide
//! whether a summary is complete (compaction.md §2.1, §2.3).
//!
//! Three rule sets, checked in this order: structure (the required sections, in order, each with
//! content), truncation (an open fence or a trailing continuation mark), and the size floor (a
//! summary under 200 tokens may not stand in for more than 10,000). Which sets apply depends on
//! where the check runs: every writer applies all three, loading applies structure and truncation
//! to sectioned summaries and truncation alone to legacy ones, and conversation copy applies all
//! three again because it has the covered span at hand.

use crate::projection::{estimate_tokens, utf16_len};

/// The Markdown skeleton a summary must follow. The summarizer prompt embeds this very constant, so
/// the format asked for and the format checked cannot drift apart.
pub const SUMMARY_FORMAT_TEMPLATE: &str = "## Goal
[What the user is trying to accomplish]

## Progress
### Done
[Completed work, with the exact files, commands and results]

### In Progress
[Work under way when the conversation was summarized]

## Key Decisions
- **[Decision]**: [Rationale]

## Next Steps
1. [The next concrete step]

## Critical Context
[Exact file paths, commands and their results, identifiers and error messages, or (none)]";

/// The headings that must appear, in this order. `## Key Decisions` is optional.
pub const REQUIRED_SUMMARY_SECTIONS: [&str; 4] =
    ["## Goal", "## Progress", "## Next Steps", "## Critical Context"];

/// A summary at or under this many tokens ...
pub const SUMMARY_FLOOR_TOKENS: u64 = 200;
/// ... may not replace a covered span over this many tokens.
pub const SUMMARY_FLOOR_SPAN_TOKENS: u64 = 10_000;

/// The trailing marks that say a summary was cut off. A trailing backtick is deliberately not one.
const TRUNCATION_SUFFIXES: [&str; 12] = ["...", ":", "：", ",", "，", "、", ";", "；", "…", "(", "（", "—"];

/// What is wrong with a summary. The codes are the reference system's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum SummaryDefect {
    /// A required section is missing, out of order or empty.
    MissingSection,
    /// The summary ends inside a fence or with a continuation mark.
    Truncated,
    /// The summary is too small for the span it replaces.
    TooSmallForFold,
}

impl SummaryDefect {
    /// The defect's reason code.
    pub fn code(self) -> &'static str {
        match self {
            SummaryDefect::MissingSection => "malformed_summary_missing_section",
            SummaryDefect::Truncated => "malformed_summary_truncated",
            SummaryDefect::TooSmallForFold => "malformed_summary_too_small_for_fold",
        }
    }
}

/// Which rule sets to apply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SummaryChecks {
    /// The required-sections rules.
    pub structure: bool,
    /// The truncation rules.
    pub truncation: bool,
    /// The size floor, with the token estimate of the whole covered span.
    pub floor_span_tokens: Option<u64>,
    /// Characters per token of the floor's estimate.
    pub chars_per_token: u64,
}

impl SummaryChecks {
    /// Every rule, for a summary about to replace a span of `span_tokens`.
    pub fn full(span_tokens: u64, chars_per_token: u64) -> Self {
        SummaryChecks {
            structure: true,
            truncation: true,
            floor_span_tokens: Some(span_tokens),
            chars_per_token,
        }
    }

    /// Structure and truncation: what loading a sectioned summary applies.
    pub fn load_sectioned() -> Self {
        SummaryChecks { structure: true, truncation: true, floor_span_tokens: None, chars_per_token: 4 }
    }

    /// Truncation alone: what loading a legacy summary applies.
    pub fn load_legacy() -> Self {
        SummaryChecks { structure: false, truncation: true, floor_span_tokens: None, chars_per_token: 4 }
    }
}

/// The first defect of `summary` under `checks`, or `None`. A blank summary has no defect: callers
/// refuse it as `empty_summary` before they get here.
pub fn find_summary_defect(summary: &str, checks: SummaryChecks) -> Option<SummaryDefect> {
    if summary.trim().is_empty() {
        return None;
    }
    let normalized = summary.replace("\r\n", "\n");
    let scan = scan_structure(&normalized);
    if checks.structure && !scan.complete {
        return Some(SummaryDefect::MissingSection);
    }
    if checks.truncation && (scan.ends_in_fence || ends_with_truncation_mark(&normalized)) {
        return Some(SummaryDefect::Truncated);
    }
    if let Some(span) = checks.floor_span_tokens {
        let tokens = estimate_tokens(utf16_len(summary), checks.chars_per_token);
        if tokens < SUMMARY_FLOOR_TOKENS && span > SUMMARY_FLOOR_SPAN_TOKENS {
            return Some(SummaryDefect::TooSmallForFold);
        }
    }
    None
}

fn ends_with_truncation_mark(text: &str) -> bool {
    let trimmed = text.trim();
    TRUNCATION_SUFFIXES.iter().any(|suffix| trimmed.ends_with(suffix))
}

#[derive(Debug)]
struct StructureScan {
    complete: bool,
    ends_in_fence: bool,
}

/// Where a line's text starts after at most three spaces, or `None` if it is indented four or more.
fn after_indent(line: &str) -> Option<&str> {
    let spaces = line.bytes().take_while(|b| *b == b' ').count();
    (spaces <= 3).then(|| &line[spaces..])
}

/// A fence opener: a run of at least three backticks or tildes, optionally followed by an info string.
fn fence_opener(line: &str) -> Option<(u8, usize)> {
    let text = after_indent(line)?;
    let first = *text.as_bytes().first()?;
    if first != b'`' && first != b'~' {
        return None;
    }
    let run = text.bytes().take_while(|b| *b == first).count();
    (run >= 3).then_some((first, run))
}

/// Whether a line closes a fence opened with `run` of `marker`: just a run of the same character, at
/// least as long, indented at most three spaces.
fn closes_fence(line: &str, marker: u8, run: usize) -> bool {
    let Some(text) = after_indent(line) else {
        return false;
    };
    let text = text.trim_end();
    text.len() >= run && text.bytes().all(|b| b == marker)
}

/// An ATX heading of level 1 to 6 (bare markers included).
fn is_heading(line: &str) -> bool {
    let Some(text) = after_indent(line) else {
        return false;
    };
    let hashes = text.bytes().take_while(|b| *b == b'#').count();
    (1..=6).contains(&hashes) && matches!(text.as_bytes().get(hashes), None | Some(b' ') | Some(b'\t'))
}

/// An H2 heading (`## ` or a bare `##`).
fn is_h2(line: &str) -> bool {
    let Some(text) = after_indent(line) else {
        return false;
    };
    text.starts_with("##") && matches!(text.as_bytes().get(2), None | Some(b' ') | Some(b'\t'))
}

/// A thematic break: three or more of one of `-`, `*`, `_`, spaces allowed between.
fn is_thematic_break(line: &str) -> bool {
    let Some(text) = after_indent(line) else {
        return false;
    };
    let marks: Vec<u8> = text.bytes().filter(|b| *b != b' ' && *b != b'\t').collect();
    marks.len() >= 3 && matches!(marks[0], b'-' | b'*' | b'_') && marks.iter().all(|b| *b == marks[0])
}

fn is_placeholder(line: &str) -> bool {
    let trimmed = line.trim();
    SUMMARY_FORMAT_TEMPLATE
        .lines()
        .filter(|l| !l.trim().is_empty() && !is_heading(l))
        .any(|l| l.trim() == trimmed)
}

fn scan_structure(text: &str) -> StructureScan {
    let mut next_required = 0usize;
    // The required section being filled, if the current section is one.
    let mut current: Option<usize> = None;
    let mut has_content = [false; REQUIRED_SUMMARY_SECTIONS.len()];
    let mut fence: Option<(u8, usize)> = None;
    for line in text.split('\n') {
        if let Some((marker, run)) = fence {
            if closes_fence(line, marker, run) {
                fence = None;
            } else if let Some(section) = current {
                has_content[section] = true;
            }
            continue;
        }
        if let Some(opener) = fence_opener(line) {
            fence = Some(opener);
            continue;
        }
        if is_heading(line) {
            let exact = after_indent(line).is_some_and(|_| {
                REQUIRED_SUMMARY_SECTIONS.get(next_required).is_some_and(|h| line.trim() == *h)
            });
            if exact {
                current = Some(next_required);
                next_required += 1;
            } else if is_h2(line) {
                current = None;
            }
            continue;
        }
        if line.trim().is_empty() || is_thematic_break(line) || is_placeholder(line) {
            continue;
        }
        if let Some(section) = current {
            has_content[section] = true;
        }
    }
    StructureScan {
        complete: next_required == REQUIRED_SUMMARY_SECTIONS.len() && has_content.iter().all(|c| *c),
        ends_in_fence: fence.is_some(),
    }
}

/// A shorter version of a sectioned summary, at most `max_chars` long (UTF-16 units), made only by
/// removing whole content lines: from the section with the most lines, its oldest first, never a
/// section's last line, never inside a fence. `None` when it cannot get that short. Whatever it
/// returns says nothing the original did not (decision 0125: a shorter summary rather than a
/// refusal when a summary and the tail it stands before do not fit).
pub fn shorten_summary(summary: &str, max_chars: u64) -> Option<String> {
    let mut lines: Vec<String> = summary.replace("\r\n", "\n").lines().map(str::to_owned).collect();
    let is_heading = |l: &str| l.trim_start().starts_with('#');
    if lines.iter().any(|l| l.trim_start().starts_with("```") || l.trim_start().starts_with("~~~")) {
        return None;
    }
    let length = |lines: &[String]| lines.iter().map(|l| utf16_len(l) + 1).sum::<u64>();
    while length(&lines) > max_chars {
        // Content lines per H2 section (a `###` subsection's lines count to its own group).
        let mut groups: Vec<Vec<usize>> = Vec::new();
        for (index, line) in lines.iter().enumerate() {
            if is_heading(line) {
                groups.push(Vec::new());
            } else if !line.trim().is_empty()
                && let Some(group) = groups.last_mut()
            {
                group.push(index);
            }
        }
        let victim = groups.iter().filter(|g| g.len() > 1).max_by_key(|g| g.len())?;
        // Numbered next steps keep their first; other lists lose their oldest.
        let index = if lines[victim[0]].trim_start().starts_with("1.") {
            victim[victim.len() - 1]
        } else {
            victim[0]
        };
        lines.remove(index);
    }
    let mut text = lines.join("\n");
    while text.contains("\n\n\n") {
        text = text.replace("\n\n\n", "\n\n");
    }
    Some(text.trim().to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = "## Goal\nFix the build.\n\n## Progress\n### Done\n- ran `cargo test`\n\n## Next Steps\n1. Ship it.\n\n## Critical Context\n- src/lib.rs";

    fn check(summary: &str, expect: Option<SummaryDefect>) {
        let checks =
            SummaryChecks { structure: true, truncation: true, floor_span_tokens: None, chars_per_token: 4 };
        assert_eq!(find_summary_defect(summary, checks), expect, "{summary}");
    }

    #[test]
    fn a_complete_summary_passes_and_blank_has_no_defect() {
        check(GOOD, None);
        check(&GOOD.replace('\n', "\r\n"), None);
        check("  \n ", None);
    }

    #[test]
    fn headings_must_match_exactly_and_in_order() {
        check(&GOOD.replace("## Goal\n", "## Goal:\n"), Some(SummaryDefect::MissingSection));
        check(&GOOD.replace("## Goal\n", "## Goal continued\n"), Some(SummaryDefect::MissingSection));
        check(&GOOD.replace("## Goal\n", "### Goal\n"), Some(SummaryDefect::MissingSection));
        check(&GOOD.replace("## Goal\n", "   ## Goal\n"), None);
        check(&GOOD.replace("## Goal\n", "    ## Goal\n"), Some(SummaryDefect::MissingSection));
        let swapped = "## Progress\nx\n## Goal\ny\n## Next Steps\nz\n## Critical Context\nw";
        check(swapped, Some(SummaryDefect::MissingSection));
    }

    #[test]
    fn non_content_lines_do_not_fill_a_section() {
        check(SUMMARY_FORMAT_TEMPLATE, Some(SummaryDefect::MissingSection));
        let empty_goal = GOOD.replace("Fix the build.", "```\n```");
        check(&empty_goal, Some(SummaryDefect::MissingSection));
        check(&GOOD.replace("Fix the build.", "###"), Some(SummaryDefect::MissingSection));
        check(&GOOD.replace("Fix the build.", "- - -"), Some(SummaryDefect::MissingSection));
        check(&GOOD.replace("Fix the build.", "***"), Some(SummaryDefect::MissingSection));
        // Content under a non-required H2 does not count for the section before it.
        check(&GOOD.replace("Fix the build.", "## Key Decisions\n- x"), Some(SummaryDefect::MissingSection));
        check(&GOOD.replace("Fix the build.", "(none)"), None);
    }

    #[test]
    fn fences_hide_headings_and_their_lines_are_content() {
        let fenced_heading = GOOD.replace("Fix the build.", "```\n## Progress\n```");
        check(&fenced_heading, None);
        let hidden = "## Goal\n```\n## Progress\nx\n## Next Steps\ny\n## Critical Context\nz\n```";
        check(hidden, Some(SummaryDefect::MissingSection));
        // A shorter run, another character, trailing text or a deep indent does not close.
        for not_closer in ["``", "~~~", "``` x", "    ```"] {
            let text = GOOD.replace("Fix the build.", &format!("```\nx\n{not_closer}"));
            check(&text, Some(SummaryDefect::MissingSection));
        }
        for closer in ["````", "   ```"] {
            check(&GOOD.replace("Fix the build.", &format!("```\nx\n{closer}")), None);
        }
    }

    #[test]
    fn truncation_signals() {
        for tail in ["...", ":", "：", ",", "，", "、", ";", "；", "…", "(", "（", "—"] {
            check(&format!("{GOOD} and then{tail}"), Some(SummaryDefect::Truncated));
        }
        check(&format!("{GOOD}\n```bash\ncargo build"), Some(SummaryDefect::Truncated));
        check(&format!("{GOOD} then `x`"), None);
        check(&format!("{GOOD} run ```inline``` here"), None);
    }

    #[test]
    fn the_size_floor_applies_only_to_large_spans() {
        let small = SummaryChecks::full(10_001, 4);
        assert_eq!(find_summary_defect(GOOD, small), Some(SummaryDefect::TooSmallForFold));
        assert_eq!(find_summary_defect(GOOD, SummaryChecks::full(10_000, 4)), None);
        let padded = format!("{GOOD}{}", " x".repeat((799 - GOOD.len()) / 2));
        let exact = format!("{padded}{}", "y".repeat(799 - padded.len()));
        assert_eq!(exact.len(), 799);
        assert_eq!(find_summary_defect(&exact, small), None);
        assert_eq!(find_summary_defect(&exact[..796], small), Some(SummaryDefect::TooSmallForFold));
    }
}
