//! Claude Code session files (`~/.claude/projects/<project>/<session>.jsonl`, and a sub-agent's
//! `agent-<id>.jsonl` beside it or under `<session>/subagents/`): one object per line, `type`
//! `user` or `assistant` with an API `message`, plus bookkeeping lines.
//!
//! What is kept:
//! - a user line's text opens a turn (named by the line's `uuid`); its `tool_result` blocks become
//!   tool results with their `is_error` (a result whose call is not among its session's lines,
//!   which Claude Code writes at times, is kept as a system event by the host naming the call);
//! - an `image` block, inside a `tool_result` (a screenshot, an image file read) or in a user line
//!   (a pasted screenshot), is a placeholder text naming its media type and the size of its base64
//!   data (`[image: image/png, 48,213 bytes of base64 not kept]`), counted: the data is never kept
//!   as text;
//! - a tool result Claude Code cut to a preview because the output was too large
//!   (`<persisted-output>` … `Full output saved to: <path>` …) is the full output, read (never
//!   written) from the file of that name in `<sessionId>/tool-results/` beside the session file,
//!   within [`PERSISTED_OUTPUT_BYTES_MAX`]; missing (or the source not a file's path), over the
//!   limit or unreadable, the preview stays and is counted;
//!   an assistant line's `thinking` (with its signature), `text` and `tool_use` blocks (with
//!   their input) become model parts;
//! - what Claude Code itself writes in user-role lines becomes a system event written by the
//!   host, never a user turn: `isMeta` lines (`Caveat: ...`, injected reminders), slash-command
//!   markup (`<command-name>`, `<command-message>`, `<command-args>`, `<local-command-stdout>`,
//!   `<local-command-stderr>`, `<bash-input>`, `<bash-stdout>`, `<bash-stderr>`) and `system` lines of
//!   subtype `local_command`. Such lines go in the turn of the request they come before;
//! - Claude Code's own compaction: the `system` line of subtype `compact_boundary` becomes a system
//!   event stating the trigger and the tokens before, and the `isCompactSummary` continuation
//!   ("This session is being continued from a previous conversation ...") a system event holding
//!   the summary, both in the open turn;
//! - "[Request interrupted by user ...]" ends the open turn as aborted at that line's time;
//! - the title: a `summary` line whose `leafUuid` is a line above it titles that line's session
//!   (a title change at the summary line, so a growing file never changes an earlier record).
//!   Claude Code also writes summaries of other sessions into a file (their leaf is elsewhere):
//!   those are counted as skipped. A `custom-title` line (the name `/rename` gives) or an
//!   `ai-title` line titles its `sessionId`; the user's name outranks the generated titles;
//! - sub-agent lines (`isSidechain: true`) form their own session `<sessionId>/agent-<agentId>`
//!   (`/sidechain` without an `agentId`), marked as a sub-agent's whose parent is `sessionId`.
//!
//! A line that repeats an earlier line of the file, the same `uuid` saying the same (its time and
//! `parentUuid` aside), is the same line written again and is skipped and counted: Claude Code
//! writes history again into a file in some versions and modes (`--input-format stream-json`
//! duplicated each earlier exchange before the next one). The same `uuid` saying something else
//! is an error naming the line.
//!
//! `cwd` is the workspace. Skipped and counted: other `system` lines (by subtype),
//! `file-history-snapshot`, `queue-operation`, `progress`, and content blocks of other types.

use std::collections::{BTreeMap, HashMap};
use std::io::Read as _;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value, json};

use super::importer::{Conversion, Converter, Importer, SOURCE_LINE_BYTES_MAX, Way};
use super::{Converted, ImportFormat, SourceLine, Turns, error, str_field, text_part, timestamp_field};
use crate::format::TranscriptError;

/// The importer of Claude Code session files.
pub(crate) struct ClaudeCode;

impl Importer for ClaudeCode {
    fn format(&self) -> ImportFormat {
        ImportFormat::ClaudeCode
    }

