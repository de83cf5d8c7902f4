//! The `RunQueue` contract, one body run against `InMemoryQueue` (the reference), the SQLite
//! file and the PostgreSQL schema: takes, renewals, releases, wake-ups, slots, and appends
//! fenced by the lease's epoch.

use castlog_core::event::{CastAborted, Event};
use castlog_core::id::{CastId, Seq};
use castlog_events::queue::memory::InMemoryQueue;
use castlog_events::{
    EventLog, InMemoryLog, LogError, Pending, PostgresLog, QueueState, RunQueue, WorkerId,
};

use super::backend::{open_sqlite, scratch, scratch_schema};

fn event() -> Pending {
    Pending::new(
        0,
        &Event::from(CastAborted {
            reason: "queue test".into(),
        }),
    )
}

/// The contract, on a queue whose appends go to `log`.
fn contract(queue: &dyn RunQueue, log: &dyn EventLog) {
    let cast = CastId::new("queued");
    assert_eq!(queue.entries().unwrap(), []);
    log.append(&cast, Seq(1), &[event()]).unwrap();
    queue.submit(&cast, "cmd:true", 10).unwrap();
    assert!(matches!(
        queue.submit(&cast, "cmd:true", 11),
        Err(LogError::AlreadyQueued { .. })
    ));
    let (a, b) = (WorkerId::new("a"), WorkerId::new("b"));

    let first = queue.take(&a, 100, 1000).unwrap().unwrap();
    assert_eq!((first.epoch, first.taken_over), (1, false));
    assert_eq!(first.agent, "cmd:true");
    let row = &queue.entries().unwrap()[0];
    assert_eq!(row.state, QueueState::Running);
    assert_eq!(row.holder.as_ref(), Some(&a));
    // Held under a live lease: nobody else takes it, the holder renews and appends.
    assert!(queue.take(&b, 500, 1000).unwrap().is_none());
    assert!(queue.renew(&first, 600, 1000).unwrap());
    assert!(queue.take(&b, 1500, 1000).unwrap().is_none());
    queue
        .append_leased(&first, Seq(2), &[b"blob".to_vec()], &[event()])
        .unwrap();

    // Past the renewed lease, b takes it over: a's lease is fenced off.
    let second = queue.take(&b, 1601, 1000).unwrap().unwrap();
    assert_eq!((second.epoch, second.taken_over), (2, true));
    let lost = queue
        .append_leased(&first, Seq(3), &[], &[event()])
        .unwrap_err();
    assert!(
        matches!(
            lost,
            LogError::LeaseLost {
                epoch: 1,
                current: 2,
                ..
            }
        ),
        "{lost:?}"
    );
    assert_eq!(
        log.head(&cast).unwrap().unwrap().seq,
        Seq(2),
        "nothing appended"
    );
    assert!(!queue.renew(&first, 1700, 1000).unwrap());
    assert!(!queue.release(&first, QueueState::Done).unwrap());
    queue
        .append_leased(&second, Seq(3), &[], &[event()])
        .unwrap();

    // Paused: taken by nobody until woken.
    assert!(queue.release(&second, QueueState::Paused).unwrap());
    assert!(queue.take(&a, 5000, 1000).unwrap().is_none());
    assert!(queue.wake(&cast, 5000).unwrap());
    assert!(
        !queue.wake(&cast, 5000).unwrap(),
        "only a paused cast wakes"
    );
    let third = queue.take(&a, 5001, 1000).unwrap().unwrap();
    assert_eq!((third.epoch, third.taken_over), (3, false));
    assert!(queue.release(&third, QueueState::Done).unwrap());
    assert!(queue.take(&a, 99_999, 1000).unwrap().is_none());
    assert_eq!(queue.entries().unwrap()[0].state, QueueState::Done);
    assert!(!queue.wake(&CastId::new("never queued"), 0).unwrap());

    // Slots: at most `limit` held, a dead holder's freed by its lease's end.
    let one = queue.take_slot("e", 2, &a, 0, 100).unwrap().unwrap();
    let two = queue.take_slot("e", 2, &b, 0, 100).unwrap().unwrap();
    assert_ne!(one.slot, two.slot);
    assert!(queue.take_slot("e", 2, &a, 50, 100).unwrap().is_none());
    assert!(queue.take_slot("other", 1, &a, 50, 100).unwrap().is_some());
    queue.release_slot(&one).unwrap();
    let again = queue.take_slot("e", 2, &b, 60, 100).unwrap().unwrap();
    assert_eq!(again.slot, one.slot);
    queue.renew_slot(&again, 150, 100).unwrap();
    // `two` (until 100) has expired, `again` was renewed until 250.
    let taken = queue.take_slot("e", 2, &a, 200, 100).unwrap().unwrap();
    assert_eq!(taken.slot, two.slot);
    assert!(queue.take_slot("e", 2, &a, 200, 100).unwrap().is_none());
}

#[test]
fn the_reference_queue_keeps_the_contract() {
    let queue = InMemoryQueue::new(InMemoryLog::new());
    contract(&queue, queue.log());
}

#[test]
fn the_sqlite_queue_keeps_the_contract() {
    let (_dir, path) = scratch();
    let log = open_sqlite(&path);
    contract(&log, &log);
}

#[test]
fn the_postgres_queue_keeps_the_contract() {
    let schema = scratch_schema();
    let log = PostgresLog::open(&schema.url()).unwrap();
    contract(&log, &log);
}

#[test]
fn a_new_sqlite_file_has_the_queue_tables_and_an_empty_queue() {
    let (_dir, path) = scratch();
    let log = open_sqlite(&path);
    assert_eq!(log.entries().unwrap(), []);
    assert!(!log.wake(&CastId::new("c"), 0).unwrap());
    let tables = super::backend::count(
        &path,
        "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name LIKE 'castlog_%'",
    );
    assert_eq!(tables, 2);
}

#[test]
fn a_postgres_append_from_another_log_wakes_a_listener() {
    let schema = scratch_schema();
    let log = PostgresLog::open(&schema.url()).unwrap();
    let cast = CastId::new("followed");
    log.append(&cast, Seq(1), &[event()]).unwrap();
    log.submit(&cast, "cmd:true", 0).unwrap();
    let mut listener = log.listen_appends().unwrap().unwrap();
    let quiet = std::time::Duration::from_millis(50);
    assert!(!listener.wait(quiet).unwrap(), "nothing appended yet");
    let other = PostgresLog::open(&schema.url()).unwrap();
    other.append(&cast, Seq(2), &[event()]).unwrap();
    assert!(listener.wait(std::time::Duration::from_secs(30)).unwrap());
}
