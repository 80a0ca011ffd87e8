//! The handlers of the host methods whose types are in `methods::host`: each makes the facade call
//! it mirrors (with the connection's seams where the call takes them). The methods' table routes to
//! them.

use mnemo::compaction::{ContextOptions, MidTurnOptions, OverflowRecovery, ProviderOverflow};
use mnemo::memory::{ListRequest, MutationRequest, SearchRequest};
use mnemo::records;
use mnemo::records::{EventId, ItemId, OperationId, Position, SessionId, TurnId, WorkspaceId};
use serde_json::Value;

use super::{Call, invalid_id, object, session_id, store};
use crate::limits::EXPORT_INLINE_BYTES_MAX;
use crate::methods::{self as m, Method};
use crate::protocol::{Reason, RpcError};
use crate::seams::{provider_connection, taken};

pub(crate) fn prepare(call: &Call<'_>, p: m::CompactParams) -> Result<m::CompactResult, RpcError> {
    compact_or_prepare(call, p, true)
}

pub(crate) fn compact(call: &Call<'_>, p: m::CompactParams) -> Result<m::CompactResult, RpcError> {
    compact_or_prepare(call, p, false)
}

pub(crate) fn policy(call: &Call<'_>, _: m::Empty) -> Result<m::Object, RpcError> {
    object(&call.mnemo.compaction().policy().map_err(store)?)
}

pub(crate) fn claims(call: &Call<'_>, p: m::ClaimsParams) -> Result<m::ClaimsResult, RpcError> {
    let session = session_id(p.session)?;
    let checkpoint = records::CheckpointId::new(p.checkpoint).map_err(invalid_id("checkpoint"))?;
    Ok(linked_claims(call.mnemo.compaction().claims(&session, &checkpoint).map_err(store)?))
}

pub(crate) fn extract(call: &Call<'_>, p: m::ExtractParams) -> Result<m::Object, RpcError> {
    let session = session_id(p.session)?;
    let terminal = p.terminal_event.map(EventId::new).transpose().map_err(invalid_id("terminal_event"))?;
    object(&call.runtime.block_on(call.mnemo.memory().extract(&session, terminal)).map_err(store)?)
}

pub(crate) fn recall_block(call: &Call<'_>, p: m::RecallBlockParams) -> Result<m::Object, RpcError> {
    let session = session_id(p.session)?;
    let memory = call.mnemo.memory();
    let block = match p.as_of {
        None => memory.recall_block(&session, p.query.as_deref()),
        Some(at) => memory.recall_block_as_of(&session, p.query.as_deref(), Position(at)),
    };
    object(&block.map_err(store)?)
}

pub(crate) fn memory_list(call: &Call<'_>, p: m::MemoryListParams) -> Result<Vec<m::Object>, RpcError> {
    let request = ListRequest {
        workspace: p.workspace.map(WorkspaceId::new).transpose().map_err(invalid_id("workspace"))?,
        kind: p.kind.map(|kind| wire_enum("kind", &kind)).transpose()?,
        include_archived: p.include_archived,
        limit: p.limit,
    };
    call.mnemo.memory().list(&request).map_err(store)?.iter().map(object).collect()
}

pub(crate) fn memory_search(call: &Call<'_>, p: m::MemorySearchParams) -> Result<Vec<m::Object>, RpcError> {
    let request = SearchRequest {
        terms: p.terms,
        match_mode: match p.match_mode {
            m::MatchMode::Exact => mnemo::memory::MatchMode::Exact,
            m::MatchMode::Prefix => mnemo::memory::MatchMode::Prefix,
        },
        workspace: p.workspace.map(WorkspaceId::new).transpose().map_err(invalid_id("workspace"))?,
        include_archived: p.include_archived,
        limit: p.limit,
    };
    call.mnemo.memory().search(&request).map_err(store)?.iter().map(object).collect()
}

pub(crate) fn memory_apply(call: &Call<'_>, p: m::MemoryApplyParams) -> Result<m::Object, RpcError> {
    let request: MutationRequest = serde_json::from_value(serde_json::json!({
        "operation": p.operation,
        "mutations": p.mutations,
    }))
    .map_err(|e| RpcError::new(Reason::InvalidParams, format!("{}: {e}", m::MemoryApply::NAME)))?;
    object(&call.mnemo.memory().apply(&request).map_err(store)?)
}

