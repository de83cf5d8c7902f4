//! The `Projection` trait and the catch-up runner with checkpoints.
//!
//! A projection is a pure fold over a cast's recorded events. The runner brings one up to date:
//! it starts from the newest checkpoint (a compact snapshot tagged with the projection's name and
//! version and the seq and chain hash it covers) and folds only the events after it. A checkpoint
//! is never trusted over the log: if its version is not this projection's, if the log no longer
//! holds the same hash at its seq, or if it does not decode, it is ignored (with a warning the
//! caller can show) and the projection is folded from the first event.

use std::ops::ControlFlow;

use castlog_core::id::{CastId, Digest, Seq};
use castlog_events::codec::{from_compact, to_compact};
use castlog_events::{EventLog, LogError, Recorded};
use serde::Serialize;
use serde::de::DeserializeOwned;

/// A read model folded from recorded events.
pub trait Projection: Default + Serialize + DeserializeOwned {
    /// Its name in checkpoints.
    const NAME: &'static str;
    /// Its version; a checkpoint of another version is ignored.
    const VERSION: u32;
    /// Applies one recorded event.
    fn apply(&mut self, record: &Recorded);
}

/// A stored checkpoint of one projection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checkpoint {
    /// The projection's name.
    pub name: String,
    /// The projection's version.
    pub version: u32,
    /// The last seq folded into it.
    pub seq: Seq,
    /// The chain hash at that seq.
    pub hash: Digest,
    /// The compact encoding of the projection.
    pub bytes: Vec<u8>,
}

/// Where checkpoints live (kept beside the log; never part of the chain).
pub trait CheckpointStore {
    /// The checkpoint of `name` for `cast`, if any.
    fn load(&self, cast: &CastId, name: &str) -> Option<Checkpoint>;
    /// Replaces the checkpoint of `checkpoint.name` for `cast`.
    fn save(&self, cast: &CastId, checkpoint: &Checkpoint);
}

/// No checkpoints at all: every catch-up is a full fold.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoCheckpoints;

impl CheckpointStore for NoCheckpoints {
    fn load(&self, _: &CastId, _: &str) -> Option<Checkpoint> {
        None
    }
    fn save(&self, _: &CastId, _: &Checkpoint) {}
}

/// Checkpoints in memory (the reference store, for tests and one process).
#[derive(Debug, Default)]
pub struct MemoryCheckpoints {
    slots: std::sync::Mutex<std::collections::BTreeMap<(CastId, String), Checkpoint>>,
}

impl CheckpointStore for MemoryCheckpoints {
    fn load(&self, cast: &CastId, name: &str) -> Option<Checkpoint> {
        let slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
        slots.get(&(cast.clone(), name.to_owned())).cloned()
    }
    fn save(&self, cast: &CastId, checkpoint: &Checkpoint) {
        let mut slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
        slots.insert((cast.clone(), checkpoint.name.clone()), checkpoint.clone());
    }
}

/// What a catch-up did.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CatchUp {
    /// The seq the fold started after (0 = from the first event).
    pub from: u64,
    /// Events folded.
    pub folded: u64,
    /// Why a checkpoint was ignored, if one was.
    pub warning: Option<String>,
}

/// Brings projection `P` of `cast` up to date, using and refreshing its checkpoint.
pub fn catch_up<P: Projection>(
    log: &dyn EventLog,
    store: &dyn CheckpointStore,
    cast: &CastId,
) -> Result<(P, CatchUp), LogError> {
    let mut report = CatchUp::default();
    let mut projection = P::default();
    if let Some(cp) = store.load(cast, P::NAME) {
        let at = log.read(cast, cp.seq, Some(cp.seq))?;
        let problem = if cp.version != P::VERSION {
            Some(format!(
                "checkpoint of {} is version {}, not {}",
                P::NAME,
                cp.version,
                P::VERSION
            ))
        } else if at.first().map(|r| r.hash) != Some(cp.hash) {
            Some(format!(
                "checkpoint of {} at seq {} does not match the log",
                P::NAME,
                cp.seq
            ))
        } else {
            match from_compact::<P>(&cp.bytes) {
                Ok(p) => {
                    projection = p;
                    report.from = cp.seq.get();
                    None
                }
                Err(e) => Some(format!("checkpoint of {} does not decode ({e})", P::NAME)),
            }
        };
        if let Some(problem) = problem {
            report.warning = Some(format!("{problem}; folding {cast} from its first event"));
        }
    }
    let mut last: Option<(Seq, Digest)> = None;
    log.scan(cast, Seq(report.from + 1), &mut |record| {
        projection.apply(&record);
        report.folded += 1;
        last = Some((record.seq, record.hash));
        ControlFlow::Continue(())
    })?;
    if let Some((seq, hash)) = last {
        store.save(
            cast,
            &Checkpoint {
                name: P::NAME.to_owned(),
                version: P::VERSION,
                seq,
                hash,
                bytes: to_compact(&projection),
            },
        );
    }
    Ok((projection, report))
}

/// Folds `P` over records from scratch.
pub fn fold<'a, P: Projection>(records: impl IntoIterator<Item = &'a Recorded>) -> P {
    let mut p = P::default();
    for r in records {
        p.apply(r);
    }
    p
}

impl CheckpointStore for castlog_events::SqliteLog {
    fn load(&self, cast: &CastId, name: &str) -> Option<Checkpoint> {
        // An unreadable checkpoint is as good as none: the fold is the truth.
        let stored = self.checkpoint(cast, name).ok().flatten()?;
        Some(Checkpoint {
            name: name.to_owned(),
            version: stored.version,
            seq: stored.seq,
            hash: stored.hash,
            bytes: stored.bytes,
        })
    }

    fn save(&self, cast: &CastId, checkpoint: &Checkpoint) {
        // A checkpoint is an optimization; failing to store one loses nothing.
        let _ = self.put_checkpoint(
            cast,
            &checkpoint.name,
            castlog_events::Snapshot {
                version: checkpoint.version,
                seq: checkpoint.seq,
                hash: checkpoint.hash,
                bytes: checkpoint.bytes.clone(),
            },
        );
    }
}
