use std::path::{Path, PathBuf};

use castlog_core::env::FixedClock;
use castlog_core::event::CastStarted;
use castlog_core::id::{CastId, Seq};
use castlog_core::loadout::load_config;
use castlog_core::machine::Status;
use castlog_core::machine::decide::started_event;
use castlog_events::chain::loadout_hash;
use castlog_events::{EventLog, InMemoryLog};
use castlog_replay::agent::ScriptedAgent;
use castlog_replay::driver::{Driver, fold};
use castlog_replay::sender::Sender;
use rstest::rstest;

pub fn fixture(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fixtures")
        .join(path)
}

/// The first event of cast `cast` of `config`'s loadout `loadout`, with the tests' task.
pub fn started(config: PathBuf, loadout: Option<&str>, cast: &str) -> CastStarted {
    let text = std::fs::read_to_string(config).unwrap();
    let loadout = load_config(&text).unwrap().resolve(loadout).unwrap();
    started_event(
        CastId::new(cast),
        &loadout,
        loadout_hash(&loadout.to_json()),
        "write a small tool".into(),
        "recommended".into(),
        None,
    )
}

/// Runs `config`'s loadout with a script on `log` under a fixed, stepping clock.
pub fn run(
    log: &InMemoryLog,
    config: &str,
    loadout: Option<&str>,
    script: &str,
    cast: &str,
) -> Status {
    run_with(log, config, loadout, script, cast, None)
}

/// [`run`] on any log, posting through `sender` when there is one (`--post`).
pub fn run_with(
    log: &(impl EventLog + ?Sized),
    config: &str,
    loadout: Option<&str>,
    script: &str,
    cast: &str,
    sender: Option<Box<dyn Sender>>,
) -> Status {
    let started = started(fixture(config), loadout, cast);
    let clock = FixedClock::stepping(1_800_000_000_000, 7);
    let dir = tempfile::tempdir().unwrap();
    let mut driver = Driver::start(log, &clock, started, dir.path()).unwrap();
    if let Some(sender) = sender {
        driver.post_with(sender);
    }
    let mut agent = ScriptedAgent::open(&fixture(script), 0).unwrap();
    driver.drive(&mut agent).unwrap().status
}

#[rstest]
#[case::build_loop("loadouts/build-loop.json", None, "scripts/build-loop.jsonl")]
#[case::consult("loadouts/consult.json", None, "scripts/consult.jsonl")]
#[case::full_auto(
    "pi-materia-default.json",
    Some("Full-Auto"),
    "scripts/full-auto.jsonl"
)]
#[case::planning_consult(
    "pi-materia-default.json",
    Some("Planning-Consult"),
    "scripts/planning-consult.jsonl"
)]
#[case::hojo_consult(
    "pi-materia-default.json",
    Some("Hojo-Consult"),
    "scripts/hojo-consult.jsonl"
)]
fn a_live_cast_equals_the_fold_of_its_log(
    #[case] config: &str,
    #[case] loadout: Option<&str>,
    #[case] script: &str,
) {
    let log = InMemoryLog::new();
    assert_eq!(run(&log, config, loadout, script, "c"), Status::Completed);
    let cast = CastId::new("c");
    let (folded, _) = fold(&log, &cast).unwrap();
    assert_eq!(folded.status, Status::Completed);
    assert_eq!(folded.head, log.head(&cast).unwrap().unwrap().seq);
    // Replaying the log through the machine reproduces every event, byte for byte, and the
    // same chain hashes (re-decide seals what it produces and compares hashes).
    assert_eq!(
        castlog_replay::redecide::redecide(&log, &cast).unwrap(),
        None
    );
}

#[test]
fn the_same_script_gives_the_same_chain() {
    let a = InMemoryLog::new();
    let b = InMemoryLog::new();
    run(
        &a,
        "loadouts/build-loop.json",
        None,
        "scripts/build-loop.jsonl",
        "same",
    );
    run(
        &b,
        "loadouts/build-loop.json",
        None,
        "scripts/build-loop.jsonl",
        "same",
    );
    let cast = CastId::new("same");
    assert_eq!(
        a.read(&cast, Seq::FIRST, None).unwrap(),
        b.read(&cast, Seq::FIRST, None).unwrap()
    );
    assert_eq!(a.head(&cast).unwrap(), b.head(&cast).unwrap());
}

