//! The run queue: `submit`, `worker` under leases, a worker killed or stalled past its lease,
//! `casts --status` and `show --follow`. On SQLite always, and on PostgreSQL (a schema of
//! its own per test) when `CASTLOG_TEST_POSTGRES` is set.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use crate::common::Sandbox;
use crate::postgres::Schema;

/// Two single-turn sockets, one after the other: a cast is two agent calls.
const TWO_SOCKETS: &str = r#"{
  "activeLoadout": "Two",
  "loadouts": {
    "Two": {
      "entry": "Socket-1",
      "sockets": {
        "Socket-1": { "materia": "Write", "parse": "text", "edges": [{ "when": "always", "to": "Socket-2" }] },
        "Socket-2": { "materia": "Check", "parse": "text" }
      }
    }
  },
  "materia": {
    "Write": { "type": "agent", "tools": "none", "label": "Write", "prompt": "Write: {{request}}" },
    "Check": { "type": "agent", "tools": "none", "label": "Check", "prompt": "Check: {{lastOutput}}" }
  }
}"#;

/// A database for one test: the sandbox's SQLite file, or a fresh PostgreSQL schema.
struct Backend {
    db: PathBuf,
    _schema: Option<Schema>,
}

fn backends(sandbox: &Sandbox) -> Vec<Backend> {
    let mut all = vec![Backend {
        db: sandbox.db(),
        _schema: None,
    }];
    if std::env::var_os("CASTLOG_TEST_POSTGRES").is_some() {
        let schema = Schema::new();
        all.push(Backend {
            db: PathBuf::from(schema.url()),
            _schema: Some(schema),
        });
    }
    all
}

/// A `cmd:` agent that waits `seconds` (touching `started` first when given), then answers.
fn agent(sandbox: &Sandbox, name: &str, seconds: &str, started: Option<&Path>) -> String {
    let touch = started
        .map(|p| format!("touch {}\n", p.display()))
        .unwrap_or_default();
    let path = sandbox.write(
        name,
        &format!("#!/bin/sh\ncat >/dev/null\n{touch}sleep {seconds}\necho ok\n"),
    );
    let mut perms = std::fs::metadata(&path).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
    std::fs::set_permissions(&path, perms).unwrap();
    format!("cmd:{path}")
}

/// Kills (SIGKILL, the whole process group) a worker the test did not see end.
struct Worker(Option<Child>);

impl Worker {
    fn child(&self) -> &Child {
        self.0.as_ref().unwrap()
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        if let Some(mut child) = self.0.take() {
            let _ = signal(&child, "-KILL", true);
            let _ = child.wait();
        }
    }
}

fn signal(child: &Child, sig: &str, group: bool) -> std::io::Result<std::process::ExitStatus> {
    let target = if group {
        format!("-{}", child.id())
    } else {
        child.id().to_string()
    };
    std::process::Command::new("kill")
        .args([sig, "--", &target])
        .status()
}

fn worker(sandbox: &Sandbox, db: &Path, id: &str, lease: &str) -> Worker {
    worker_with(sandbox, db, id, lease, &[])
}

fn worker_with(sandbox: &Sandbox, db: &Path, id: &str, lease: &str, more: &[&str]) -> Worker {
    let child = sandbox
        .command_on(db)
        .args([
            "worker",
            "--concurrency",
            "2",
            "--lease",
            lease,
            "--poll",
            "100ms",
            "--until-idle",
            "--id",
            id,
            "--json",
        ])
        .args(more)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .unwrap();
    Worker(Some(child))
}

/// Waits for the worker to end and returns its `--json` report and stderr.
fn finish(mut worker: Worker) -> (serde_json::Value, String) {
    let child = worker.0.take().unwrap();
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "the worker failed: {stderr}");
    let report = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("worker stdout is not JSON ({e}): {stderr}"));
    (report, stderr)
}

