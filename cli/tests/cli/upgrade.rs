//! A database written by an older build opens, verifies and replays byte for byte.
//! `fixtures/casts/v7/` holds one written at schema v7 (before streams kept their kind) from
//! the fixtures: `built` (the build loop), `sent` (a post, with the `claims:staging` ledger
//! it took a day on), `engaged` (an engage run) and `rebuilt` (a recast of `built`), with
//! projection checkpoints from `replay`, and what `casts --all --json` and `replay --json`
//! printed on it then.

use crate::common::{Sandbox, completion_lines, fixture, make_read_only, scripted};

/// A sandbox whose database is a copy of the fixture database in `fixtures/casts/DIR/`.
fn with_database(dir: &str) -> Sandbox {
    let sandbox = Sandbox::new();
    std::fs::copy(fixture(&format!("casts/{dir}/castlog.db")), sandbox.db()).unwrap();
    sandbox
}

/// A sandbox whose database is a copy of the v7 fixture.
fn with_v7_database() -> Sandbox {
    with_database("v7")
}

/// `verify --all --json` on the sandbox's database: it passes, and the report it gives.
fn verified(sandbox: &Sandbox) -> serde_json::Value {
    let verified = sandbox.run(&["verify", "--all", "--json"]);
    assert_eq!(verified.code, 0, "{}", verified.stdout);
    let report = verified.json();
    assert_eq!(report["ok"], true, "{report}");
    report
}

