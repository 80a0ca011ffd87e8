//! The model seams across the process boundary: a client registers a `Summarizer`, a
//! `ProviderCompactor` or a `MemoryProposer` (`seams/register`), and the server calls back to it over
//! the same connection — a JSON-RPC request from the server with its own id (`seam/summarize`,
//! `seam/provider_compact`, `seam/propose`), which the client answers like any call.
//!
//! A seam call that gets no usable answer (the client answered an error, did not answer within the
//! registered timeout, answered something else, or went away) is a model failure in the facade's
//! own terms (`SummarizeError::Provider`, `ModelError::Timeout`): compaction and extraction fail
//! open exactly as they do when a model in-process fails, and the call's result lists the failure
//! (`seam_failures`).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use mnemo::compaction::{
    BoxFuture, Connection, ProviderCompactionRequest, ProviderCompactor, SummarizeError, Summarizer,
    SummarizerIdentity, SummaryRequest, SummaryResponse,
};
use mnemo::memory::{MemoryProposer, ModelError, ProposalPrompt};
use serde::Serialize;
use serde_json::Value;
use tokio::sync::{mpsc, oneshot};

use crate::methods::{self as m, SeamFailure, SeamFailureReason, ServerMessage};
use crate::protocol::{JSONRPC_VERSION, Request, RequestId, Response, RpcError};

/// A frame the server writes to a connection.
#[derive(Debug, Clone, Serialize)]
#[serde(untagged)]
pub(crate) enum Outgoing {
    /// The answer to a client's call.
    Response(Response),
    /// A request of the server's (a seam) or a notification (no id).
    Request(Request),
}

/// The server's side of calls to one client: sends requests with ids of its own and routes the
/// client's answers back to them.
pub(crate) struct Peer {
    outgoing: mpsc::Sender<Outgoing>,
    pending: Mutex<HashMap<RequestId, oneshot::Sender<Result<Value, RpcError>>>>,
    next_id: AtomicU64,
    closed: AtomicBool,
}

impl std::fmt::Debug for Peer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Peer").field("closed", &self.closed.load(Ordering::Acquire)).finish_non_exhaustive()
    }
}

impl Peer {
    pub(crate) fn new(outgoing: mpsc::Sender<Outgoing>) -> Peer {
        Peer {
            outgoing,
            pending: Mutex::new(HashMap::new()),
            next_id: AtomicU64::new(1),
            closed: AtomicBool::new(false),
        }
    }

    /// Sends a notification (no answer is expected). Waits while the connection's queue is full;
    /// false once the connection is gone.
    pub(crate) async fn notify<M: ServerMessage>(&self, params: &M::Params) -> bool {
        let Ok(params) = serde_json::to_value(params) else { return false };
        let frame = Request {
            jsonrpc: JSONRPC_VERSION.to_owned(),
            id: None,
            method: M::NAME.to_owned(),
            params: Some(params),
        };
        self.outgoing.send(Outgoing::Request(frame)).await.is_ok()
    }

    /// Calls the client and waits at most `timeout` for its answer.
    pub(crate) async fn request<M: ServerMessage>(
        &self,
        params: &M::Params,
        timeout: Duration,
    ) -> Result<M::Result, SeamFailure> {
        let failure = |reason, message: String| SeamFailure { seam: M::NAME.to_owned(), reason, message };
        if self.closed.load(Ordering::Acquire) {
            return Err(failure(SeamFailureReason::Disconnected, "the client's connection is closed".into()));
        }
        let params = serde_json::to_value(params).map_err(|e| {
            failure(SeamFailureReason::InvalidAnswer, format!("params do not serialize: {e}"))
        })?;
        let id = RequestId::Text(format!("mnemo-{}", self.next_id.fetch_add(1, Ordering::AcqRel)));
        let (answer, answered) = oneshot::channel();
        self.pending.lock().unwrap_or_else(PoisonError::into_inner).insert(id.clone(), answer);
        let frame = Request {
            jsonrpc: JSONRPC_VERSION.to_owned(),
            id: Some(id.clone()),
            method: M::NAME.to_owned(),
            params: Some(params),
        };
        let exchange = async {
            self.outgoing.send(Outgoing::Request(frame)).await.ok()?;
            answered.await.ok()
        };
        let result = tokio::time::timeout(timeout, exchange).await;
        self.pending.lock().unwrap_or_else(PoisonError::into_inner).remove(&id);
        match result {
            Err(_) => Err(failure(
                SeamFailureReason::Timeout,
                format!("the client did not answer {} within {} ms", M::NAME, timeout.as_millis()),
            )),
            Ok(None) => Err(failure(
                SeamFailureReason::Disconnected,
                format!("the client's connection closed before it answered {}", M::NAME),
            )),
            Ok(Some(Err(error))) => Err(failure(
                SeamFailureReason::ClientError,
                format!("the client answered {} with an error: {}", M::NAME, error.message),
            )),
            Ok(Some(Ok(value))) => serde_json::from_value(value).map_err(|e| {
                failure(SeamFailureReason::InvalidAnswer, format!("the client's answer to {}: {e}", M::NAME))
            }),
        }
    }

