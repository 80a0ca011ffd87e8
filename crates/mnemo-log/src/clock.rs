//! The clock the writer reads append timestamps from. Injected, so tests and imports are deterministic.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use mnemo_core::TimestampMs;

/// A source of append timestamps.
pub trait Clock: Send + Sync + std::fmt::Debug {
    /// Milliseconds since the Unix epoch.
    fn now(&self) -> TimestampMs;
}

/// The system's wall clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> TimestampMs {
        // A clock before 1970 is a broken machine; recording 0 keeps the log writable and the
        // writer's monotonic rule keeps timestamps ordered.
        let millis = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis()).unwrap_or(0);
        TimestampMs(u64::try_from(millis).unwrap_or(u64::MAX))
    }
}

/// A clock that returns a set time and advances by a fixed step on every read (tests, fixtures).
#[derive(Debug)]
pub struct ManualClock {
    next_ms: AtomicU64,
    step_ms: u64,
}

impl ManualClock {
    /// A clock starting at `start_ms` that advances `step_ms` on every read.
    pub fn new(start_ms: u64, step_ms: u64) -> Self {
        ManualClock { next_ms: AtomicU64::new(start_ms), step_ms }
    }
}

impl Clock for ManualClock {
    fn now(&self) -> TimestampMs {
        TimestampMs(self.next_ms.fetch_add(self.step_ms, Ordering::Relaxed))
    }
}
