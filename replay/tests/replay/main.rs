//! Integration tests of the driver and of re-decide.
#![allow(clippy::unwrap_used, clippy::expect_used)]

/// The `EventLog` methods a test log passes to the log it wraps (`self.inner`) unchanged.
macro_rules! pass_to_inner {
    () => {
        fn fork(
            &self,
            cast: &castlog_core::id::CastId,
            from: &castlog_events::ForkPoint,
            events: &[castlog_events::Pending],
        ) -> Result<Vec<castlog_events::Recorded>, castlog_events::LogError> {
            self.inner.fork(cast, from, events)
        }

        fn import(
            &self,
            head: &castlog_events::CastHead,
            events: &[castlog_events::Recorded],
        ) -> Result<(), castlog_events::LogError> {
            self.inner.import(head, events)
        }

        fn scan(
            &self,
            cast: &castlog_core::id::CastId,
            from: castlog_core::id::Seq,
            visit: &mut dyn FnMut(castlog_events::Recorded) -> std::ops::ControlFlow<()>,
        ) -> Result<(), castlog_events::LogError> {
            self.inner.scan(cast, from, visit)
        }

        fn casts(&self) -> Result<Vec<castlog_events::CastHead>, castlog_events::LogError> {
            self.inner.casts()
        }

        fn head(
            &self,
            cast: &castlog_core::id::CastId,
        ) -> Result<Option<castlog_events::CastHead>, castlog_events::LogError> {
            self.inner.head(cast)
        }

        fn put_blob(
            &self,
            bytes: &[u8],
        ) -> Result<castlog_core::id::Digest, castlog_events::LogError> {
            self.inner.put_blob(bytes)
        }

        fn get_blob(
            &self,
            hash: &castlog_core::id::Digest,
        ) -> Result<Option<Vec<u8>>, castlog_events::LogError> {
            self.inner.get_blob(hash)
        }
    };
}

/// Driving fixture casts on the in-memory log with a fixed clock.
mod drive;
/// Parallel lanes: fan-out, join, determinism whatever the finishing order, overlap.
mod lanes;
/// The `openai:` agent against a chat-completions server started on 127.0.0.1.
mod openai;
mod openai_tools;
/// Steps committed before they are durable: only with a local agent, never before an effect.
mod pipeline;
/// Two runs racing for one day, made deterministic: the compare-and-set at each call site.
mod race;
/// The `recorded:` agent (cassette): re-runs, occurrences, misses, fallback, resume.
mod recorded;
/// Re-deciding a log: exact reproduction, and the first divergence named by seq.
mod redecide;
/// Snapshots of rendered prompts.
mod snapshots;
/// Structured output (`--structured`): the handoff contract as a response format, and the
/// fallback after a server refuses it.
mod structured;
