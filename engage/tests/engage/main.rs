//! Integration tests of the engagement context: its pure stages, and its runner on the
//! in-memory log with scripted roles.
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

/// The pure stages: the reference behaviours of engagement-spec §5 and castlog's fixes.
mod pipeline;
/// A rival run taking the same destination and day at the last moment.
mod rival;
/// The runner with scripted roles: engagement-spec §5 and castlog's fixes.
mod runner;
