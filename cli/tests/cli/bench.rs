//! `bench synth` through the binary: the figures' shape and the step count.

use crate::common::Sandbox;

#[test]
fn bench_synth_prints_every_figure_and_counts_the_steps() {
    let figures = small_synth(&[]);
    let keys: Vec<&str> = figures
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    let mut expected = vec![
        "steps",
        "events",
        "wall_s",
        "steps_per_s",
        "ms_per_step_first10pct",
        "ms_per_step_last10pct",
        "db_bytes",
        "db_bytes_per_step",
        "history_list_s",
        "state_mid_s",
        "fork_s",
        "fork_steps",
        "peak_rss_mb",
        "durability",
        "reply_text",
        "packed",
        "pipelined",
        "commits",
        "commit_floor_ms",
        "ceiling_batched",
        "ceiling_per_step",
        "of_ceiling_batched",
        "of_ceiling_per_step",
        "stored_bytes_per_step",
    ];
    let mut got = keys.clone();
    got.sort_unstable();
    expected.sort_unstable();
    assert_eq!(got, expected);
    assert_eq!(figures["steps"], 1 + 2 * 2 * 2);
    assert_eq!(figures["durability"], "full");
    assert_eq!(figures["pipelined"], true);
    assert!(figures["events"].as_u64().unwrap() > 9);
    assert!(figures["db_bytes"].as_u64().unwrap() > 0);
    // One commit starts the cast; the steps of the local agent are then held together, up to
    // 16 in one commit, and these nine are committed once the run ends.
    assert_eq!(figures["commits"], 2);
    assert!(figures["commit_floor_ms"].as_f64().unwrap() > 0.0);
    // The ceilings write the same bytes per step, as many steps, 16 to a commit and one each.
    for (key, per_commit, commits) in [("ceiling_batched", 16, 1), ("ceiling_per_step", 1, 9)] {
        let ceiling = &figures[key];
        assert_eq!(ceiling["steps"], 9, "{ceiling}");
        assert_eq!(ceiling["steps_per_commit"], per_commit, "{ceiling}");
        assert_eq!(ceiling["commits"], commits, "{ceiling}");
        let per_step = figures["db_bytes_per_step"].as_f64().unwrap();
        assert_eq!(
            ceiling["bytes_per_step"],
            per_step.ceil() as u64,
            "{ceiling}"
        );
        assert!(ceiling["steps_per_s"].as_f64().unwrap() > 0.0, "{ceiling}");
    }
    assert!(figures["of_ceiling_batched"].as_f64().unwrap() > 0.0);
    assert!(figures["of_ceiling_per_step"].as_f64().unwrap() > 0.0);
    // A fork at the middle redoes part of the run, never more than all of it.
    if let Some(fork) = figures["fork_steps"].as_u64() {
        assert!((1..=9).contains(&fork), "fork_steps {fork}");
    }
    // Where the bytes went: every kind the run recorded, the blob store and the caches, each
    // at most what the whole file holds per step.
    let stored = &figures["stored_bytes_per_step"];
    let per_step = figures["db_bytes_per_step"].as_f64().unwrap();
    let payloads = stored["payloads"].as_object().unwrap();
    for kind in [
        "cast_started",
        "agent_replied",
        "socket_completed",
        "prompt_dispatched",
    ] {
        assert!(payloads[kind].as_f64().unwrap() > 0.0, "{stored}");
    }
    let held: f64 = payloads.values().map(|v| v.as_f64().unwrap()).sum::<f64>()
        + ["chunks", "blobs", "caches"]
            .iter()
            .map(|k| stored[*k].as_f64().unwrap())
            .sum::<f64>();
    assert!(
        held > 0.0 && held <= per_step,
        "{held} of {per_step}: {stored}"
    );
}

#[test]
fn bench_replay_measures_a_cast_and_its_recast() {
    let figures = small_bench("replay", "3", &[]);
    for key in [
        "events",
        "fold_events_per_s",
        "verify_events_per_s",
        "redecide_events_per_s",
        "state_mid_s",
        "diff_s",
    ] {
        assert!(figures[key].is_number(), "{key} missing: {figures}");
    }
    // The recast is forked at the middle and driven by the same agent: a fork shares exactly
    // its prefix, and every aligned step is there.
    assert!(
        figures["diff_common_prefix"].as_u64().unwrap() <= figures["events"].as_u64().unwrap() / 2
    );
    assert_eq!(figures["diff_steps"], 1 + 2 * 3 * 2);
}

