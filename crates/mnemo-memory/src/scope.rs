//! Where a memory holds: the one rule behind every item's scope, whichever proposer wrote it.
//!
//! A global item reaches every session start in every project, so global is earned by the user's
//! words, never assumed. Global holds only what is about the user wherever they work: who they are
//! (their name, what to call them, what they are, where they live), how the assistant is to talk to
//! them ("always answer in French"), and a preference they say holds everywhere ("in everything I
//! write", "in every project"). Everything else holds in the workspace it was said in: a project's
//! facts and rules, a habit stated without such words ("I prefer tabs over spaces": spaces may be
//! the rule in the next repository), and a passing remark ("I like turtles").

use std::sync::OnceLock;

use mnemo_core::MemoryScope;
use regex::Regex;

/// Words that say a preference holds wherever the user works.
const EVERYWHERE: &str = concat!(
    r"\b(?:everywhere|wherever|no\s+matter\s+(?:what|which|where)",
    r"|in\s+(?:everything|every\s+\w+|all\s+(?:of\s+)?(?:my\s+|the\s+)?\w+|any\s+\w+)",
    r"|across\s+(?:all\s+)?(?:my\s+)?(?:projects|repos|repositories|codebases|languages))\b",
);

/// Nouns after "in every", "in all" or "in any" that reach beyond one project; "in all files" or
/// "in every test" speaks of the project at hand.
const EVERYWHERE_NOUNS: &[&str] = &[
    "project",
    "projects",
    "repo",
    "repos",
    "repository",
    "repositories",
    "codebase",
    "codebases",
    "language",
    "languages",
    "session",
    "sessions",
    "conversation",
    "conversations",
    "chat",
    "chats",
    "workspace",
    "workspaces",
    "context",
    "contexts",
];

/// Who the user is.
const IDENTITY: &str = concat!(
    r"\b(?:my\s+name\s+is|call\s+me|my\s+pronouns\s+are|i\s+live\s+in|i\s+am\s+based\s+in|i'm\s+based\s+in",
    r"|i\s+work\s+as|i\s+am\s+an?|i'm\s+an?)\s+(\w+)",
);

/// What follows "I am a" in a remark, not an identity: "I'm a bit tired", "I'm a fan of turtles".
const NOT_IDENTITY: &[&str] = &["bit", "little", "lot", "fan", "big", "huge", "tad", "touch"];

/// How the assistant is to talk to the user, as a standing rule.
const ADDRESS: &str = concat!(
    r"\b(?:(?:always|never|from\s+now\s+on,?|going\s+forward,?)\s+(?:please\s+)?",
    r"(?:answer|reply|respond|talk|speak|write\s+to\s+me|address\s+me|explain)",
    r"|i\s+(?:prefer|want|like)\s+(?:your\s+)?(?:answers|replies|responses|explanations))\b",
);

struct Patterns {
    everywhere: Regex,
    identity: Regex,
    address: Regex,
}

fn patterns() -> Option<&'static Patterns> {
    static PATTERNS: OnceLock<Option<Patterns>> = OnceLock::new();
    PATTERNS
        .get_or_init(|| {
            Some(Patterns {
                everywhere: Regex::new(EVERYWHERE).ok()?,
                identity: Regex::new(IDENTITY).ok()?,
                address: Regex::new(ADDRESS).ok()?,
            })
        })
        .as_ref()
}

/// Whether the user's words state something that holds wherever they work (see the module
/// documentation). `words` are the user's own: a quote, not a statement rewritten about them.
pub fn holds_everywhere(words: &str) -> bool {
    // Without its patterns nothing is global: the safe side of the rule.
    let Some(patterns) = patterns() else { return false };
    let lower = words.to_lowercase().replace('’', "'");
    let identity = patterns
        .identity
        .captures_iter(&lower)
        .any(|c| c.get(1).is_some_and(|next| !NOT_IDENTITY.contains(&next.as_str())));
    let everywhere = patterns.everywhere.find_iter(&lower).any(|m| {
        let last = m.as_str().split_whitespace().last().unwrap_or_default();
        !(m.as_str().starts_with("in ") && m.as_str() != "in everything") || EVERYWHERE_NOUNS.contains(&last)
    });
    identity || everywhere || patterns.address.is_match(&lower)
}

/// The scope an item is stored in: global when it was proposed global and one of its quotes holds
/// everywhere ([`holds_everywhere`]); otherwise the session's workspace. `None` when it holds only
/// in a workspace and the session belongs to none (`session` is [`MemoryScope::Global`]): it is not
/// stored, rather than stored for every project.
pub fn item_scope(proposed_global: bool, quotes: &[String], session: &MemoryScope) -> Option<MemoryScope> {
    if proposed_global && quotes.iter().any(|q| holds_everywhere(q)) {
        return Some(MemoryScope::Global);
    }
    match session {
        MemoryScope::Workspace(_) => Some(session.clone()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mnemo_core::WorkspaceId;

    #[test]
    fn only_what_holds_wherever_the_user_works_is_global() {
        for everywhere in [
            "I prefer British spelling in everything I write",
            "always answer in French",
            "from now on answer in English",
            "Never reply with emojis",
            "my name is Ada",
            "call me Ada",
            "I'm a backend engineer",
            "I live in Lisbon",
            "I use tabs in every project",
            "I prefer pnpm across all my projects",
            "I want answers short",
        ] {
            assert!(holds_everywhere(everywhere), "{everywhere:?} holds everywhere");
        }
        for here in [
            "I like turtles",
            "I prefer tabs over spaces",
            "I never use unwrap in library code",
            "never force-push to main",
            "always open a PR",
            "we deploy with fly.io",
            "use tabs in all files",
            "I'm a bit tired",
            "I work on the billing service",
            "answer this one in French",
        ] {
            assert!(!holds_everywhere(here), "{here:?} holds in its workspace");
        }
    }

    #[test]
    fn a_workspace_item_of_a_session_without_a_workspace_is_not_stored() {
        let workspace = MemoryScope::Workspace(WorkspaceId::new("acme/api").unwrap());
        let quotes = |q: &str| vec![q.to_owned()];
        let cases = [
            (true, "always answer in French", &workspace, Some(MemoryScope::Global)),
            (true, "I like turtles", &workspace, Some(workspace.clone())),
            // A proposer may narrow what holds everywhere to the workspace, never widen.
            (false, "always answer in French", &workspace, Some(workspace.clone())),
            (true, "I like turtles", &MemoryScope::Global, None),
            (false, "never force-push to main", &MemoryScope::Global, None),
            (true, "my name is Ada", &MemoryScope::Global, Some(MemoryScope::Global)),
        ];
        for (global, quote, session, expected) in cases {
            assert_eq!(item_scope(global, &quotes(quote), session), expected, "{quote:?} in {session:?}");
        }
    }
}
