//! The follower: an ordered consumer that tails the JetStream stream from the index's next sequence
//! and folds every message into the index, so that this host learns of every append, its own and
//! other hosts', in the one order the stream gives them.

use std::sync::Arc;
use std::time::Duration;

use async_nats::jetstream::consumer::DeliverPolicy;
use async_nats::jetstream::consumer::pull::OrderedConfig;
use async_nats::jetstream::stream::Stream;
use futures_util::StreamExt as _;
use tokio::sync::Notify;
use tracing::{error, warn};

use crate::batch;
use crate::index::SharedIndex;
use crate::limits::FOLLOW_PULL_EXPIRY;

/// The pause before a consumer that failed is created again.
const RECREATE_PAUSE: Duration = Duration::from_millis(200);

/// Follows the stream until the task is dropped or the stream holds something that is not a valid
/// continuation of the log.
pub(crate) async fn follow(stream: Stream, index: Arc<SharedIndex>, restart: Arc<Notify>) {
    loop {
        let next = index.lock().sequence + 1;
        let consumed = tokio::select! {
            consumed = consume_from(&stream, &index, next) => consumed,
            () = restart.notified() => Err("an append waits for a message this consumer has not delivered".to_owned()),
        };
        match consumed {
            Ok(()) => return,
            Err(reason) => {
                warn!(%reason, next, "the log follower lost its consumer; creating it again");
                tokio::time::sleep(RECREATE_PAUSE).await;
            }
        }
    }
}

/// Consumes from `sequence` on. Returns `Ok` only when the follower must stop for good (the index
/// failed); an `Err` asks for a new consumer from where the index is.
async fn consume_from(stream: &Stream, index: &SharedIndex, sequence: u64) -> Result<(), String> {
    let mut messages = ordered_messages(stream, sequence).await?;
    while let Some(message) = messages.next().await {
        let message = message.map_err(|e| e.to_string())?;
        let info = message.info().map_err(|e| e.to_string())?;
        let stream_sequence = info.stream_sequence;
        let message_id = message
            .headers
            .as_ref()
            .and_then(|headers| headers.get(async_nats::header::NATS_MESSAGE_ID))
            .map(|value| value.as_str().to_owned());
        let folded = batch::decode(&message.payload, stream_sequence)
            .and_then(|envelopes| index.lock().fold(stream_sequence, message_id, envelopes));
        if let Err(failure) = folded {
            error!(%failure, stream_sequence, "the shared log holds an invalid message; following stops");
            index.lock().failure = Some(format!("JetStream message {stream_sequence}: {failure}"));
            index.notify();
            return Ok(());
        }
        index.notify();
    }
    Err("the consumer's message stream ended".to_owned())
}

/// An ordered consumer's messages from `sequence` on.
pub(crate) async fn ordered_messages(
    stream: &Stream,
    sequence: u64,
) -> Result<async_nats::jetstream::consumer::pull::Ordered, String> {
    let deliver_policy = if sequence <= 1 {
        DeliverPolicy::All
    } else {
        DeliverPolicy::ByStartSequence { start_sequence: sequence }
    };
    let consumer = stream
        .create_consumer(OrderedConfig {
            deliver_policy,
            max_expires: FOLLOW_PULL_EXPIRY,
            ..Default::default()
        })
        .await
        .map_err(|e| format!("cannot create an ordered consumer: {e}"))?;
    consumer.messages().await.map_err(|e| format!("cannot read the ordered consumer: {e}"))
}