    /// Routes a client's answer to the request it answers; false when no request of this
    /// connection waits for that id.
    pub(crate) fn answer(&self, id: &RequestId, result: Result<Value, RpcError>) -> bool {
        let waiting = self.pending.lock().unwrap_or_else(PoisonError::into_inner).remove(id);
        match waiting {
            Some(waiting) => waiting.send(result).is_ok(),
            None => false,
        }
    }

    /// The client is gone: every waiting seam call fails as `disconnected`, and so will later ones.
    pub(crate) fn close(&self) {
        self.closed.store(true, Ordering::Release);
        self.pending.lock().unwrap_or_else(PoisonError::into_inner).clear();
    }
}

/// Seam failures of one call, shared by the seams that call made.
pub(crate) type Failures = Arc<Mutex<Vec<SeamFailure>>>;

fn record(failures: &Failures, failure: SeamFailure) {
    failures.lock().unwrap_or_else(PoisonError::into_inner).push(failure);
}

/// What one connection registered.
#[derive(Debug, Clone, Default)]
pub(crate) struct Registered {
    pub(crate) summarizer: Option<m::SummarizerSeam>,
    pub(crate) provider_compactor: Option<m::ProviderCompactorSeam>,
    pub(crate) timeout: Duration,
}

/// A `Summarizer` answered by the client.
#[derive(Debug)]
pub(crate) struct ClientSummarizer {
    pub(crate) peer: Arc<Peer>,
    pub(crate) spec: m::SummarizerSeam,
    pub(crate) timeout: Duration,
    pub(crate) failures: Failures,
}

impl Summarizer for ClientSummarizer {
    fn identity(&self) -> SummarizerIdentity {
        SummarizerIdentity { name: self.spec.name.clone(), prompt_version: self.spec.prompt_version.clone() }
    }

    fn limits_input(&self) -> bool {
        self.spec.limits_input
    }

    fn summarize<'a>(
        &'a self,
        request: &'a SummaryRequest,
    ) -> BoxFuture<'a, Result<SummaryResponse, SummarizeError>> {
        Box::pin(async move {
            let params = m::SummarizeParams {
                instructions: request.instructions.clone(),
                messages: request.messages.clone(),
                previous_summary: request.previous_summary.clone(),
                span_tokens: request.span_tokens,
                input_digest: request.input_digest.to_hex(),
            };
            match self.peer.request::<m::SummarizeSeam>(&params, self.timeout).await {
                Ok(answer) => Ok(SummaryResponse {
                    text: answer.text,
                    finish: match answer.finish {
                        m::FinishReason::Stop => mnemo::compaction::FinishReason::Stop,
                        m::FinishReason::Length => mnemo::compaction::FinishReason::Length,
                    },
                }),
                Err(failure) => {
                    let message = failure.message.clone();
                    record(&self.failures, failure);
                    Err(SummarizeError::Provider(message))
                }
            }
        })
    }
}

/// A `ProviderCompactor` answered by the client.
#[derive(Debug)]
pub(crate) struct ClientCompactor {
    pub(crate) peer: Arc<Peer>,
    pub(crate) spec: m::ProviderCompactorSeam,
    pub(crate) timeout: Duration,
    pub(crate) failures: Failures,
}

impl ProviderCompactor for ClientCompactor {
    fn identity(&self) -> SummarizerIdentity {
        SummarizerIdentity { name: self.spec.name.clone(), prompt_version: self.spec.prompt_version.clone() }
    }

    fn connection(&self) -> Connection {
        provider_connection(&self.spec.connection)
    }

    fn compact<'a>(
        &'a self,
        request: &'a ProviderCompactionRequest,
    ) -> BoxFuture<'a, Result<Vec<Value>, SummarizeError>> {
        Box::pin(async move {
            let params = m::ProviderCompactParams {
                messages: request.messages.clone(),
                input_digest: request.input_digest.to_hex(),
            };
            match self.peer.request::<m::ProviderCompactSeam>(&params, self.timeout).await {
                Ok(answer) => Ok(answer.output),
                Err(failure) => {
                    let message = failure.message.clone();
                    record(&self.failures, failure);
                    Err(SummarizeError::Provider(message))
                }
            }
        })
    }
}

