//! The session list as a person reads it: each session's own event times (not the times its
//! records were appended, which follow the order files were imported in), a title for sessions
//! without one (their first real request), most recent activity first. A relay session (what an MCP
//! server recorded so that a request to remember has its evidence) is no conversation: it is kept
//! in the log and out of the list.

use std::collections::BTreeMap;

use mnemo_core::TimestampMs;
use mnemo_pipeline::stages::session_catalog::SessionSummary;
use serde::Serialize;

use crate::messages::SessionHeader;

/// The `source` of a session that only relays an MCP client's requests (`mnemo mcp`): left out of
/// the session list.
pub const RELAY_SESSION_SOURCE: &str = "mnemo-mcp";

/// One row of the session list.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SessionListing {
    /// The catalog's summary (its `first_timestamp` / `last_timestamp` are append times).
    #[serde(flatten)]
    pub summary: SessionSummary,
    /// The own time of the session's first user or assistant message.
    pub first_activity: Option<TimestampMs>,
    /// The own time of its latest user or assistant message.
    pub last_activity: Option<TimestampMs>,
    /// The title to show: the session's own, else its first real request (markup stripped).
    pub display_title: Option<String>,
    /// Whether `display_title` was taken from the first request.
    pub title_from_request: bool,
}

/// Every session of the catalog's `summaries` but relay sessions as a row of the list, with its
/// messages' `headers`: most recent activity first (by the events' own times; sessions without
/// messages last), ties by id.
pub fn session_listings(summaries: Vec<SessionSummary>, headers: Vec<SessionHeader>) -> Vec<SessionListing> {
    let mut headers: BTreeMap<_, _> = headers.into_iter().map(|h| (h.session.clone(), h)).collect();
    let mut list: Vec<SessionListing> = summaries
        .into_iter()
        .filter(|summary| summary.source.as_deref() != Some(RELAY_SESSION_SOURCE))
        .map(|summary| {
            let header = headers.remove(&summary.session);
            let own = summary.title.clone().filter(|t| !t.trim().is_empty());
            let request = header.as_ref().and_then(|h| h.first_request.clone());
            SessionListing {
                first_activity: header.as_ref().and_then(|h| h.first_message_at),
                last_activity: header.as_ref().and_then(|h| h.last_message_at),
                title_from_request: own.is_none() && request.is_some(),
                display_title: own.or(request),
                summary,
            }
        })
        .collect();
    list.sort_by(|a, b| {
        b.last_activity
            .map(|t| t.0)
            .cmp(&a.last_activity.map(|t| t.0))
            .then_with(|| a.summary.session.cmp(&b.summary.session))
    });
    list
}
