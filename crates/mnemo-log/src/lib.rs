//! The durable append-only log on fjall: append with expected stream revision, group commit, hash
//! chain, reads, tailing, recovery. Knows nothing of the domain beyond the envelope.
//!
//! It is not:
//! - a record decoder: an envelope carries a kind code and bytes that `mnemo-core` gives meaning to;
//! - a projection engine: stages that fold the log into state live in `mnemo-pipeline`.

mod backend;
mod clock;
mod damaged;
mod databases;
mod envelope;
mod error;
mod fjall_log;
mod high_water;
mod key_index;
mod keys;
pub mod limits;
mod priority;
mod reply;
mod shared;
mod store_dir;
mod store_lock;
mod tail;
mod verify;
mod version_files;
mod writer;

pub use backend::{
    AppendOutcome, AppendRequest, Appended, BatchLimits, Durability, EnvelopeIter, ExpectedRevision, HeldKey,
    KeyRefusal, LogBackend, NewRecord, RevisionConflict, RulePrecheck, StreamHead,
};
pub use clock::{Clock, ManualClock, SystemClock};
pub use damaged::{DamagedCopy, JournalCut};
pub use databases::{
    DATABASE_DIR_NAME, KEYS_DATABASE_DIR_NAME, KEYS_KEYSPACE, LOG_KEYSPACE, META_KEYSPACE, STREAMS_KEYSPACE,
    keys_keyspace_options, keyspace_options,
};
pub use envelope::{ENVELOPE_FORMAT_VERSION, Envelope, EnvelopeDraft, GENESIS_HASH, HASH_BYTES};
pub use error::{CorruptionKind, LogError, LostRange, damage, describe, diagnose, fault_cause};
pub use fjall_log::{ACCEPTED_LOSS_FILE_NAME, FjallLog, LogOptions};
pub use high_water::{HIGH_WATER_FILE_NAME, HighWater, read_high_water};
pub use key_index::KeyRulesOf;
pub use priority::lower_this_thread;
pub use reply::PendingAppend;
pub use store_dir::{PRIVATE_DIR_MODE, PRIVATE_FILE_MODE, STORE_MARKER_FILE_NAME};
pub use store_lock::LOCK_FILE_NAME;
pub use verify::ChainVerifier;
