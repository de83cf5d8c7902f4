//! The `EventLog` contract for imports: a verified export stored into another log (of either
//! backend) reproduces the same records and heads; an import that would overwrite, misnumber or
//! orphan a cast is refused.

use castlog_core::id::Seq;
use castlog_events::LogError;
use castlog_events::codec;
use castlog_events::verify::verify_cast;
use rstest::rstest;

use super::backend::Backend;
use super::sample;

#[rstest]
fn an_import_reproduces_records_and_heads(
    #[values(Backend::Memory, Backend::Sqlite, Backend::Postgres)] from: Backend,
    #[values(Backend::Memory, Backend::Sqlite, Backend::Postgres)] to: Backend,
) {
    let source = from.open();
    let written = sample::populate(&*source);
    let target = to.open();
    for cast in [&written.origin, &written.recast] {
        let export = codec::collect(&*source, cast).unwrap();
        codec::import(&*target, &export).unwrap();
        assert_eq!(
            target.read(cast, Seq::FIRST, None).unwrap(),
            source.read(cast, Seq::FIRST, None).unwrap()
        );
        assert_eq!(target.head(cast).unwrap(), source.head(cast).unwrap());
    }
    assert_eq!(target.casts().unwrap(), source.casts().unwrap());
    for blob in &written.blobs {
        assert_eq!(
            target.get_blob(blob).unwrap(),
            source.get_blob(blob).unwrap()
        );
    }
    for head in target.casts().unwrap() {
        assert_eq!(verify_cast(&*target, &head).unwrap().problems, vec![]);
    }
}

#[rstest]
fn an_import_of_an_existing_cast_is_refused(
    #[values(Backend::Memory, Backend::Sqlite, Backend::Postgres)] backend: Backend,
) {
    let log = backend.open();
    let written = sample::populate(&*log);
    let export = codec::collect(&*log, &written.origin).unwrap();
    let err = codec::import(&*log, &export).unwrap_err();
    assert!(
        matches!(&err, codec::CodecError::Log(LogError::CastExists { cast }) if *cast == written.origin),
        "{err:?}"
    );
    let err = log.import(&export.head, &export.events).unwrap_err();
    assert!(
        matches!(&err, LogError::CastExists { cast } if *cast == written.origin),
        "{err:?}"
    );
    assert_eq!(
        log.read(&written.origin, Seq::FIRST, None).unwrap(),
        export.events
    );
    assert_eq!(log.casts().unwrap().len(), 2);
}

#[rstest]
fn an_import_checks_numbering_and_the_fork_parent(
    #[values(Backend::Memory, Backend::Sqlite, Backend::Postgres)] backend: Backend,
) {
    let source = Backend::Memory.open();
    let written = sample::populate(&*source);
    let log = backend.open();
    // A fork whose parent is not in the log.
    let recast = codec::collect(&*source, &written.recast).unwrap();
    let err = log.import(&recast.head, &recast.events).unwrap_err();
    assert!(
        matches!(&err, LogError::BadForkPoint { parent, seq: Seq(4), .. } if *parent == written.origin),
        "{err:?}"
    );
    // Records that do not start at seq 1.
    let origin = codec::collect(&*source, &written.origin).unwrap();
    let err = log.import(&origin.head, &origin.events[1..]).unwrap_err();
    assert!(
        matches!(&err, LogError::BrokenImport { cast, seq: Seq(2), .. } if *cast == written.origin),
        "{err:?}"
    );
    assert!(log.casts().unwrap().is_empty());
}

/// Regression: a refused import used to store the export's blobs before the log refused the
/// cast. Nothing may be left behind.
#[rstest]
fn a_refused_import_stores_no_blob(
    #[values(Backend::Memory, Backend::Sqlite, Backend::Postgres)] backend: Backend,
) {
    let source = Backend::Memory.open();
    let written = sample::populate(&*source);
    let mut recast = codec::collect(&*source, &written.recast).unwrap();
    let orphan = b"a blob only the refused export carries".to_vec();
    let orphan_hash = castlog_events::chain::blob_hash(&orphan);
    recast.blobs.push((orphan_hash, orphan));
    let log = backend.open();
    let err = codec::import(&*log, &recast).unwrap_err();
    assert!(
        matches!(&err, codec::CodecError::Log(LogError::BadForkPoint { .. })),
        "{err:?}"
    );
    assert_eq!(log.get_blob(&orphan_hash).unwrap(), None);
    assert!(log.casts().unwrap().is_empty());
}
