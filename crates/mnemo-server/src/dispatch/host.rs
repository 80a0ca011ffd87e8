//! The host methods of `methods::host`: each reads its parameters, makes the facade call it mirrors
//! (with the connection's seams where the call takes them) and writes its result.

use mnemo::compaction::{ContextOptions, MidTurnOptions, OverflowRecovery, ProviderOverflow};
use mnemo::memory::{ListRequest, MutationRequest, SearchRequest};
use mnemo::records::{EventId, Position, SessionId, TurnId, WorkspaceId};
use mnemo::{Mnemo, records};
use serde_json::Value;
use tokio::runtime::Handle;

use super::{invalid_id, object, run, session_id, store};
use crate::limits::EXPORT_INLINE_BYTES_MAX;
use crate::methods::{self as m, Method};
use crate::protocol::{Reason, RpcError};
use crate::seams::{ConnectionSeams, provider_connection, taken};

/// Runs a host method; `method_not_found` when `method` is none.
pub(crate) fn call(
    mnemo: &Mnemo,
    runtime: &Handle,
    seams: &ConnectionSeams,
    method: &str,
    params: Value,
) -> Result<Value, RpcError> {
    match method {
        m::Prepare::NAME => run::<m::Prepare>(params, |p| compact(mnemo, runtime, seams, p, true)),
        m::Compact::NAME => run::<m::Compact>(params, |p| compact(mnemo, runtime, seams, p, false)),
        m::RecoverOverflow::NAME => run::<m::RecoverOverflow>(params, |p| overflow(mnemo, runtime, seams, p)),
        m::CopySession::NAME => run::<m::CopySession>(params, |p| copy(mnemo, p)),
        m::Policy::NAME => run::<m::Policy>(params, |_| object(&mnemo.compaction().policy().map_err(store)?)),
        m::Claims::NAME => run::<m::Claims>(params, |p| {
            let session = session_id(p.session)?;
            let checkpoint = records::CheckpointId::new(p.checkpoint).map_err(invalid_id("checkpoint"))?;
            Ok(claims(mnemo.compaction().claims(&session, &checkpoint).map_err(store)?))
        }),
        m::Extract::NAME => run::<m::Extract>(params, |p| {
            let session = session_id(p.session)?;
            let terminal =
                p.terminal_event.map(EventId::new).transpose().map_err(invalid_id("terminal_event"))?;
            object(&runtime.block_on(mnemo.memory().extract(&session, terminal)).map_err(store)?)
        }),
        m::RecallBlock::NAME => run::<m::RecallBlock>(params, |p| {
            let session = session_id(p.session)?;
            let block = match p.as_of {
                None => mnemo.memory().recall_block(&session, p.query.as_deref()),
                Some(at) => mnemo.memory().recall_block_as_of(&session, p.query.as_deref(), Position(at)),
            };
            object(&block.map_err(store)?)
        }),
        m::MemoryList::NAME => run::<m::MemoryList>(params, |p| {
            let request = ListRequest {
                workspace: p.workspace.map(WorkspaceId::new).transpose().map_err(invalid_id("workspace"))?,
                kind: p.kind.map(|kind| wire_enum("kind", &kind)).transpose()?,
                include_archived: p.include_archived,
                limit: p.limit,
            };
            mnemo.memory().list(&request).map_err(store)?.iter().map(object).collect()
        }),
        m::MemorySearch::NAME => run::<m::MemorySearch>(params, |p| {
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
            mnemo.memory().search(&request).map_err(store)?.iter().map(object).collect()
        }),
        m::MemoryApply::NAME => run::<m::MemoryApply>(params, |p| {
            let request: MutationRequest = serde_json::from_value(serde_json::json!({
                "operation": p.operation,
                "mutations": p.mutations,
            }))
            .map_err(|e| RpcError::new(Reason::InvalidParams, format!("{}: {e}", m::MemoryApply::NAME)))?;
            object(&mnemo.memory().apply(&request).map_err(store)?)
        }),
        m::MemoryCursor::NAME => run::<m::MemoryCursor>(params, |p| {
            let session = session_id(p.session)?;
            Ok(m::CursorResult { cursor: mnemo.memory().cursor(&session).map_err(store)? })
        }),
        m::Rebuild::NAME => run::<m::Rebuild>(params, |p| {
            mnemo.rebuild(p.stage.as_deref()).map_err(store)?.iter().map(object).collect()
        }),
        m::Export::NAME => run::<m::Export>(params, |_| export(mnemo)),
        other => Err(RpcError::new(Reason::MethodNotFound, format!("no method {other:?}"))),
    }
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

fn compact(
    mnemo: &Mnemo,
    runtime: &Handle,
    seams: &ConnectionSeams,
    p: m::CompactParams,
    prepare: bool,
) -> Result<m::CompactResult, RpcError> {
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

fn overflow(
    mnemo: &Mnemo,
    runtime: &Handle,
    seams: &ConnectionSeams,
    p: m::OverflowParams,
) -> Result<m::OverflowResult, RpcError> {
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

fn copy(mnemo: &Mnemo, p: m::CopyParams) -> Result<m::Object, RpcError> {
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
    object(&mnemo.compaction().copy(&session, up_to, target).map_err(store)?)
}

fn export(mnemo: &Mnemo) -> Result<m::ExportResult, RpcError> {
    let mut text = Vec::new();
    let report = mnemo.export_transcript(&mut text).map_err(store)?;
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

fn claims(found: mnemo::compaction::CheckpointClaims) -> m::ClaimsResult {
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
