//! Where each cast is, for `casts`: its run-queue row (queued, held by a worker, paused) and,
//! outside the queue or once released at its end, the status its log folds to.

use std::collections::HashMap;

use castlog_core::env::Clock;
use castlog_core::id::CastId;
use castlog_core::machine::Status;
use castlog_events::{CastHead, Database, QueueEntry, QueueState, RunQueue, StreamKind};
use castlog_replay::clock::SystemClock;
use serde::Serialize;

use crate::error::CliError;

/// A cast's place in the fleet's work.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Place {
    /// `queued`, `running`, `paused`, `completed`, `failed` or `aborted` (`None` for a stream
    /// that is not a cast).
    pub status: Option<&'static str>,
    /// The status its log folds to (`awaiting_refinement`, ...), when it was folded.
    pub cast_status: Option<&'static str>,
    /// The worker holding it, while one does under a lease that has not expired.
    pub holder: Option<String>,
    /// Its queue row's epoch (bumped by every take), for a queued cast.
    pub epoch: Option<u64>,
    /// Its holder's lease expired: any worker may take it over.
    pub lease_expired: bool,
}

/// The queue's rows, read once for a listing.
pub(crate) struct Fleet {
    rows: HashMap<CastId, QueueEntry>,
    now_ms: u64,
}

impl Fleet {
    pub(crate) fn read(log: &Database) -> Result<Self, CliError> {
        let rows = log
            .entries()?
            .into_iter()
            .map(|e| (e.cast.clone(), e))
            .collect();
        Ok(Self {
            rows,
            now_ms: SystemClock.now_ms(),
        })
    }

    /// Where `head`'s cast is; a cast outside the queue (or done in it) is folded.
    pub(crate) fn place(&self, log: &Database, head: &CastHead) -> Place {
        let mut place = Place {
            status: None,
            cast_status: None,
            holder: None,
            epoch: None,
            lease_expired: false,
        };
        if head.kind != StreamKind::Cast {
            return place;
        }
        let row = self.rows.get(&head.cast);
        place.epoch = row.map(|r| r.epoch);
        match row.map(|r| r.state) {
            Some(QueueState::Running) => {
                let row = row.expect("matched");
                if row.lease_until_ms >= self.now_ms {
                    place.status = Some("running");
                    place.holder = row.holder.as_ref().map(ToString::to_string);
                } else {
                    place.status = Some("queued");
                    place.lease_expired = true;
                }
                return place;
            }
            Some(QueueState::Queued) => {
                place.status = Some("queued");
                return place;
            }
            Some(QueueState::Paused) | Some(QueueState::Done) | None => {}
        }
        let folded = castlog_replay::driver::fold(log, &head.cast).ok();
        let status = folded.map(|(state, _)| state.status);
        place.cast_status = status.map(Status::as_str);
        place.status = Some(match status {
            Some(Status::Completed) => "completed",
            Some(Status::Failed) => "failed",
            Some(Status::Aborted) => "aborted",
            Some(Status::Running) if row.is_none() => "running",
            // Released at a pause, or waiting for a person or `resume`.
            _ => "paused",
        });
        place
    }
}