/// A `MemoryProposer` answered by the client.
#[derive(Debug)]
pub(crate) struct ClientProposer {
    pub(crate) peer: Arc<Peer>,
    pub(crate) spec: m::MemoryProposerSeam,
    pub(crate) timeout: Duration,
}

impl MemoryProposer for ClientProposer {
    fn name(&self) -> &str {
        &self.spec.name
    }

    fn propose<'a>(&'a self, prompt: &'a ProposalPrompt) -> BoxFuture<'a, Result<String, ModelError>> {
        Box::pin(async move {
            let prompt = match serde_json::to_value(prompt) {
                Ok(Value::Object(prompt)) => prompt,
                _ => return Err(ModelError::Configuration("the proposal prompt does not serialize".into())),
            };
            match self.peer.request::<m::ProposeSeam>(&m::ProposeParams { prompt }, self.timeout).await {
                Ok(answer) => Ok(answer.text),
                Err(failure) if failure.reason == SeamFailureReason::Timeout => Err(ModelError::Timeout),
                Err(failure) => Err(ModelError::Provider(failure.message)),
            }
        })
    }
}

/// The facade's connection from the wire's.
pub(crate) fn provider_connection(connection: &m::ProviderConnection) -> Connection {
    Connection {
        provider_type: connection.provider_type.clone(),
        slug: connection.slug.clone(),
        model: connection.model.clone(),
    }
}

/// Longest time the server waits for one seam answer (and the default).
pub use crate::limits::SEAM_TIMEOUT_MAX;

/// One connection's seams: the client it calls back, what it registered, and its overflow latches.
#[derive(Debug)]
pub(crate) struct ConnectionSeams {
    pub(crate) peer: Arc<Peer>,
    registered: Mutex<Registered>,
    /// One single-retry latch per session and turn (`compaction/recover_overflow`).
    latches: Mutex<HashMap<(String, String), mnemo::compaction::OverflowLatch>>,
}

impl ConnectionSeams {
    pub(crate) fn new(peer: Arc<Peer>) -> ConnectionSeams {
        ConnectionSeams {
            peer,
            registered: Mutex::new(Registered { timeout: SEAM_TIMEOUT_MAX, ..Registered::default() }),
            latches: Mutex::new(HashMap::new()),
        }
    }

    pub(crate) fn register(&self, registered: Registered) {
        *self.registered.lock().unwrap_or_else(PoisonError::into_inner) = registered;
    }

    pub(crate) fn registered(&self) -> Registered {
        self.registered.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// The compaction options of one call: the registered seams (when `use_client`), and where
    /// their failures are collected.
    pub(crate) fn compact_options(
        &self,
        use_client: bool,
        context: mnemo::compaction::ContextOptions,
        min_recent_turns: Option<u64>,
    ) -> (mnemo::compaction::CompactOptions, Failures) {
        let failures = Failures::default();
        let mut options =
            mnemo::compaction::CompactOptions { context, min_recent_turns, ..Default::default() };
        if use_client {
            let registered = self.registered();
            options.summarizer = registered.summarizer.map(|spec| {
                Arc::new(ClientSummarizer {
                    peer: Arc::clone(&self.peer),
                    spec,
                    timeout: registered.timeout,
                    failures: Arc::clone(&failures),
                }) as Arc<dyn Summarizer>
            });
            options.provider_compactor = registered.provider_compactor.map(|spec| {
                Arc::new(ClientCompactor {
                    peer: Arc::clone(&self.peer),
                    spec,
                    timeout: registered.timeout,
                    failures: Arc::clone(&failures),
                }) as Arc<dyn ProviderCompactor>
            });
        }
        (options, failures)
    }

    /// Runs `body` with the latch of `session`'s `turn`.
    pub(crate) fn with_latch<T>(
        &self,
        session: &str,
        turn: &str,
        body: impl FnOnce(&mut mnemo::compaction::OverflowLatch) -> T,
    ) -> T {
        let mut latches = self.latches.lock().unwrap_or_else(PoisonError::into_inner);
        if latches.len() >= crate::limits::OVERFLOW_LATCHES_MAX {
            latches.clear();
        }
        body(latches.entry((session.to_owned(), turn.to_owned())).or_default())
    }
}

/// The failures collected so far.
pub(crate) fn taken(failures: &Failures) -> Vec<SeamFailure> {
    std::mem::take(&mut *failures.lock().unwrap_or_else(PoisonError::into_inner))
}
