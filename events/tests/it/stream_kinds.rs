//! Stream kinds in files written before they were kept: a schema v7 database (built by that
//! castlog from the fixtures, `fixtures/casts/v7/`) is upgraded to v8 with every stream's
//! kind filled from what it was, and reads, heads and chains stay as they were; read-only,
//! the same file gives the same kinds without its upgrade.

use std::path::{Path, PathBuf};

use castlog_events::sqlite::SCHEMA_VERSION;
use castlog_events::verify::verify_cast;
use castlog_events::{EventLog, SqliteLog, StreamKind};
use tempfile::TempDir;

use super::backend::{count, scratch};

/// The v7 fixture database, copied to a scratch directory.
fn v7_copy() -> (TempDir, PathBuf) {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/casts/v7/castlog.db");
    let (dir, path) = scratch();
    std::fs::copy(fixture, &path).unwrap();
    (dir, path)
}

/// What `castlog casts --all --json` printed on the fixture with the build that wrote it.
fn listed_before() -> Vec<(String, u64, String)> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/casts/v7/casts.json");
    let listed: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    listed["casts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["cast"].as_str().unwrap().to_owned(),
                c["head"].as_u64().unwrap(),
                c["hash"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

/// Each stream's kind, as the fixture's streams were made: two casts and a recast of one, a
/// destination's claims ledger, an engage run.
const KINDS: &[(&str, StreamKind)] = &[
    ("built", StreamKind::Cast),
    ("sent", StreamKind::Cast),
    ("claims:staging", StreamKind::ClaimsLedger),
    ("engaged", StreamKind::Engagement),
    ("rebuilt", StreamKind::Cast),
];

fn kinds(log: &SqliteLog) -> Vec<(String, StreamKind)> {
    log.casts()
        .unwrap()
        .into_iter()
        .map(|h| (h.cast.to_string(), h.kind))
        .collect()
}

fn expected() -> Vec<(String, StreamKind)> {
    KINDS.iter().map(|(c, k)| ((*c).to_owned(), *k)).collect()
}

/// Every stream's head is the one the old build listed, and its chain verifies.
fn assert_unchanged(log: &SqliteLog) {
    let heads: Vec<(String, u64, String)> = log
        .casts()
        .unwrap()
        .into_iter()
        .map(|h| (h.cast.to_string(), h.seq.get(), h.hash.to_hex()))
        .collect();
    assert_eq!(heads, listed_before());
    // An engagement's events are its own context's vocabulary, which this crate does not
    // know; `castlog verify` checks them (cli tests, `engage_verify`).
    for head in log.casts().unwrap() {
        if head.kind == StreamKind::Engagement {
            continue;
        }
        let verified = verify_cast(log, &head).unwrap();
        assert_eq!(verified.problems, vec![], "{}", head.cast);
    }
}

#[test]
fn a_version_7_file_is_upgraded_with_the_kind_of_every_stream() {
    let (_dir, path) = v7_copy();
    assert_eq!(count(&path, "PRAGMA user_version"), 7);
    let columns = "SELECT count(*) FROM pragma_table_info('casts') WHERE name = 'kind'";
    assert_eq!(count(&path, columns), 0);
    let log = SqliteLog::open_existing(&path).unwrap();
    assert_eq!(count(&path, "PRAGMA user_version"), SCHEMA_VERSION);
    assert_eq!(count(&path, columns), 1);
    assert_eq!(kinds(&log), expected());
    assert_unchanged(&log);
}

/// A file castlog cannot write keeps schema v7; its kinds are computed the way the upgrade
/// fills them (so the two rules cannot drift apart).
#[test]
fn a_read_only_version_7_file_reads_the_same_kinds() {
    let (_dir, path) = v7_copy();
    // A write version above 2 in the header makes SQLite open the file read-only, for every
    // user, root included.
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[18] = 3;
    std::fs::write(&path, bytes).unwrap();
    let log = SqliteLog::open_existing(&path).unwrap();
    assert_eq!(kinds(&log), expected());
    assert_unchanged(&log);
    drop(log);
    assert_eq!(count(&path, "PRAGMA user_version"), 7);
}
