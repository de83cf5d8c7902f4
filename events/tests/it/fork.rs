//! The `EventLog` contract for forks (recasts): the child's chain commits to the parent's hash
//! at the fork seq, and a fork point the log does not hold is refused. Both backends.

use castlog_core::id::{Digest, Seq};
use castlog_events::verify::verify_cast;
use castlog_events::{EventLog, ForkPoint, LogError};
use rstest::rstest;

use super::backend::Backend;
use super::sample::{self, assert_chain};

#[rstest]
fn fork_links_to_the_parent_hash_at_the_fork_seq(
    #[values(Backend::Memory, Backend::Sqlite, Backend::Postgres)] backend: Backend,
) {
    let log = backend.open();
    let (parent, child) = (sample::cast("parent"), sample::cast("child"));
    let parent_records = sample::seed(&*log, &parent, 4);
    let point = ForkPoint {
        cast: parent.clone(),
        seq: Seq(2),
        hash: parent_records[1].hash,
    };
    let forked = log.fork(&child, &point, &sample::batch(40, 2)).unwrap();
    assert_eq!(forked[0].prev, point.hash);
    assert_chain(&forked, point.hash);
    let head = log.head(&child).unwrap().unwrap();
    assert_eq!(head.parent.as_ref(), Some(&point));
    assert_eq!(head.genesis_prev(), point.hash);
    assert_eq!((head.seq, head.hash), (Seq(2), forked[1].hash));
    assert_eq!(head.created_ms, forked[0].at_ms);
    // The fork continues like any cast; the parent is untouched.
    let more = log.append(&child, Seq(3), &sample::batch(42, 1)).unwrap();
    assert_eq!(more[0].prev, forked[1].hash);
    assert_eq!(log.read(&parent, Seq::FIRST, None).unwrap(), parent_records);
    let verified = verify_cast(&*log, &log.head(&child).unwrap().unwrap()).unwrap();
    assert_eq!(verified.problems, vec![]);
}

#[rstest]
#[case::wrong_hash(2, Some(3))]
#[case::missing_seq(9, None)]
#[case::seq_zero(0, None)]
fn fork_rejects_a_bad_fork_point(
    #[values(Backend::Memory, Backend::Sqlite, Backend::Postgres)] backend: Backend,
    #[case] seq: u64,
    #[case] hash_of: Option<usize>,
) {
    let log = backend.open();
    let (parent, child) = (sample::cast("parent"), sample::cast("child"));
    let records = sample::seed(&*log, &parent, 4);
    let hash = hash_of.map_or(Digest([9; 32]), |s| records[s - 1].hash);
    let point = ForkPoint {
        cast: parent.clone(),
        seq: Seq(seq),
        hash,
    };
    let err = log.fork(&child, &point, &sample::batch(0, 1)).unwrap_err();
    match err {
        LogError::BadForkPoint {
            parent: p, seq: s, ..
        } => assert_eq!((p, s), (parent, Seq(seq))),
        other => panic!("expected a bad fork point, got {other:?}"),
    }
    assert_eq!(log.head(&child).unwrap(), None);
    assert_eq!(log.casts().unwrap().len(), 1);
}

#[rstest]
fn fork_rejects_an_unknown_parent_and_an_existing_child(
    #[values(Backend::Memory, Backend::Sqlite, Backend::Postgres)] backend: Backend,
) {
    let log = backend.open();
    let (parent, child) = (sample::cast("parent"), sample::cast("child"));
    let records = sample::seed(&*log, &parent, 2);
    let ghost = ForkPoint {
        cast: sample::cast("ghost"),
        seq: Seq(1),
        hash: records[0].hash,
    };
    let err = log.fork(&child, &ghost, &sample::batch(0, 1)).unwrap_err();
    assert!(
        matches!(&err, LogError::BadForkPoint { parent, seq: Seq(1), .. } if parent.as_str() == "ghost"),
        "{err:?}"
    );
    // Forking onto a cast that exists (here: the parent itself) is a conflict.
    let point = ForkPoint {
        cast: parent.clone(),
        seq: Seq(1),
        hash: records[0].hash,
    };
    let err = log.fork(&parent, &point, &sample::batch(0, 1)).unwrap_err();
    assert!(
        matches!(&err, LogError::Conflict { cast, expected: Seq(1), found: Seq(3) } if *cast == parent),
        "{err:?}"
    );
    assert_eq!(log.read(&parent, Seq::FIRST, None).unwrap(), records);
}

/// A recast of a recast names both of its ancestors, nearest first; a fork loop made in a
/// damaged file ends the walk instead of spinning.
#[test]
fn ancestors_walk_up_to_the_root_once() {
    use castlog_events::log::ancestors;
    let (_dir, path) = super::backend::scratch();
    let log = super::backend::open_sqlite(&path);
    let (a, b, c) = (sample::cast("a"), sample::cast("b"), sample::cast("c"));
    let seeded = sample::seed(&log, &a, 2);
    let at = |cast: &castlog_core::id::CastId, hash| ForkPoint {
        cast: cast.clone(),
        seq: Seq(1),
        hash,
    };
    let b_records = log
        .fork(&b, &at(&a, seeded[0].hash), &sample::batch(10, 1))
        .unwrap();
    let c_records = log
        .fork(&c, &at(&b, b_records[0].hash), &sample::batch(20, 1))
        .unwrap();
    assert_eq!(ancestors(&log, &c).unwrap(), vec![b.clone(), a.clone()]);
    assert_eq!(ancestors(&log, &a).unwrap(), vec![]);
    // Damage: the root now names its own grandchild as its parent.
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute(
        "UPDATE casts SET parent_cast = 'c', parent_seq = 1, parent_hash = ?1 WHERE cast_id = 'a'",
        [c_records[0].hash.0.as_slice()],
    )
    .unwrap();
    drop(conn);
    assert_eq!(ancestors(&log, &c).unwrap(), vec![b, a]);
}
