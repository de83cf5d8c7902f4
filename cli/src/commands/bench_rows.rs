//! The rows a bench run wrote, step by step, for the raw-insert baseline to write again: a
//! log that passes every call to the run's database and notes, for each append, the seqs it
//! stored and the blobs it named (their digests only, so the run's memory is the run's).
//! After the run [`Notes::steps`] reads those rows back: each step's event rows and blob
//! rows, byte for byte what the log stored.

use std::ops::ControlFlow;
use std::sync::{Mutex, MutexGuard};

use castlog_core::id::{CastId, Digest, Seq};
use castlog_events::chain::blob_hash;
use castlog_events::log::StoredRow;
use castlog_events::{
    Appending, CastHead, EventLog, ForkPoint, LogError, Pending, Recorded, Snapshot,
};

/// One append (or blobs-only write) as the log took it.
#[derive(Debug)]
struct Append {
    /// The seqs it stored (empty for blobs only).
    seqs: std::ops::Range<u64>,
    blobs: Vec<Digest>,
    /// Whether it holds a socket completion, which ends a step.
    completes: bool,
}

/// The rows one step wrote: its events' rows and the blobs they name.
#[derive(Debug, Default)]
pub(super) struct StepRows {
    pub(super) events: Vec<Recorded>,
    pub(super) blobs: Vec<Vec<u8>>,
}

impl StepRows {
    /// The bytes of the rows: every column of each event row, and each blob's digest and
    /// bytes.
    pub(super) fn bytes(&self) -> u64 {
        let events: usize = self
            .events
            .iter()
            .map(|r| 8 + 8 + 8 + r.kind.len() + 4 + r.payload.len() + 32 + 32)
            .sum();
        let blobs: usize = self.blobs.iter().map(|b| 32 + b.len()).sum();
        (events + blobs) as u64
    }

    pub(super) fn rows(&self) -> u64 {
        (self.events.len() + self.blobs.len()) as u64
    }
}

/// `log`, with every append to one cast noted.
pub(super) struct Written<'a, L: EventLog + ?Sized> {
    log: &'a L,
    appends: Mutex<Vec<Append>>,
}

impl<L: EventLog + ?Sized> std::fmt::Debug for Written<'_, L> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Written")
            .field("appends", &self.appends().len())
            .finish_non_exhaustive()
    }
}

impl<'a, L: EventLog + ?Sized> Written<'a, L> {
    pub(super) fn new(log: &'a L) -> Self {
        Self {
            log,
            appends: Mutex::new(Vec::new()),
        }
    }

    fn appends(&self) -> MutexGuard<'_, Vec<Append>> {
        self.appends.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn note(&self, blobs: &[Vec<u8>], records: &[Recorded]) {
        let seqs = match (records.first(), records.last()) {
            (Some(first), Some(last)) => first.seq.get()..last.seq.get() + 1,
            _ => 1..1,
        };
        self.appends().push(Append {
            seqs,
            blobs: blobs.iter().map(|b| blob_hash(b)).collect(),
            completes: records.iter().any(|r| r.kind == "socket_completed"),
        });
    }

    /// What was noted, for reading the rows back once the run is over.
    pub(super) fn into_notes(self) -> Notes {
        Notes(self.appends.into_inner().unwrap_or_else(|p| p.into_inner()))
    }
}

/// The appends a [`Written`] log noted.
#[derive(Debug)]
pub(super) struct Notes(Vec<Append>);

impl Notes {
    /// The write transactions noted (appends and blobs-only writes).
    pub(super) fn writes(&self) -> u64 {
        self.0.len() as u64
    }