    fn about(&self) -> &'static str {
        "Claude Code session JSON Lines"
    }

    fn detects_line(&self, object: &Map<String, Value>) -> bool {
        let kind = object.get("type").and_then(Value::as_str).unwrap_or("");
        LINE_TYPES.contains(&kind)
            && ["sessionId", "uuid", "leafUuid", "messageId"].iter().any(|k| object.contains_key(*k))
    }

    fn workspace_is_directory(&self) -> bool {
        true
    }

    fn conversion(&self) -> Conversion {
        Conversion(Way::Lines {
            line_bytes_max: SOURCE_LINE_BYTES_MAX,
            ahead: 0,
            start: |source, _| Converter::Claude(ClaudeFile::new(source)),
        })
    }
}

/// The line types of a session file.
pub(crate) const LINE_TYPES: [&str; 7] =
    ["user", "assistant", "summary", "system", "file-history-snapshot", "queue-operation", "progress"];

/// The text Claude Code writes as a user message when the user interrupts a turn.
const INTERRUPTED: &str = "[Request interrupted by user";

/// Markup Claude Code writes in user-role lines for slash commands and `!` shell commands.
const COMMAND_PREFIXES: [&str; 8] = [
    "<command-name>",
    "<command-message>",
    "<command-args>",
    "<local-command-stdout>",
    "<local-command-stderr>",
    "<bash-input>",
    "<bash-stdout>",
    "<bash-stderr>",
];

/// How a `tool_result` block whose `tool_use` is not among its session's lines is counted. Claude
/// Code writes such files: the assistant line with the call is sometimes never written while the
/// result is (a background task stopped mid-flight), its compaction has removed calls whose results
/// stay, and a resumed file's new session may answer a call of the session it goes on from. The
/// result cannot be one (no call of its session made it); its content is kept as a system event
/// by the host.
const ORPHANED_RESULT: &str =
    "tool_result block without its tool_use in the session (its content kept as a system event)";

/// The system event's text for a tool result whose call is not among its session's lines.
fn orphaned_result_text(result: &Value) -> String {
    let id = result["id"].as_str().unwrap_or_default();
    let error = if result["is_error"] == Value::Bool(true) { " (an error)" } else { "" };
    let content = match &result["result"] {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    };
    format!(
        "Claude Code recorded a result{error} for tool call {id}, whose call is not in this session's lines of the file:\n{content}"
    )
}

/// The text Claude Code puts before local command output.
const CAVEAT: &str = "Caveat:";

/// How an image inside a `tool_result` block is counted. A screenshot or an image file read is
/// tens to hundreds of kilobytes of base64, which as tool-result text would bloat the log, the
/// search index and every assembled context while telling a reader nothing: a placeholder naming
/// its media type and size stands in its place.
const TOOL_RESULT_IMAGE: &str =
    "image in a tool_result (its base64 data not kept; a placeholder in its place)";

/// How an image block of a user line (a pasted screenshot) is counted; the user's text is kept
/// and a placeholder part stands in the image's place.
const USER_IMAGE: &str = "user image block (its base64 data not kept; a placeholder in its place)";

/// The text that stands for an image block whose data is not kept: its media type and the size of
/// its base64 data, or where it was (a `url` source, which is short and kept).
fn image_placeholder(block: &Value) -> String {
    let source = &block["source"];
    match source["type"].as_str() {
        Some("base64") => {
            let media_type = source["media_type"].as_str().unwrap_or("unknown media type");
            let bytes = source["data"].as_str().map_or(0, str::len);
            format!("[image: {media_type}, {} bytes of base64 not kept]", with_thousands(bytes))
        }
        Some("url") => format!("[image: {}]", source["url"].as_str().unwrap_or("a url not given")),
        other => format!("[image: {} source not kept]", other.unwrap_or("an unnamed")),
    }
}

/// How Claude Code (2.1.2 and later) opens a tool result whose output was too large to keep in the
/// session file: it saved the full output to a file and kept a preview, as
/// `<persisted-output>\nOutput too large (4.8MB). Full output saved to: <path>\n\nPreview (first
/// 2KB):\n…\n</persisted-output>`.
const PERSISTED_OUTPUT_TAG: &str = "<persisted-output>";

/// What comes before the saved file's path in a persisted-output preview.
const PERSISTED_OUTPUT_SAVED_TO: &str = "Full output saved to: ";

