//! Chain verification: re-read stored bytes and check every link.
//!
//! [`ChainChecker`] is fed records in storage order and reports each problem with the exact
//! cast and seq; it never re-serializes anything. [`verify_cast`] runs it over a log (and also
//! checks the fork link and the recorded head); `import` runs it over a file before storing.
//! After a problem the checker carries on from the stored hash, so one damaged event is reported
//! once instead of poisoning every later link.

use std::ops::ControlFlow;

use castlog_core::event::Contexts;
use castlog_core::id::{CastId, Digest, Seq};
use serde::Serialize;

use crate::decoder::Decoder;
use crate::log::{CastHead, EventLog, LogError, StoredRow};
use crate::record::Recorded;

/// What kind of damage a problem is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ProblemKind {
    /// A seq is absent (a deleted row, or a truncated tail).
    Missing,
    /// Two rows claim the same seq.
    Duplicate,
    /// An event's `prev` is not the previous event's hash.
    BrokenLink,
    /// The stored hash is not the hash of the stored fields.
    HashMismatch,
    /// The payload does not decode into a known event.
    Undecodable,
    /// The fork parent is missing or differs.
    ForkParent,
    /// The recorded head does not match the last event.
    Head,
    /// A referenced blob is missing or does not match its address.
    Blob,
    /// The store could not be read there.
    Unreadable,
    /// Re-running the machine over the recorded inputs gives other events.
    Divergence,
    /// A parent's `lanes_joined` names a lane head (seq and hash) its lane's chain does not
    /// hold.
    Lane,
    /// A kept state snapshot or projection checkpoint is not what a fold of the log gives at
    /// its seq (it is ignored when damaged; one that decodes but differs would mislead
    /// `state --at`, `replay` or `export --artifacts`).
    Snapshot,
    /// Events are stored under a cast the log no longer lists (its head row is gone).
    Orphaned,
    /// An event row is not where its own cast key and seq put it: a row changed in place
    /// (read at its address, under other fields), or a row the schema v6 upgrade kept apart
    /// in `events_apart` (a key or seq no event can have, a value of another type), which no
    /// read of a cast sees. A second copy of a seq kept apart is a [`ProblemKind::Duplicate`].
    Misplaced,
    /// The cast is gone, shorter than, or forked away from the head an anchor recorded for it
    /// (see [`crate::anchor`]).
    Anchor,
}

/// One problem found by verification.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Problem {
    /// Stream the problem is in.
    pub cast: CastId,
    /// Seq of the damaged record; for a head problem, where head and records disagree.
    pub seq: Seq,
    /// What is wrong there.
    pub kind: ProblemKind,
    /// A sentence a person can act on.
    pub message: String,
}

/// Checks records of one cast, in storage order.
#[derive(Debug)]
pub struct ChainChecker {
    cast: CastId,
    /// The hash the next record's `prev` must equal (None after a row whose hash cannot be
    /// read: that link cannot be checked).
    prev: Option<Digest>,
    /// Seq of the last record checked (`Seq(0)` before the first).
    last: Seq,
    problems: Vec<Problem>,
    events: u64,
    /// The vocabularies a payload may decode in (the machine's, and other contexts').
    contexts: Contexts,
    /// Decodes the machine's events in order, with the replies later ones name.
    decoder: Decoder,
}

impl ChainChecker {
    /// A checker for `cast` whose first record must link to `genesis`.
    pub fn new(cast: CastId, genesis: Digest) -> Self {
        Self {
            cast,
            prev: Some(genesis),
            last: Seq(0),
            problems: Vec::new(),
            events: 0,
            contexts: Contexts::MACHINE,
            decoder: Decoder::new(),
        }
    }

    /// The same checker, decoding events of `contexts` besides the machine's.
    pub fn in_contexts(mut self, contexts: Contexts) -> Self {
        self.contexts = contexts;
        self
    }

    fn report(&mut self, seq: Seq, kind: ProblemKind, message: String) {
        self.problems.push(Problem {
            cast: self.cast.clone(),
            seq,
            kind,
            message,
        });
    }

    /// Checks the next record.
    pub fn check(&mut self, record: &Recorded) {
        self.check_hashed(record, record.computed_hash());
    }

