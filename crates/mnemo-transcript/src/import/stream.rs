//! An import's records as a stream: the input read a line at a time, converted by its format's
//! converter and parsed by the mnemo parser, so what an import holds is one line, the converter's
//! open turn and the cross-line checks' keys — never the file or its records.
//!
//! The JSON Lines formats (mnemo, Claude Code, Codex, RuntimeEvent lines) stream. The formats that
//! are one JSON document (a chat-completions array or request body, a SWE-agent trajectory) are
//! parsed whole, as a JSON document must be, and converted before their first record comes out.

use std::collections::BTreeMap;
use std::io::BufRead;

use mnemo_core::SessionId;
use serde_json::Value;

use super::importer::{Converter, Way};
use super::lines::{LineReader, RawLine};
use super::list::importer;
use super::{Converted, ImportError, ImportFormat, NO_CONVERSATION_LINES, SourceLine, chat, error, maka};
use crate::format::{TRANSCRIPT_LINE_BYTES_MAX, TranscriptParser, TranscriptRecord, line_over};

/// The longest line read of a file in `format`, as its importer says: the mnemo format's lines are
/// records.
fn source_line_bytes_max(format: ImportFormat) -> usize {
    match importer(format).map(|importer| importer.conversion().0) {
        Some(Way::Lines { line_bytes_max, .. }) => line_bytes_max,
        _ => TRANSCRIPT_LINE_BYTES_MAX,
    }
}

/// Converted lines a converter may hold open (a Codex turn, whose results a later event may mark
/// failed) before they are made final anyway, so one endless turn cannot hold a file in memory.
pub const CONVERT_HOLD_LINES_MAX: usize = 4096;

/// The records an input yields, in file order, each with its session's place in
/// [`RecordStream::sessions`].
pub struct RecordStream<'s, R> {
    source: &'s str,
    format: ImportFormat,
    /// The input; none for a whole document, read before the stream opened.
    reader: Option<LineReader<R>>,
    converter: Converter<'s>,
    out: Converted,
    parser: TranscriptParser,
    /// Source lines read ahead (a Codex rollout's first lines), not converted yet.
    ahead: std::collections::VecDeque<SourceLine>,
    /// Lines of a whole document (counted when it was read).
    whole_lines: Option<usize>,
    ended: bool,
    /// Records yielded so far.
    yielded: usize,
    /// Whether to keep the state the input's end found, before the converter's last lines.
    keep_end: bool,
    /// That state, once the end was reached.
    end: Option<StreamState>,
}

/// Where a stream of a JSON Lines input stood at the end of what it read, before the converter's
/// last lines (which end what a longer input might go on with): reading more of the same input
/// from there yields what reading it all from its start yields after the records already yielded.
#[derive(Clone)]
pub struct StreamState {
    format: ImportFormat,
    converter: Converter<'static>,
    out: Converted,
    parser: TranscriptParser,
    /// Lines and bytes read.
    lines: usize,
    bytes: u64,
    /// Records yielded.
    yielded: usize,
}

impl StreamState {
    /// Bytes of the input read.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// The format read.
    pub fn format(&self) -> ImportFormat {
        self.format
    }

    /// Records the stream had yielded.
    pub fn yielded(&self) -> usize {
        self.yielded
    }
}

impl std::fmt::Debug for StreamState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StreamState")
            .field("format", &self.format)
            .field("lines", &self.lines)
            .field("bytes", &self.bytes)
            .field("yielded", &self.yielded)
            .finish_non_exhaustive()
    }
}

impl Converter<'_> {
    fn with_source(self, source: &str) -> Converter<'_> {
        match self {
            Converter::Mnemo => Converter::Mnemo,
            Converter::Claude(file) => Converter::Claude(file.with_source(source)),
            Converter::Codex(rollout) => Converter::Codex(rollout.with_source(source)),
            Converter::Maka => Converter::Maka,
            Converter::Whole => Converter::Whole,
        }
    }
}

impl<R> std::fmt::Debug for RecordStream<'_, R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecordStream")
            .field("source", &self.source)
            .field("format", &self.format)
            .field("yielded", &self.yielded)
            .finish_non_exhaustive()
    }
}

