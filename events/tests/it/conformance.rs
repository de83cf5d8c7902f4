//! The `EventLog` contract: appends, conflicts, batches, reads, heads and blobs. Every test body
//! runs against both backends.

use std::ops::ControlFlow;
use std::thread;

use castlog_core::id::{Digest, Seq};
use castlog_events::chain::blob_hash;
use castlog_events::log::with_events;
use castlog_events::verify::verify_cast;
use castlog_events::{CastHead, ForkPoint, LogError, Pending, StreamKind};
use rstest::rstest;

use super::backend::Backend;
use super::sample::{self, AT, assert_chain, seqs};

#[rstest]
fn append_creates_a_cast_at_seq_one(
    #[values(Backend::Memory, Backend::Sqlite, Backend::Postgres)] backend: Backend,
) {
    let log = backend.open();
    let cast = sample::cast("c");
    assert_eq!(log.head(&cast).unwrap(), None);
    let event = sample::event(0);
    let sealed = log
        .append(&cast, Seq::FIRST, &[Pending::new(AT, &event)])
        .unwrap();
    assert_eq!(sealed.len(), 1);
    let first = &sealed[0];
    assert_eq!(first.cast, cast);
    assert_eq!(first.seq, Seq(1));
    assert_eq!(first.at_ms, AT);
    assert_eq!(
        (first.kind.as_str(), first.v),
        (event.kind(), event.version())
    );
    assert_eq!(first.payload, event.encode());
    assert_eq!(first.prev, Digest::ZERO);
    assert_eq!(first.hash, first.computed_hash());
    assert_eq!(first.event().unwrap(), event);
    let head = CastHead {
        cast: cast.clone(),
        seq: Seq(1),
        hash: first.hash,
        parent: None,
        created_ms: AT,
        kind: StreamKind::Cast,
    };
    assert_eq!(log.head(&cast).unwrap(), Some(head));
    assert_eq!(log.read(&cast, Seq::FIRST, None).unwrap(), sealed);
}

#[rstest]
#[case::behind(Seq(2))]
#[case::at_the_head(Seq(3))]
#[case::ahead(Seq(5))]
#[case::recreating(Seq(1))]
#[case::zero(Seq(0))]
fn a_wrong_expected_seq_is_a_conflict_and_writes_nothing(
    #[values(Backend::Memory, Backend::Sqlite, Backend::Postgres)] backend: Backend,
    #[case] expected: Seq,
) {
    let log = backend.open();
    let cast = sample::cast("c");
    let before = sample::seed(&*log, &cast, 3);
    let head = log.head(&cast).unwrap();
    let err = log
        .append(&cast, expected, &sample::batch(10, 2))
        .unwrap_err();
    match err {
        LogError::Conflict {
            cast: c,
            expected: e,
            found,
        } => assert_eq!((c, e, found), (cast.clone(), expected, Seq(4))),
        other => panic!("expected a conflict, got {other:?}"),
    }
    assert_eq!(log.read(&cast, Seq::FIRST, None).unwrap(), before);
    assert_eq!(log.head(&cast).unwrap(), head);
}

#[rstest]
fn appending_past_the_start_of_a_missing_cast_is_a_conflict(
    #[values(Backend::Memory, Backend::Sqlite, Backend::Postgres)] backend: Backend,
) {
    let log = backend.open();
    let cast = sample::cast("nobody");
    let err = log.append(&cast, Seq(3), &sample::batch(0, 1)).unwrap_err();
    assert!(
        matches!(&err, LogError::Conflict { cast: c, expected: Seq(3), found: Seq(1) } if *c == cast),
        "{err:?}"
    );
    assert_eq!(log.head(&cast).unwrap(), None);
    assert!(log.casts().unwrap().is_empty());
    let err = log.read(&cast, Seq::FIRST, None).unwrap_err();
    assert!(
        matches!(&err, LogError::UnknownCast { cast: c } if *c == cast),
        "{err:?}"
    );
}

