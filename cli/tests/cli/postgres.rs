//! `--db postgres://...`: the commands on a PostgreSQL log (a fresh schema per test on the
//! machine's server, `CASTLOG_TEST_POSTGRES` or `postgres://postgres@127.0.0.1:5432/test`,
//! dropped afterwards), and `copy` between SQLite and PostgreSQL with identical heads. A
//! server that does not answer fails these tests, naming the URL.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::common::{Sandbox, fixture, scripted};

/// A schema of the test server that exists for one test.
pub(crate) struct Schema {
    name: String,
    server: String,
}

impl Schema {
    pub(crate) fn new() -> Self {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let server = std::env::var("CASTLOG_TEST_POSTGRES")
            .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into());
        let name = format!(
            "castlog_cli_{}_{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        // Created here, not by castlog, so a test of a command that needs a log finds an
        // empty schema rather than none.
        client(&server)
            .batch_execute(&format!("CREATE SCHEMA \"{name}\""))
            .unwrap();
        Self { name, server }
    }

    pub(crate) fn url(&self) -> String {
        format!("{}?schema={}", self.server, self.name)
    }

    fn sql(&self, sql: &str) {
        let mut client = client(&self.server);
        client
            .batch_execute(&format!("SET search_path TO \"{}\"; {sql}", self.name))
            .unwrap();
    }
}

impl Drop for Schema {
    fn drop(&mut self) {
        if let Ok(mut c) = postgres::Client::connect(&self.server, postgres::NoTls) {
            let _ = c.batch_execute(&format!("DROP SCHEMA \"{}\" CASCADE", self.name));
        }
    }
}

fn client(server: &str) -> postgres::Client {
    postgres::Client::connect(server, postgres::NoTls).unwrap_or_else(|e| {
        panic!(
            "the PostgreSQL tests need a server at {server} (set CASTLOG_TEST_POSTGRES to use another; .ci/run starts one): {e}"
        )
    })
}

/// Runs the build-loop fixture to completion as cast `b` on `db`; its `run --json` output.
fn completed_build_loop_on(sandbox: &Sandbox, db: &str) -> serde_json::Value {
    let build = fixture("loadouts/build-loop.json");
    let script = scripted("build-loop.jsonl");
    let run = sandbox.run_on(
        Path::new(db),
        &[
            "run", &build, "--task", "greet", "--cast", "b", "--agent", &script, "--json",
        ],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.json()["status"], "completed", "{}", run.stdout);
    run.json()
}