/// The folder Claude Code saves full outputs in: `<project>/<sessionId>/tool-results/`, beside the
/// session file `<project>/<sessionId>.jsonl` (and above a sub-agent's `<sessionId>/subagents/`).
const TOOL_RESULTS_FOLDER: &str = "tool-results";

/// The largest saved output read back in place of its preview: a tool result is one record, which
/// must stay under the record limit once escaped as JSON (a byte can take six).
pub(crate) const PERSISTED_OUTPUT_BYTES_MAX: u64 = 512 * 1024;

/// How a preview is counted whose saved output is not beside the session file (another machine, a
/// cleaned folder, or a file imported by a name that is not its path): the preview is kept.
const PERSISTED_OUTPUT_MISSING: &str =
    "persisted tool output not found beside the session file (its preview kept)";

/// How a preview is counted whose saved output is over [`PERSISTED_OUTPUT_BYTES_MAX`].
const PERSISTED_OUTPUT_TOO_LARGE: &str =
    "persisted tool output over the 524288-byte limit (its preview kept)";

const _: () = assert!(PERSISTED_OUTPUT_BYTES_MAX == 524_288, "the count's text names the limit");

/// How a preview is counted whose saved output could not be read as UTF-8 text.
const PERSISTED_OUTPUT_UNREADABLE: &str = "persisted tool output unreadable (its preview kept)";

/// The name of the file a persisted-output preview names (the last part of its path, which was
/// written on the machine that ran Claude Code), when `text` is such a preview.
fn persisted_output_file(text: &str) -> Option<&str> {
    let first = text.strip_prefix(PERSISTED_OUTPUT_TAG)?.trim_start_matches(['\r', '\n']).lines().next()?;
    let (_, path) = first.split_once(PERSISTED_OUTPUT_SAVED_TO)?;
    let name = path.trim().rsplit(['/', '\\']).next()?;
    plain_name(name).then_some(name)
}

/// Whether `name` is one path component, neither `.` nor `..`: the only names joined to a folder.
fn plain_name(name: &str) -> bool {
    !name.is_empty() && name != "." && name != ".." && !name.contains(['/', '\\'])
}

/// A saved output's text: a `.json` file holds the result's list of text blocks, whose texts are
/// joined as a result's blocks are; any other file is the text itself.
fn persisted_output_text(name: &str, text: String) -> String {
    if !name.ends_with(".json") {
        return text;
    }
    match serde_json::from_str::<Value>(&text) {
        Ok(Value::Array(items)) => {
            let texts: Vec<&str> =
                items.iter().filter_map(|i| i.get("text").and_then(Value::as_str)).collect();
            if texts.len() == items.len() { texts.join("\n") } else { text }
        }
        _ => text,
    }
}

/// Reads a saved output through [`PERSISTED_OUTPUT_BYTES_MAX`]; the error is how the preview that
/// stays is counted.
fn read_persisted_output(path: &Path) -> Result<String, &'static str> {
    let file = match std::fs::File::open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(PERSISTED_OUTPUT_MISSING),
        Err(_) => return Err(PERSISTED_OUTPUT_UNREADABLE),
    };
    match file.metadata() {
        Ok(metadata) if !metadata.is_file() => return Err(PERSISTED_OUTPUT_MISSING),
        Ok(metadata) if metadata.len() > PERSISTED_OUTPUT_BYTES_MAX => {
            return Err(PERSISTED_OUTPUT_TOO_LARGE);
        }
        Ok(_) => {}
        Err(_) => return Err(PERSISTED_OUTPUT_UNREADABLE),
    }
    let mut bytes = Vec::new();
    // A file that grew since its size was read is still read no further than the limit.
    file.take(PERSISTED_OUTPUT_BYTES_MAX + 1)
        .read_to_end(&mut bytes)
        .map_err(|_| PERSISTED_OUTPUT_UNREADABLE)?;
    if bytes.len() as u64 > PERSISTED_OUTPUT_BYTES_MAX {
        return Err(PERSISTED_OUTPUT_TOO_LARGE);
    }
    String::from_utf8(bytes).map_err(|_| PERSISTED_OUTPUT_UNREADABLE)
}