#[rstest]
fn a_batch_is_sealed_as_one_chain(
    #[values(Backend::Memory, Backend::Sqlite, Backend::Postgres)] backend: Backend,
) {
    let log = backend.open();
    let cast = sample::cast("c");
    let first = log.append(&cast, Seq(1), &sample::batch(0, 4)).unwrap();
    assert_eq!(seqs(&first), [1, 2, 3, 4]);
    let second = log.append(&cast, Seq(5), &sample::batch(4, 3)).unwrap();
    assert_eq!(seqs(&second), [5, 6, 7]);
    let all = log.read(&cast, Seq::FIRST, None).unwrap();
    assert_eq!(all, [first, second].concat());
    assert_chain(&all, Digest::ZERO);
    let head = log.head(&cast).unwrap().unwrap();
    assert_eq!((head.seq, head.hash), (Seq(7), all[6].hash));
}

#[rstest]
fn an_empty_append_is_refused(
    #[values(Backend::Memory, Backend::Sqlite, Backend::Postgres)] backend: Backend,
) {
    let log = backend.open();
    let fresh = sample::cast("fresh");
    let err = log.append(&fresh, Seq::FIRST, &[]).unwrap_err();
    assert!(
        matches!(&err, LogError::EmptyAppend { cast } if *cast == fresh),
        "{err:?}"
    );
    assert_eq!(log.head(&fresh).unwrap(), None);
    let cast = sample::cast("c");
    sample::seed(&*log, &cast, 2);
    let err = log.append(&cast, Seq(3), &[]).unwrap_err();
    assert!(
        matches!(&err, LogError::EmptyAppend { cast: c } if *c == cast),
        "{err:?}"
    );
    assert_eq!(log.head(&cast).unwrap().unwrap().seq, Seq(2));
}

#[rstest]
fn readers_never_see_half_a_batch(
    #[values(Backend::Memory, Backend::Sqlite, Backend::Postgres)] backend: Backend,
) {
    const BATCH: u64 = 4;
    const BATCHES: u64 = 50;
    let log = backend.open();
    let cast = sample::cast("c");
    sample::seed(&*log, &cast, BATCH);
    thread::scope(|scope| {
        let writer = scope.spawn(|| {
            for i in 1..BATCHES {
                let next = Seq(i * BATCH + 1);
                log.append(&cast, next, &sample::batch(i * BATCH, BATCH))
                    .unwrap();
            }
        });
        // Read while the writer writes (and once more after it ends): every read sees whole
        // batches only.
        loop {
            let finished = writer.is_finished();
            let records = log.read(&cast, Seq::FIRST, None).unwrap();
            assert_eq!(
                records.len() as u64 % BATCH,
                0,
                "a read saw part of a batch"
            );
            assert_eq!(log.head(&cast).unwrap().unwrap().seq.get() % BATCH, 0);
            if finished {
                assert_eq!(records.len() as u64, BATCH * BATCHES);
                break;
            }
        }
    });
}

#[rstest]
#[case::everything(1, None, &[1, 2, 3, 4, 5])]
#[case::from_the_middle(3, None, &[3, 4, 5])]
#[case::bounded(2, Some(4), &[2, 3, 4])]
#[case::one_event(3, Some(3), &[3])]
#[case::to_the_last(4, Some(5), &[4, 5])]
#[case::past_the_end(6, None, &[])]
#[case::reversed(4, Some(2), &[])]
#[case::from_zero(0, Some(2), &[1, 2])]
fn read_returns_the_asked_range(
    #[values(Backend::Memory, Backend::Sqlite, Backend::Postgres)] backend: Backend,
    #[case] from: u64,
    #[case] to: Option<u64>,
    #[case] expected: &[u64],
) {
    let log = backend.open();
    let cast = sample::cast("c");
    let all = sample::seed(&*log, &cast, 5);
    let read = log.read(&cast, Seq(from), to.map(Seq)).unwrap();
    assert_eq!(seqs(&read), expected);
    for record in &read {
        assert_eq!(record, &all[record.seq.get() as usize - 1]);
    }
}