fn listed(sandbox: &Sandbox, args: &[&str]) -> Vec<(String, String, u64, String)> {
    sandbox.run(args).json()["casts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["cast"].as_str().unwrap().to_owned(),
                c["kind"].as_str().unwrap().to_owned(),
                c["head"].as_u64().unwrap(),
                c["hash"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

#[test]
fn a_version_7_database_gets_stream_kinds_and_lists_casts_only() {
    let sandbox = with_v7_database();
    let before: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(fixture("casts/v7/casts.json")).unwrap())
            .unwrap();
    let all = listed(&sandbox, &["casts", "--all", "--json"]);
    // Heads and hashes are the ones the old build listed; the engage run is now known as one.
    let kinds: Vec<(&str, &str)> = all
        .iter()
        .map(|(c, k, _, _)| (c.as_str(), k.as_str()))
        .collect();
    assert_eq!(
        kinds,
        [
            ("built", "cast"),
            ("sent", "cast"),
            ("claims:staging", "claims_ledger"),
            ("engaged", "engagement"),
            ("rebuilt", "cast"),
        ]
    );
    for ((cast, _, head, hash), old) in all.iter().zip(before["casts"].as_array().unwrap()) {
        assert_eq!(old["cast"], cast.as_str());
        assert_eq!(old["head"], *head, "{cast}");
        assert_eq!(old["hash"], hash.as_str(), "{cast}");
    }
    let casts: Vec<String> = listed(&sandbox, &["casts", "--json"])
        .into_iter()
        .map(|(c, _, _, _)| c)
        .collect();
    assert_eq!(casts, ["built", "sent", "rebuilt"]);
    let text = sandbox.run(&["casts"]);
    assert!(!text.stdout.contains("engaged"), "{}", text.stdout);
    assert!(!text.stdout.contains("claims:staging"), "{}", text.stdout);
}

#[test]
fn a_version_7_database_verifies_and_replays_byte_for_byte() {
    let sandbox = with_v7_database();
    let report = verified(&sandbox);
    assert_eq!(report["casts"], 5);
    assert_eq!(report["events"], 184);
    for cast in ["built", "sent", "claims:staging", "engaged", "rebuilt"] {
        let replayed = sandbox.run(&["replay", cast, "--json"]);
        assert_eq!(replayed.code, 0, "{cast}: {}", replayed.stderr);
        let pinned = std::fs::read_to_string(fixture(&format!(
            "casts/v7/replay-{}.json",
            cast.replace(':', "-")
        )))
        .unwrap();
        assert_eq!(replayed.stdout, pinned, "{cast}");
    }
}

/// The engage run is refused as a cast by what the log records it as.
#[test]
fn the_engage_run_of_a_version_7_database_is_not_a_workflow_cast() {
    let sandbox = with_v7_database();
    let state = sandbox.run(&["state", "engaged"]);
    assert_eq!(state.code, 1, "{}", state.stderr);
    assert!(
        state.stderr.contains("engaged is not a workflow cast")
            && state.stderr.contains("records it as engagement"),
        "{}",
        state.stderr
    );
}

/// `fixtures/casts/v9/` holds a database written at schema v9 by the build before
/// `socket_completed` version 2, from the fixtures: `built` (the build loop), `demo` (pi-materia's
/// Full-Auto) and `demo-b` (a recast of `demo` at Socket-4:2 with `full-auto-other.jsonl`), with
/// no projection checkpoints, and what `casts --json`, `replay --json`, `export --format jsonl`
/// and `show --json` printed on it then.
fn with_v9_database() -> Sandbox {
    with_database("v9")
}

/// Recasts the fixture's `demo` at Socket-4:2 with `full-auto-other.jsonl` as `demo-c` (what
/// `demo-b` is, by the build that wrote the fixture); `show demo-c --json` then.
fn recast_demo(sandbox: &Sandbox) -> serde_json::Value {
    let agent = scripted("full-auto-other.jsonl");
    let recast = sandbox.run(&[
        "recast",
        "demo",
        "--at",
        "Socket-4:2",
        "--agent",
        &agent,
        "--cast",
        "demo-c",
        "--quiet",
    ]);
    assert_eq!(recast.code, 0, "{}", recast.stderr);
    sandbox.run(&["show", "demo-c", "--json"]).json()
}

/// A file of what the build that wrote `fixtures/casts/DIR/` printed on it.
fn pinned(dir: &str, name: &str) -> String {
    std::fs::read_to_string(fixture(&format!("casts/{dir}/{name}"))).unwrap()
}

#[test]
fn a_database_from_before_socket_completed_version_2_reads_byte_for_byte() {
    let sandbox = with_v9_database();
    reads_as_pinned_v9(&sandbox);
    // Opening it for writing upgraded it to packed columns; the events and blobs it held are
    // left unpacked (only the projection checkpoints `replay` wrote since are new rows).
    let conn = rusqlite::Connection::open(sandbox.db()).unwrap();
    let (version, packed): (i64, i64) = conn
        .query_row(
            "SELECT (SELECT user_version FROM pragma_user_version),
                    (SELECT count(*) FROM events WHERE substr(payload, 1, 4) = x'28b52ffd')
                  + (SELECT coalesce(sum(packed), 0) FROM chunks)",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert_eq!(
        (version, packed),
        (castlog_events::sqlite::SCHEMA_VERSION, 0)
    );
}

/// Read-only, the same file reads as it is, at schema version 9 (no packed columns), the same
/// bytes as the build that wrote it printed.
#[test]
fn a_read_only_version_9_database_reads_byte_for_byte_without_its_upgrade() {
    let sandbox = with_v9_database();
    make_read_only(&sandbox);
    reads_as_pinned_v9(&sandbox);
    let conn = rusqlite::Connection::open_with_flags(
        sandbox.db(),
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
    )
    .unwrap();
    let version: i64 = conn
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap();
    assert_eq!(version, 9);
}

/// The v9 fixture's casts verify and print what the build that wrote them printed.
fn reads_as_pinned_v9(sandbox: &Sandbox) {
    reads_as_pinned(sandbox, "v9");
}

/// The casts of the fixture in `fixtures/casts/DIR/` (`built`, `demo`, `demo-b`, 192 events)
/// verify and print what the build that wrote them printed: `casts --json`, `replay --json`,
/// `export --format jsonl` and `show --json`.
fn reads_as_pinned(sandbox: &Sandbox, dir: &str) {
    assert_eq!(verified(sandbox)["events"], 192);
    assert_eq!(
        sandbox.run(&["casts", "--json"]).stdout,
        pinned(dir, "casts.json")
    );
    for cast in ["built", "demo", "demo-b"] {
        let replayed = sandbox.run(&["replay", cast, "--json"]);
        assert_eq!(replayed.code, 0, "{cast}: {}", replayed.stderr);
        assert_eq!(
            replayed.stdout,
            pinned(dir, &format!("replay-{cast}.json")),
            "{cast}"
        );
    }
    let exported = sandbox.path("demo.jsonl");
    let out = exported.to_str().unwrap();
    let export = sandbox.run(&["export", "demo", "--format", "jsonl", "--output", out]);
    assert_eq!(export.code, 0, "{}", export.stderr);
    assert_eq!(
        std::fs::read_to_string(&exported).unwrap(),
        pinned(dir, "export-demo.jsonl")
    );
    assert_eq!(
        sandbox.run(&["show", "demo-b", "--json"]).stdout,
        pinned(dir, "show-demo-b.json")
    );
}

/// `fixtures/casts/v10/` holds the same casts written at schema v10 (values packed) by the
/// build before `socket_completed` version 3 and `data_assigned` and `rework_routed` version 2
/// (every reply, value and reason in full), with what it printed: they read byte for byte, and
/// a recast of `demo` goes on in the new versions and diffs as the same as `demo-b`.
#[test]
fn a_database_from_before_texts_were_named_reads_byte_for_byte() {
    let sandbox = with_database("v10");
    reads_as_pinned(&sandbox, "v10");
    let shown = sandbox.run(&["show", "demo", "--json"]).json();
    let versions: std::collections::BTreeSet<(String, u64)> = shown["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| {
            ["socket_completed", "data_assigned", "rework_routed"]
                .contains(&e["kind"].as_str().unwrap())
        })
        .map(|e| {
            (
                e["kind"].as_str().unwrap().to_owned(),
                e["v"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        versions.into_iter().collect::<Vec<_>>(),
        [
            ("data_assigned".to_owned(), 1),
            ("socket_completed".to_owned(), 2)
        ]
    );
    let shown = recast_demo(&sandbox);
    let named: Vec<&str> = shown["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| {
            let p = &e["payload"];
            p["output_of"].is_u64() || p["value_of"].is_u64() || p["reason_of"].is_u64()
        })
        .map(|e| e["kind"].as_str().unwrap())
        .collect();
    for kind in ["socket_completed", "data_assigned"] {
        assert!(named.contains(&kind), "no {kind} names its text: {named:?}");
    }
    verified(&sandbox);
    let diff = sandbox.run(&["diff", "demo-b", "demo-c", "--json"]).json();
    assert_eq!(diff["first_divergence"], serde_json::Value::Null, "{diff}");
}

/// A recast of an old cast writes version 3 after its parent's version 1 prefix: the reply is
/// stored once (a completion names the reply its output is, and leaves out a `parsed` that is
/// the output's parse), `show --json` still gives `output` and `parsed`, both re-decide, and
/// `diff` finds the recast the same as the one the old build made.
#[test]
fn a_recast_of_an_old_cast_stores_each_parsed_reply_once() {
    let sandbox = with_v9_database();
    let shown = recast_demo(&sandbox);
    let completions: Vec<&serde_json::Value> = shown["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == "socket_completed")
        .collect();
    assert!(!completions.is_empty());
    let (mut once, mut named) = (0, 0);
    for event in &completions {
        assert_eq!(event["v"], 3, "{event}");
        let payload = &event["payload"];
        assert!(payload["output"].is_string(), "{event}");
        if payload["output_of"].is_u64() {
            named += 1;
        }
        if payload["parsed_from_output"] == true {
            once += 1;
            let output: serde_json::Value =
                serde_json::from_str(payload["output"].as_str().unwrap()).unwrap();
            assert_eq!(payload["parsed"], output, "{event}");
        }
    }
    assert!(once > 0, "no reply was stored once: {completions:?}");
    assert!(named > 0, "no completion named its reply: {completions:?}");
    // The recast's large payloads are stored packed; the old casts' rows stay as they were.
    let conn = rusqlite::Connection::open(sandbox.db()).unwrap();
    let packed = |cast: &str| -> i64 {
        conn.query_row(
            "SELECT count(*) FROM events WHERE substr(payload, 1, 1) != x'7b'
             AND id >> 32 = (SELECT id FROM casts WHERE cast_id = ?1)",
            [cast],
            |r| r.get(0),
        )
        .unwrap()
    };
    assert!(packed("demo-c") > 0);
    assert_eq!(packed("demo"), 0);
    // The stored payload holds the reply once: the exported line has no `parsed` beside it.
    let exported = sandbox.path("demo-c.jsonl");
    let out = exported.to_str().unwrap();
    assert_eq!(
        sandbox
            .run(&["export", "demo-c", "--format", "jsonl", "--output", out])
            .code,
        0
    );
    let lines = std::fs::read_to_string(&exported).unwrap();
    let stored_once = completion_lines(&lines, r#""parsed_from_output":true"#, r#""parsed":"#);
    assert_eq!(stored_once, once);
    assert_eq!(
        completion_lines(&lines, r#""output_of":"#, r#""output":"#),
        named
    );
    verified(&sandbox);
    let diff = sandbox.run(&["diff", "demo-b", "demo-c", "--json"]).json();
    assert_eq!(diff["first_divergence"], serde_json::Value::Null, "{diff}");
}
