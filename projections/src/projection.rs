//! The `Projection` trait and the catch-up runner with checkpoints.
//!
//! A projection is a pure fold over a cast's recorded events. The runner brings one up to date:
//! it starts from the newest checkpoint (a compact snapshot tagged with the projection's name and
//! version and the seq and chain hash it covers) and folds only the events after it. A checkpoint
//! is never trusted over the log: if its version is not this projection's, if the log no longer
//! holds the same hash at its seq, if it does not match its seal, or if it does not decode, it is
//! ignored (with a warning the caller can show) and the projection is folded from the first
//! event. `verify` also folds each projection to its checkpoint's seq and compares
//! ([`check_checkpoint`]).
//!
//! # Checkpoint bytes
//! A stored checkpoint's bytes are the projection's compact encoding behind the seal every
//! cache beside the log has (`castlog_events::seal`, purpose `ProjectionCheckpoint`, named
//! by the projection's name and version). It names accidental or careless changes to a row
//! (anyone can compute it, so `verify` compares against a fold too).

use std::ops::ControlFlow;

use castlog_core::event::Event;
use castlog_core::id::{CastId, Digest, Seq};
use castlog_events::codec::{from_compact, is_compact_of, to_compact};
use castlog_events::seal::{Purpose, Seal};
use castlog_events::{Decoder, EventLog, LogError, Recorded};
use serde::Serialize;
use serde::de::DeserializeOwned;

/// A read model folded from recorded events.
pub trait Projection: Default + Serialize + DeserializeOwned {
    /// Its name in checkpoints.
    const NAME: &'static str;
    /// Its version; a checkpoint of another version is ignored.
    const VERSION: u32;
    /// Applies one recorded event: `record` as stored, and `event`, what it decodes to in its
    /// cast's order (`None` for a payload that does not decode or a kind of another context,
    /// which the projection may decode itself).
    fn apply(&mut self, record: &Recorded, event: Option<&Event>);
}

/// A stored checkpoint of one projection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checkpoint {
    /// The projection's name.
    pub name: String,
    /// The projection's version.
    pub version: u32,
    /// Last seq folded into it; catch-up folds on from the next.
    pub seq: Seq,
    /// The log's chain hash at `seq` when it was taken; a checkpoint whose hash the log no
    /// longer has at `seq` is ignored and the projection folded again.
    pub hash: Digest,
    /// The compact encoding of the projection.
    pub bytes: Vec<u8>,
}

/// Where checkpoints live (kept beside the log; never part of the chain).
pub trait CheckpointStore {
    /// The checkpoint of `name` for `cast`, if any.
    fn load(&self, cast: &CastId, name: &str) -> Option<Checkpoint>;
    /// Replaces the checkpoint of `checkpoint.name` for `cast`.
    fn save(&self, cast: &CastId, checkpoint: Checkpoint);
}

/// No checkpoints at all: every catch-up is a full fold.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoCheckpoints;

impl CheckpointStore for NoCheckpoints {
    fn load(&self, _: &CastId, _: &str) -> Option<Checkpoint> {
        None
    }
    fn save(&self, _: &CastId, _: Checkpoint) {}
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
    fn save(&self, cast: &CastId, checkpoint: Checkpoint) {
        let mut slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
        slots.insert((cast.clone(), checkpoint.name.clone()), checkpoint);
    }
}

/// The seal of a checkpoint of `cast` (see the module docs).
fn seal<'a>(cast: &'a CastId, name: &'a str, version: u32, seq: Seq, hash: &'a Digest) -> Seal<'a> {
    Seal {
        purpose: Purpose::ProjectionCheckpoint,
        cast,
        name,
        version,
        seq,
        hash,
    }
}