#[rstest]
fn scan_stops_when_the_visitor_breaks(
    #[values(Backend::Memory, Backend::Sqlite, Backend::Postgres)] backend: Backend,
) {
    let log = backend.open();
    let cast = sample::cast("c");
    sample::seed(&*log, &cast, 5);
    let mut seen = Vec::new();
    log.scan(&cast, Seq(2), &mut |record| {
        seen.push(record.seq.get());
        if seen.len() == 2 {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        }
    })
    .unwrap();
    assert_eq!(seen, [2, 3]);
    let missing = sample::cast("missing");
    let err = log
        .scan(&missing, Seq::FIRST, &mut |_| ControlFlow::Continue(()))
        .unwrap_err();
    assert!(
        matches!(&err, LogError::UnknownCast { cast } if *cast == missing),
        "{err:?}"
    );
}

#[rstest]
fn a_long_chain_reads_across_scan_pages(
    #[values(Backend::Memory, Backend::Sqlite, Backend::Postgres)] backend: Backend,
) {
    // The SQLite log reads 4096 rows per page; 9000 events span three pages.
    const TOTAL: u64 = 9000;
    let log = backend.open();
    let cast = sample::cast("long");
    for start in (0..TOTAL).step_by(1000) {
        log.append(&cast, Seq(start + 1), &sample::batch(start, 1000))
            .unwrap();
    }
    let all = log.read(&cast, Seq::FIRST, None).unwrap();
    assert_eq!(all.len() as u64, TOTAL);
    assert_chain(&all, Digest::ZERO);
    let middle = log.read(&cast, Seq(4000), Some(Seq(4200))).unwrap();
    assert_eq!(seqs(&middle), (4000..=4200).collect::<Vec<_>>());
    let mut seen = 0;
    log.scan(&cast, Seq::FIRST, &mut |record| {
        seen += 1;
        assert_eq!(record.seq, Seq(seen));
        if seen == 5000 {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        }
    })
    .unwrap();
    assert_eq!(seen, 5000);
    let head = log.head(&cast).unwrap().unwrap();
    let verified = verify_cast(&*log, &head).unwrap();
    assert_eq!((verified.events, verified.problems), (TOTAL, vec![]));
}

/// `with_events` hands out a scan's records in order across its pages, lets the consumer
/// stop early and read the log meanwhile, and returns a read error instead of a result.
#[rstest]
fn with_events_streams_a_scan_in_order(
    #[values(Backend::Memory, Backend::Sqlite, Backend::Postgres)] backend: Backend,
) {
    let log = backend.open();
    let cast = sample::cast("long");
    log.append(&cast, Seq::FIRST, &sample::batch(0, 1000))
        .unwrap();
    let streamed = with_events(&*log, &cast, Seq(2), |records| {
        let head = log.head(&cast).unwrap().unwrap().seq;
        (records.map(|r| r.seq.get()).collect::<Vec<_>>(), head)
    })
    .unwrap();
    assert_eq!(streamed, ((2..=1000).collect::<Vec<_>>(), Seq(1000)));
    let first = with_events(&*log, &cast, Seq::FIRST, |records| {
        records.take(300).last().map(|r| r.seq)
    })
    .unwrap();
    assert_eq!(first, Some(Seq(300)));
    let missing = sample::cast("missing");
    let err = with_events(&*log, &missing, Seq::FIRST, |records| records.count()).unwrap_err();
    assert!(matches!(err, LogError::UnknownCast { .. }), "{err:?}");
}

