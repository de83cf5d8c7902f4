//! `anchor`, `verify --anchor` and `--anchor`/`CASTLOG_ANCHOR` on the commands that write: a
//! cast cut short (its tail deleted and its head row fixed up, or a database restored from an
//! older copy) verifies as a valid shorter chain, and only an anchor kept outside tells.

use crate::common::{Run, Sandbox, fixture, scripted};

/// Runs the build-loop fixture as `cast` with `--anchor anchor.json`.
fn anchored_run(sandbox: &Sandbox, cast: &str) -> Run {
    let mut cmd = sandbox.build_loop(cast, &scripted("build-loop.jsonl"));
    cmd.arg("--anchor").arg(sandbox.path("anchor.json"));
    let run = sandbox.finish(&mut cmd);
    assert_eq!(run.code, 0, "{}", run.stderr);
    run
}

/// Deletes the last `n` events of `cast` and points its head row at the event before them,
/// as someone hiding the cast's last decision would.
fn cut_tail(sandbox: &Sandbox, cast: &str, n: u64) -> u64 {
    let conn = rusqlite::Connection::open(sandbox.db()).unwrap();
    conn.execute_batch("DROP TRIGGER events_no_delete;")
        .unwrap();
    let (key, head): (i64, u64) = conn
        .query_row(
            "SELECT id, head_seq FROM casts WHERE cast_id = ?1",
            [cast],
            |row| Ok((row.get(0)?, row.get(1)?)),
        )
        .unwrap();
    let last = head - n;
    conn.execute(
        "DELETE FROM events WHERE cast_id = ?1 AND seq > ?2",
        rusqlite::params![key, last],
    )
    .unwrap();
    let hash: Vec<u8> = conn
        .query_row(
            "SELECT hash FROM events WHERE cast_id = ?1 AND seq = ?2",
            rusqlite::params![key, last],
            |row| row.get(0),
        )
        .unwrap();
    conn.execute(
        "UPDATE casts SET head_seq = ?1, head_hash = ?2 WHERE id = ?3",
        rusqlite::params![last, hash, key],
    )
    .unwrap();
    head
}

fn events_of(sandbox: &Sandbox) -> i64 {
    let conn = rusqlite::Connection::open(sandbox.db()).unwrap();
    conn.query_row("SELECT count(*) FROM events", [], |row| row.get(0))
        .unwrap()
}

#[test]
fn a_cut_off_tail_verifies_as_a_shorter_cast_without_an_anchor_and_fails_with_one() {
    let sandbox = Sandbox::new();
    let head = anchored_run(&sandbox, "demo").json()["events"]
        .as_u64()
        .unwrap();
    let anchored = cut_tail(&sandbox, "demo", 4);
    assert_eq!(anchored, head);
    // The chain alone cannot tell: what is left is a valid chain.
    let plain = sandbox.run(&["verify", "--json"]);
    assert_eq!(plain.code, 0, "{}", plain.stdout);

    let anchor = sandbox.path("anchor.json");
    let run = sandbox.run(&["verify", "--json", "--anchor", anchor.to_str().unwrap()]);
    assert_eq!(run.code, 3, "{}", run.stdout);
    let report = run.json();
    assert_eq!(report["ok"], false);
    let problems = report["problems"].as_array().unwrap();
    assert_eq!(problems.len(), 1, "{report}");
    assert_eq!(problems[0]["cast"], "demo");
    assert_eq!(problems[0]["seq"], head);
    assert_eq!(problems[0]["kind"], "anchor");
    let message = problems[0]["message"].as_str().unwrap();
    assert!(
        message.contains(&format!("the cast ends at seq {}", head - 4))
            && message.contains(&format!("events {} to {head} are gone", head - 3)),
        "{message}"
    );
    // The text report names the cast and the seq too, and so does the environment variable.
    let mut cmd = sandbox.command_on(&sandbox.db());
    cmd.arg("verify").env("CASTLOG_ANCHOR", &anchor);
    let run = sandbox.finish(&mut cmd);
    assert_eq!(run.code, 3);
    assert!(
        run.stdout.contains(&format!("demo seq {head}")),
        "{}",
        run.stdout
    );
    assert!(
        run.stderr.contains("first at cast demo seq"),
        "{}",
        run.stderr
    );
}

