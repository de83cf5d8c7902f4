//! `replay` and `export --artifacts`: projections rebuilt from the log, checkpoints never trusted
//! over it.

use crate::common::{Sandbox, completion_lines, fixture, unpack_values};

fn cast(sandbox: &Sandbox) {
    let run = sandbox.run(&[
        "run",
        &fixture("loadouts/build-loop.json"),
        "--task",
        "greet",
        "--cast",
        "a",
        "--agent",
        &format!("scripted:{}", fixture("scripts/build-loop.jsonl")),
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
}

#[test]
fn replay_from_a_checkpoint_equals_the_full_fold_and_the_state() {
    let sandbox = Sandbox::new();
    cast(&sandbox);
    let first = sandbox.run(&["replay", "a", "--json"]).json();
    let second = sandbox.run(&["replay", "a", "--json"]).json();
    assert_eq!(first["projections"]["cast_view"]["from"], 0);
    assert_eq!(second["projections"]["cast_view"]["from"], first["events"]);
    assert_eq!(second["projections"]["cast_view"]["folded"], 0);
    let strip = |mut v: serde_json::Value| {
        v.as_object_mut().unwrap().remove("projections");
        v
    };
    assert_eq!(strip(first.clone()), strip(second));
    let state = sandbox.run(&["state", "a", "--json"]).json();
    assert_eq!(first["status"], state["status"]);
    assert_eq!(first["visits"], state["visits"]);
    assert_eq!(first["usage"]["input"], state["usage"]["input"]);
    assert_eq!(first["completions"], 11);
    assert_eq!(first["repairs"], 1);
    assert_eq!(first["reworks"], 1);
}

#[test]
fn a_corrupted_checkpoint_is_ignored_with_a_warning() {
    let sandbox = Sandbox::new();
    cast(&sandbox);
    let clean = sandbox.run(&["replay", "a", "--json"]).json();
    let conn = rusqlite::Connection::open(sandbox.db()).unwrap();
    let changed = conn
        .execute(
            "UPDATE checkpoints SET bytes = x'ffffffff00' WHERE name = 'cast_view'",
            [],
        )
        .unwrap();
    assert_eq!(changed, 1);
    conn.execute("UPDATE checkpoints SET seq = 3 WHERE name = 'usage'", [])
        .unwrap();
    drop(conn);
    let run = sandbox.run(&["replay", "a", "--json"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stderr.contains("checkpoint of cast_view at seq")
            && run.stderr.contains("does not match its seal"),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr
            .contains("checkpoint of usage at seq 3 does not match the log"),
        "{}",
        run.stderr
    );
    let again = run.json();
    assert_eq!(again["projections"]["cast_view"]["from"], 0);
    assert_eq!(again["status"], clean["status"]);
    assert_eq!(again["usage"], clean["usage"]);
    assert_eq!(again["visits"], clean["visits"]);
}

/// A projection checkpoint whose content was changed in place (same length, still decoding)
/// is not used by `export --artifacts`, and `verify` names it.
#[test]
fn a_rewritten_manifest_checkpoint_is_not_exported_and_is_named() {
    let sandbox = Sandbox::new();
    cast(&sandbox);
    let clean = sandbox.path("clean");
    let run = sandbox.run(&["export", "a", "--artifacts", clean.to_str().unwrap()]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    unpack_values(&sandbox.db());
    let conn = rusqlite::Connection::open(sandbox.db()).unwrap();
    let changed = conn
        .execute(
            "UPDATE checkpoints SET bytes = CAST(replace(CAST(bytes AS TEXT), 'sockets/', 'SOCKETS/') AS BLOB)
             WHERE name = 'manifest' AND instr(CAST(bytes AS TEXT), 'sockets/') > 0",
            [],
        )
        .unwrap();
    assert_eq!(
        changed, 1,
        "the manifest checkpoint names the artifacts' paths"
    );
    drop(conn);
    let verify = sandbox.run(&["verify", "a", "--json"]);
    assert_eq!(verify.code, 3, "{}", verify.stdout);
    let problems = verify.json()["problems"].as_array().unwrap().clone();
    assert!(
        problems.iter().any(|p| p["message"]
            .as_str()
            .unwrap()
            .contains("manifest checkpoint")),
        "{problems:?}"
    );
    let again = sandbox.path("again");
    let run = sandbox.run(&["export", "a", "--artifacts", again.to_str().unwrap()]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stderr.contains("does not match its seal"),
        "{}",
        run.stderr
    );
    assert_eq!(files(&again, &again), files(&clean, &clean));
}

/// Regression: the manifest kept a copy of every output's text, so `replay` and `verify` of a
/// long cast held all of them (and their checkpoint stored them again). It names the event
/// that holds each text, and `export --artifacts` reads the text from there.
#[test]
fn the_manifest_names_texts_by_their_event_instead_of_copying_them() {
    let sandbox = Sandbox::new();
    cast(&sandbox);
    let dir = sandbox.path("tree");
    let run = sandbox.run(&["export", "a", "--artifacts", dir.to_str().unwrap()]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    unpack_values(&sandbox.db());
    let conn = rusqlite::Connection::open(sandbox.db()).unwrap();
    let (quoted, paths): (i64, i64) = conn
        .query_row(
            "SELECT instr(CAST(bytes AS TEXT), 'hello'), instr(CAST(bytes AS TEXT), 'sockets/')
             FROM checkpoints WHERE name = 'manifest'",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert_eq!(quoted, 0, "the manifest checkpoint copies a reply's text");
    assert!(paths > 0, "the manifest checkpoint names no artifact");
    let outputs: Vec<String> = files(&dir, &dir)
        .into_iter()
        .map(|(_, bytes)| String::from_utf8(bytes).unwrap())
        .collect();
    assert!(
        outputs.iter().any(|text| text.contains("hello")),
        "{outputs:?}"
    );
}

/// Every file under `dir`, by its path below `root`, with its bytes, in path order.
fn files(root: &std::path::Path, dir: &std::path::Path) -> Vec<(std::path::PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(files(root, &path));
        } else {
            let bytes = std::fs::read(&path).unwrap();
            out.push((path.strip_prefix(root).unwrap().to_path_buf(), bytes));
        }
    }
    out.sort();
    out
}

#[test]
fn the_artifact_tree_is_byte_identical_across_replays() {
    let sandbox = Sandbox::new();
    cast(&sandbox);
    let one = sandbox.path("one");
    let two = sandbox.path("two");
    assert_eq!(
        sandbox
            .run(&["export", "a", "--artifacts", one.to_str().unwrap()])
            .code,
        0
    );
    assert_eq!(
        sandbox
            .run(&["export", "a", "--artifacts", two.to_str().unwrap()])
            .code,
        0
    );
    let files = |root: &std::path::Path| {
        let mut out = Vec::new();
        let mut stack = vec![root.to_path_buf()];
        while let Some(dir) = stack.pop() {
            for entry in std::fs::read_dir(&dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    stack.push(path);
                } else {
                    let rel = path.strip_prefix(root).unwrap().display().to_string();
                    out.push((rel, std::fs::read(&path).unwrap()));
                }
            }
        }
        out.sort();
        out
    };
    let (a, b) = (files(&one), files(&two));
    assert_eq!(a, b);
    let names: Vec<&str> = a.iter().map(|(n, _)| n.as_str()).collect();
    for expected in [
        "manifest.json",
        "sockets/socket-2/1.json",
        "sockets/socket-3/2-wi-1.md",
        "sockets/socket-4/1-wi-1.rejected-1.md",
        "contexts/socket-4-wi-1-1-turn2.md",
    ] {
        assert!(
            names.contains(&expected),
            "{expected} missing from {names:?}"
        );
    }
    let rejected = a
        .iter()
        .find(|(n, _)| n == "sockets/socket-4/1-wi-1.rejected-1.md")
        .unwrap();
    assert_eq!(rejected.1, b"Looks mostly fine to me.");
}

/// A database written by an older castlog (schema version 1, before checkpoints, chunked
/// blobs and the batched blob index existed) is migrated on open, replays and verifies.
#[test]
fn a_database_from_an_older_schema_replays_and_verifies() {
    let sandbox = Sandbox::new();
    cast(&sandbox);
    let conn = rusqlite::Connection::open(sandbox.db()).unwrap();
    // Back to version 1: events keyed by a UNIQUE(cast_id, seq) index, blobs whole again (no
    // chunks table, no chunked column), no checkpoints.
    conn.execute_batch(
        "CREATE TABLE events_v1 (
             cast_id INTEGER NOT NULL REFERENCES casts(id), seq INTEGER NOT NULL,
             at_ms INTEGER NOT NULL, kind TEXT NOT NULL, v INTEGER NOT NULL,
             payload BLOB NOT NULL, prev BLOB NOT NULL, hash BLOB NOT NULL,
             UNIQUE (cast_id, seq));
         INSERT INTO events_v1 SELECT cast_id, seq, at_ms, kind, v, payload, prev, hash
             FROM events ORDER BY seq DESC;
         DROP TABLE events;
         ALTER TABLE events_v1 RENAME TO events;
         DROP TRIGGER casts_no_delete;
         DROP TABLE events_apart;",
    )
    .unwrap();
    conn.execute_batch(
        "WITH RECURSIVE parts(id, i, acc) AS (
             SELECT id, 0, CAST('' AS BLOB) FROM blobs WHERE chunked = 1
             UNION ALL
             SELECT p.id, p.i + 1, CAST(p.acc || (SELECT c.bytes FROM chunks c
                    WHERE printf('%016X', c.id) = hex(substr(b.bytes, p.i * 8 + 1, 8))) AS BLOB)
             FROM parts p JOIN blobs b ON b.id = p.id WHERE p.i * 8 < length(b.bytes))
         UPDATE blobs SET bytes = (SELECT acc FROM parts p WHERE p.id = blobs.id
                                   ORDER BY i DESC LIMIT 1)
         WHERE chunked = 1;
         DROP TABLE chunks;
         ALTER TABLE blobs DROP COLUMN chunked;
         DROP TABLE blob_index;
         DROP TABLE blob_index_upto;
         DROP TABLE checkpoints;
         PRAGMA user_version = 1;",
    )
    .unwrap();
    drop(conn);
    let verify = sandbox.run(&["verify", "--json"]);
    assert_eq!(verify.code, 0, "{}", verify.stdout);
    let replay = sandbox.run(&["replay", "a", "--json"]).json();
    assert_eq!(replay["status"], "completed");
    let conn = rusqlite::Connection::open(sandbox.db()).unwrap();
    let version: i64 = conn
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap();
    assert_eq!(version, castlog_events::sqlite::SCHEMA_VERSION);
    let (events, misplaced): (i64, i64) = conn
        .query_row(
            "SELECT count(*), count(*) FILTER (WHERE id != cast_id * 4294967296 + seq) FROM events",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert!(events > 0);
    assert_eq!(
        misplaced, 0,
        "the migration addresses every event by cast and seq"
    );
    let (blobs, indexed, above): (i64, i64, i64) = conn
        .query_row(
            "SELECT (SELECT count(*) FROM blobs), (SELECT count(*) FROM blob_index),
                    (SELECT count(*) FROM blobs WHERE id > (SELECT upto FROM blob_index_upto))",
            [],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .unwrap();
    assert!(blobs > 0);
    assert_eq!(
        (indexed, above),
        (blobs, 0),
        "the migration indexes every blob"
    );
    let checkpoints: i64 = conn
        .query_row("SELECT count(*) FROM checkpoints", [], |r| r.get(0))
        .unwrap();
    assert!(checkpoints > 0);
}

/// A completion whose output is its visit's reply names that reply's seq instead of repeating
/// it (`socket_completed` version 3); every reader still sees the output: `show --json` puts it
/// back beside `output_of`, `show` describes the event, an export carries the short payload and
/// its import reads the same, and verify re-decides it to the same bytes.
#[test]
fn completions_name_their_replies_and_every_reader_shows_the_output() {
    let sandbox = Sandbox::new();
    cast(&sandbox);
    let shown = sandbox.run(&["show", "a", "--json"]).json();
    let events = shown["events"].as_array().unwrap();
    let at = |seq: u64| events.iter().find(|e| e["seq"] == seq).unwrap();
    let mut named = 0;
    for event in events.iter().filter(|e| e["kind"] == "socket_completed") {
        assert_eq!(event["v"], 3, "{event}");
        let payload = &event["payload"];
        assert!(payload["output"].is_string(), "{event}");
        if let Some(seq) = payload["output_of"].as_u64() {
            named += 1;
            let reply = at(seq);
            assert_eq!(reply["kind"], "agent_replied", "{event}");
            assert_eq!(reply["payload"]["text"], payload["output"], "{event}");
        }
    }
    assert!(named >= 8, "{named} completions named their reply");
    let text = sandbox.run(&["show", "a"]);
    assert_eq!(text.code, 0, "{}", text.stderr);
    assert!(!text.stdout.contains("does not decode"), "{}", text.stdout);
    assert!(
        !text.stdout.contains("refers to the reply"),
        "{}",
        text.stdout
    );

    let file = sandbox.path("a.jsonl");
    let file_arg = file.to_str().unwrap();
    let export = sandbox.run(&["export", "a", "--format", "jsonl", "-o", file_arg]);
    assert_eq!(export.code, 0, "{}", export.stderr);
    let lines = std::fs::read_to_string(&file).unwrap();
    assert_eq!(
        completion_lines(&lines, r#""output_of":"#, r#""output":"#),
        named
    );
    let other = sandbox.path("other.db");
    let import = sandbox.run_on(&other, &["import", file_arg]);
    assert_eq!(import.code, 0, "{}", import.stderr);
    assert_eq!(
        sandbox.run_on(&other, &["show", "a", "--json"]).json(),
        shown
    );
    for db in [sandbox.db(), other] {
        let verify = sandbox.run_on(&db, &["verify", "a", "--json"]);
        assert_eq!(verify.code, 0, "{}", verify.stdout);
    }
}