#[rstest]
fn casts_lists_heads_in_creation_order(
    #[values(Backend::Memory, Backend::Sqlite, Backend::Postgres)] backend: Backend,
) {
    let log = backend.open();
    let (b, a, c) = (sample::cast("b"), sample::cast("a"), sample::cast("c"));
    let b_records = sample::seed(&*log, &b, 2);
    log.append(&a, Seq(1), &sample::batch(20, 1)).unwrap();
    let point = ForkPoint {
        cast: b.clone(),
        seq: Seq(1),
        hash: b_records[0].hash,
    };
    log.fork(&c, &point, &sample::batch(30, 2)).unwrap();
    log.append(&b, Seq(3), &sample::batch(2, 3)).unwrap();
    log.append(&a, Seq(2), &sample::batch(21, 1)).unwrap();
    let heads = log.casts().unwrap();
    let names: Vec<&str> = heads.iter().map(|h| h.cast.as_str()).collect();
    assert_eq!(names, ["b", "a", "c"]);
    for head in &heads {
        let records = log.read(&head.cast, Seq::FIRST, None).unwrap();
        let (first, last) = (&records[0], &records[records.len() - 1]);
        assert_eq!(
            (head.seq, head.hash),
            (last.seq, last.hash),
            "{}",
            head.cast
        );
        assert_eq!(head.created_ms, first.at_ms, "{}", head.cast);
        assert_eq!(log.head(&head.cast).unwrap().as_ref(), Some(head));
    }
    assert_eq!(heads[2].parent, Some(point));
    assert_eq!(heads[0].parent, None);
}

#[rstest]
fn blobs_are_stored_by_content_hash(
    #[values(Backend::Memory, Backend::Sqlite, Backend::Postgres)] backend: Backend,
) {
    let log = backend.open();
    let hash = log.put_blob(b"hello").unwrap();
    assert_eq!(hash, blob_hash(b"hello"));
    assert_eq!(log.get_blob(&hash).unwrap(), Some(b"hello".to_vec()));
    assert_eq!(log.put_blob(b"hello").unwrap(), hash);
    assert_eq!(log.get_blob(&hash).unwrap(), Some(b"hello".to_vec()));
    let empty = log.put_blob(b"").unwrap();
    assert_eq!(log.get_blob(&empty).unwrap(), Some(Vec::new()));
    assert_ne!(empty, hash);
    assert_eq!(log.get_blob(&blob_hash(b"never stored")).unwrap(), None);
}

#[rstest]
fn large_blobs_round_trip_byte_for_byte(
    #[values(Backend::Memory, Backend::Sqlite, Backend::Postgres)] backend: Backend,
) {
    let log = backend.open();
    // Large enough to be chunked by SqliteLog, with a shared run and non-UTF-8 bytes.
    let shared: Vec<u8> = (0..40_000u32).map(|i| (i * 7919 % 251) as u8).collect();
    let a = [b"first ".as_slice(), &shared].concat();
    let b = [shared.as_slice(), b" second", &[0xff, 0x00]].concat();
    let (ha, hb) = (log.put_blob(&a).unwrap(), log.put_blob(&b).unwrap());
    assert_eq!(ha, blob_hash(&a));
    assert_eq!(log.get_blob(&ha).unwrap(), Some(a.clone()));
    assert_eq!(log.get_blob(&hb).unwrap(), Some(b));
    assert_eq!(log.put_blob(&a).unwrap(), ha);
    assert_eq!(log.get_blob(&ha).unwrap(), Some(a));
}

#[rstest]
fn verify_finds_no_problem_in_an_intact_log(
    #[values(Backend::Memory, Backend::Sqlite, Backend::Postgres)] backend: Backend,
) {
    let log = backend.open();
    sample::populate(&*log);
    let heads = log.casts().unwrap();
    assert_eq!(heads.len(), 2);
    for head in heads {
        let verified = verify_cast(&*log, &head).unwrap();
        assert_eq!(verified.problems, vec![], "{}", head.cast);
        assert_eq!(verified.events, head.seq.get());
    }
}