fn until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(120);
    while !done() {
        assert!(Instant::now() < deadline, "gave up waiting: {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn casts(sandbox: &Sandbox, db: &Path) -> Vec<serde_json::Value> {
    let run = sandbox.run_on(db, &["casts", "--json"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    run.json()["casts"].as_array().unwrap().clone()
}

fn submit(sandbox: &Sandbox, db: &Path, config: &str, agent: &str, cast: &str) {
    let run = sandbox.run_on(
        db,
        &[
            "submit", config, "--task", cast, "--agent", agent, "--cast", cast, "--json",
        ],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.json()["cast"], cast);
    assert_eq!(run.json()["state"], "queued");
}

fn events(sandbox: &Sandbox, db: &Path, cast: &str) -> Vec<serde_json::Value> {
    let run = sandbox.run_on(db, &["show", cast, "--json"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    run.json()["events"].as_array().unwrap().clone()
}

fn count(events: &[serde_json::Value], kind: &str) -> usize {
    events.iter().filter(|e| e["kind"] == kind).count()
}

/// `(socket, visit)` of every completed socket visit, in order.
fn completions(events: &[serde_json::Value]) -> Vec<(String, u64)> {
    events
        .iter()
        .filter(|e| e["kind"] == "socket_completed")
        .map(|e| {
            (
                e["payload"]["socket"].as_str().unwrap().to_owned(),
                e["payload"]["visit"].as_u64().unwrap(),
            )
        })
        .collect()
}

#[test]
fn thirty_casts_three_workers_one_killed_each_cast_completes_once() {
    let sandbox = Sandbox::new();
    let config = sandbox.write("two.json", TWO_SOCKETS);
    let agent = agent(&sandbox, "agent.sh", "0.1", None);
    for backend in backends(&sandbox) {
        let db = &backend.db;
        let names: Vec<String> = (1..=30).map(|i| format!("job-{i:02}")).collect();
        for name in &names {
            submit(&sandbox, db, &config, &agent, name);
        }
        let queued = casts(&sandbox, db);
        assert!(queued.iter().all(|c| c["status"] == "queued"), "{queued:?}");

        let doomed = worker(&sandbox, db, "w1", "2s");
        let others = [
            worker(&sandbox, db, "w2", "2s"),
            worker(&sandbox, db, "w3", "2s"),
        ];
        // Mid-run: some cast is done, and w1 holds one.
        let mut held_by_w1 = Vec::new();
        until("w1 to hold a cast after the first cast completed", || {
            let now = casts(&sandbox, db);
            held_by_w1 = now
                .iter()
                .filter(|c| c["holder"] == "w1")
                .map(|c| c["cast"].as_str().unwrap().to_owned())
                .collect();
            !held_by_w1.is_empty() && now.iter().any(|c| c["status"] == "completed")
        });
        signal(doomed.child(), "-KILL", true).unwrap();
        drop(doomed);
        // What w1 held when it died: its leases have not expired yet.
        held_by_w1 = casts(&sandbox, db)
            .iter()
            .filter(|c| c["holder"] == "w1")
            .map(|c| c["cast"].as_str().unwrap().to_owned())
            .collect();
        assert!(!held_by_w1.is_empty(), "w1 held nothing when it was killed");

        let reports: Vec<_> = others.into_iter().map(finish).collect();
        let listed = casts(&sandbox, db);
        assert_eq!(listed.len(), 30);
        for cast in &listed {
            assert_eq!(cast["status"], "completed", "{cast}");
            assert_eq!(cast["holder"], serde_json::Value::Null);
        }
        for name in &names {
            let events = events(&sandbox, db, name);
            assert_eq!(count(&events, "cast_completed"), 1, "{name}");
            assert_eq!(
                completions(&events),
                [("Socket-1".to_owned(), 1), ("Socket-2".to_owned(), 1)],
                "{name}: a socket visit completed twice or not at all"
            );
        }
        // What w1 held when it died was taken over and finished by w2 or w3.
        for name in &held_by_w1 {
            let taken_over = reports.iter().any(|(report, _)| {
                report["casts"].as_array().unwrap().iter().any(|c| {
                    c["cast"] == name.as_str()
                        && c["taken_over"] == true
                        && c["outcome"] == "completed"
                })
            });
            assert!(taken_over, "{name} was not taken over: {reports:?}");
            let listed = listed.iter().find(|c| c["cast"] == name.as_str()).unwrap();
            assert!(listed["epoch"].as_u64().unwrap() >= 2, "{listed}");
            // Its prompt in flight (or held) was sent again through the resume path.
            let events = events(&sandbox, db, name);
            assert!(count(&events, "cast_resumed") >= 1, "{name}: {events:?}");
        }
        let verify = sandbox.run_on(db, &["verify", "--all", "--json"]);
        assert_eq!(verify.code, 0, "{}", verify.stdout);
        assert_eq!(verify.json()["ok"], true);
    }
}

#[test]
fn a_worker_stopped_past_its_lease_appends_nothing_after_the_take_over() {
    let sandbox = Sandbox::new();
    let config = sandbox.write("two.json", TWO_SOCKETS);
    for (n, backend) in backends(&sandbox).into_iter().enumerate() {
        let db = &backend.db;
        let started = sandbox.path(&format!("started-{n}"));
        let agent = agent(&sandbox, &format!("slow-{n}.sh"), "0.8", Some(&started));
        submit(&sandbox, db, &config, &agent, "slow");
        let stalled = worker(&sandbox, db, "stalled", "1s");
        until("the first worker's agent to start", || started.exists());
        signal(stalled.child(), "-STOP", false).unwrap();
        until("the stopped worker's lease to expire", || {
            casts(&sandbox, db)[0]["lease_expired"] == true
        });
        let (report, _) = finish(worker(&sandbox, db, "rescuer", "2s"));
        assert_eq!(report["casts"][0]["outcome"], "completed", "{report}");
        assert_eq!(report["casts"][0]["taken_over"], true, "{report}");
        let done = events(&sandbox, db, "slow");

        signal(stalled.child(), "-CONT", false).unwrap();
        let (report, stderr) = finish(stalled);
        assert_eq!(
            report["casts"][0]["outcome"], "lease_lost",
            "{report} {stderr}"
        );
        assert!(
            stderr.contains("was taken over"),
            "the stalled worker does not say it lost the cast: {stderr}"
        );
        let after = events(&sandbox, db, "slow");
        assert_eq!(
            after, done,
            "the stalled worker appended after the take-over"
        );
        assert_eq!(count(&after, "cast_completed"), 1);
        assert_eq!(sandbox.run_on(db, &["verify", "--all"]).code, 0);
    }
}

#[test]
fn casts_lists_status_and_holder_and_show_follow_ends_with_the_cast() {
    let sandbox = Sandbox::new();
    let config = sandbox.write("two.json", TWO_SOCKETS);
    let agent = agent(&sandbox, "agent.sh", "0.1", None);
    for backend in backends(&sandbox) {
        let db = &backend.db;
        submit(&sandbox, db, &config, &agent, "watched");
        let queued = sandbox.run_on(db, &["casts", "--status", "queued", "--json"]);
        assert_eq!(queued.json()["casts"][0]["cast"], "watched");
        let running = sandbox.run_on(db, &["casts", "--status", "running", "--json"]);
        assert_eq!(running.json()["casts"].as_array().unwrap().len(), 0);

        let follow = sandbox
            .command_on(db)
            .args(["show", "watched", "--follow"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let (report, _) = finish(worker(&sandbox, db, "w", "2s"));
        assert_eq!(report["casts"][0]["outcome"], "completed");
        let out = follow.wait_with_output().unwrap();
        assert!(out.status.success());
        let text = String::from_utf8_lossy(&out.stdout);
        let last = text.lines().last().unwrap_or_default();
        assert!(last.contains("cast_completed"), "{text}");
        assert_eq!(
            text.lines().filter(|l| l.contains("agent_replied")).count(),
            2,
            "{text}"
        );
        let done = sandbox.run_on(db, &["casts", "--status", "completed", "--json"]);
        let row = &done.json()["casts"][0];
        assert_eq!(row["cast"], "watched");
        assert_eq!(row["cast_status"], "completed");
        assert_eq!(row["epoch"], 1);

        // With --json, NDJSON: one document per event line, the same as `show --json`'s
        // events, ending with the cast (so a follow of a finished cast returns at once).
        let ndjson = sandbox.run_on(db, &["show", "watched", "--follow", "--json"]);
        assert_eq!(ndjson.code, 0, "{}", ndjson.stderr);
        let lines: Vec<serde_json::Value> = ndjson
            .stdout
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l:?}")))
            .collect();
        let whole = sandbox.run_on(db, &["show", "watched", "--json"]).json();
        assert_eq!(
            Some(&lines),
            whole["events"].as_array(),
            "{}",
            ndjson.stdout
        );
        assert_eq!(lines.last().unwrap()["kind"], "cast_completed");
        assert!(
            lines
                .iter()
                .all(|l| l["seq"].is_u64() && l["hash"].is_string())
        );
    }
}

#[test]
fn max_inflight_holds_an_endpoints_limit_across_workers() {
    let sandbox = Sandbox::new();
    let config = sandbox.write("two.json", TWO_SOCKETS);
    for (n, backend) in backends(&sandbox).into_iter().enumerate() {
        let db = &backend.db;
        // The agent notes how many of its calls are in flight (itself included) when it starts.
        let inflight = sandbox.path(&format!("inflight-{n}"));
        let seen = sandbox.path(&format!("seen-{n}"));
        std::fs::create_dir_all(&inflight).unwrap();
        let path = sandbox.write(
            &format!("counted-{n}.sh"),
            &format!(
                "#!/bin/sh\ncat >/dev/null\ntouch {dir}/$$\nls {dir} | wc -l >> {seen}\nsleep 0.2\nrm {dir}/$$\necho ok\n",
                dir = inflight.display(),
                seen = seen.display()
            ),
        );
        let mut perms = std::fs::metadata(&path).unwrap().permissions();
        std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
        std::fs::set_permissions(&path, perms).unwrap();
        let agent = format!("cmd:{path}");
        for i in 1..=6 {
            submit(&sandbox, db, &config, &agent, &format!("limited-{i}"));
        }
        let limit = format!("{agent}=1");
        let workers =
            ["a", "b"].map(|id| worker_with(&sandbox, db, id, "2s", &["--max-inflight", &limit]));
        for worker in workers {
            let (report, _) = finish(worker);
            for cast in report["casts"].as_array().unwrap() {
                assert_eq!(cast["outcome"], "completed", "{report}");
            }
        }
        let counts: Vec<u32> = std::fs::read_to_string(&seen)
            .unwrap()
            .lines()
            .map(|l| l.trim().parse().unwrap())
            .collect();
        assert_eq!(counts.len(), 12, "two calls per cast: {counts:?}");
        assert!(
            counts.iter().all(|c| *c == 1),
            "more than one call in flight: {counts:?}"
        );
        let listed = casts(&sandbox, db);
        assert!(
            listed.iter().all(|c| c["status"] == "completed"),
            "{listed:?}"
        );
    }
}

#[test]
fn bench_workers_reports_casts_per_second_per_worker_count() {
    let sandbox = Sandbox::new();
    let run = sandbox.run_on(
        &sandbox.db(),
        &[
            "bench",
            "workers",
            "--workers",
            "1,2",
            "--casts",
            "3",
            "--sleep-ms",
            "10",
            "--json",
        ],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    let figures = run.json();
    assert_eq!(figures["backend"], "sqlite");
    let rounds = figures["rounds"].as_array().unwrap();
    assert_eq!(
        rounds
            .iter()
            .map(|r| r["workers"].as_u64().unwrap())
            .collect::<Vec<_>>(),
        [1, 2]
    );
    assert_eq!(rounds[0]["scaling"], 1.0);
    assert!(
        rounds
            .iter()
            .all(|r| r["casts_per_s"].as_f64().unwrap() > 0.0)
    );
    // Every submitted cast was driven to its end.
    let listed = casts(&sandbox, &sandbox.db());
    assert_eq!(listed.len(), 6);
    assert!(
        listed.iter().all(|c| c["status"] == "completed"),
        "{listed:?}"
    );
}

/// A multi-turn socket, then a single-turn one.
const TALK: &str = r#"{
  "activeLoadout": "Talk",
  "loadouts": {
    "Talk": {
      "entry": "Socket-1",
      "sockets": {
        "Socket-1": { "materia": "Talk", "parse": "text", "edges": [{ "when": "always", "to": "Socket-2" }] },
        "Socket-2": { "materia": "Check", "parse": "text" }
      }
    }
  },
  "materia": {
    "Talk": { "type": "agent", "tools": "none", "multiTurn": true, "label": "Talk", "prompt": "Talk: {{request}}" },
    "Check": { "type": "agent", "tools": "none", "label": "Check", "prompt": "Check: {{lastOutput}}" }
  }
}"#;

#[test]
fn a_paused_cast_waits_in_the_queue_until_refine_or_continue() {
    let sandbox = Sandbox::new();
    let config = sandbox.write("talk.json", TALK);
    let agent = agent(&sandbox, "agent.sh", "0", None);
    for backend in backends(&sandbox) {
        let db = &backend.db;
        submit(&sandbox, db, &config, &agent, "talk");
        let status = |wanted: &str| {
            let run = sandbox.run_on(db, &["casts", "--status", wanted, "--json"]);
            run.json()["casts"]
                .as_array()
                .unwrap()
                .iter()
                .map(|c| c["cast"].as_str().unwrap().to_owned())
                .collect::<Vec<_>>()
        };
        let (report, _) = finish(worker(&sandbox, db, "w", "2s"));
        assert_eq!(report["casts"][0]["outcome"], "awaiting_refinement");
        assert_eq!(status("paused"), ["talk"]);
        // Paused: a worker takes nothing.
        let (report, _) = finish(worker(&sandbox, db, "w", "2s"));
        assert_eq!(report["casts"], serde_json::json!([]));

        let refined = sandbox.run_on(db, &["refine", "talk", "say more", "--json"]);
        assert_eq!(refined.code, 0, "{}", refined.stderr);
        assert_eq!(status("queued"), ["talk"]);
        let (report, _) = finish(worker(&sandbox, db, "w", "2s"));
        assert_eq!(report["casts"][0]["outcome"], "awaiting_refinement");

        let finalized = sandbox.run_on(db, &["continue", "talk", "--json"]);
        assert_eq!(finalized.code, 0, "{}", finalized.stderr);
        assert_eq!(status("queued"), ["talk"]);
        let (report, _) = finish(worker(&sandbox, db, "w", "2s"));
        assert_eq!(report["casts"][0]["outcome"], "completed");
        assert_eq!(status("completed"), ["talk"]);
        let events = events(&sandbox, db, "talk");
        // Two drafts, the finalized answer (a turn of its own) and Socket-2's.
        assert_eq!(count(&events, "agent_replied"), 4);
        assert_eq!(count(&events, "cast_completed"), 1);
        assert_eq!(sandbox.run_on(db, &["verify", "--all"]).code, 0);
    }
}

#[test]
fn submit_refuses_a_bad_config_or_agent_before_opening_the_database() {
    let sandbox = Sandbox::new();
    let config = sandbox.write("two.json", TWO_SOCKETS);
    let missing = sandbox.run(&[
        "submit",
        "nope.json",
        "--task",
        "t",
        "--agent",
        "cmd:true",
        "--json",
    ]);
    assert_eq!(missing.code, 1);
    assert!(missing.stderr.contains("nope.json"), "{}", missing.stderr);
    missing.assert_failure_stdout();
    let agent = sandbox.run(&["submit", &config, "--task", "t", "--agent", "bogus:x"]);
    assert_eq!(agent.code, 1);
    assert!(
        agent.stderr.contains("unknown agent spec"),
        "{}",
        agent.stderr
    );
    assert!(
        !sandbox.db().exists(),
        "nothing may be created for a refused submit"
    );
    let worker = sandbox.run(&["worker", "--lease", "0s"]);
    assert_eq!(worker.code, 1, "{}", worker.stderr);
    assert!(worker.stderr.contains("more than 0"), "{}", worker.stderr);
}

/// A post step appends to a destination's claims ledger as well as to its cast: a worker
/// does both (the cast's appends fenced by its lease), and the post stays a dry run.
#[test]
fn a_worker_drives_a_post_cast_as_a_dry_run() {
    let sandbox = Sandbox::new();
    let config = crate::common::fixture("loadouts/post.json");
    let agent = crate::common::scripted("post.jsonl");
    for backend in backends(&sandbox) {
        let db = &backend.db;
        submit(&sandbox, db, &config, &agent, "posting");
        let (report, stderr) = finish(worker(&sandbox, db, "w", "2s"));
        assert_eq!(
            report["casts"][0]["outcome"], "completed",
            "{report} {stderr}"
        );
        let events = events(&sandbox, db, "posting");
        assert_eq!(count(&events, "post_claimed"), 1);
        assert_eq!(sandbox.run_on(db, &["verify", "--all"]).code, 0);
    }
}