impl<'s, R: BufRead> RecordStream<'s, R> {
    /// A stream of a JSON Lines `format` (not `auto`, not a whole-document format).
    pub fn lines(reader: R, source: &'s str, format: ImportFormat) -> Result<Self, ImportError> {
        let mut stream = RecordStream {
            source,
            format,
            reader: Some(LineReader::new(reader).limited(source_line_bytes_max(format))),
            // Replaced below by a converting format's own, once its first lines are read.
            converter: Converter::Mnemo,
            out: Converted::default(),
            parser: TranscriptParser::default(),
            ahead: std::collections::VecDeque::new(),
            whole_lines: None,
            ended: false,
            yielded: 0,
            keep_end: false,
            end: None,
        };
        if let Some(Way::Lines { ahead, start, .. }) = importer(format).map(|i| i.conversion().0) {
            while stream.ahead.len() < ahead {
                match stream.read_source_line()? {
                    Some(line) => stream.ahead.push_back(line),
                    None => break,
                }
            }
            let first: Vec<SourceLine> = stream.ahead.iter().cloned().collect();
            stream.converter = start(source, &first);
        }
        Ok(stream)
    }

    /// A stream that goes on from `state` with `reader`, which reads what follows the bytes the
    /// state's stream read.
    pub fn resumed(reader: R, source: &'s str, state: StreamState) -> Self {
        let StreamState { format, converter, out, parser, lines, bytes, yielded } = state;
        RecordStream {
            source,
            format,
            reader: Some(LineReader::resume(reader, lines, bytes).limited(source_line_bytes_max(format))),
            converter: converter.with_source(source),
            out,
            parser,
            ahead: std::collections::VecDeque::new(),
            whole_lines: None,
            ended: false,
            yielded,
            keep_end: false,
            end: None,
        }
    }

    /// Keeps the state the end of the input finds (see [`StreamState`]), for
    /// [`RecordStream::end_state`].
    pub fn keep_end_state(&mut self) {
        self.keep_end = true;
    }

    /// The state kept at the end of the input, once the stream has ended.
    pub fn end_state(&mut self) -> Option<StreamState> {
        self.end.take()
    }
}

impl<'s, R: BufRead> RecordStream<'s, R> {
    /// A stream of a whole-document format (openai-chat, swe-agent), converted now.
    pub fn whole(bytes: &[u8], source: &'s str, format: ImportFormat) -> Result<Self, ImportError> {
        let mut out = Converted::default();
        match importer(format).map(|importer| importer.conversion().0) {
            Some(Way::Document(convert)) => convert(bytes, source, &mut out)?,
            _ => chat::convert(bytes, source, &mut out)?,
        }
        out.settle();
        let lines = bytes.split(|b| *b == b'\n').count() - usize::from(bytes.ends_with(b"\n"));
        Ok(RecordStream {
            source,
            format,
            reader: None,
            converter: Converter::Whole,
            out,
            parser: TranscriptParser::default(),
            ahead: std::collections::VecDeque::new(),
            whole_lines: Some(lines),
            ended: false,
            yielded: 0,
            keep_end: false,
            end: None,
        })
    }
}

