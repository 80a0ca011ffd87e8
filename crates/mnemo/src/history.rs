//! History: a session's visible transcript, and the SearchHistory / ReadHistory agent tools, live
//! or as of an earlier log position.
//!
//! Time travel folds the log into memory up to the position with the stages' own projectors
//! (`fold_to`), so an answer as of position P is exactly what the live stages answered when the log
//! ended at P. It costs one scan of the log up to P per stage consulted (two for a search or a read), and
//! memory for the folded state; live calls read the stages' stores directly.

pub use mnemo_history::{
    DiagnosticCode, HistoryContext, HistoryRead, HistoryReadRequest, HistorySearch, HistorySearchRequest,
    MatchKind, MessageKind, ProjectionDiagnostic, READ_AFTER_TURNS_DEFAULT, READ_BEFORE_TURNS_DEFAULT,
    READ_SIDE_TURNS_MAX, READ_TURNS_MAX, RELAY_SESSION_SOURCE, ReadFailure, ReadFailureReason, ReadMessage,
    ReadOutcome, ReadTurn, SEARCH_LIMIT_DEFAULT, SEARCH_LIMIT_MAX, STEP_LIMIT_ERROR_CLASS, SearchFailure,
    SearchFailureReason, SearchOutcome, SearchRow, SessionHeader, SessionListing, Severity, ToolFailure,
    TurnState, VisibleMessage,
};
pub use mnemo_pipeline::stages::session_catalog::SessionSummary;

use mnemo_core::{Position, SessionId};
use mnemo_history::{index, messages};
use serde::Serialize;
use tracing::info_span;

use crate::mnemo::Mnemo;

/// A session's visible transcript, as `show` prints it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SessionTranscript {
    /// The session's header: title, last message time, flags, revision family.
    pub header: SessionHeader,
    /// Its visible messages in order (thinking, hidden and partial events never appear).
    pub messages: Vec<VisibleMessage>,
    /// How each ended turn ended (status, failure class, step limit), in the order of their
    /// terminal facts.
    pub turns: Vec<TurnState>,
    /// What the projection could not show and why, hard or soft (spec §2.1), in log order.
    pub diagnostics: Vec<ProjectionDiagnostic>,
}

impl Mnemo {
    /// Sessions, transcripts, and the SearchHistory / ReadHistory agent tools.
    pub fn history(&self) -> History<'_> {
        History { mnemo: self }
    }
}

/// Sessions and their history, live or as of an earlier log position ([`Mnemo::history`]).
///
/// Every call is synchronous and waits for the stages it reads to fold the log as it is now (at
/// most [`CATCH_UP_TIMEOUT`](crate::stages::CATCH_UP_TIMEOUT)); an `as_of` call instead folds the log
/// up to that position in memory, which takes time linear in the position.
#[derive(Debug, Clone, Copy)]
pub struct History<'a> {
    mnemo: &'a Mnemo,
}

impl History<'_> {
    /// Every session, in id order.
    pub fn sessions(&self) -> crate::Result<Vec<SessionSummary>> {
        self.mnemo.sessions()
    }

    /// Every session as a person reads the list: most recent activity first (by the events' own
    /// times), each with its activity span and a title (its own, else its first real request).
    pub fn session_list(&self) -> crate::Result<Vec<SessionListing>> {
        use mnemo_pipeline::stages::session_catalog;
        let catalog = self.mnemo.caught_up_store(session_catalog::STAGE_NAME)?;
        let summaries = session_catalog::list(catalog.as_ref())?;
        let history = self.mnemo.caught_up_store(messages::STAGE_NAME)?;
        let headers = messages::headers(history.as_ref())?;
        Ok(mnemo_history::session_listings(summaries, headers))
    }

    /// One session's summary; `None` for a session the store does not hold.
    pub fn session(&self, session: &SessionId) -> crate::Result<Option<SessionSummary>> {
        self.mnemo.session(session)
    }

    /// A session's visible messages, as of `as_of` (the whole log when `None`); `None` when the
    /// session has no records by then.
    pub fn transcript(
        &self,
        session: &SessionId,
        as_of: Option<Position>,
    ) -> crate::Result<Option<SessionTranscript>> {
        let _span = info_span!("show", session = %session).entered();
        let store = self.mnemo.store_as_of(messages::STAGE_NAME, as_of)?;
        let Some(header) = messages::header(store.as_ref(), session)? else {
            return Ok(None);
        };
        let rows = messages::messages(store.as_ref(), session)?;
        let turns = messages::turn_states(store.as_ref(), session)?;
        let diagnostics = messages::diagnostics(store.as_ref(), session)?;
        Ok(Some(SessionTranscript { header, messages: rows, turns, diagnostics }))
    }

    /// SearchHistory: ranked matches across logical sessions, as of `as_of` (the whole log when
    /// `None`). A refused call (bad arguments, incognito, abort) is the inner `Err`, in the tool's
    /// error shape; the outer error is a store failure.
    pub fn search(
        &self,
        request: &HistorySearchRequest,
        context: &HistoryContext<'_>,
        as_of: Option<Position>,
    ) -> crate::Result<SearchOutcome> {
        let _span = info_span!("search_history").entered();
        let messages = self.mnemo.store_as_of(messages::STAGE_NAME, as_of)?;
        let index = self.mnemo.store_as_of(index::STAGE_NAME, as_of)?;
        Ok(mnemo_history::search_history(messages.as_ref(), index.as_ref(), request, context)?)
    }

    /// ReadHistory: a bounded window of one session's visible turns, as of `as_of` (the whole log
    /// when `None`). A refused call is the inner `Err`, in the tool's error shape.
    pub fn read(
        &self,
        request: &HistoryReadRequest,
        context: &HistoryContext<'_>,
        as_of: Option<Position>,
    ) -> crate::Result<ReadOutcome> {
        let _span = info_span!("read_history").entered();
        let messages = self.mnemo.store_as_of(messages::STAGE_NAME, as_of)?;
        let index = self.mnemo.store_as_of(index::STAGE_NAME, as_of)?;
        Ok(mnemo_history::read_history(messages.as_ref(), index.as_ref(), request, context)?)
    }
}