    /// Checks the next record whose hash was already recomputed (on another thread).
    pub fn check_hashed(&mut self, record: &Recorded, computed: Digest) {
        self.events += 1;
        let seq = record.seq;
        if record.cast != self.cast {
            let message = format!("event belongs to cast {}, not {}", record.cast, self.cast);
            self.report(seq, ProblemKind::BrokenLink, message);
        }
        if seq == self.last {
            self.report(
                seq,
                ProblemKind::Duplicate,
                format!("seq {seq} is stored twice"),
            );
            return;
        }
        if seq < self.last {
            let message = format!("seq {seq} is stored after seq {}", self.last);
            self.report(seq, ProblemKind::BrokenLink, message);
            return;
        }
        if seq != self.last.next() {
            self.report_gap(seq);
        } else if let Some(prev) = self.prev.filter(|prev| *prev != record.prev) {
            let (found, before) = record.prev.short_pair(&prev);
            let message = format!("prev is {found} but the event before has hash {before}");
            self.report(seq, ProblemKind::BrokenLink, message);
        }
        if computed != record.hash {
            let (stored, bytes) = record.hash.short_pair(&computed);
            let message = format!(
                "stored hash {stored} but the stored bytes hash to {bytes}: the event was altered"
            );
            self.report(seq, ProblemKind::HashMismatch, message);
        } else if let Err(err) = self.decoder.check(&self.contexts, record) {
            self.report(seq, ProblemKind::Undecodable, err.to_string());
        }
        self.prev = Some(record.hash);
        self.last = seq;
    }

    /// Reports the seqs missing between the last one seen and `seq`.
    fn report_gap(&mut self, seq: Seq) {
        let missing = self.last.next();
        let message = if seq.get() - missing.get() == 1 {
            format!("seq {missing} is missing")
        } else {
            format!("seqs {missing} to {} are missing", Seq(seq.get() - 1))
        };
        self.report(missing, ProblemKind::Missing, message);
    }

    /// Checks a stored row, which may not decode (see [`StoredRow`]).
    pub fn check_row(&mut self, row: &StoredRow) {
        match row {
            StoredRow::Record(record) => self.check(record),
            StoredRow::Unreadable {
                first,
                last,
                hash,
                message,
            } => self.check_unreadable(*first, *last, *hash, message),
        }
    }

    /// Checks rows `first..=last` that cannot be read: reported at `first`, and the chain
    /// goes on after `last` from its stored hash if that is known.
    pub fn check_unreadable(&mut self, first: Seq, last: Seq, hash: Option<Digest>, why: &str) {
        self.events += last.get().saturating_sub(first.get()) + 1;
        if first > self.last.next() {
            self.report_gap(first);
        }
        let message = if first == last {
            format!("the row of seq {first} cannot be read: {why}")
        } else {
            format!("the rows of seqs {first} to {last} cannot be read: {why}")
        };
        self.report(first, ProblemKind::Unreadable, message);
        if last > self.last {
            self.prev = hash;
            self.last = last;
        }
    }

    /// Checks the end of the chain against the recorded head and returns what was found.
    pub fn finish(mut self, head: Option<(Seq, Digest)>) -> Verified {
        if let Some((seq, hash)) = head {
            if self.last < seq {
                let from = self.last.next();
                let message = format!(
                    "the head records seq {seq} but the chain ends at seq {}: the tail was truncated",
                    self.last
                );
                self.report(from, ProblemKind::Missing, message);
            } else if self.last > seq {
                let message = format!("the chain goes past the recorded head seq {seq}");
                self.report(seq.next(), ProblemKind::Head, message);
            } else if let Some(last) = self.prev.filter(|last| *last != hash) {
                let (head, last) = hash.short_pair(&last);
                let message =
                    format!("the recorded head hash {head} differs from the last event's {last}");
                self.report(seq, ProblemKind::Head, message);
            }
        }
        Verified {
            events: self.events,
            problems: self.problems,
        }
    }
}

/// The outcome of verifying one cast.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verified {
    /// Records checked, readable or not.
    pub events: u64,
    /// Problems found, in seq order of discovery.
    pub problems: Vec<Problem>,
}

/// Verifies one cast of `log`: every link, every hash, the fork parent and the head. The
/// head and the events are read from one state of the log ([`EventLog::scan_chain`]), so an
/// append made while this runs is never taken for damage; `head` names the cast (and its fork
/// parent), the head checked is the one read with the events.
pub fn verify_cast(log: &dyn EventLog, head: &CastHead) -> Result<Verified, LogError> {
    verify_cast_in(log, head, Contexts::MACHINE)
}

/// [`verify_cast`] for a log that also holds streams of other contexts: their events decode
/// in `contexts`.
pub fn verify_cast_in(
    log: &dyn EventLog,
    head: &CastHead,
    contexts: Contexts,
) -> Result<Verified, LogError> {
    verify_cast_visiting(log, head, contexts, &mut |_| {})
}