    /// The rows of `cast` step by step, read back from `log`: a step is the appends up to and
    /// including one that completes a socket visit (what follows the last completion joins
    /// the last step). A blob named again later is not a row again (the log stores it once).
    pub(super) fn steps(
        &self,
        log: &(impl EventLog + ?Sized),
        cast: &CastId,
    ) -> Result<Vec<StepRows>, LogError> {
        let mut events: Vec<Recorded> = Vec::new();
        log.scan(cast, Seq::FIRST, &mut |record| {
            events.push(record);
            ControlFlow::Continue(())
        })?;
        let mut steps: Vec<StepRows> = Vec::new();
        let mut current = StepRows::default();
        let mut seen = std::collections::HashSet::new();
        for append in &self.0 {
            for seq in append.seqs.clone() {
                let at = usize::try_from(seq.saturating_sub(1)).unwrap_or(usize::MAX);
                if let Some(record) = events.get(at).filter(|r| r.seq.get() == seq) {
                    current.events.push(record.clone());
                }
            }
            for hash in &append.blobs {
                if seen.insert(*hash)
                    && let Some(bytes) = log.get_blob(hash)?
                {
                    current.blobs.push(bytes);
                }
            }
            if append.completes {
                steps.push(std::mem::take(&mut current));
            }
        }
        match steps.last_mut() {
            Some(last) => {
                last.events.append(&mut current.events);
                last.blobs.append(&mut current.blobs);
            }
            None => steps.push(current),
        }
        Ok(steps)
    }
}

impl<L: EventLog + ?Sized> EventLog for Written<'_, L> {
    fn append(
        &self,
        cast: &CastId,
        expected: Seq,
        events: &[Pending],
    ) -> Result<Vec<Recorded>, LogError> {
        let records = self.log.append(cast, expected, events)?;
        self.note(&[], &records);
        Ok(records)
    }

    fn fork(
        &self,
        cast: &CastId,
        from: &ForkPoint,
        events: &[Pending],
    ) -> Result<Vec<Recorded>, LogError> {
        self.log.fork(cast, from, events)
    }

    fn import(&self, head: &CastHead, events: &[Recorded]) -> Result<(), LogError> {
        self.log.import(head, events)
    }

    fn scan(
        &self,
        cast: &CastId,
        from: Seq,
        visit: &mut dyn FnMut(Recorded) -> ControlFlow<()>,
    ) -> Result<(), LogError> {
        self.log.scan(cast, from, visit)
    }

    fn scan_chain(
        &self,
        cast: &CastId,
        visit: &mut dyn FnMut(StoredRow) -> ControlFlow<()>,
    ) -> Result<Option<CastHead>, LogError> {
        self.log.scan_chain(cast, visit)
    }

    fn scan_kinds(
        &self,
        kinds: &[&str],
        cast: Option<&CastId>,
        visit: &mut dyn FnMut(Recorded) -> ControlFlow<()>,
    ) -> Result<(), LogError> {
        self.log.scan_kinds(kinds, cast, visit)
    }

    fn casts(&self) -> Result<Vec<CastHead>, LogError> {
        self.log.casts()
    }

    fn head(&self, cast: &CastId) -> Result<Option<CastHead>, LogError> {
        self.log.head(cast)
    }

    fn put_blob(&self, bytes: &[u8]) -> Result<Digest, LogError> {
        let hash = self.log.put_blob(bytes)?;
        self.note(&[bytes.to_vec()], &[]);
        Ok(hash)
    }

    fn append_with_blobs(
        &self,
        cast: &CastId,
        expected: Seq,
        blobs: &[Vec<u8>],
        events: &[Pending],
    ) -> Result<Vec<Recorded>, LogError> {
        let records = self.log.append_with_blobs(cast, expected, blobs, events)?;
        self.note(blobs, &records);
        Ok(records)
    }

    fn begin_append_with_blobs(
        &self,
        cast: &CastId,
        expected: Seq,
        blobs: &[Vec<u8>],
        events: &[Pending],
    ) -> Result<Appending<'_>, LogError> {
        let appending = self
            .log
            .begin_append_with_blobs(cast, expected, blobs, events)?;
        self.note(blobs, appending.records());
        Ok(appending)
    }

    fn get_blob(&self, hash: &Digest) -> Result<Option<Vec<u8>>, LogError> {
        self.log.get_blob(hash)
    }

    fn put_snapshot(&self, cast: &CastId, snapshot: Snapshot) -> Result<(), LogError> {
        self.log.put_snapshot(cast, snapshot)
    }

    fn begin_put_snapshot(&self, cast: &CastId, snapshot: Snapshot) -> Result<(), LogError> {
        self.log.begin_put_snapshot(cast, snapshot)
    }

    fn snapshot(&self, cast: &CastId, at_most: Seq) -> Result<Option<Snapshot>, LogError> {
        self.log.snapshot(cast, at_most)
    }

    fn read(&self, cast: &CastId, from: Seq, to: Option<Seq>) -> Result<Vec<Recorded>, LogError> {
        self.log.read(cast, from, to)
    }
}