/// A begun append is accepted when begin returns (sealed in order, a conflict refused there
/// and then); once waited for it is durable and every reader sees it, blobs included.
#[rstest]
fn a_begun_append_is_accepted_at_once_and_stored_once_waited_for(
    #[values(
        Backend::Memory,
        Backend::Sqlite,
        Backend::SqliteFull,
        Backend::Postgres
    )]
    backend: Backend,
) {
    let log = backend.open();
    let cast = sample::cast("c");
    let body = sample::text(3, 9_000);
    let first = log
        .begin_append_with_blobs(
            &cast,
            Seq::FIRST,
            std::slice::from_ref(&body),
            &sample::batch(0, 2),
        )
        .unwrap();
    let second = log
        .begin_append_with_blobs(&cast, Seq(3), &[], &sample::batch(2, 3))
        .unwrap();
    let refused = log.begin_append_with_blobs(&cast, Seq(3), &[], &sample::batch(5, 1));
    assert!(
        matches!(refused, Err(LogError::Conflict { .. })),
        "{refused:?}"
    );
    // Waited for out of order: each is durable once covered.
    second.wait().unwrap();
    first.wait().unwrap();
    assert_eq!(log.head(&cast).unwrap().unwrap().seq, Seq(5));
    assert_eq!(log.get_blob(&blob_hash(&body)).unwrap(), Some(body));
    let events = log.read(&cast, Seq::FIRST, None).unwrap();
    assert_eq!(seqs(&events), (1..=5).collect::<Vec<u64>>());
    assert_chain(&events, Digest::ZERO);
}

/// A claim event of one of the indexed kinds, for claim `claim`.
fn claim_event(i: u64, claim: &str) -> Pending {
    use castlog_core::event::{Event, PostRefused, PostStaged};
    use castlog_core::id::ClaimId;
    let claim = ClaimId::new(claim);
    let event = if i.is_multiple_of(2) {
        Event::from(PostStaged {
            claim,
            message_id: format!("m{i}"),
        })
    } else {
        Event::from(PostRefused::of_claim(claim, format!("r{i}")))
    };
    Pending::new(AT + i, &event)
}

/// `scan_kinds` visits what scanning every listed cast and skipping the other kinds visits:
/// cast by cast in creation order (a cast appended to later keeps its place), seq order
/// within one, for all casts or one, for the claim kinds, a part of them, or other kinds; a
/// named cast the log does not hold is unknown, and a visitor that breaks stops the read.
#[rstest]
fn scan_kinds_visits_the_kinds_asked_for_cast_by_cast(
    #[values(Backend::Memory, Backend::Sqlite, Backend::Postgres)] backend: Backend,
) {
    use castlog_core::claims::EVENT_KINDS;
    let log = backend.open();
    let (b, a, c) = (sample::cast("b"), sample::cast("a"), sample::cast("c"));
    let b_first = log
        .append(&b, Seq(1), &[claim_event(0, "b1"), sample::pending(1)])
        .unwrap();
    log.append(&a, Seq(1), &sample::batch(2, 3)).unwrap();
    let point = ForkPoint {
        cast: b.clone(),
        seq: Seq(1),
        hash: b_first[0].hash,
    };
    log.fork(&c, &point, &[sample::pending(5), claim_event(6, "c1")])
        .unwrap();
    log.append(&a, Seq(4), &[claim_event(7, "a1"), claim_event(8, "a1")])
        .unwrap();
    log.append(&b, Seq(3), &[sample::pending(9), claim_event(10, "b2")])
        .unwrap();

    let by_scanning = |kinds: &[&str], only: Option<&castlog_core::id::CastId>| {
        let mut out = Vec::new();
        for head in log.casts().unwrap() {
            if only.is_some_and(|o| *o != head.cast) {
                continue;
            }
            let records = log.read(&head.cast, Seq::FIRST, None).unwrap();
            out.extend(
                records
                    .into_iter()
                    .filter(|r| kinds.contains(&r.kind.as_str())),
            );
        }
        out
    };
    let scanned = |kinds: &[&str], only: Option<&castlog_core::id::CastId>| {
        let mut out = Vec::new();
        log.scan_kinds(kinds, only, &mut |record| {
            out.push(record);
            ControlFlow::Continue(())
        })
        .map(|()| out)
    };
    let all = scanned(&EVENT_KINDS, None).unwrap();
    let places: Vec<(&str, u64)> = all.iter().map(|r| (r.cast.as_str(), r.seq.get())).collect();
    assert_eq!(places, [("b", 1), ("b", 4), ("a", 4), ("a", 5), ("c", 2)]);
    assert_eq!(all, by_scanning(&EVENT_KINDS, None));
    let other = sample::event(1).kind();
    for kinds in [
        &["post_staged"][..],
        &[other],
        &[other, "post_refused"],
        &[],
    ] {
        assert_eq!(
            scanned(kinds, None).unwrap(),
            by_scanning(kinds, None),
            "{kinds:?}"
        );
        for cast in [&a, &b, &c] {
            assert_eq!(
                scanned(kinds, Some(cast)).unwrap(),
                by_scanning(kinds, Some(cast)),
                "{kinds:?} of {cast}"
            );
        }
    }
    let missing = sample::cast("missing");
    assert!(matches!(
        scanned(&EVENT_KINDS, Some(&missing)),
        Err(LogError::UnknownCast { cast }) if cast == missing
    ));
    let mut visited = 0;
    log.scan_kinds(&EVENT_KINDS, None, &mut |_| {
        visited += 1;
        if visited == 2 {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        }
    })
    .unwrap();
    assert_eq!(visited, 2);
}

