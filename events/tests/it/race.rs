//! Two writers racing for one cast. Each appends at the seq it believes is next (read through
//! `head()`); the log must hand every seq to exactly one of them and tell every loser the seq it
//! expected and the seq the log was really at.

use std::sync::Barrier;
use std::thread;

use castlog_core::id::{CastId, Seq};
use castlog_events::verify::verify_cast;
use castlog_events::{CastHead, EventLog, LogError, Recorded};
use rstest::rstest;
use tempfile::TempDir;

use super::backend::{open_sqlite, scratch};
use super::sample;

/// How the two writers reach the log.
#[derive(Debug, Clone, Copy)]
enum Writers {
    /// Both threads share one `InMemoryLog`.
    Memory,
    /// Both threads share one `SqliteLog` (one writer connection, group commit).
    SqliteShared,
    /// Each thread has its own `SqliteLog` on the same file: two writer connections.
    SqliteTwo,
}

struct Pair {
    // Declared before `_dir` so the logs close before the directory is removed.
    logs: Vec<Box<dyn EventLog>>,
    _dir: Option<TempDir>,
}

impl Writers {
    fn open(self) -> Pair {
        match self {
            Writers::Memory => Pair {
                logs: vec![Box::new(castlog_events::InMemoryLog::new())],
                _dir: None,
            },
            Writers::SqliteShared | Writers::SqliteTwo => {
                let (dir, path) = scratch();
                let count = if matches!(self, Writers::SqliteTwo) {
                    2
                } else {
                    1
                };
                let logs = (0..count)
                    .map(|_| Box::new(open_sqlite(&path)) as Box<dyn EventLog>)
                    .collect();
                Pair {
                    logs,
                    _dir: Some(dir),
                }
            }
        }
    }
}

impl Pair {
    /// The log writer `i` (0 or 1) uses.
    fn writer(&self, i: usize) -> &dyn EventLog {
        &*self.logs[i % self.logs.len()]
    }
}

/// The seq a writer believes is next.
fn believed_next(head: &Result<Option<CastHead>, LogError>) -> Seq {
    match head {
        Ok(Some(head)) => head.seq.next(),
        _ => Seq::FIRST,
    }
}

/// Checks the finished chain: seqs `1..=total`, every link and hash good, the head at the end.
fn assert_intact(log: &dyn EventLog, cast: &CastId, total: u64) -> Vec<Recorded> {
    let records = log.read(cast, Seq::FIRST, None).unwrap();
    let seqs: Vec<u64> = records.iter().map(|r| r.seq.get()).collect();
    assert_eq!(seqs, (1..=total).collect::<Vec<_>>());
    let head = log.head(cast).unwrap().unwrap();
    assert_eq!(
        (head.seq, head.hash),
        (Seq(total), records[records.len() - 1].hash)
    );
    let verified = verify_cast(log, &head).unwrap();
    assert_eq!((verified.events, verified.problems), (total, vec![]));
    records
}

/// Both writers read the head, then both append at the seq they read: in every round exactly one
/// wins and the other is told it expected `k` while the log was at `k + 1`.
#[rstest]
fn in_lockstep_each_round_has_one_winner_and_one_named_loser(
    #[values(Writers::Memory, Writers::SqliteShared, Writers::SqliteTwo)] writers: Writers,
) {
    const ROUNDS: u64 = 100;
    let pair = writers.open();
    let cast = sample::cast("raced");
    let barrier = Barrier::new(2);
    let outcomes = thread::scope(|scope| {
        let handles = [0, 1].map(|i| {
            let (log, cast, barrier) = (pair.writer(i), &cast, &barrier);
            scope.spawn(move || {
                // Nothing in here panics, so neither thread can leave the other at a barrier.
                let mut out = Vec::new();
                for round in 0..ROUNDS {
                    barrier.wait();
                    let head = log.head(cast);
                    let expected = believed_next(&head);
                    barrier.wait();
                    let pending = sample::pending(round * 2 + i as u64);
                    let result = log.append(cast, expected, std::slice::from_ref(&pending));
                    out.push((head.is_ok(), expected, pending, result));
                }
                out
            })
        });
        handles.map(|h| h.join().unwrap())
    });
    let records = assert_intact(pair.writer(0), &cast, ROUNDS);
    for k in 1..=ROUNDS {
        let round = [&outcomes[0][k as usize - 1], &outcomes[1][k as usize - 1]];
        let mut winners = 0;
        for (head_ok, expected, pending, result) in round {
            assert!(head_ok, "reading the head failed in round {k}");
            assert_eq!(*expected, Seq(k));
            match result {
                Ok(sealed) => {
                    winners += 1;
                    assert_eq!(sealed[0].seq, Seq(k));
                    assert_eq!(records[k as usize - 1].payload, pending.payload);
                }
                Err(LogError::Conflict {
                    cast: c,
                    expected,
                    found,
                }) => assert_eq!((c, *expected, *found), (&cast, Seq(k), Seq(k + 1))),
                Err(other) => panic!("round {k}: expected a conflict, got {other:?}"),
            }
        }
        assert_eq!(winners, 1, "round {k}");
    }
}