/// The folder a session file's source names it is in, when the source is the path of a file:
/// where its saved outputs are looked for. A source that is only a name has none.
fn session_folder(source: &str) -> Option<PathBuf> {
    let path = Path::new(source);
    if !path.is_file() {
        return None;
    }
    let folder = path.parent()?;
    Some(if folder.as_os_str().is_empty() { PathBuf::from(".") } else { folder.to_path_buf() })
}

/// A count written with thousands separators (48213 is "48,213").
fn with_thousands(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (index, digit) in digits.chars().enumerate() {
        if index > 0 && (digits.len() - index).is_multiple_of(3) {
            out.push(',');
        }
        out.push(digit);
    }
    out
}

#[derive(Default, Clone)]
struct Session {
    turns: Turns,
    last_line: usize,
    /// Its place in the file's order of sessions.
    place: usize,
    /// Whether the user named it (`custom-title`): a name then outranks generated titles.
    named: bool,
}

/// A digest of a line's `uuid`: the first 16 bytes of its SHA-256. Two uuids of a file with equal
/// digests would be taken for one (a chance of about 10^-27 among a million lines).
type UuidDigest = [u8; 16];

/// A digest of what a line says, its `timestamp` and `parentUuid` aside (the first 8 bytes of the
/// SHA-256 of the rest): the same `uuid` with the same digest is the same line written again.
type LineDigest = [u8; 8];

fn line_digest(object: &Map<String, Value>) -> LineDigest {
    use sha2::Digest as _;
    let mut hasher = sha2::Sha256::new();
    for (key, value) in object {
        if key != "timestamp" && key != "parentUuid" {
            hasher.update(key.as_bytes());
            hasher.update([0]);
            // Serialized straight into the hash: a line's content can be hundreds of kilobytes.
            let _ = serde_json::to_writer(&mut hasher, value);
            hasher.update([0]);
        }
    }
    let full: [u8; 32] = hasher.finalize().into();
    let mut digest = [0; 8];
    digest.copy_from_slice(&full[..8]);
    digest
}

fn uuid_digest(uuid: &str) -> UuidDigest {
    use sha2::Digest as _;
    let full: [u8; 32] = sha2::Sha256::digest(uuid.as_bytes()).into();
    let mut digest = [0; 16];
    digest.copy_from_slice(&full[..16]);
    digest
}

/// A Claude Code file read a line at a time.
#[derive(Clone)]
pub(crate) struct ClaudeFile<'a> {
    source: &'a str,
    sessions: BTreeMap<String, Session>,
    order: Vec<String>,
    /// Each tool call's name and the session that made it (as its place in `order`), by call id.
    tool_names: BTreeMap<String, (String, usize)>,
    /// The session of every line read so far (as its place in `order`) and a digest of what the
    /// line says, by a digest of its `uuid`: some 28 bytes a line where the uuids themselves cost
    /// about a hundred (see [`uuid_digest`]), so that a long file does not grow the import's
    /// memory beyond that.
    uuids: HashMap<UuidDigest, (u32, LineDigest)>,
    /// The name the user gave a session (`custom-title`) on a line before its first, given it when
    /// it opens.
    names: BTreeMap<String, String>,
    /// The folder of the session file, when the source is its path: saved outputs are read from
    /// beside it, never written.
    folder: Option<PathBuf>,
}

impl<'a> ClaudeFile<'a> {
    pub(crate) fn new(source: &'a str) -> Self {
        ClaudeFile {
            source,
            sessions: BTreeMap::new(),
            order: Vec::new(),
            tool_names: BTreeMap::new(),
            uuids: HashMap::new(),
            names: BTreeMap::new(),
            folder: session_folder(source),
        }
    }

