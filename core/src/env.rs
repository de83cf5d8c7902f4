//! The environment a decision runs in: time and the blob digest, injected.
//!
//! `core` never reads a clock or draws randomness. The shell reads its [`Clock`] once per
//! decision and passes the reading in an [`Env`]; whatever the decision derives from it (an event
//! time, a claim day, a new id) is recorded in the events it returns, so replay needs no clock.

use crate::id::Digest;

/// A source of wall-clock time in milliseconds since the Unix epoch.
pub trait Clock: Send + Sync + std::fmt::Debug {
    /// Milliseconds since the Unix epoch, as the caller's clock (or a test's) says.
    fn now_ms(&self) -> u64;
}

/// A clock that always reads the same instant, or steps by a fixed amount per reading; for tests
/// and hermetic snapshots.
#[derive(Debug)]
pub struct FixedClock {
    start: u64,
    step: u64,
    readings: std::sync::atomic::AtomicU64,
}

impl FixedClock {
    /// A clock stuck at `at_ms`.
    pub fn at(at_ms: u64) -> Self {
        Self::stepping(at_ms, 0)
    }

    /// A clock that starts at `start_ms` and advances `step_ms` per reading.
    pub fn stepping(start_ms: u64, step_ms: u64) -> Self {
        Self {
            start: start_ms,
            step: step_ms,
            readings: std::sync::atomic::AtomicU64::new(0),
        }
    }
}

impl Clock for FixedClock {
    fn now_ms(&self) -> u64 {
        let n = self
            .readings
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.start.saturating_add(n.saturating_mul(self.step))
    }
}

/// The content-address function the log uses for blobs, passed in so that `core` can name the
/// blobs its events refer to (a rendered prompt, an entry body) without depending on a hash
/// implementation. It must be a pure function of its input.
pub type DigestFn = fn(&[u8]) -> Digest;

/// One decision's environment: the time it happens at and the blob digest function.
#[derive(Debug, Clone, Copy)]
pub struct Env {
    /// Milliseconds since the Unix epoch.
    pub now_ms: u64,
    /// The blob content-address function.
    pub digest: DigestFn,
}

impl Env {
    /// An environment at a fixed instant.
    pub fn new(now_ms: u64, digest: DigestFn) -> Self {
        Self { now_ms, digest }
    }

    /// Reads `clock` once.
    pub fn from_clock(clock: &dyn Clock, digest: DigestFn) -> Self {
        Self::new(clock.now_ms(), digest)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stepping_clock_steps() {
        let clock = FixedClock::stepping(1_000, 5);
        assert_eq!(clock.now_ms(), 1_000);
        assert_eq!(clock.now_ms(), 1_005);
        assert_eq!(Env::from_clock(&clock, |_| Digest::ZERO).now_ms, 1_010);
    }
}
