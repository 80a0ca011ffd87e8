//! Export through the facade: the log read session by session (in order of their first record),
//! each session's records in stream order, written as the transcript crate's lines
//! ([`mnemo_transcript::SessionExport`]).

use std::collections::BTreeSet;
use std::io::Write;

use mnemo_core::{Position, SessionId, StreamId, StreamRevision};
use mnemo_transcript::{ExportReport, SessionExport};

use crate::error::Error;
use crate::mnemo::Mnemo;

/// Envelopes read per page of a session stream.
const EXPORT_PAGE_ENVELOPES_MAX: usize = 1024;

impl Mnemo {
    /// Writes every session of the log to `out` in the mnemo transcript format.
    pub fn export_transcript(&self, out: &mut dyn Write) -> Result<ExportReport, Error> {
        let mut report = ExportReport::default();
        let mut sessions = Vec::new();
        let mut known = BTreeSet::new();
        for envelope in self.log.scan(Position::FIRST) {
            let envelope = envelope?;
            match envelope.stream.session_id() {
                Some(session) => {
                    if known.insert(session.clone()) {
                        sessions.push(session);
                    }
                }
                None => {
                    let kind =
                        mnemo_core::RecordKind::from_code(envelope.kind).map_or("unknown", |k| k.name());
                    *report.skipped.entry(kind.to_owned()).or_insert(0) += 1;
                }
            }
        }
        for session in &sessions {
            self.export_session(session, out, &mut report)?;
            report.sessions += 1;
        }
        out.flush().map_err(write_error)?;
        Ok(report)
    }

    fn export_session(
        &self,
        session: &SessionId,
        out: &mut dyn Write,
        report: &mut ExportReport,
    ) -> Result<(), Error> {
        let stream = StreamId::session(session);
        let mut seen = SessionExport::default();
        let mut from = StreamRevision(0);
        loop {
            let page = self.log.read_stream(&stream, from, EXPORT_PAGE_ENVELOPES_MAX)?;
            let Some(last) = page.last() else { break };
            from = StreamRevision(last.revision.0 + 1);
            let full = page.len() == EXPORT_PAGE_ENVELOPES_MAX;
            for envelope in page {
                let logged = mnemo_pipeline::LoggedRecord::decode(envelope)?;
                let line = seen
                    .line(&logged.record, logged.timestamp, report)
                    .map_err(|e| Error::InvalidInput(format!("record does not serialize: {e}")))?;
                match line {
                    Some(line) => {
                        out.write_all(line.as_bytes())
                            .and_then(|()| out.write_all(b"\n"))
                            .map_err(write_error)?;
                        report.lines += 1;
                    }
                    None => {
                        *report.skipped.entry(logged.record.kind().name().to_owned()).or_insert(0) += 1;
                    }
                }
            }
            if !full {
                break;
            }
        }
        Ok(())
    }
}

fn write_error(source: std::io::Error) -> Error {
    Error::Write { path: "the export output".to_owned(), source }
}