    /// The same state, naming another source in its errors (a capture resumed from it).
    pub(crate) fn with_source<'b>(self, source: &'b str) -> ClaudeFile<'b> {
        let ClaudeFile { source: _, sessions, order, tool_names, uuids, names, folder: _ } = self;
        ClaudeFile { source, sessions, order, tool_names, uuids, names, folder: session_folder(source) }
    }

    /// The full output a persisted-output preview names, read from the session's `tool-results`
    /// folder (`session_id`'s, beside the session file; a sub-agent file's, above its
    /// `subagents` folder); the error is how the preview that stays is counted.
    fn persisted_output(&self, session_id: &str, name: &str) -> Result<String, &'static str> {
        let Some(folder) = &self.folder else { return Err(PERSISTED_OUTPUT_MISSING) };
        if !plain_name(session_id) {
            return Err(PERSISTED_OUTPUT_MISSING);
        }
        let results = match folder.parent() {
            Some(session) if folder.file_name().is_some_and(|f| f == "subagents") => {
                session.join(TOOL_RESULTS_FOLDER)
            }
            _ => folder.join(session_id).join(TOOL_RESULTS_FOLDER),
        };
        read_persisted_output(&results.join(name)).map(|text| persisted_output_text(name, text))
    }

    /// Converts one line. What it yields is final once it returns: no later line amends it.
    pub(crate) fn line(
        &mut self,
        source_line: &SourceLine,
        out: &mut Converted,
    ) -> Result<(), TranscriptError> {
        let SourceLine { line, object } = source_line;
        let kind = str_field(object, "type", self.source, *line, "")?;
        if matches!(kind, "user" | "assistant" | "system") && self.repeated(object) {
            out.skip("repeated line (an earlier line's uuid, saying the same)");
            return Ok(());
        }
        match kind {
            "user" | "assistant" => self.message(object, kind, *line, out)?,
            "system" => self.system(object, *line, out)?,
            "summary" => self.summary(object, *line, out),
            "custom-title" | "ai-title" => self.title_line(object, kind, *line, out),
            other => out.skip(other),
        }
        Ok(())
    }

    /// Whether the line repeats an earlier line: its `uuid`, saying the same.
    fn repeated(&self, object: &Map<String, Value>) -> bool {
        let Some(uuid) = object.get("uuid").and_then(Value::as_str) else {
            return false;
        };
        self.uuids.get(&uuid_digest(uuid)).is_some_and(|(_, digest)| *digest == line_digest(object))
    }

    /// At the end of the file: each session's open turn as `Turns::finish` leaves it.
    pub(crate) fn finish(&mut self, out: &mut Converted) {
        for session in self.order.clone() {
            if let Some(state) = self.sessions.get_mut(&session) {
                let line = state.last_line;
                state.turns.finish(out, line, &session);
            }
        }
    }
}

/// What a user-role line is, by its flags.
#[derive(Clone, Copy, PartialEq, Eq)]
enum UserKind {
    /// Typed by the user (or tool results).
    Plain,
    /// Written by Claude Code (`isMeta`).
    Meta,
    /// The continuation after Claude Code compacted the conversation (`isCompactSummary`).
    CompactSummary,
}