/// `casts --json` of `db`: every cast's id, seq and head hash.
fn heads(sandbox: &Sandbox, db: &Path) -> serde_json::Value {
    let run = sandbox.run_on(db, &["casts", "--json"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    run.json()
}

#[test]
fn a_cast_runs_pauses_finishes_exports_and_verifies_on_postgres() {
    let (sandbox, schema) = (Sandbox::new(), Schema::new());
    let url = schema.url();
    let db = Path::new(&url);
    let script = scripted("consult-by-hand.jsonl");
    let config = fixture("loadouts/consult.json");
    let run = sandbox.run_on(
        db,
        &[
            "run",
            &config,
            "--task",
            "a key=value tool",
            "--cast",
            "plan",
            "--agent",
            &script,
            "--json",
        ],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(
        run.json()["status"],
        "awaiting_refinement",
        "{}",
        run.stdout
    );
    let refined = sandbox.run_on(
        db,
        &["refine", "plan", "keep it to two items", "--agent", &script],
    );
    assert_eq!(refined.code, 0, "{}", refined.stderr);
    let done = sandbox.run_on(db, &["continue", "plan", "--agent", &script, "--json"]);
    assert_eq!(done.json()["status"], "completed", "{}", done.stdout);
    let head = done.json()["head"].clone();

    let state = sandbox.run_on(db, &["state", "plan", "--json"]);
    assert_eq!(state.json()["status"], "completed", "{}", state.stdout);
    let show = sandbox.run_on(db, &["show", "plan"]);
    assert!(show.stdout.contains("cast_completed"), "{}", show.stdout);
    let replay = sandbox.run_on(db, &["replay", "plan", "--json"]);
    assert_eq!(replay.code, 0, "{}", replay.stderr);
    let casts = heads(&sandbox, db);
    assert_eq!(casts["casts"][0]["cast"], "plan", "{casts}");

    // The same cast, exported from PostgreSQL and imported into SQLite, keeps its head.
    let file = sandbox.path("plan.jsonl");
    let exported = sandbox.run_on(db, &["export", "plan", "-o", file.to_str().unwrap()]);
    assert_eq!(exported.code, 0, "{}", exported.stderr);
    let imported = sandbox.run(&["import", file.to_str().unwrap(), "--json"]);
    assert_eq!(imported.json()["hash"], head, "{}", imported.stdout);

    let verify = sandbox.run_on(db, &["verify", "--all", "--json"]);
    assert_eq!(verify.code, 0, "{}", verify.stdout);
    assert_eq!(verify.json()["ok"], true);
}

#[test]
fn castlog_db_in_the_environment_selects_postgres() {
    let (sandbox, schema) = (Sandbox::new(), Schema::new());
    let run = completed_build_loop_on(&sandbox, &schema.url());
    let listed = std::process::Command::new(crate::common::castlog_bin())
        .current_dir(sandbox.path("."))
        .env("CASTLOG_DB", schema.url())
        .args(["casts", "--json"])
        .output()
        .unwrap();
    let listed: serde_json::Value = serde_json::from_slice(&listed.stdout).unwrap();
    assert_eq!(listed["casts"][0]["hash"], run["head"], "{listed}");
}

#[test]
fn a_damaged_row_is_named_by_verify_at_its_cast_and_seq() {
    let (sandbox, schema) = (Sandbox::new(), Schema::new());
    let url = schema.url();
    completed_build_loop_on(&sandbox, &url);
    schema.sql(
        "DROP TRIGGER events_no_update ON events;
         UPDATE events SET payload = set_byte(payload, 1, get_byte(payload, 1) # 1)
         WHERE seq = 4;",
    );
    let verify = sandbox.run_on(Path::new(&url), &["verify", "--all", "--json"]);
    assert_eq!(verify.code, 3, "{}", verify.stdout);
    let problem = &verify.json()["problems"][0];
    assert_eq!(
        (problem["cast"].as_str(), problem["seq"].as_u64()),
        (Some("b"), Some(4)),
        "{problem}"
    );
}

#[test]
fn a_command_that_needs_a_log_finds_none_in_an_empty_schema() {
    let (sandbox, schema) = (Sandbox::new(), Schema::new());
    let run = sandbox.run_on(Path::new(&schema.url()), &["casts"]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(
        run.stderr.contains("holds no castlog tables"),
        "{}",
        run.stderr
    );
}

#[test]
fn an_unreachable_server_is_a_clear_error() {
    let sandbox = Sandbox::new();
    let run = sandbox.run_on(
        Path::new("postgres://castlog:secret@127.0.0.1:1/none"),
        &["casts"],
    );
    assert_ne!(run.code, 0);
    assert!(
        run.stderr
            .contains("cannot open castlog database postgres://castlog:***@127.0.0.1:1/none"),
        "{}",
        run.stderr
    );
}

/// Every shipped export (fixtures/casts/ and fixtures/exports/, parents before forks).
fn fixture_exports() -> Vec<String> {
    let mut files: Vec<String> = Vec::new();
    for dir in ["casts", "exports"] {
        let mut names: Vec<String> = std::fs::read_dir(fixture(dir))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
            .map(|p| p.to_str().unwrap().to_owned())
            .collect();
        names.sort();
        files.extend(names);
    }
    // A fork is imported after its parent.
    files.sort_by_key(|f| f.contains("-fork"));
    files
}

#[test]
fn every_fixture_cast_copied_sqlite_to_postgres_to_sqlite_keeps_its_head() {
    let (sandbox, schema) = (Sandbox::new(), Schema::new());
    let url = schema.url();
    let (first, last) = (sandbox.path("first.db"), sandbox.path("last.db"));
    let files = fixture_exports();
    assert!(files.len() >= 6, "{files:?}");
    for file in &files {
        let run = sandbox.run_on(&first, &["import", file]);
        assert_eq!(run.code, 0, "{file}: {}", run.stderr);
    }
    let to_pg = sandbox.run_on(
        &first,
        &[
            "copy",
            "--from",
            first.to_str().unwrap(),
            "--to",
            &url,
            "--all",
            "--json",
        ],
    );
    assert_eq!(to_pg.code, 0, "{}", to_pg.stderr);
    let back = sandbox.run_on(
        &first,
        &[
            "copy",
            "--from",
            &url,
            "--to",
            last.to_str().unwrap(),
            "--all",
            "--json",
        ],
    );
    assert_eq!(back.code, 0, "{}", back.stderr);
    let copied = back.json()["casts"].as_array().unwrap().len();
    assert_eq!(copied, files.len());

    let source = heads(&sandbox, &first);
    assert_eq!(heads(&sandbox, Path::new(&url)), source);
    assert_eq!(heads(&sandbox, &last), source);
    for db in [
        first.to_str().unwrap(),
        url.as_str(),
        last.to_str().unwrap(),
    ] {
        let verify = sandbox.run_on(Path::new(db), &["verify", "--all", "--json"]);
        assert_eq!(verify.code, 0, "{db}: {}", verify.stdout);
    }

    // Run again: every cast is there with the same head, and nothing is copied twice.
    let again = sandbox.run_on(
        &first,
        &[
            "copy",
            "--from",
            first.to_str().unwrap(),
            "--to",
            &url,
            "--json",
        ],
    );
    let again = again.json();
    let outcomes: Vec<&str> = again["casts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["outcome"].as_str().unwrap())
        .collect();
    assert_eq!(outcomes.len(), files.len());
    assert!(outcomes.iter().all(|o| *o == "present"), "{outcomes:?}");
}

#[test]
fn copying_one_cast_brings_its_fork_parent_first() {
    let (sandbox, schema) = (Sandbox::new(), Schema::new());
    let url = schema.url();
    let first = sandbox.path("first.db");
    for file in fixture_exports() {
        sandbox.run_on(&first, &["import", &file]);
    }
    let run = sandbox.run_on(
        &first,
        &[
            "copy",
            "--from",
            first.to_str().unwrap(),
            "--to",
            &url,
            "fixture-stream-fork",
            "--json",
        ],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    let json = run.json();
    let casts: Vec<&str> = json["casts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["cast"].as_str().unwrap())
        .collect();
    assert_eq!(casts, ["fixture-stream", "fixture-stream-fork"]);
}

#[test]
fn a_cast_the_target_holds_with_another_head_is_refused() {
    let (sandbox, schema) = (Sandbox::new(), Schema::new());
    let url = schema.url();
    sandbox.completed_build_loop("b");
    completed_build_loop_on(&sandbox, &url);
    let run = sandbox.run(&[
        "copy",
        "--from",
        sandbox.db().to_str().unwrap(),
        "--to",
        &url,
        "b",
    ]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(
        run.stderr
            .contains("in the target already with another head"),
        "{}",
        run.stderr
    );
}

#[test]
fn bench_synth_runs_on_postgres_and_measures_its_tables() {
    let (sandbox, schema) = (Sandbox::new(), Schema::new());
    let run = sandbox.run_on(
        Path::new(&schema.url()),
        &["bench", "synth", "--items", "2", "--rework", "2", "--json"],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    let figures = run.json();
    // 1 plan step, then per item 2 builds and 2 evals.
    assert_eq!(figures["steps"], 9, "{figures}");
    assert_eq!(
        figures["fork_steps"].as_u64().map(|n| n > 0),
        Some(true),
        "{figures}"
    );
    assert!(figures["db_bytes"].as_u64().unwrap() > 0, "{figures}");
    assert!(figures["commit_floor_ms"].is_null(), "{figures}");
    // The raw-insert ceiling through the same client, in a scratch schema dropped afterwards.
    for ceiling in ["ceiling_batched", "ceiling_per_step"] {
        assert_eq!(figures[ceiling]["steps"], 9, "{figures}");
        assert!(
            figures[ceiling]["steps_per_s"].as_f64().unwrap() > 0.0,
            "{figures}"
        );
    }
    assert_eq!(figures["ceiling_per_step"]["commits"], 9, "{figures}");
    assert_eq!(figures["ceiling_batched"]["commits"], 1, "{figures}");
    // The baseline writes the run's own rows: its events and the blobs they name, step by
    // step, and the log wrote each step in a transaction of its own (one more creates the cast).
    let rows = figures["ceiling_per_step"]["rows_per_step"]
        .as_f64()
        .unwrap();
    let events = figures["events"].as_f64().unwrap();
    assert!(rows * 9.0 > events, "{figures}");
    assert!(
        figures["ceiling_per_step"]["bytes_per_step"]
            .as_u64()
            .unwrap()
            > 1000,
        "{figures}"
    );
    assert_eq!(figures["commits"], 10, "{figures}");
    // The per-table breakdown reads SQLite's tables; PostgreSQL's bytes are its own.
    assert!(figures["stored_bytes_per_step"].is_null(), "{figures}");
    assert!(
        figures["of_ceiling_per_step"].as_f64().unwrap() > 0.0,
        "{figures}"
    );
    assert!(
        figures["of_ceiling_batched"].as_f64().unwrap() > 0.0,
        "{figures}"
    );
    let verify = sandbox.run_on(Path::new(&schema.url()), &["verify", "--all"]);
    assert_eq!(verify.code, 0, "{}", verify.stdout);
}