/// A kept snapshot is a cache: `fold_until` trusts a sealed one (that is what makes time
/// travel fast), so `check_snapshots` (run by `verify`) compares every one with a fold from the
/// first event and names one that differs, and `fold_until_fresh` never reads them.
#[test]
fn a_snapshot_that_is_not_the_fold_is_named() {
    use castlog_replay::driver::{check_snapshots, fold_until, fold_until_fresh, sealed_snapshot};
    let dir = tempfile::tempdir().unwrap();
    let log = castlog_events::SqliteLog::open(dir.path().join("x.db")).unwrap();
    let status = run_with(
        &log,
        "loadouts/build-loop.json",
        None,
        "scripts/build-loop.jsonl",
        "snap",
        None,
    );
    assert_eq!(status, Status::Completed);
    let cast = CastId::new("snap");
    let at = Seq(10);
    let hash = log.read(&cast, at, Some(at)).unwrap()[0].hash;
    let (good, used) = fold_until_fresh(&log, &cast, at).unwrap();
    log.put_snapshot(&cast, sealed_snapshot(&good, used, at, hash))
        .unwrap();
    assert!(check_snapshots(&log, &cast).unwrap().is_empty());

    let mut wrong = good.clone();
    wrong.request = "something else".into();
    log.put_snapshot(&cast, sealed_snapshot(&wrong, used, at, hash))
        .unwrap();
    let problems = check_snapshots(&log, &cast).unwrap();
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert_eq!(problems[0].0, at);
    assert!(
        problems[0].1.contains("is not the state the log folds to"),
        "{problems:?}"
    );
    assert_eq!(
        fold_until(&log, &cast, Seq(12)).unwrap().0.request,
        "something else"
    );
    assert_eq!(
        fold_until_fresh(&log, &cast, Seq(12)).unwrap().0.request,
        good.request
    );

    // Moved to another seq, the seal breaks: ignored on use, named by the check.
    let mut moved = sealed_snapshot(&good, used, at, hash);
    moved.seq = Seq(11);
    moved.hash = log.read(&cast, Seq(11), Some(Seq(11))).unwrap()[0].hash;
    log.put_snapshot(&cast, moved).unwrap();
    let problems = check_snapshots(&log, &cast).unwrap();
    assert!(
        problems
            .iter()
            .any(|(seq, m)| *seq == Seq(11) && m.contains("does not match its seal")),
        "{problems:?}"
    );
    assert_eq!(fold_until(&log, &cast, Seq(11)).unwrap().0.head, Seq(11));
}

/// A snapshot written before the one cache seal (format 3, sealed without name and version)
/// is of another format now: a fold never starts from it (even one that would be taken as
/// the state), and `verify` does not call it damage.
#[test]
fn a_snapshot_sealed_by_the_old_recipe_is_folded_past() {
    use castlog_events::chain::blob_hash_of_parts;
    use castlog_replay::driver::{check_snapshots, fold_until, fold_until_fresh};
    let dir = tempfile::tempdir().unwrap();
    let log = castlog_events::SqliteLog::open(dir.path().join("x.db")).unwrap();
    let status = run_with(
        &log,
        "loadouts/build-loop.json",
        None,
        "scripts/build-loop.jsonl",
        "old",
        None,
    );
    assert_eq!(status, Status::Completed);
    let cast = CastId::new("old");
    let at = Seq(10);
    let hash = log.read(&cast, at, Some(at)).unwrap()[0].hash;
    let (good, used) = fold_until_fresh(&log, &cast, at).unwrap();
    let mut other = good.clone();
    other.request = "from the old snapshot".into();
    let json = other.snapshot(used as u64);
    // The recipe of format 3: tag, cast, 0, seq, chain hash, state bytes.
    let old_seal = blob_hash_of_parts(&[
        b"castlog state snapshot\0",
        cast.as_str().as_bytes(),
        &[0],
        &at.get().to_be_bytes(),
        &hash.0,
        &json,
    ]);
    let mut bytes = old_seal.0.to_vec();
    bytes.extend_from_slice(&json);
    log.put_snapshot(
        &cast,
        castlog_events::Snapshot {
            version: 3,
            seq: at,
            hash,
            bytes,
        },
    )
    .unwrap();
    assert_eq!(
        fold_until(&log, &cast, Seq(12)).unwrap().0.request,
        good.request
    );
    assert!(check_snapshots(&log, &cast).unwrap().is_empty());
}
