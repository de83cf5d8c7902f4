//! Prompts as projections: `prompt`, `audit`, the lint, under both placement policies.

use serde_json::Value;

use crate::common::{Sandbox, fixture};

/// Runs the recovery fixture under `policy` until its repair allowance runs out, then revives
/// it: the revived Build turn carries a recovery note, a retry, a rework reason and a delta.
fn recovered(sandbox: &Sandbox, policy: &str) {
    let script = format!("scripted:{}", fixture("scripts/recovery.jsonl"));
    let run = sandbox.run(&[
        "run",
        &fixture("loadouts/recovery.json"),
        "--task",
        "upload tool",
        "--cast",
        policy,
        "--policy",
        policy,
        "--agent",
        &script,
        "--json",
    ]);
    assert_eq!(run.json()["status"], "failed", "{}", run.stdout);
    let revived = sandbox.run(&["revive", policy, "--agent", &script, "--json"]);
    assert_eq!(revived.json()["status"], "completed", "{}", revived.stdout);
}

fn placements(prompt: &Value) -> Vec<(String, String, String)> {
    prompt["placements"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["source_type"].as_str().unwrap().to_owned(),
                p["destination"].as_str().unwrap().to_owned(),
                p["rule"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

fn find<'a>(
    all: &'a [(String, String, String)],
    source_type: &str,
) -> &'a (String, String, String) {
    all.iter()
        .find(|(s, _, _)| s == source_type)
        .unwrap_or_else(|| panic!("no {source_type} in {all:?}"))
}

#[test]
fn a_recovery_turn_renders_one_mandate_block_under_recommended() {
    let sandbox = Sandbox::new();
    recovered(&sandbox, "recommended");
    let prompt = sandbox
        .run(&[
            "prompt",
            "recommended",
            "Socket-2:2",
            "--turn",
            "3",
            "--json",
        ])
        .json();
    let all = placements(&prompt);
    assert_eq!(find(&all, "recoveryTicket").2, "trailing:mandate");
    assert_eq!(find(&all, "remainingDelta").2, "trailing:appended-delta");
    assert_eq!(find(&all, "retryFeedback").2, "inline:lower-mandate");
    assert_eq!(find(&all, "reworkFeedback").2, "inline:lower-mandate");
    let trailing_mandates = all
        .iter()
        .filter(|(_, _, r)| r == "trailing:mandate")
        .count();
    assert_eq!(trailing_mandates, 1);
    let messages = prompt["messages"].as_array().unwrap();
    let last = messages.last().unwrap()["content"].as_str().unwrap();
    assert_eq!(last.matches("## ").count(), 1, "{last}");
    assert!(last.starts_with("## Recovery"));
    assert!(
        last.trim_end().ends_with("- Add a progress bar"),
        "the delta is appended: {last}"
    );
    assert!(
        !messages[0]["content"]
            .as_str()
            .unwrap()
            .contains("still ahead")
    );
    assert!(prompt["hash"].is_string() && prompt["system_hash"].is_string());

    let audit = sandbox
        .run(&["audit", "recommended", "--lint", "--json"])
        .json();
    assert_eq!(
        audit["findings"],
        serde_json::json!([]),
        "{}",
        audit["findings"]
    );
    assert!(!audit["prompts"].as_array().unwrap().is_empty());
}

#[test]
fn the_legacy_lint_finds_folded_escalations_and_a_mutating_prefix() {
    let sandbox = Sandbox::new();
    recovered(&sandbox, "legacy");
    let prompt = sandbox
        .run(&["prompt", "legacy", "Socket-2:2", "--turn", "3", "--json"])
        .json();
    let all = placements(&prompt);
    for folded in ["recoveryTicket", "reworkFeedback", "remainingDelta"] {
        assert_eq!(find(&all, folded).1, "system_fold", "{folded}");
    }
    assert_eq!(find(&all, "retryFeedback").2, "trailing:mandate");

    let audit = sandbox.run(&["audit", "legacy", "--lint", "--json"]).json();
    let findings = audit["findings"].as_array().unwrap();
    let has = |rule: &str, entry: &str| {
        findings.iter().any(|f| {
            f["rule"] == rule && f["entry"] == entry && f["socket"] == "Socket-2" && f["visit"] == 2
        })
    };
    assert!(
        has("escalation-in-system-fold", "recoveryTicket"),
        "{findings:?}"
    );
    assert!(
        has("escalation-in-system-fold", "remainingDelta"),
        "{findings:?}"
    );
    assert!(
        has("mutable-in-cached-prefix", "recoveryTicket"),
        "{findings:?}"
    );
    for f in findings {
        for key in ["rule", "socket", "visit", "entry", "message"] {
            assert!(!f[key].is_null(), "finding without {key}: {f}");
        }
    }
}

#[test]
fn the_rework_reason_reaches_the_next_build_prompt_once() {
    let sandbox = Sandbox::new();
    let run = sandbox.run(&[
        "run",
        &fixture("loadouts/build-loop.json"),
        "--task",
        "greet",
        "--cast",
        "b",
        "--agent",
        &format!("scripted:{}", fixture("scripts/build-loop.jsonl")),
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let prompt = sandbox.run(&["prompt", "b", "Socket-3:2", "--json"]).json();
    let text: String = prompt["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["content"].as_str().unwrap())
        .collect::<Vec<_>>()
        .join("\n");
    assert_eq!(
        text.matches("greet() ignores the user's name").count(),
        1,
        "{text}"
    );
    assert!(text.contains("From Socket-4 Eval"), "{text}");
    // The next item's Build prompt does not carry the cleared rework.
    let next = sandbox.run(&["prompt", "b", "Socket-3:3", "--json"]).json();
    assert!(!next.to_string().contains("Runtime follow-up context"));

    let filtered = sandbox
        .run(&[
            "audit",
            "b",
            "--socket",
            "Socket-3",
            "--source-type",
            "reworkFeedback",
            "--json",
        ])
        .json();
    let prompts = filtered["prompts"].as_array().unwrap();
    assert_eq!(prompts.len(), 3);
    let with_rework: Vec<usize> = prompts
        .iter()
        .map(|p| p["placements"].as_array().unwrap().len())
        .collect();
    assert_eq!(with_rework, [0, 1, 0]);
}

#[test]
fn asking_for_a_prompt_that_does_not_exist_is_a_user_error() {
    let sandbox = Sandbox::new();
    sandbox.run(&[
        "run",
        &fixture("loadouts/build-loop.json"),
        "--task",
        "greet",
        "--cast",
        "b",
        "--agent",
        &format!("scripted:{}", fixture("scripts/build-loop.jsonl")),
    ]);
    let missing = sandbox.run(&["prompt", "b", "Socket-9"]);
    assert_eq!(missing.code, 1);
    assert!(missing.stderr.contains("no prompt"), "{}", missing.stderr);
    let bad = sandbox.run(&["prompt", "b", "Socket-3:x"]);
    assert_eq!(bad.code, 1);
    let turn = sandbox.run(&["prompt", "b", "Socket-4:1", "--turn", "7"]);
    assert_eq!(turn.code, 1);
    assert!(
        turn.stderr.contains("turns recorded: 1, 2"),
        "{}",
        turn.stderr
    );
}

/// Rendered prompts are not stored: `prompt` rebuilds them from the entry blobs and checks the
/// recorded digest, and a damaged entry blob is named by `verify` and refused by `prompt`.
#[test]
fn prompts_rebuild_from_entry_blobs_and_damage_is_named() {
    let sandbox = Sandbox::new();
    let script = format!("scripted:{}", fixture("scripts/build-loop.jsonl"));
    let run = sandbox.finish(&mut sandbox.build_loop("demo", &script));
    assert_eq!(run.json()["status"], "completed", "{}", run.stderr);
    let prompt = sandbox
        .run(&["prompt", "demo", "Socket-2", "--json"])
        .json();
    let hash = prompt["hash"].as_str().unwrap().to_owned();
    let conn = rusqlite::Connection::open(sandbox.db()).unwrap();
    let stored: i64 = conn
        .query_row(
            "SELECT count(*) FROM blobs WHERE hex(hash) = upper(?1)",
            [&hash],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(stored, 0, "the rendered prompt is not stored");
    let system = prompt["messages"][0]["content"].as_str().unwrap();
    assert!(!system.is_empty());

    // Damage the body of the first placed entry of that prompt.
    let body = prompt["placements"][0]["body"].as_str().unwrap().to_owned();
    let changed = conn
        .execute(
            "UPDATE blobs SET bytes = CAST('tampered' AS BLOB) WHERE hex(hash) = upper(?1)",
            [&body],
        )
        .unwrap();
    assert_eq!(changed, 1);
    drop(conn);
    let verify = sandbox.run(&["verify", "demo", "--json"]);
    assert_eq!(verify.code, 3, "{}", verify.stdout);
    let problems = verify.json()["problems"].as_array().unwrap().clone();
    assert!(
        problems
            .iter()
            .any(|p| p["kind"] == "blob"
                && p["message"].as_str().unwrap().contains("does not match")),
        "{problems:?}"
    );
    let refused = sandbox.run(&["prompt", "demo", "Socket-2"]);
    assert_eq!(refused.code, 3, "{}", refused.stderr);
    assert!(
        refused.stderr.contains("the prompt of seq")
            && refused.stderr.contains("not the recorded prompt"),
        "{}",
        refused.stderr
    );
}

/// A long entry is stored as chunks; a missing chunk is reported by `verify` as a damaged
/// blob at the seq of the prompt that uses it, and `prompt` refuses with exit 3.
#[test]
fn a_missing_chunk_is_named_by_verify_and_prompt() {
    let sandbox = Sandbox::new();
    let task = "add a greeting that says hello to each named person in turn ".repeat(40);
    let run = sandbox.run(&[
        "run",
        &fixture("loadouts/build-loop.json"),
        "--task",
        &task,
        "--cast",
        "long",
        "--agent",
        &format!("scripted:{}", fixture("scripts/build-loop.jsonl")),
        "--json",
    ]);
    assert_eq!(run.json()["status"], "completed", "{}", run.stderr);
    assert_eq!(sandbox.run(&["verify", "long"]).code, 0);
    let conn = rusqlite::Connection::open(sandbox.db()).unwrap();
    let chunked: i64 = conn
        .query_row("SELECT count(*) FROM blobs WHERE chunked != 0", [], |r| {
            r.get(0)
        })
        .unwrap();
    assert!(chunked > 0, "the long request is stored as chunks");
    conn.execute("DELETE FROM chunks WHERE id = 1", []).unwrap();
    drop(conn);
    let verify = sandbox.run(&["verify", "long", "--json"]);
    assert_eq!(verify.code, 3, "{}", verify.stderr);
    let problems = verify.json()["problems"].as_array().unwrap().clone();
    assert!(
        problems.iter().any(|p| p["kind"] == "blob"
            && p["message"].as_str().unwrap().contains("is damaged")
            && p["message"]
                .as_str()
                .unwrap()
                .contains("chunk 0 (row 1) is missing")),
        "{problems:?}"
    );
    let refused = sandbox.run(&["prompt", "long", "Socket-2"]);
    assert_eq!(refused.code, 3, "{}", refused.stderr);
    assert!(refused.stderr.contains("is missing"), "{}", refused.stderr);
}

/// A database written by an older castlog kept each rendered prompt (and system fold) as a
/// blob. Such a blob is used when it matches its address, and named as damage when it does
/// not: by `verify` and by `prompt`.
#[test]
fn a_prompt_blob_stored_by_an_older_castlog_is_checked() {
    let sandbox = Sandbox::new();
    let script = format!("scripted:{}", fixture("scripts/build-loop.jsonl"));
    let run = sandbox.finish(&mut sandbox.build_loop("old", &script));
    assert_eq!(run.json()["status"], "completed", "{}", run.stderr);
    let prompt = sandbox.run(&["prompt", "old", "Socket-2", "--json"]).json();
    let hash = prompt["hash"].as_str().unwrap().to_owned();
    let system_hash = prompt["system_hash"].as_str().unwrap().to_owned();
    // The stored form: compact JSON, role before content.
    let stored: Vec<String> = prompt["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| format!("{{\"role\":{},\"content\":{}}}", m["role"], m["content"]))
        .collect();
    let stored = format!("[{}]", stored.join(","));
    let conn = rusqlite::Connection::open(sandbox.db()).unwrap();
    // One row per address, as castlog keeps them: rewritten in place when it is there.
    let put = |hash: &str, bytes: &[u8]| {
        let params = rusqlite::params![hash, bytes];
        let changed = conn
            .execute(
                "UPDATE blobs SET bytes = ?2, chunked = 0 WHERE hash = unhex(?1)",
                params,
            )
            .unwrap();
        if changed == 0 {
            conn.execute(
                "INSERT INTO blobs (hash, bytes) VALUES (unhex(?1), ?2)",
                params,
            )
            .unwrap();
        }
    };
    put(&hash, stored.as_bytes());
    put(
        &system_hash,
        prompt["messages"][0]["content"]
            .as_str()
            .unwrap()
            .as_bytes(),
    );
    assert_eq!(
        sandbox.run(&["verify", "old"]).code,
        0,
        "matching stored blobs are sound"
    );
    let shown = sandbox.run(&["prompt", "old", "Socket-2", "--json"]).json();
    assert_eq!(shown["messages"], prompt["messages"]);

    put(&hash, b"[{\"role\":\"system\",\"content\":\"rm -rf /\"}]");
    put(&system_hash, b"rm -rf /");
    let verify = sandbox.run(&["verify", "old", "--json"]);
    assert_eq!(verify.code, 3, "{}", verify.stdout);
    let problems = verify.json()["problems"].as_array().unwrap().clone();
    for damaged in [&hash, &system_hash] {
        assert!(
            problems.iter().any(|p| p["message"]
                .as_str()
                .unwrap()
                .contains(&format!("{} does not match", &damaged[..12]))),
            "{damaged}: {problems:?}"
        );
    }
    let refused = sandbox.run(&["prompt", "old", "Socket-2"]);
    assert_eq!(refused.code, 3, "{}", refused.stderr);
    assert!(
        refused.stderr.contains("does not match its content"),
        "{}",
        refused.stderr
    );
}

/// A prompt that no longer rebuilds from its entry blobs is an integrity failure, whichever
/// command meets it: `run` (re-sending the prompt after a transient agent failure) and
/// `prompt` give the same exit code and kind.
#[test]
fn a_prompt_that_does_not_rebuild_exits_3_from_run_and_from_prompt() {
    let sandbox = Sandbox::new();
    let empty = sandbox.write("empty.jsonl", "");
    let first = sandbox.finish(&mut sandbox.build_loop("first", &format!("scripted:{empty}")));
    assert_eq!(first.json()["status"], "awaiting_agent", "{}", first.stderr);
    let prompt = sandbox
        .run(&["prompt", "first", "Socket-2", "--json"])
        .json();
    // Damage an entry body; the next cast's dispatch stores the same address and keeps the
    // damaged row (blobs are written once per address).
    let body = prompt["placements"][0]["body"].as_str().unwrap().to_owned();
    let conn = rusqlite::Connection::open(sandbox.db()).unwrap();
    let changed = conn
        .execute(
            "UPDATE blobs SET bytes = CAST('tampered' AS BLOB) WHERE hex(hash) = upper(?1)",
            [&body],
        )
        .unwrap();
    assert_eq!(changed, 1);
    drop(conn);
    // A transient failure first: the prompt is sent again, rebuilt from the log.
    let mut lines = vec![r#"{"error": "transient", "message": "rate limited"}"#.to_owned()];
    lines.extend(crate::common::fixture_lines("scripts/build-loop.jsonl"));
    let script = sandbox.write("transient.jsonl", &(lines.join("\n") + "\n"));
    let run = sandbox.finish(&mut sandbox.build_loop("second", &format!("scripted:{script}")));
    run.assert_failure_stdout();
    let shown = sandbox.run(&["prompt", "second", "Socket-2", "--json"]);
    shown.assert_failure_stdout();
    for (what, refused) in [("run", &run), ("prompt", &shown)] {
        assert_eq!(refused.code, 3, "{what}: {}", refused.stderr);
        let error = &refused.json()["error"];
        assert_eq!(error["kind"], "integrity", "{what}: {error}");
        assert!(
            error["message"]
                .as_str()
                .unwrap()
                .contains("not the recorded prompt"),
            "{what}: {error}"
        );
    }
}