pub(crate) fn memory_why(call: &Call<'_>, p: m::MemoryGetParams) -> Result<Option<m::Object>, RpcError> {
    let item = ItemId::new(p.item).map_err(invalid_id("item"))?;
    call.mnemo.memory().why(&item).map_err(store)?.map(|w| object(&w)).transpose()
}

pub(crate) fn memory_history(call: &Call<'_>, p: m::MemoryGetParams) -> Result<Vec<m::Object>, RpcError> {
    let item = ItemId::new(p.item).map_err(invalid_id("item"))?;
    call.mnemo.memory().history(&item).map_err(store)?.iter().map(object).collect()
}

pub(crate) fn memory_unmerge(call: &Call<'_>, p: m::MemoryUnmergeParams) -> Result<m::Object, RpcError> {
    let item = ItemId::new(p.item).map_err(invalid_id("item"))?;
    let operation = OperationId::new(p.operation).map_err(invalid_id("operation"))?;
    object(&call.mnemo.memory().unmerge(&item, operation).map_err(store)?)
}

pub(crate) fn memory_cursor(call: &Call<'_>, p: m::SessionParams) -> Result<m::CursorResult, RpcError> {
    let session = session_id(p.session)?;
    Ok(m::CursorResult { cursor: call.mnemo.memory().cursor(&session).map_err(store)? })
}

pub(crate) fn rebuild(call: &Call<'_>, p: m::RebuildParams) -> Result<Vec<m::Object>, RpcError> {
    call.mnemo.rebuild(p.stage.as_deref()).map_err(store)?.iter().map(object).collect()
}

/// A facade enum from its wire name (`"project_fact"`), or `invalid_params` naming the member.
fn wire_enum<T: serde::de::DeserializeOwned>(member: &str, name: &str) -> Result<T, RpcError> {
    serde_json::from_value(Value::String(name.to_owned()))
        .map_err(|e| RpcError::new(Reason::InvalidParams, format!("{member}: {e}")))
}

fn context_options(
    window: Option<u64>,
    current_turn: Option<String>,
    connection: Option<&m::ProviderConnection>,
    search_text: Option<String>,
) -> Result<ContextOptions, RpcError> {
    Ok(ContextOptions {
        window,
        current_turn: current_turn.map(TurnId::new).transpose().map_err(invalid_id("current_turn"))?,
        connection: connection.map(provider_connection).unwrap_or_default(),
        search_text,
        ..ContextOptions::default()
    })
}

fn compact_or_prepare(
    call: &Call<'_>,
    p: m::CompactParams,
    prepare: bool,
) -> Result<m::CompactResult, RpcError> {
    let (mnemo, runtime, seams) = (call.mnemo, call.runtime, call.seams);
    let session = session_id(p.session)?;
    let context = context_options(p.window, p.current_turn, p.connection.as_ref(), p.search_text)?;
    let (options, failures) = seams.compact_options(p.client_seams, context, p.min_recent_turns);
    let outcome = if prepare {
        runtime.block_on(mnemo.compaction().prepare_history(&session, &options))
    } else {
        runtime.block_on(mnemo.compaction().compact(&session, &options))
    }
    .map_err(store)?;
    Ok(m::CompactResult {
        history: object(&outcome.history)?,
        recorded: outcome.recorded.as_ref().map(object).transpose()?,
        seam_failures: taken(&failures),
    })
}

