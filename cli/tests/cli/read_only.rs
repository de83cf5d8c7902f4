//! Commands that read never write: not into a missing or empty file, not into something that
//! is not a file; and a database castlog cannot write still reads.

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use rstest::rstest;

use crate::common::{Run, Sandbox, fixture, make_read_only};

/// Commands that need a database there already (most only read; the last ones add to a
/// cast).
const NEED_A_LOG: &[&[&str]] = &[
    &["casts"],
    &["verify"],
    &["verify", "c", "--json"],
    &["show", "c"],
    &["state", "c"],
    &["replay", "c"],
    &["claims"],
    &["audit", "c"],
    &["prompt", "c", "Socket-2"],
    &["diff", "a", "b"],
    &["abort", "c"],
];

fn refused(run: &Run, what: &str) {
    assert_eq!(run.code, 1, "{what}: {}{}", run.stdout, run.stderr);
    assert!(
        run.stderr.contains("no castlog database at"),
        "{what}: {}",
        run.stderr
    );
}

/// The files in the sandbox directory beside `db` whose names start with its name.
fn beside(db: &Path) -> Vec<String> {
    let name = db.file_name().unwrap().to_str().unwrap().to_owned();
    let mut found: Vec<String> = std::fs::read_dir(db.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|f| f.starts_with(&name))
        .collect();
    found.sort();
    found
}

// Regression: `casts` and `verify` on a 0-byte file wrote castlog's schema into it and
// reported a valid empty log (exit 0).
#[test]
fn reading_commands_on_an_empty_or_missing_file_refuse_and_write_nothing() {
    let sandbox = Sandbox::new();
    let empty = sandbox.path("empty.db");
    let missing = sandbox.path("missing.db");
    std::fs::write(&empty, b"").unwrap();
    for args in NEED_A_LOG {
        refused(
            &sandbox.run_on(&empty, args),
            &format!("{args:?} on an empty file"),
        );
        assert_eq!(std::fs::metadata(&empty).unwrap().len(), 0, "{args:?}");
        assert_eq!(beside(&empty), vec!["empty.db".to_owned()], "{args:?}");
        refused(
            &sandbox.run_on(&missing, args),
            &format!("{args:?} on no file"),
        );
        assert!(
            beside(&missing).is_empty(),
            "{args:?} created {:?}",
            beside(&missing)
        );
    }
    let run = sandbox.run_on(&empty, &["casts"]);
    assert!(run.stderr.contains("the file is empty"), "{}", run.stderr);
}

#[test]
fn reading_a_sqlite_file_without_castlog_schema_leaves_it_as_it_was() {
    let sandbox = Sandbox::new();
    let db = sandbox.path("blank.db");
    rusqlite::Connection::open(&db)
        .unwrap()
        .execute_batch("PRAGMA page_size = 4096; VACUUM;")
        .unwrap();
    let before = std::fs::read(&db).unwrap();
    assert!(!before.is_empty());
    for args in NEED_A_LOG {
        refused(&sandbox.run_on(&db, args), &format!("{args:?}"));
    }
    assert_eq!(std::fs::read(&db).unwrap(), before);
}

/// Runs castlog on `db` with `args`, failing the test (not hanging it) if it never ends.
fn run_bounded(sandbox: &Sandbox, db: &Path, args: &[&str]) -> Run {
    let mut child = sandbox
        .command_on(db)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            child.kill().unwrap();
            panic!("castlog {args:?} on {} never returned", db.display());
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let out = child.wait_with_output().unwrap();
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

// Regression: a FIFO given as --db blocked castlog forever (opening it waits for a writer).
#[rstest]
#[case::fifo("a FIFO")]
#[case::socket("a socket")]
#[case::device("a device")]
#[case::directory("a directory")]
fn a_db_that_is_not_a_file_is_refused_at_once(#[case] kind: &str) {
    let sandbox = Sandbox::new();
    let db = sandbox.path("db");
    let _listener;
    let db = match kind {
        "a FIFO" => {
            let made = std::process::Command::new("mkfifo")
                .arg(&db)
                .status()
                .unwrap();
            assert!(made.success());
            db
        }
        "a socket" => {
            _listener = std::os::unix::net::UnixListener::bind(&db).unwrap();
            db
        }
        "a device" => "/dev/null".into(),
        _ => sandbox.dir.path().to_path_buf(),
    };
    let script = format!("scripted:{}", fixture("scripts/build-loop.jsonl"));
    let config = fixture("loadouts/build-loop.json");
    let commands: [&[&str]; 4] = [
        &["casts"],
        &["verify", "--json"],
        &["run", &config, "--task", "greet", "--agent", &script],
        &["bench", "append", "--events", "1"],
    ];
    for args in commands {
        let run = run_bounded(&sandbox, &db, args);
        assert_eq!(run.code, 1, "{args:?}: {}", run.stderr);
        assert!(
            run.stderr
                .contains(&format!("it is {kind}, not a database file")),
            "{args:?}: {}",
            run.stderr
        );
    }
}

// Regression: a write to a read-only database was an internal error (exit 2, "storage error
// while creating a cast: attempt to write a readonly database").
#[test]
fn a_read_only_database_reads_and_refuses_writes_with_a_clear_user_error() {
    let sandbox = Sandbox::new();
    let script = format!("scripted:{}", fixture("scripts/build-loop.jsonl"));
    let run = sandbox.finish(&mut sandbox.build_loop("c", &script));
    assert_eq!(run.code, 0, "{}", run.stderr);
    make_read_only(&sandbox);
    for args in [
        vec!["casts", "--json"],
        vec!["verify", "--json"],
        vec!["show", "c", "--json"],
        vec!["state", "c", "--json"],
        vec!["replay", "c", "--json"],
    ] {
        let run = sandbox.run(&args);
        assert_eq!(run.code, 0, "{args:?}: {}", run.stderr);
        run.json();
    }
    let config = fixture("loadouts/build-loop.json");
    let db = sandbox.db();
    for args in [
        vec!["run", &config, "--task", "greet", "--agent", &script],
        vec![
            "bench",
            "append",
            "--events",
            "1",
            "--db",
            db.to_str().unwrap(),
        ],
        vec!["recast", "c", "--at", "7", "--agent", &script],
    ] {
        let run = sandbox.run(&args);
        assert_eq!(run.code, 1, "{args:?}: {}", run.stderr);
        assert!(
            run.stderr.contains("the database is read-only"),
            "{args:?}: {}",
            run.stderr
        );
    }
}

/// A read-only database of schema version 6 (before the index of claim events, which it
/// cannot be given) still reads, its claims included.
#[test]
fn a_read_only_version_6_database_lists_its_claims() {
    let sandbox = Sandbox::new();
    let run = sandbox.run(&[
        "run",
        &fixture("loadouts/post.json"),
        "--task",
        "release 1.2",
        "--cast",
        "dry",
        "--agent",
        &format!("scripted:{}", fixture("scripts/post.jsonl")),
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let conn = rusqlite::Connection::open(sandbox.db()).unwrap();
    conn.execute_batch("DROP INDEX events_claims; PRAGMA user_version = 6;")
        .unwrap();
    drop(conn);
    make_read_only(&sandbox);
    let claims = sandbox.run(&["claims", "--json"]);
    assert_eq!(claims.code, 0, "{}", claims.stderr);
    let listed = claims.json();
    assert_eq!(listed["claims"].as_array().unwrap().len(), 1, "{listed}");
    assert_eq!(listed["claims"][0]["cast"], "dry");
    assert_eq!(sandbox.run(&["verify", "--json"]).code, 0);
}
