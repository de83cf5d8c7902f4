//! `verify` while another writer appends to the same cast: the head and the rows must come
//! from one state of the log, or an append committed between reading them looks like a chain
//! that goes past its head (or a truncated tail).

use std::sync::atomic::{AtomicBool, Ordering};

use castlog_core::id::Seq;
use castlog_events::verify::verify_cast;
use rstest::rstest;

use super::backend::Backend;
use super::sample;

/// Events the writer appends, one per append (each its own commit, as `bench append --batch 1`).
const APPENDS: u64 = 3000;

// Regression: `verify` read the head, then the rows; an append in between gave exit 3 with
// "the chain goes past the recorded head seq".
#[rstest]
#[case::memory(Backend::Memory)]
#[case::sqlite(Backend::Sqlite)]
#[case::postgres(Backend::Postgres)]
fn verify_while_a_writer_appends_reports_no_false_damage(#[case] backend: Backend) {
    let log = backend.open();
    let cast = sample::cast("growing");
    sample::seed(&*log, &cast, 1);
    let done = AtomicBool::new(false);
    let (rounds, last_seen) = std::thread::scope(|s| {
        let writer = s.spawn(|| {
            for i in 1..APPENDS {
                log.append(&cast, Seq(i + 1), &sample::batch(i, 1)).unwrap();
            }
            done.store(true, Ordering::SeqCst);
        });
        let mut rounds = 0u64;
        // Each round takes the head first, as `verify --all` does when it lists the casts,
        // and verifies at least once more after the writer is done.
        let last_seen = loop {
            let finished = done.load(Ordering::SeqCst);
            let head = log.head(&cast).unwrap().unwrap();
            let verified = verify_cast(&*log, &head).unwrap();
            assert_eq!(
                verified.problems,
                vec![],
                "round {rounds}, head {}",
                head.seq
            );
            assert!(verified.events >= head.seq.get());
            rounds += 1;
            if finished {
                break verified.events;
            }
        };
        writer.join().unwrap();
        (rounds, last_seen)
    });
    assert!(rounds >= 1);
    assert_eq!(last_seen, APPENDS);
}