pub(crate) fn overflow(call: &Call<'_>, p: m::OverflowParams) -> Result<m::OverflowResult, RpcError> {
    let (mnemo, runtime, seams) = (call.mnemo, call.runtime, call.seams);
    let session = session_id(p.session.clone())?;
    let turn = TurnId::new(p.turn.clone()).map_err(invalid_id("turn"))?;
    let anchor = EventId::new(p.anchor.clone()).map_err(invalid_id("anchor"))?;
    let mut request = MidTurnOptions::new(turn, anchor, p.reference_tokens);
    request.durable_through = p.durable_through.map(Position);
    let overflow = ProviderOverflow {
        context_length_error: p.context_length_error,
        produced_output: p.produced_output,
        steps_remaining: p.steps_remaining,
        step: p.step,
        historical_images: p.historical_images,
        request,
    };
    let context = context_options(p.window, None, p.connection.as_ref(), None)?;
    let (options, failures) = seams.compact_options(p.client_seams, context, None);
    // The turn's latch is held through the recovery: two recoveries of one turn on one connection
    // run one after the other, and only the first may retry.
    let recovered = seams.with_latch(&p.session, &p.turn, |latch| {
        runtime.block_on(mnemo.compaction().recover_from_overflow(&session, latch, &overflow, &options))
    });
    let recovery = recovered.map_err(store)?;
    let mut result = m::OverflowResult {
        action: String::new(),
        checkpoint: None,
        items: None,
        reason: None,
        detail: None,
        diagnostic: None,
        seam_failures: taken(&failures),
    };
    match recovery {
        OverflowRecovery::RetryWithoutImages => result.action = "retry_without_images".to_owned(),
        OverflowRecovery::Resend { checkpoint, items } => {
            result.action = "resend".to_owned();
            result.checkpoint = Some(object(&*checkpoint)?);
            result.items = Some(
                items
                    .iter()
                    .map(serde_json::to_value)
                    .collect::<Result<_, _>>()
                    .map_err(|e| RpcError::new(Reason::Internal, e.to_string()))?,
            );
        }
        OverflowRecovery::SurfaceProviderError => result.action = "surface_provider_error".to_owned(),
        OverflowRecovery::FailedOpen { reason, detail, diagnostic } => {
            result.action = "failed_open".to_owned();
            result.reason = Some(reason.to_owned());
            result.detail = Some(detail.to_owned());
            result.diagnostic = Some(diagnostic);
        }
        other => {
            return Err(RpcError::new(
                Reason::Internal,
                format!("an overflow recovery this server does not know: {other:?}"),
            ));
        }
    }
    Ok(result)
}

pub(crate) fn copy(call: &Call<'_>, p: m::CopyParams) -> Result<m::Object, RpcError> {
    let session = session_id(p.session)?;
    let up_to = match p.up_to {
        None => None,
        Some(m::CopyBoundary::ThroughTurn(turn)) => {
            Some(records::CopyBoundary::ThroughTurn(TurnId::new(turn).map_err(invalid_id("up_to"))?))
        }
        Some(m::CopyBoundary::BeforeTurn(turn)) => {
            Some(records::CopyBoundary::BeforeTurn(TurnId::new(turn).map_err(invalid_id("up_to"))?))
        }
        Some(m::CopyBoundary::ThroughEvent(event)) => {
            Some(records::CopyBoundary::ThroughEvent(EventId::new(event).map_err(invalid_id("up_to"))?))
        }
    };
    let target = p.target.map(SessionId::new).transpose().map_err(invalid_id("target"))?;
    object(&call.mnemo.compaction().copy(&session, up_to, target).map_err(store)?)
}

pub(crate) fn export(call: &Call<'_>, _: m::Empty) -> Result<m::ExportResult, RpcError> {
    let mut text = Vec::new();
    let report = call.mnemo.export_transcript(&mut text).map_err(store)?;
    if text.len() > EXPORT_INLINE_BYTES_MAX {
        return Err(RpcError::new(
            Reason::InvalidInput,
            format!(
                "export: the store's transcript is {} bytes, more than one answer carries ({EXPORT_INLINE_BYTES_MAX}); \
                 export it with `mnemo export` instead",
                text.len()
            ),
        )
        .with_limit(EXPORT_INLINE_BYTES_MAX as u64));
    }
    let text = String::from_utf8(text)
        .map_err(|e| RpcError::new(Reason::Internal, format!("export: the transcript is not UTF-8: {e}")))?;
    Ok(m::ExportResult { text, report: object(&report)? })
}

fn linked_claims(found: mnemo::compaction::CheckpointClaims) -> m::ClaimsResult {
    m::ClaimsResult {
        checkpoint: found.checkpoint.to_string(),
        position: found.position.0,
        covered_events: found.covered_events,
        claims: found
            .claims
            .into_iter()
            .map(|c| m::LinkedClaim {
                claim: c.claim,
                kind: c.kind.to_owned(),
                supported: c.supported,
                events: c
                    .events
                    .into_iter()
                    .map(|e| m::ClaimEvent { position: e.position.0, event: e.event.to_string() })
                    .collect(),
                event_count: c.event_count as u64,
            })
            .collect(),
        recorded: found
            .recorded
            .map(|r| m::FaithfulnessReport { checked: r.checked, unsupported: r.unsupported }),
        matches_recorded: found.matches_recorded,
    }
}