#[test]
fn a_command_that_writes_refuses_a_log_shorter_than_its_anchor_and_changes_nothing() {
    let sandbox = Sandbox::new();
    anchored_run(&sandbox, "demo");
    cut_tail(&sandbox, "demo", 2);
    let anchor_before = std::fs::read_to_string(sandbox.path("anchor.json")).unwrap();
    let events_before = events_of(&sandbox);
    let mut cmd = sandbox.build_loop("other", &scripted("build-loop.jsonl"));
    cmd.arg("--anchor").arg(sandbox.path("anchor.json"));
    let run = sandbox.finish(&mut cmd);
    assert_eq!(run.code, 3, "{}", run.stderr);
    assert!(
        run.stderr.contains("the log no longer holds what anchor")
            && run.stderr.contains("cast demo seq")
            && run.stderr.contains("nothing was written"),
        "{}",
        run.stderr
    );
    assert_eq!(events_of(&sandbox), events_before);
    assert_eq!(
        std::fs::read_to_string(sandbox.path("anchor.json")).unwrap(),
        anchor_before
    );
    // `castlog anchor` does not forget the lost events either: the entry is kept (exit 3).
    let run = sandbox.run(&[
        "anchor",
        "-o",
        sandbox.path("anchor.json").to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(run.code, 3, "{}", run.stderr);
    assert_eq!(run.json()["casts"][0]["change"], "kept");
    assert_eq!(
        std::fs::read_to_string(sandbox.path("anchor.json")).unwrap(),
        anchor_before
    );
}

#[test]
fn a_database_restored_from_an_older_copy_is_caught_by_the_anchor() {
    let sandbox = Sandbox::new();
    anchored_run(&sandbox, "first");
    std::fs::copy(sandbox.db(), sandbox.path("older.db")).unwrap();
    anchored_run(&sandbox, "second");
    let older = sandbox.path("older.db");
    let run = sandbox.run_on(
        &older,
        &[
            "verify",
            "--all",
            "--json",
            "--anchor",
            sandbox.path("anchor.json").to_str().unwrap(),
        ],
    );
    assert_eq!(run.code, 3, "{}", run.stdout);
    let report = run.json();
    assert_eq!(report["problems"][0]["cast"], "second");
    assert!(
        report["problems"][0]["message"]
            .as_str()
            .unwrap()
            .contains("the cast is gone"),
        "{report}"
    );
    // A database that is gone altogether is not created again to say so.
    std::fs::remove_file(&older).unwrap();
    let mut cmd = sandbox.command_on(&older);
    cmd.args(["run", &fixture("loadouts/build-loop.json"), "--task", "t"])
        .args(["--agent", &scripted("build-loop.jsonl")])
        .arg("--anchor")
        .arg(sandbox.path("anchor.json"));
    let run = sandbox.finish(&mut cmd);
    assert_eq!(run.code, 3, "{}", run.stderr);
    assert!(!older.exists());
}

#[test]
fn the_anchor_moves_with_every_command_that_writes_and_with_castlog_anchor() {
    let sandbox = Sandbox::new();
    let first = anchored_run(&sandbox, "a").json();
    let anchor: serde_json::Value =
        serde_json::from_slice(&std::fs::read(sandbox.path("anchor.json")).unwrap()).unwrap();
    assert_eq!(anchor["castlog_anchor"], 1);
    assert_eq!(anchor["heads"][0]["cast"], "a");
    assert_eq!(anchor["heads"][0]["seq"], first["events"]);
    assert_eq!(anchor["heads"][0]["hash"], first["head"]);

    // A cast written without the anchor is added by `castlog anchor`, the known one moved.
    sandbox.completed_build_loop("b");
    let mut cmd = sandbox.command_on(&sandbox.db());
    cmd.args(["anchor", "--json"])
        .env("CASTLOG_ANCHOR", sandbox.path("anchor.json"));
    let run = sandbox.finish(&mut cmd);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let changes: Vec<(String, String)> = run.json()["casts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["cast"].as_str().unwrap().into(),
                c["change"].as_str().unwrap().into(),
            )
        })
        .collect();
    assert_eq!(
        changes,
        [("a".into(), "moved".into()), ("b".into(), "added".into())]
    );
    let anchor = sandbox.path("anchor.json");
    let run = sandbox.run(&["verify", "--anchor", anchor.to_str().unwrap()]);
    assert_eq!(run.code, 0, "{}", run.stdout);

    // `mark` writes, so it moves the anchor too.
    let mut cmd = sandbox.command_on(&sandbox.db());
    cmd.args(["mark", "a", "here", "--at", "10"])
        .env("CASTLOG_ANCHOR", &anchor);
    assert_eq!(sandbox.finish(&mut cmd).code, 0);
    let moved: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&anchor).unwrap()).unwrap();
    assert_eq!(
        moved["heads"][0]["seq"],
        first["events"].as_u64().unwrap() + 1
    );
}

#[test]
fn a_malformed_or_missing_anchor_is_a_clear_user_error() {
    let sandbox = Sandbox::new();
    sandbox.completed_build_loop("a");
    let bad = sandbox.write(
        "bad.json",
        "{\"castlog_anchor\": 1, \"heads\": [{\"cast\": \"a\", \"seq\": 3, \"hash\": \"xyz\"}]}",
    );
    let run = sandbox.run(&["verify", "--anchor", &bad]);
    assert_eq!(run.code, 1);
    assert!(
        run.stderr
            .contains("anchor entry 1 (cast \"a\"): the hash is not 64 hex digits"),
        "{}",
        run.stderr
    );
    let missing = sandbox.path("missing.json");
    let run = sandbox.run(&["verify", "--anchor", missing.to_str().unwrap()]);
    assert_eq!(run.code, 1);
    assert!(run.stderr.contains("no anchor file at"), "{}", run.stderr);
    let run = sandbox.run(&["anchor"]);
    assert_eq!(run.code, 1);
    assert!(
        run.stderr.contains("name the anchor file"),
        "{}",
        run.stderr
    );
}