impl<R: BufRead> RecordStream<'_, R> {
    /// The next record, or `None` after the last; an error names the line at fault.
    pub fn next_record(&mut self) -> Result<Option<(usize, TranscriptRecord)>, ImportError> {
        loop {
            if let Some(record) = self.parser.pop() {
                self.yielded += 1;
                return Ok(Some(record));
            }
            if let Some((line, mut value)) = self.out.take_settled() {
                // A converted session names the format it came from (decision 0166); a mnemo
                // session line says so itself, or not at all.
                if self.format != ImportFormat::Mnemo
                    && value.get("kind").and_then(Value::as_str) == Some("session")
                    && value.get("source").is_none()
                {
                    value["source"] = Value::String(self.format.name().to_owned());
                }
                self.parser.value(value, line, self.source)?;
                continue;
            }
            if self.ended {
                return Ok(None);
            }
            self.advance()?;
        }
    }

    /// Reads and converts one more source line, or finishes the file.
    fn advance(&mut self) -> Result<(), ImportError> {
        if let Converter::Mnemo = self.converter {
            return self.advance_mnemo();
        }
        let next = match self.ahead.pop_front() {
            Some(line) => Some(line),
            None => self.read_source_line()?,
        };
        let Some(line) = next else {
            return self.finish();
        };
        match &mut self.converter {
            Converter::Claude(file) => {
                file.line(&line, &mut self.out)?;
                self.out.settle();
            }
            Converter::Codex(rollout) => rollout.line(&line, &mut self.out)?,
            Converter::Maka => {
                maka::line(&line, self.source, &mut self.out)?;
                self.out.settle();
            }
            Converter::Mnemo | Converter::Whole => {}
        }
        if self.out.unsettled() > CONVERT_HOLD_LINES_MAX {
            self.out.settle();
        }
        Ok(())
    }

    fn advance_mnemo(&mut self) -> Result<(), ImportError> {
        let source = self.source;
        let Some(reader) = self.reader.as_mut() else { return self.finish() };
        match reader.next_line().map_err(|e| read_error(source, e))? {
            Some(RawLine::Line(line, raw)) => {
                self.parser.mnemo_line(raw, line, source)?;
            }
            Some(RawLine::TooLong(line, length)) => {
                return Err(line_over(source, line, length, reader.limit()).into());
            }
            None => self.finish()?,
        }
        Ok(())
    }

    /// At the end of the input: the converter's last lines, then the checks of a whole file.
    fn finish(&mut self) -> Result<(), ImportError> {
        if self.keep_end
            && let Some(reader) = &self.reader
            && reader.ends_at_a_line_end()
            && self.ahead.is_empty()
        {
            self.end = Some(StreamState {
                format: self.format,
                converter: self.converter.clone().with_source(""),
                out: self.out.clone(),
                parser: self.parser.clone(),
                lines: reader.lines(),
                bytes: reader.bytes(),
                yielded: self.yielded,
            });
        }
        match &mut self.converter {
            Converter::Claude(file) => file.finish(&mut self.out),
            Converter::Codex(rollout) => rollout.finish(&mut self.out),
            _ => {}
        }
        self.out.settle();
        self.ended = true;
        let lines = self.line_count();
        if !matches!(self.converter, Converter::Mnemo) && self.out.len() == 0 {
            let skipped: Vec<String> =
                self.out.skipped.iter().map(|(what, n)| format!("{n} × {what}")).collect();
            let format = self.format;
            return Err(error(
                self.source,
                1,
                None,
                format!(
                    "{NO_CONVERSATION_LINES}{format} conversation line (skipped: {}); is the file in another format? --format auto tells",
                    if skipped.is_empty() { "nothing".to_owned() } else { skipped.join(", ") }
                ),
            )
            .into());
        }
        // A converted line yields a record or an error when it is parsed, after this: only the
        // mnemo format, parsed as it is read, can end with no record and no error.
        if matches!(self.converter, Converter::Mnemo) {
            self.parser.check_not_empty(self.source, lines)?;
        }
        Ok(())
    }

    /// Reads one source line of a JSON Lines format as an object; blank lines are skipped.
    fn read_source_line(&mut self) -> Result<Option<SourceLine>, ImportError> {
        let source = self.source;
        let Some(reader) = self.reader.as_mut() else { return Ok(None) };
        loop {
            let (line, raw) = match reader.next_line().map_err(|e| read_error(source, e))? {
                None => return Ok(None),
                Some(RawLine::TooLong(line, length)) => {
                    return Err(line_over(source, line, length, reader.limit()).into());
                }
                Some(RawLine::Line(line, raw)) => (line, raw),
            };
            let fail = |reason: String| ImportError::Transcript(error(source, line, None, reason));
            let text = std::str::from_utf8(raw).map_err(|e| fail(format!("not valid UTF-8: {e}")))?;
            if text.trim().is_empty() {
                continue;
            }
            return match crate::json::parse(text.as_bytes()) {
                Ok(Value::Object(object)) => Ok(Some(SourceLine { line, object })),
                Ok(_) => Err(fail("a line must be a JSON object".to_owned())),
                Err(e) => Err(fail(format!("not valid JSON: {e}"))),
            };
        }
    }

    /// The sessions met so far, in order of first appearance.
    pub fn sessions(&self) -> &[SessionId] {
        self.parser.sessions()
    }

    /// The format read.
    pub fn format(&self) -> ImportFormat {
        self.format
    }

    /// Lines of the input (complete once the stream has ended).
    pub fn line_count(&self) -> usize {
        match (&self.reader, self.whole_lines) {
            (Some(reader), _) => reader.lines(),
            (None, lines) => lines.unwrap_or(0),
        }
    }

    /// Bytes of the input read so far, and their SHA-256.
    pub fn read(&self) -> Option<(u64, [u8; 32])> {
        self.reader.as_ref().map(|reader| (reader.bytes(), reader.digest()))
    }

    /// Lines (or content blocks) skipped, by type.
    pub fn skipped(&self) -> &BTreeMap<String, u64> {
        &self.out.skipped
    }
}

fn read_error(source: &str, error: std::io::Error) -> ImportError {
    ImportError::Read { path: source.to_owned(), source: error }
}