impl ClaudeFile<'_> {
    /// The session a line belongs to (a sub-agent's lines their own), opened on its first line,
    /// with the line's uuid and time.
    fn line_session(
        &mut self,
        object: &Map<String, Value>,
        line: usize,
        out: &mut Converted,
    ) -> Result<(String, String, Option<u64>), TranscriptError> {
        let parent = str_field(object, "sessionId", self.source, line, "")?;
        let uuid = str_field(object, "uuid", self.source, line, "")?.to_owned();
        let ts = timestamp_field(object, "timestamp", self.source, line)?;
        let sidechain = object.get("isSidechain").and_then(Value::as_bool) == Some(true);
        let session = if sidechain {
            match object.get("agentId").and_then(Value::as_str).filter(|a| !a.is_empty()) {
                Some(agent) => format!("{parent}/agent-{agent}"),
                None => format!("{parent}/sidechain"),
            }
        } else {
            parent.to_owned()
        };
        if !self.sessions.contains_key(&session) {
            let workspace = object.get("cwd").and_then(Value::as_str);
            let at = out.len();
            let name = self.names.remove(&session);
            out.session(line, &session, workspace, name.as_deref(), ts);
            if sidechain && let Some(value) = out.line_mut(at) {
                value["subagent"] = json!(true);
                value["parent"] = json!(parent);
            }
            let state = Session { place: self.order.len(), named: name.is_some(), ..Session::default() };
            self.sessions.insert(session.clone(), state);
            self.order.push(session.clone());
        }
        if let Some(state) = self.sessions.get(&session) {
            let place = u32::try_from(state.place).unwrap_or(u32::MAX);
            self.uuids.insert(uuid_digest(&uuid), (place, line_digest(object)));
        }
        Ok((session, uuid, ts))
    }

    /// A `summary` line titles the session that holds its `leafUuid` (a line above). Claude Code
    /// also writes summaries of other sessions into a file; those are skipped and counted.
    fn summary(&mut self, object: &Map<String, Value>, line: usize, out: &mut Converted) {
        let leaf = object.get("leafUuid").and_then(Value::as_str).unwrap_or_default();
        let session =
            self.uuids.get(&uuid_digest(leaf)).and_then(|(place, _)| self.order.get(*place as usize));
        match (session, object.get("summary").and_then(Value::as_str)) {
            (Some(session), _) if self.sessions.get(session).is_some_and(|s| s.named) => {
                out.skip("summary (the user named the session)");
            }
            (Some(session), Some(summary)) if !summary.trim().is_empty() => {
                let session = session.clone();
                out.title(line, &session, summary, None);
            }
            _ => out.skip("summary (of another session)"),
        }
    }

    /// A title line of its `sessionId`: the name the user gave it (`custom-title`, written by
    /// `/rename`), or one Claude Code generated (`ai-title`), which a name outranks, as in Claude
    /// Code's own session list. A name given before the session's first line is its title when it
    /// opens; a generated title of a session not in the file is counted.
    fn title_line(&mut self, object: &Map<String, Value>, kind: &str, line: usize, out: &mut Converted) {
        let named = kind == "custom-title";
        let key = if named { "customTitle" } else { "aiTitle" };
        let title = object.get(key).and_then(Value::as_str).map(str::trim).unwrap_or_default();
        let session = object.get("sessionId").and_then(Value::as_str).unwrap_or_default();
        if title.is_empty() || session.is_empty() {
            out.skip(format!("{kind} (without a title or a sessionId)"));
            return;
        }
        match self.sessions.get_mut(session) {
            Some(state) if !named && state.named => out.skip("ai-title (the user named the session)"),
            Some(state) => {
                state.named |= named;
                out.title(line, session, title, None);
            }
            None if named => {
                self.names.insert(session.to_owned(), title.to_owned());
            }
            None => out.skip("ai-title (of a session not in the file)"),
        }
    }

    /// A `system` line: compaction boundaries and local command output are kept, others counted.
    fn system(
        &mut self,
        object: &Map<String, Value>,
        line: usize,
        out: &mut Converted,
    ) -> Result<(), TranscriptError> {
        let subtype = object.get("subtype").and_then(Value::as_str).unwrap_or("none");
        if !matches!(subtype, "compact_boundary" | "local_command") {
            out.skip(format!("system {subtype}"));
            return Ok(());
        }
        let (session, uuid, ts) = self.line_session(object, line, out)?;
        let mut state = self.sessions.remove(&session).unwrap_or_default();
        state.last_line = line;
        if subtype == "compact_boundary" {
            let meta = object.get("compactMetadata");
            let trigger = meta.and_then(|m| m.get("trigger")).and_then(Value::as_str).unwrap_or("unknown");
            let tokens = meta
                .and_then(|m| m.get("preTokens"))
                .and_then(Value::as_u64)
                .map_or_else(|| "an unknown number of".to_owned(), |n| n.to_string());
            let text = format!(
                "Claude Code compacted the conversation (trigger: {trigger}; {tokens} tokens before)."
            );
            state.turns.event_by(out, line, &session, "system", "host", ts, &uuid, vec![text_part(&text)]);
        } else {
            let content = object.get("content").and_then(Value::as_str).unwrap_or_default();
            state.turns.before_request(out, line, &session, &uuid, ts);
            state.turns.event_by(out, line, &session, "system", "host", ts, &uuid, vec![text_part(content)]);
        }
        self.sessions.insert(session, state);
        Ok(())
    }

    fn message(
        &mut self,
        object: &Map<String, Value>,
        kind: &str,
        line: usize,
        out: &mut Converted,
    ) -> Result<(), TranscriptError> {
        let (session, uuid, ts) = self.line_session(object, line, out)?;
        let Some(Value::Object(message)) = object.get("message") else {
            return Err(error(self.source, line, Some("message"), "must be an object with role and content"));
        };
        let blocks = blocks(message, self.source, line)?;
        let meta = if object.get("isCompactSummary").and_then(Value::as_bool) == Some(true) {
            UserKind::CompactSummary
        } else if object.get("isMeta").and_then(Value::as_bool) == Some(true) {
            UserKind::Meta
        } else {
            UserKind::Plain
        };
        let mut state = self.sessions.remove(&session).unwrap_or_default();
        state.last_line = line;
        let result = if kind == "user" {
            self.user(&mut state, &blocks, &session, &uuid, meta, line, ts, out)
        } else {
            self.assistant(&mut state, &blocks, &session, &uuid, line, ts, out)
        };
        self.sessions.insert(session, state);
        result
    }

    #[expect(clippy::too_many_arguments, reason = "the line's identity and content, each distinct")]
    fn user(
        &mut self,
        state: &mut Session,
        blocks: &[Map<String, Value>],
        session: &str,
        uuid: &str,
        meta: UserKind,
        line: usize,
        ts: Option<u64>,
        out: &mut Converted,
    ) -> Result<(), TranscriptError> {
        let mut texts = Vec::new();
        let mut results = Vec::new();
        let mut orphaned = Vec::new();
        for (index, block) in blocks.iter().enumerate() {
            let path = format!("message.content[{index}]");
            match str_field(block, "type", self.source, line, &path)? {
                "text" => texts.push(text_part(str_field(block, "text", self.source, line, &path)?)),
                "image" => {
                    out.skip(USER_IMAGE);
                    texts.push(text_part(&image_placeholder(&Value::Object(block.clone()))));
                }
                "tool_result" => {
                    // A sub-agent's session is `<sessionId>/agent-<agentId>`: its outputs are
                    // saved under the `sessionId`.
                    let session_id = session.split('/').next().unwrap_or(session);
                    let result = self.tool_result(block, line, &path, session_id, out)?;
                    let id = result["id"].as_str().unwrap_or_default();
                    // Only a call of this session makes a result of it.
                    if self.tool_names.get(id).is_some_and(|(_, place)| *place == state.place) {
                        results.push(result);
                    } else {
                        out.skip(ORPHANED_RESULT);
                        orphaned.push(text_part(&orphaned_result_text(&result)));
                    }
                }
                other => out.skip(format!("user block {other}")),
            }
        }
        state.turns.event(out, line, session, "tool", ts, &format!("{uuid}/results"), results);
        let id = format!("{uuid}/orphaned-results");
        state.turns.event_by(out, line, session, "system", "host", ts, &id, orphaned);
        let text_of = |part: &Value| part["text"].as_str().unwrap_or_default().trim_start().to_owned();
        let interrupted = texts.len() == 1 && text_of(&texts[0]).starts_with(INTERRUPTED);
        let command = !texts.is_empty()
            && texts.iter().all(|t| {
                let text = text_of(t);
                COMMAND_PREFIXES.iter().any(|p| text.starts_with(p)) || text.starts_with(CAVEAT)
            });
        if interrupted {
            // The turn ends here, at the interruption's time, as aborted.
            state.turns.set_status("aborted");
            state.turns.end(out, line, session, ts);
            out.skip("user interruption notice (the turn ends aborted)");
        } else if meta == UserKind::CompactSummary {
            state.turns.event_by(out, line, session, "system", "host", ts, uuid, texts);
        } else if command || meta == UserKind::Meta {
            // Command markup and its caveat come before the request they precede; other
            // injected text belongs where it stands.
            if command {
                state.turns.before_request(out, line, session, uuid, ts);
            }
            state.turns.event_by(out, line, session, "system", "host", ts, uuid, texts);
        } else {
            state.turns.user(out, line, session, Some(uuid), ts, uuid, texts);
        }
        Ok(())
    }

    fn tool_result(
        &self,
        block: &Map<String, Value>,
        line: usize,
        path: &str,
        session_id: &str,
        out: &mut Converted,
    ) -> Result<Value, TranscriptError> {
        let id = str_field(block, "tool_use_id", self.source, line, path)?;
        let name = self.tool_names.get(id).map_or_else(|| "unknown".to_owned(), |(name, _)| name.clone());
        let result = match block.get("content") {
            None | Some(Value::Null) => Value::String(String::new()),
            Some(Value::String(text)) => Value::String(text.clone()),
            // A list of blocks: keep the text of text blocks, the blocks themselves otherwise; an
            // image is its placeholder's text.
            Some(Value::Array(items)) => {
                let items: Vec<Value> = items
                    .iter()
                    .map(|item| {
                        if item["type"] == "image" {
                            out.skip(TOOL_RESULT_IMAGE);
                            text_part(&image_placeholder(item))
                        } else {
                            item.clone()
                        }
                    })
                    .collect();
                let texts: Vec<&str> =
                    items.iter().filter_map(|i| i.get("text").and_then(Value::as_str)).collect();
                if texts.len() == items.len() { Value::String(texts.join("\n")) } else { Value::Array(items) }
            }
            Some(_) => {
                return Err(error(
                    self.source,
                    line,
                    Some(&format!("{path}.content")),
                    "must be a string or an array of blocks",
                ));
            }
        };
        let result = self.with_persisted_output(result, session_id, out);
        let is_error = block.get("is_error").and_then(Value::as_bool).unwrap_or(false);
        Ok(json!({"type": "tool_result", "id": id, "name": name, "result": result, "is_error": is_error}))
    }

    /// A result that is a persisted-output preview becomes the full output saved beside the
    /// session file, when it is there and within the limit; otherwise the preview stays, counted.
    fn with_persisted_output(&self, result: Value, session_id: &str, out: &mut Converted) -> Value {
        let Some(name) = result.as_str().and_then(persisted_output_file) else { return result };
        match self.persisted_output(session_id, name) {
            Ok(full) => Value::String(full),
            Err(why) => {
                out.skip(why);
                result
            }
        }
    }

    #[expect(clippy::too_many_arguments, reason = "the line's identity and content, each distinct")]
    fn assistant(
        &mut self,
        state: &mut Session,
        blocks: &[Map<String, Value>],
        session: &str,
        uuid: &str,
        line: usize,
        ts: Option<u64>,
        out: &mut Converted,
    ) -> Result<(), TranscriptError> {
        let mut parts = Vec::new();
        for (index, block) in blocks.iter().enumerate() {
            let path = format!("message.content[{index}]");
            match str_field(block, "type", self.source, line, &path)? {
                "text" => parts.push(text_part(str_field(block, "text", self.source, line, &path)?)),
                "thinking" => {
                    let mut part = json!({"type": "thinking", "text": str_field(block, "thinking", self.source, line, &path)?});
                    if let Some(Value::String(signature)) = block.get("signature")
                        && !signature.is_empty()
                    {
                        part["signature"] = json!(signature);
                    }
                    parts.push(part);
                }
                "tool_use" => {
                    let id = str_field(block, "id", self.source, line, &path)?;
                    let name = str_field(block, "name", self.source, line, &path)?;
                    let input = block.get("input").cloned().unwrap_or_else(|| Value::Object(Map::new()));
                    self.tool_names.insert(id.to_owned(), (name.to_owned(), state.place));
                    parts.push(json!({"type": "tool_call", "id": id, "name": name, "args": input}));
                }
                other => out.skip(format!("assistant block {other}")),
            }
        }
        state.turns.event(out, line, session, "model", ts, uuid, parts);
        Ok(())
    }
}

/// A message's content as blocks: a string is one text block.
fn blocks(
    message: &Map<String, Value>,
    source: &str,
    line: usize,
) -> Result<Vec<Map<String, Value>>, TranscriptError> {
    match message.get("content") {
        Some(Value::String(text)) => {
            let mut block = Map::new();
            block.insert("type".to_owned(), json!("text"));
            block.insert("text".to_owned(), json!(text));
            Ok(if text.is_empty() { Vec::new() } else { vec![block] })
        }
        Some(Value::Array(items)) => items
            .iter()
            .enumerate()
            .map(|(index, item)| match item {
                Value::Object(block) => Ok(block.clone()),
                _ => Err(error(
                    source,
                    line,
                    Some(&format!("message.content[{index}]")),
                    "a content block must be an object",
                )),
            })
            .collect(),
        _ => Err(error(source, line, Some("message.content"), "must be a string or an array of blocks")),
    }
}