/// The encoding inside a stored checkpoint of `cast`, if its seal holds.
fn unsealed<'c>(cast: &CastId, cp: &'c Checkpoint) -> Option<&'c [u8]> {
    seal(cast, &cp.name, cp.version, cp.seq, &cp.hash).open(&cp.bytes)
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
        } else if let Some(encoded) = unsealed(cast, &cp) {
            match from_compact::<P>(encoded) {
                Ok(p) => {
                    projection = p;
                    report.from = cp.seq.get();
                    None
                }
                Err(e) => Some(format!("checkpoint of {} does not decode ({e})", P::NAME)),
            }
        } else {
            Some(format!(
                "checkpoint of {} at seq {} does not match its seal (damaged)",
                P::NAME,
                cp.seq
            ))
        };
        if let Some(problem) = problem {
            report.warning = Some(format!("{problem}; folding {cast} from its first event"));
        }
    }
    let mut last: Option<(Seq, Digest)> = None;
    let mut decoder = Decoder::new();
    log.scan(cast, Seq(report.from + 1), &mut |record| {
        let event = decoder.event_in(log, &record).ok();
        projection.apply(&record, event.as_ref());
        report.folded += 1;
        last = Some((record.seq, record.hash));
        ControlFlow::Continue(())
    })?;
    if let Some((seq, hash)) = last {
        let bytes = seal(cast, P::NAME, P::VERSION, seq, &hash).wrap(&to_compact(&projection));
        store.save(
            cast,
            Checkpoint {
                name: P::NAME.to_owned(),
                version: P::VERSION,
                seq,
                hash,
                bytes,
            },
        );
    }
    Ok((projection, report))
}

/// What is wrong with the stored checkpoint of `P` for `cast`, if anything: one of this
/// projection's version that does not match its seal, or is not what a fold of the log gives
/// at its seq. (One of another version, or at a seq the log no longer holds with its hash, is
/// ignored by readers and not checked.)
pub fn check_checkpoint<P: Projection>(
    log: &dyn EventLog,
    store: &dyn CheckpointStore,
    cast: &CastId,
) -> Result<Option<(Seq, String)>, LogError> {
    let Some(cp) = store.load(cast, P::NAME) else {
        return Ok(None);
    };
    if cp.version != P::VERSION {
        return Ok(None);
    }
    // Folded as the events are read, never holding them.
    let mut folded = P::default();
    let mut last = None;
    let mut decoder = Decoder::new();
    log.scan(cast, Seq::FIRST, &mut |record| {
        if record.seq > cp.seq {
            return ControlFlow::Break(());
        }
        let event = decoder.event(&record).ok();
        folded.apply(&record, event.as_ref());
        last = Some((record.seq, record.hash));
        ControlFlow::Continue(())
    })?;
    if last != Some((cp.seq, cp.hash)) {
        return Ok(None);
    }
    let problem = match unsealed(cast, &cp) {
        None => "does not match its seal (damaged; it is ignored)",
        Some(encoded) if !is_compact_of(&folded, encoded) => "is not what the log folds to there",
        Some(_) => return Ok(None),
    };
    Ok(Some((
        cp.seq,
        format!("the {} checkpoint at seq {} {problem}", P::NAME, cp.seq),
    )))
}

/// Folds `P` over records from scratch.
pub fn fold<'a, P: Projection>(records: impl IntoIterator<Item = &'a Recorded>) -> P {
    let mut p = P::default();
    let mut decoder = Decoder::new();
    for r in records {
        let event = decoder.event(r).ok();
        p.apply(r, event.as_ref());
    }
    p
}

/// A checkpoint a log keeps under `name`, for [`CheckpointStore::load`]: an unreadable one
/// is as good as none (the fold is the truth).
fn stored(
    stored: Result<Option<castlog_events::Snapshot>, castlog_events::LogError>,
    name: &str,
) -> Option<Checkpoint> {
    let stored = stored.ok().flatten()?;
    Some(Checkpoint {
        name: name.to_owned(),
        version: stored.version,
        seq: stored.seq,
        hash: stored.hash,
        bytes: stored.bytes,
    })
}