/// A first event of kind `kind` (the log reads only its kind to tell the stream's).
fn opening(kind: &'static str) -> Pending {
    Pending {
        at_ms: AT,
        kind,
        v: 1,
        payload: b"{}".to_vec(),
    }
}

/// A stream keeps the kind its first event opens, whoever appends after it, however it was
/// created (appended, begun and held, forked, imported): the kind is data of the head, not
/// read again from the id or the events.
#[rstest]
fn a_stream_keeps_the_kind_it_was_created_with(
    #[values(Backend::Memory, Backend::Sqlite, Backend::SqliteFull)] backend: Backend,
) {
    let log = backend.open();
    let kind_of = |name: &str| log.head(&sample::cast(name)).unwrap().unwrap().kind;
    let cast = sample::cast("c");
    let sealed = log.append(&cast, Seq::FIRST, &sample::batch(0, 2)).unwrap();
    // An id that looks like a ledger's is still what its first event makes it.
    log.append(
        &sample::cast("claims:lookalike"),
        Seq::FIRST,
        &sample::batch(5, 1),
    )
    .unwrap();
    log.append(
        &sample::cast("ledger"),
        Seq::FIRST,
        &[opening("day_claimed")],
    )
    .unwrap();
    let begun = log
        .begin_append_with_blobs(
            &sample::cast("engaged"),
            Seq::FIRST,
            &[],
            &[opening("engagement_started")],
        )
        .unwrap();
    begun.wait().unwrap();
    // Events appended later, of any kind, change nothing.
    log.append(&cast, Seq(3), &[opening("engagement_started")])
        .unwrap();
    let point = ForkPoint {
        cast,
        seq: Seq(2),
        hash: sealed[1].hash,
    };
    log.fork(&sample::cast("fork"), &point, &sample::batch(9, 1))
        .unwrap();
    assert_eq!(kind_of("c"), StreamKind::Cast);
    assert_eq!(kind_of("claims:lookalike"), StreamKind::Cast);
    assert_eq!(kind_of("ledger"), StreamKind::ClaimsLedger);
    assert_eq!(kind_of("engaged"), StreamKind::Engagement);
    assert_eq!(kind_of("fork"), StreamKind::Cast);
    let listed: Vec<(String, StreamKind)> = log
        .casts()
        .unwrap()
        .into_iter()
        .map(|h| (h.cast.to_string(), h.kind))
        .collect();
    assert_eq!(
        listed,
        [
            ("c".to_owned(), StreamKind::Cast),
            ("claims:lookalike".to_owned(), StreamKind::Cast),
            ("ledger".to_owned(), StreamKind::ClaimsLedger),
            ("engaged".to_owned(), StreamKind::Engagement),
            ("fork".to_owned(), StreamKind::Cast),
        ]
    );
    // An import takes the head's kind as given.
    let records = log.read(&sample::cast("ledger"), Seq::FIRST, None).unwrap();
    let mut head = log.head(&sample::cast("ledger")).unwrap().unwrap();
    head.cast = sample::cast("imported");
    let records: Vec<_> = records
        .into_iter()
        .map(|mut r| {
            r.cast = head.cast.clone();
            r
        })
        .collect();
    let other = backend.open();
    other.import(&head, &records).unwrap();
    assert_eq!(
        other.head(&head.cast).unwrap().unwrap().kind,
        StreamKind::ClaimsLedger
    );
}