/// [`verify_cast_in`] that also hands every readable record to `visit` once it is checked, in
/// seq order, so a caller with more to check in the events (the blobs they name) reads the
/// cast once instead of twice.
pub fn verify_cast_visiting(
    log: &dyn EventLog,
    head: &CastHead,
    contexts: Contexts,
    visit: &mut dyn FnMut(&Recorded),
) -> Result<Verified, LogError> {
    let mut checker =
        ChainChecker::new(head.cast.clone(), head.genesis_prev()).in_contexts(contexts);
    if let Some(parent) = &head.parent {
        let found = log.read(&parent.cast, parent.seq, Some(parent.seq));
        let message = match found {
            Ok(records) => match records.first() {
                Some(r) if r.seq == parent.seq && r.hash == parent.hash => None,
                Some(r) => {
                    let (named, found) = parent.hash.short_pair(&r.hash);
                    Some(format!(
                        "forked from {} at seq {} with hash {named}, but that event's hash is {found}",
                        parent.cast, parent.seq,
                    ))
                }
                None => Some(format!(
                    "fork parent {} has no seq {}",
                    parent.cast, parent.seq
                )),
            },
            Err(LogError::UnknownCast { .. }) => {
                Some(format!("fork parent {} is not in this log", parent.cast))
            }
            Err(err) => return Err(err),
        };
        if let Some(message) = message {
            checker.report(Seq::FIRST, ProblemKind::ForkParent, message);
        }
    }
    let scanned = scan_pipelined(
        log,
        &head.cast,
        &mut |row, computed| match (row, computed) {
            (StoredRow::Record(record), Some(computed)) => {
                checker.check_hashed(record, computed);
                visit(record);
            }
            (StoredRow::Record(record), None) => {
                checker.check(record);
                visit(record);
            }
            (row, _) => checker.check_row(row),
        },
    );
    match scanned {
        Ok(Some(read)) => Ok(checker.finish(Some((read.seq, read.hash)))),
        Ok(None) => {
            let message = "the log no longer lists this cast (its row in casts is gone)".into();
            checker.report(head.seq, ProblemKind::Head, message);
            Ok(checker.finish(None))
        }
        Err(err @ LogError::Corrupt { .. }) => {
            let at = checker.last.next();
            checker.report(at, ProblemKind::Unreadable, err.to_string());
            Ok(checker.finish(None))
        }
        Err(other) => Err(other),
    }
}

/// Rows per hand-off between the reading and the checking thread.
const PIPELINE_PAGE: usize = 512;

/// Reads `cast` ([`EventLog::scan_chain`]) on a second thread while `check` hashes, links and
/// decodes on this one, so reading rows and checking them overlap (verification is the one
/// full scan a user waits for). Order is preserved; each record comes with its recomputed
/// hash. Returns the head read with the rows.
fn scan_pipelined(
    log: &dyn EventLog,
    cast: &CastId,
    check: &mut dyn FnMut(&StoredRow, Option<Digest>),
) -> Result<Option<CastHead>, LogError> {
    std::thread::scope(|scope| {
        let (pages, received) = std::sync::mpsc::sync_channel::<Vec<StoredRow>>(8);
        let reader = scope.spawn(move || {
            let mut page = Vec::with_capacity(PIPELINE_PAGE);
            let scanned = log.scan_chain(cast, &mut |row| {
                page.push(row);
                if page.len() == PIPELINE_PAGE {
                    let full = std::mem::replace(&mut page, Vec::with_capacity(PIPELINE_PAGE));
                    if pages.send(full).is_err() {
                        return ControlFlow::Break(());
                    }
                }
                ControlFlow::Continue(())
            });
            if !page.is_empty() {
                // The checker only stops receiving when it is done; nothing is lost.
                drop(pages.send(page));
            }
            scanned
        });
        for page in received {
            for row in &page {
                let computed = match row {
                    StoredRow::Record(record) => Some(record.computed_hash()),
                    StoredRow::Unreadable { .. } => None,
                };
                check(row, computed);
            }
        }
        reader.join().unwrap_or_else(|_| {
            Err(LogError::storage(
                "verifying",
                "the reading thread panicked",
            ))
        })
    })
}

/// Checks a whole chain held in memory (an import) and returns its first problem, if any.
pub fn first_problem(head: &CastHead, records: &[Recorded]) -> Option<Problem> {
    first_problem_in(head, records, Contexts::MACHINE)
}

/// [`first_problem`], decoding events of `contexts` besides the machine's.
pub fn first_problem_in(
    head: &CastHead,
    records: &[Recorded],
    contexts: Contexts,
) -> Option<Problem> {
    let mut checker =
        ChainChecker::new(head.cast.clone(), head.genesis_prev()).in_contexts(contexts);
    for record in records {
        checker.check(record);
    }
    checker
        .finish(Some((head.seq, head.hash)))
        .problems
        .into_iter()
        .next()
}