/// A checkpoint as a log keeps it, for [`CheckpointStore::save`].
fn to_store(checkpoint: Checkpoint) -> (String, castlog_events::Snapshot) {
    (
        checkpoint.name,
        castlog_events::Snapshot {
            version: checkpoint.version,
            seq: checkpoint.seq,
            hash: checkpoint.hash,
            bytes: checkpoint.bytes,
        },
    )
}

impl CheckpointStore for castlog_events::SqliteLog {
    fn load(&self, cast: &CastId, name: &str) -> Option<Checkpoint> {
        stored(self.checkpoint(cast, name), name)
    }

    fn save(&self, cast: &CastId, checkpoint: Checkpoint) {
        // A checkpoint is an optimization; failing to store one loses nothing.
        let (name, snapshot) = to_store(checkpoint);
        let _ = self.put_checkpoint(cast, &name, snapshot);
    }
}

impl CheckpointStore for castlog_events::Database {
    fn load(&self, cast: &CastId, name: &str) -> Option<Checkpoint> {
        stored(self.checkpoint(cast, name), name)
    }

    fn save(&self, cast: &CastId, checkpoint: Checkpoint) {
        let (name, snapshot) = to_store(checkpoint);
        let _ = self.put_checkpoint(cast, &name, snapshot);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use castlog_core::event::{CastAborted, Event};
    use castlog_events::InMemoryLog;
    use castlog_events::record::Pending;

    /// Counts events: a projection whose encoding is one number.
    #[derive(Debug, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
    struct Count {
        n: u64,
    }

    impl Projection for Count {
        const NAME: &'static str = "count";
        const VERSION: u32 = 1;
        fn apply(&mut self, _: &Recorded, _: Option<&Event>) {
            self.n += 1;
        }
    }

    fn five_events() -> (InMemoryLog, CastId) {
        let log = InMemoryLog::default();
        let cast = CastId::new("c");
        let events: Vec<Pending> = (0..5)
            .map(|i| {
                let reason = format!("r{i}");
                Pending::new(i, &Event::CastAborted(CastAborted { reason }))
            })
            .collect();
        log.append(&cast, Seq::FIRST, &events).unwrap();
        (log, cast)
    }

    /// A checkpoint is used when its seal holds; one changed in place (still decoding) is
    /// ignored with a warning and named by `check_checkpoint`, and so is one whose seal was
    /// computed again over a content the log does not fold to.
    #[test]
    fn a_checkpoint_changed_in_place_is_ignored_and_named() {
        let (log, cast) = five_events();
        let store = MemoryCheckpoints::default();
        let (count, first) = catch_up::<Count>(&log, &store, &cast).unwrap();
        assert_eq!((count.n, first.from), (5, 0));
        let (_, second) = catch_up::<Count>(&log, &store, &cast).unwrap();
        assert_eq!((second.from, second.folded, second.warning), (5, 0, None));
        assert_eq!(
            check_checkpoint::<Count>(&log, &store, &cast).unwrap(),
            None
        );

        let kept = store.load(&cast, "count").unwrap();
        let mut changed = kept.clone();
        *changed.bytes.last_mut().unwrap() += 1;
        store.save(&cast, changed);
        let (seq, problem) = check_checkpoint::<Count>(&log, &store, &cast)
            .unwrap()
            .unwrap();
        assert_eq!(seq, Seq(5));
        assert!(problem.contains("does not match its seal"), "{problem}");
        let (count, third) = catch_up::<Count>(&log, &store, &cast).unwrap();
        assert_eq!((count.n, third.from), (5, 0));
        assert!(third.warning.unwrap().contains("does not match its seal"));

        let encoded = to_compact(&Count { n: 9 });
        let forged = seal(&cast, "count", 1, kept.seq, &kept.hash).wrap(&encoded);
        store.save(
            &cast,
            Checkpoint {
                bytes: forged,
                ..kept
            },
        );
        let (_, problem) = check_checkpoint::<Count>(&log, &store, &cast)
            .unwrap()
            .unwrap();
        assert!(
            problem.contains("is not what the log folds to"),
            "{problem}"
        );
    }
}