/// `bench reads` runs every read command on a cast it makes and prints each one's figures
/// (their values are measurements, not checked).
#[test]
fn bench_reads_prints_a_figure_for_every_read_command() {
    let figures = small_bench("reads", "2", &[]);
    let mut keys: Vec<&str> = figures
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    keys.sort_unstable();
    assert_eq!(
        keys,
        [
            "built",
            "cast",
            "events",
            "max_command",
            "max_peak_rss_mb",
            "reads",
            "verify_events_per_s"
        ]
    );
    assert!(figures["verify_events_per_s"].as_f64().unwrap() > 0.0);
    assert_eq!(figures["built"], true);
    let reads = figures["reads"].as_array().unwrap();
    let commands: Vec<&str> = reads
        .iter()
        .map(|r| r["command"].as_str().unwrap())
        .collect();
    assert_eq!(
        commands,
        [
            "casts --json",
            "show CAST --json",
            "show CAST",
            "export CAST --format jsonl -o FILE --json",
            "export CAST --format bincode -o FILE --json",
            "state CAST --json",
            &format!(
                "state CAST --at {} --json",
                figures["events"].as_u64().unwrap() / 2
            ),
            "replay CAST --json",
            "verify --all --json",
            "diff CAST CAST --json",
            "audit CAST --json",
            "audit CAST --lint --json",
            "prompt CAST Socket-3:4 --json",
        ]
    );
    for read in reads {
        assert_eq!(read["exit"], 0, "{read}");
        assert!(read["peak_rss_mb"].is_number(), "{read}");
        assert!(read["wall_s"].is_number(), "{read}");
    }
    assert!(commands.contains(&figures["max_command"].as_str().unwrap()));
}