/// Both writers append as fast as they can, retrying after each conflict, until each has won 100
/// seqs.
#[rstest]
fn free_running_writers_take_every_seq_exactly_once(
    #[values(Writers::Memory, Writers::SqliteShared, Writers::SqliteTwo)] writers: Writers,
) {
    const PER_WRITER: usize = 100;
    let pair = writers.open();
    let cast = sample::cast("raced");
    let barrier = Barrier::new(2);
    let outcomes = thread::scope(|scope| {
        let handles = [0, 1].map(|i| {
            let (log, cast, barrier) = (pair.writer(i), &cast, &barrier);
            scope.spawn(move || {
                barrier.wait();
                let (mut won, mut lost) = (Vec::new(), Vec::new());
                while won.len() < PER_WRITER {
                    let expected = believed_next(&log.head(cast));
                    let pending = sample::pending(won.len() as u64 * 2 + i as u64);
                    match log.append(cast, expected, &[pending]) {
                        Ok(sealed) => won.push((expected, sealed[0].seq)),
                        Err(err) => lost.push((expected, err)),
                    }
                }
                (won, lost)
            })
        });
        handles.map(|h| h.join().unwrap())
    });
    let total = 2 * PER_WRITER as u64;
    let mut won: Vec<u64> = outcomes
        .iter()
        .flat_map(|(won, _)| won.iter())
        .map(|(expected, seq)| {
            assert_eq!(expected, seq, "an append landed elsewhere than it expected");
            seq.get()
        })
        .collect();
    won.sort_unstable();
    assert_eq!(
        won,
        (1..=total).collect::<Vec<_>>(),
        "a seq was taken twice or not at all"
    );
    for (expected, err) in outcomes.iter().flat_map(|(_, lost)| lost) {
        match err {
            LogError::Conflict {
                cast: c,
                expected: e,
                found,
            } => {
                assert_eq!((c, e), (&cast, expected));
                // The head only moves forward, so a loser is always behind, never ahead.
                assert!(found > expected && found.get() <= total, "{err}");
            }
            other => panic!("expected a conflict, got {other:?}"),
        }
    }
    assert_intact(pair.writer(0), &cast, total);
    assert_intact(pair.writer(1), &cast, total);
}

/// Appends made at the same time by many threads through one `SqliteLog` (which commits what
/// queued while one leader waited for its fsync as one group) are all stored, in order, each
/// in its own cast, and never more transactions than appends are made.
#[test]
fn concurrent_appends_all_land() {
    let (_dir, path) = scratch();
    // Full durability: each transaction waits for its fsync, as a driven cast's do.
    let log = castlog_events::SqliteLog::open(&path).unwrap();
    const THREADS: usize = 8;
    const APPENDS: u64 = 40;
    let start = Barrier::new(THREADS);
    thread::scope(|s| {
        for t in 0..THREADS {
            let (log, start) = (&log, &start);
            s.spawn(move || {
                let cast = sample::cast(&format!("group{t}"));
                start.wait();
                for i in 0..APPENDS {
                    log.append(&cast, Seq(i * 2 + 1), &sample::batch(i * 2, 2))
                        .unwrap();
                }
            });
        }
    });
    let appends = THREADS as u64 * APPENDS;
    assert!(
        log.commits() <= appends,
        "{} transactions for {appends} appends",
        log.commits()
    );
    for t in 0..THREADS {
        let cast = sample::cast(&format!("group{t}"));
        let head = log.head(&cast).unwrap().unwrap();
        assert_eq!(head.seq, Seq(APPENDS * 2));
        assert_eq!(verify_cast(&log, &head).unwrap().events, APPENDS * 2);
    }
}