/// A completion that names the reply its output is (`socket_completed` version 3) reads back
/// through a `Decoder`, from the records before it or from the log alone, and verifies; one
/// that names a seq holding no reply of its visit is undecodable at its own seq.
#[rstest]
fn a_completion_naming_its_reply_reads_back_and_a_wrong_name_is_caught(
    #[values(Backend::Memory, Backend::Sqlite, Backend::Postgres)] backend: Backend,
) {
    use castlog_core::event::{AgentReplied, Event, SocketCompleted};
    use castlog_core::id::{SocketId, Turn, Visit};
    use castlog_events::Decoder;
    use castlog_events::verify::ProblemKind;

    let log = backend.open();
    let text = "a reply long enough to be worth storing once ".repeat(40);
    let reply = Event::from(AgentReplied {
        socket: SocketId::new("Build"),
        visit: Visit(1),
        turn: Turn(1),
        text: text.clone(),
        usage: None,
        tool_calls: Vec::new(),
        cost: None,
    });
    let completed = |output_of: u64| {
        Event::from(SocketCompleted {
            socket: SocketId::new("Build"),
            visit: Visit(1),
            item: None,
            output: text.clone(),
            output_of: Some(Seq(output_of)),
            parsed: None,
            satisfied: None,
            finalized: false,
        })
    };
    let good = sample::cast("named");
    let events = [reply.clone(), completed(1)];
    let pending: Vec<Pending> = events.iter().map(|e| Pending::new(AT, e)).collect();
    let sealed = log.append(&good, Seq::FIRST, &pending).unwrap();
    assert!(sealed[1].payload.len() < 200, "the reply is not repeated");
    let records = log.read(&good, Seq::FIRST, None).unwrap();
    assert_eq!(Decoder::all(&records).unwrap(), events);
    let alone = log.read(&good, Seq(2), None).unwrap();
    assert_eq!(
        Decoder::new().event_in(&*log, &alone[0]).unwrap(),
        events[1]
    );
    let head = log.head(&good).unwrap().unwrap();
    assert!(verify_cast(&*log, &head).unwrap().problems.is_empty());

    let bad = sample::cast("misnamed");
    let events = [reply, sample::event(1), completed(2)];
    let pending: Vec<Pending> = events.iter().map(|e| Pending::new(AT, e)).collect();
    log.append(&bad, Seq::FIRST, &pending).unwrap();
    let head = log.head(&bad).unwrap().unwrap();
    let problems = verify_cast(&*log, &head).unwrap().problems;
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert_eq!(
        (problems[0].seq, problems[0].kind),
        (Seq(3), ProblemKind::Undecodable)
    );
    assert!(
        problems[0]
            .message
            .contains("names seq 2, a reply of Socket-2 visit 2"),
        "{}",
        problems[0].message
    );
}