/// A long cast keeps state snapshots as it runs; `state --at` from a snapshot prints exactly
/// what a fold from the first event prints, and a damaged or stale snapshot is ignored.
#[test]
fn state_at_from_a_snapshot_equals_a_full_fold() {
    let sandbox = Sandbox::new();
    let db = sandbox.db();
    let db = db.to_str().unwrap();
    let run = sandbox.run(&[
        "bench",
        "synth",
        "--items",
        "60",
        "--rework",
        "3",
        "--output-bytes",
        "300",
        "--db",
        db,
        "--json",
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let events = run.json()["events"].as_u64().unwrap();
    assert!(
        events > 2100,
        "{events} events: the cast must pass a snapshot point"
    );
    let casts = sandbox.run(&["casts", "--json"]).json();
    let cast = casts["casts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["parent"].is_null())
        .unwrap()["cast"]
        .as_str()
        .unwrap()
        .to_owned();
    let conn = rusqlite::Connection::open(db).unwrap();
    let snapshots: i64 = conn
        .query_row(
            "SELECT count(*) FROM checkpoints WHERE cast_id = ?1 AND name LIKE 'state@%'",
            [&cast],
            |r| r.get(0),
        )
        .unwrap();
    assert!(snapshots >= 1, "no snapshot kept");
    let seqs = ["2047", "2051", "2052", "2100", &events.to_string()];
    let states = |sandbox: &Sandbox| -> Vec<String> {
        seqs.iter()
            .map(|at| {
                let out = sandbox.run(&["state", &cast, "--at", at, "--json"]);
                assert_eq!(out.code, 0, "{}", out.stderr);
                out.stdout
            })
            .collect()
    };
    let from_snapshots = states(&sandbox);
    // The kept snapshots are read, not ignored (a state that keeps rework entries included).
    let at_head = sandbox.run(&["state", &cast, "--json"]);
    assert!(!at_head.stderr.contains("snapshot"), "{}", at_head.stderr);
    assert_eq!(
        sandbox.run(&["verify", &cast]).code,
        0,
        "kept snapshots match the fold"
    );
    // A snapshot whose seq no longer matches where it is filed: named, never looped on.
    let moved = "UPDATE checkpoints SET seq = seq + 1 WHERE name LIKE 'state@%'";
    conn.execute(moved, []).unwrap();
    assert_eq!(
        states(&sandbox),
        from_snapshots,
        "a moved snapshot was used"
    );
    let verify = sandbox.run(&["verify", &cast, "--json"]);
    assert_eq!(verify.code, 3, "{}", verify.stdout);
    let problems = verify.json()["problems"].as_array().unwrap().clone();
    assert!(
        problems.iter().any(|p| p["kind"] == "snapshot"),
        "{problems:?}"
    );
    conn.execute(
        "UPDATE checkpoints SET seq = seq - 1 WHERE name LIKE 'state@%'",
        [],
    )
    .unwrap();
    conn.execute(
        "UPDATE checkpoints SET bytes = CAST('{\"damaged\": true}' AS BLOB) WHERE name LIKE 'state@%'",
        [],
    )
    .unwrap();
    assert_eq!(
        states(&sandbox),
        from_snapshots,
        "a damaged snapshot changed the state"
    );
    let verify = sandbox.run(&["verify", &cast, "--json"]);
    assert_eq!(verify.code, 3, "{}", verify.stdout);
    let problems = verify.json()["problems"].as_array().unwrap().clone();
    assert!(
        problems.iter().any(|p| p["kind"] == "snapshot"
            && p["message"]
                .as_str()
                .unwrap()
                .contains("does not match its seal")),
        "{problems:?}"
    );
    conn.execute("DELETE FROM checkpoints WHERE name LIKE 'state@%'", [])
        .unwrap();
    assert_eq!(
        states(&sandbox),
        from_snapshots,
        "a snapshot changed the state"
    );
    assert_eq!(sandbox.run(&["verify", &cast]).code, 0);
}

/// `bench` never writes into the database `CASTLOG_DB` names for the other commands, and
/// `bench append` refuses to add its raw events to a workflow cast (it would no longer
/// re-decide) or to append nothing.
#[test]
fn bench_keeps_out_of_real_casts() {
    let sandbox = Sandbox::new();
    let script = format!(
        "scripted:{}",
        crate::common::fixture("scripts/build-loop.jsonl")
    );
    let run = sandbox.finish(&mut sandbox.build_loop("real", &script));
    assert_eq!(run.code, 0, "{}", run.stderr);
    let casts = || sandbox.run(&["casts", "--json"]).stdout;
    let before = casts();
    let through_env = std::process::Command::new(crate::common::castlog_bin())
        .current_dir(sandbox.path(""))
        .env("CASTLOG_DB", sandbox.db())
        .args([
            "bench",
            "append",
            "--events",
            "5",
            "--payload-bytes",
            "16",
            "--json",
        ])
        .output()
        .unwrap();
    assert!(through_env.status.success(), "{through_env:?}");
    assert_eq!(casts(), before, "bench wrote into CASTLOG_DB");
    for (args, says) in [
        (vec!["--cast", "real"], "cast real is not a bench cast"),
        (vec!["--events", "0"], "must be at least 1"),
    ] {
        let mut all = vec!["bench", "append", "--payload-bytes", "16"];
        all.extend(args);
        let out = sandbox.run(&all);
        assert_eq!(out.code, 1, "{}", out.stderr);
        assert!(out.stderr.contains(says), "{}", out.stderr);
    }
    assert_eq!(casts(), before);
    assert_eq!(sandbox.run(&["verify"]).code, 0);
}

#[test]
fn bench_synth_without_the_pipeline_runs_the_same_steps_and_says_so() {
    let figures = small_synth(&["--no-pipeline"]);
    assert_eq!(figures["pipelined"], false);
    assert_eq!(figures["steps"], 1 + 2 * 2 * 2);
    // One commit starts the cast, then one per reply: the commit before each agent call.
    assert_eq!(figures["commits"], 1 + 2 * 2 * 2 + 1);
}

/// With normal durability the local agent's steps are held and committed together too (no
/// fsync to wait for, but a commit per step saved), so `normal` is never slower than `full`.
#[test]
fn bench_synth_with_normal_durability_holds_the_steps_too() {
    let figures = small_synth(&["--durability", "normal"]);
    assert_eq!(figures["durability"], "normal");
    assert_eq!(figures["pipelined"], true);
    assert_eq!(figures["commits"], 2);
    let strict = small_synth(&["--durability", "normal", "--no-pipeline"]);
    assert_eq!(strict["commits"], 1 + 2 * 2 * 2 + 1);
}

/// A pipelined run past 2,048 events keeps state snapshots (written with the held steps) that
/// `verify` finds to be the state the log folds to, for the cast and its recast alike.
#[test]
fn bench_synth_keeps_snapshots_that_verify() {
    let sandbox = Sandbox::new();
    let db = sandbox.path("synth.db");
    let db_arg = db.to_str().unwrap();
    let run = sandbox.run(&[
        "bench",
        "synth",
        "--items",
        "100",
        "--rework",
        "3",
        "--output-bytes",
        "100",
        "--db",
        db_arg,
        "--json",
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run.json()["events"].as_u64().unwrap() > 2 * 2048);
    let snapshots: i64 = rusqlite::Connection::open(&db)
        .unwrap()
        .query_row(
            "SELECT count(*) FROM checkpoints WHERE name LIKE 'state@%'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert!(snapshots >= 2, "{snapshots} snapshots");
    let verify = sandbox.run_on(&db, &["verify", "--json"]);
    assert_eq!(verify.code, 0, "{}", verify.stdout);
    assert_eq!(verify.json()["ok"], true);
}

/// Packing is on unless `--no-pack`: the same words-text cast then takes fewer bytes per step;
/// random replies pack less well than words, and the figures say which run was which.
#[test]
fn bench_synth_packs_unless_told_not_to_and_says_so() {
    let bytes = |extra: &[&str]| -> (f64, serde_json::Value, serde_json::Value) {
        let sandbox = Sandbox::new();
        let mut args = vec!["bench", "synth", "--items", "20", "--output-bytes", "2000"];
        args.extend_from_slice(extra);
        args.push("--json");
        let run = sandbox.run(&args);
        assert_eq!(run.code, 0, "{}", run.stderr);
        let figures = run.json();
        (
            figures["db_bytes_per_step"].as_f64().unwrap(),
            figures["packed"].clone(),
            figures["reply_text"].clone(),
        )
    };
    let (packed, on, words) = bytes(&[]);
    let (unpacked, off, _) = bytes(&["--no-pack"]);
    let (random, _, text) = bytes(&["--text", "random"]);
    assert_eq!((on, off), (true.into(), false.into()));
    assert_eq!((words, text), ("words".into(), "random".into()));
    assert!(packed < unpacked, "{packed} packed, {unpacked} not");
    assert!(packed < random, "{packed} words, {random} random");
}

/// `bench synth --json` on 2 items, 2 tries and 100-byte replies, with `extra` options.
fn small_synth(extra: &[&str]) -> serde_json::Value {
    small_bench("synth", "2", extra)
}

/// `bench WORKLOAD` on a small synthetic cast (W items, 2 tries, 100-byte replies).
fn small_bench(workload: &str, items: &str, extra: &[&str]) -> serde_json::Value {
    let sandbox = Sandbox::new();
    let mut args = vec![
        "bench",
        workload,
        "--items",
        items,
        "--rework",
        "2",
        "--output-bytes",
        "100",
        "--json",
    ];
    args.extend_from_slice(extra);
    let run = sandbox.run(&args);
    assert_eq!(run.code, 0, "bench {workload} failed: {}", run.stderr);
    run.json()
}

/// `bench posts` measures each database size asked for (its rates are measurements, not
/// checked), in databases it makes anew beside `--db`.
#[test]
fn bench_posts_prints_a_run_per_size_in_databases_of_its_own() {
    let sandbox = Sandbox::new();
    let args = ["bench", "posts", "--casts", "2,5", "--posts", "3", "--json"];
    let run = sandbox.run(&args);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let figures = run.json();
    assert_eq!(figures["posts"], 3);
    let runs = figures["runs"].as_array().unwrap();
    let casts: Vec<u64> = runs.iter().map(|r| r["casts"].as_u64().unwrap()).collect();
    assert_eq!(casts, [2, 5]);
    let per_cast = figures["background_cast_events"].as_u64().unwrap();
    for r in runs {
        assert_eq!(
            r["events"].as_u64().unwrap(),
            r["casts"].as_u64().unwrap() * per_cast
        );
        assert!(r["post_steps_per_s"].as_f64().unwrap() > 0.0, "{r}");
    }
    let kept = sandbox.path("castlog.db.casts-5");
    let listed = sandbox.run_on(&kept, &["casts", "--json"]).json();
    assert_eq!(listed["casts"].as_array().unwrap().len(), 5 + 3);
    let again = sandbox.run(&args);
    assert_eq!(again.code, 1, "{}", again.stderr);
    assert!(
        again.stderr.contains("castlog.db.casts-2 exists"),
        "{}",
        again.stderr
    );
}

/// `bench tools` records the calls it says, in casts of --per-visit calls, into a database
/// that then verifies (so the calls were recorded, not only counted).
#[test]
fn bench_tools_records_its_calls_in_casts_that_verify() {
    let sandbox = Sandbox::new();
    let db = sandbox.path("tools.db");
    let run = sandbox.run_on(
        &db,
        &[
            "bench",
            "tools",
            "--calls",
            "25",
            "--per-visit",
            "10",
            "--durability",
            "normal",
            "--json",
        ],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    let figures = run.json();
    assert_eq!(figures["calls"], 25);
    assert_eq!(figures["casts"], 3);
    assert!(figures["bytes_per_call"].as_f64().unwrap() > 0.0);
    let verify = sandbox.run_on(&db, &["verify", "--json"]);
    assert_eq!(verify.code, 0, "{}", verify.stdout);
    let shown = sandbox.run_on(&db, &["casts", "--json"]);
    assert_eq!(shown.code, 0, "{}", shown.stderr);
    assert_eq!(
        shown.stdout.matches("bench-tools-").count(),
        3,
        "{}",
        shown.stdout
    );
}

#[test]
fn bench_lanes_prints_both_wall_times_and_their_ratio() {
    let sandbox = Sandbox::new();
    let run = sandbox.run(&["bench", "lanes", "--sleep-ms", "0", "--json"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let figures = run.json();
    for key in [
        "parallel_wall_s",
        "serial_wall_s",
        "parallel_vs_serial",
        "agent_calls",
    ] {
        assert!(figures[key].is_number(), "{key}: {figures}");
    }
    assert_eq!(figures["lanes"], 4);
    assert_eq!(figures["work_items"], 8);
}
