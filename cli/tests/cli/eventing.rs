//! Issue 20 item 7: eventing with webhook sinks. A cast's bus events are delivered from its
//! log to a local HTTP endpoint that fails, goes down and comes back; filters and body
//! templates shape what each sink gets; header values are never recorded.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common::{Sandbox, fixture};

const SECRET: &str = "Bearer hook-secret-7f3a9c";

/// One request the endpoint took.
#[derive(Debug, Clone)]
struct Received {
    path: String,
    headers: BTreeMap<String, String>,
    body: Value,
    answered: u16,
}

/// A webhook endpoint on localhost (std's `TcpListener`): it answers 500 to its first
/// `failures` requests and 200 to the others, and can be taken down and brought up again on
/// the same port.
struct Endpoint {
    port: u16,
    received: Arc<Mutex<Vec<Received>>>,
    failures: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Endpoint {
    fn start(failures: usize) -> Endpoint {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let mut endpoint = Endpoint {
            port,
            received: Arc::default(),
            failures: Arc::new(AtomicUsize::new(failures)),
            stop: Arc::default(),
            thread: None,
        };
        endpoint.serve(listener);
        endpoint
    }

    fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    fn serve(&mut self, listener: TcpListener) {
        listener.set_nonblocking(true).unwrap();
        self.stop.store(false, Ordering::SeqCst);
        let (received, failures, stop) = (
            Arc::clone(&self.received),
            Arc::clone(&self.failures),
            Arc::clone(&self.stop),
        );
        self.thread = Some(std::thread::spawn(move || {
            while !stop.load(Ordering::SeqCst) {
                match listener.accept() {
                    Ok((stream, _)) => {
                        stream.set_nonblocking(false).unwrap();
                        answer(stream, &received, &failures);
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(2)),
                }
            }
        }));
    }

    /// Nothing listens on the port until [`Endpoint::up`].
    fn down(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(thread) = self.thread.take() {
            thread.join().unwrap();
        }
    }

    fn up(&mut self) {
        let listener = TcpListener::bind(("127.0.0.1", self.port)).unwrap();
        self.serve(listener);
    }

    fn received(&self) -> Vec<Received> {
        self.received.lock().unwrap().clone()
    }

    /// Waits until at least `n` requests came.
    fn wait_for(&self, n: usize) {
        let deadline = Instant::now() + Duration::from_secs(60);
        while self.received().len() < n {
            assert!(
                Instant::now() < deadline,
                "the endpoint never got {n} requests"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for Endpoint {
    fn drop(&mut self) {
        self.down();
    }
}

fn answer(stream: std::net::TcpStream, received: &Mutex<Vec<Received>>, failures: &AtomicUsize) {
    let mut reader = BufReader::new(stream);
    let mut request_line = String::new();
    if reader.read_line(&mut request_line).is_err() {
        return;
    }
    let path = request_line
        .split_whitespace()
        .nth(1)
        .unwrap_or_default()
        .to_owned();
    let mut headers = BTreeMap::new();
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).is_err() || line.trim().is_empty() {
            break;
        }
        if let Some((name, value)) = line.split_once(':') {
            headers.insert(name.trim().to_ascii_lowercase(), value.trim().to_owned());
        }
    }
    let length = headers
        .get("content-length")
        .and_then(|l| l.parse().ok())
        .unwrap_or(0);
    let mut body = vec![0; length];
    let _ = reader.read_exact(&mut body);
    let fail = failures
        .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
        .is_ok();
    let answered = if fail { 500 } else { 200 };
    received.lock().unwrap().push(Received {
        path,
        headers,
        body: serde_json::from_slice(&body).unwrap_or(Value::Null),
        answered,
    });
    let mut stream = reader.into_inner();
    let _ = write!(
        stream,
        "HTTP/1.1 {answered} X\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
    );
}

/// The Build-Loop fixture with `eventing` set.
fn config_with(sandbox: &Sandbox, name: &str, eventing: Value) -> String {
    let mut config: Value = serde_json::from_str(
        &std::fs::read_to_string(fixture("loadouts/build-loop.json")).unwrap(),
    )
    .unwrap();
    config["eventing"] = eventing;
    sandbox.write(name, &serde_json::to_string_pretty(&config).unwrap())
}

fn sink(url: &str) -> Value {
    json!({
        "url": url,
        "headers": { "Authorization": SECRET },
        "timeoutMs": 5000,
        "maxRetries": 3,
        "retryBackoffMs": 1,
        "maxBackoffMs": 5,
        "discardingAfter": 1000,
    })
}

/// The delivery record's rows of `cast`, read straight from the database file.
fn delivery_rows(sandbox: &Sandbox, cast: &str) -> Vec<(u64, String, Option<u16>)> {
    let conn = rusqlite::Connection::open(sandbox.db()).unwrap();
    let mut stmt = conn
        .prepare(
            "SELECT sequence, status, status_code FROM castlog_deliveries WHERE cast_id = ?1 ORDER BY rowid",
        )
        .unwrap();
    stmt.query_map([cast], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

/// Kills the child (its whole group) if the test panics before it does.
struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The endpoint fails the first two deliveries, is down while castlog is killed with
/// SIGKILL mid cast, and is up again for `resume`: every bus event of the cast reaches it, in
/// order, each sequence always under one id (redeliveries repeat it), the failures are in
/// the delivery record, and the header's value is sent but never recorded.
#[test]
fn every_event_is_delivered_in_order_through_failures_and_a_kill() {
    use std::os::unix::process::CommandExt;

    let sandbox = Sandbox::new();
    let mut endpoint = Endpoint::start(2);
    let config = config_with(
        &sandbox,
        "config.json",
        json!({ "enabled": true, "heartbeatIntervalMs": 0,
                "sinks": { "ops": sink(&endpoint.url("/hook")) } }),
    );
    let script = fixture("scripts/build-loop.jsonl");
    // A command agent that answers from the script and hangs on its fifth call.
    let counter = sandbox.path("calls");
    let agent = sandbox.path("agent.py");
    std::fs::write(
        &agent,
        format!(
            r#"import json, sys, time
sys.stdin.read()
path = {counter:?}
try:
    n = int(open(path).read()) + 1
except FileNotFoundError:
    n = 1
open(path, "w").write(str(n))
if n == 5:
    time.sleep(120)
line = open({script:?}).read().splitlines()[n - 1]
sys.stdout.write(json.loads(line)["reply"])
"#
        ),
    )
    .unwrap();
    let child = sandbox
        .command_on(&sandbox.db())
        .args([
            "run",
            &config,
            "--task",
            "greet",
            "--cast",
            "hooked",
            "--agent",
            &format!("cmd:python3 {}", agent.display()),
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()
        .unwrap();
    let mut child = KillOnDrop(child);
    // Two failures and a delivery of the first event; then the endpoint goes down.
    endpoint.wait_for(3);
    endpoint.down();
    let deadline = Instant::now() + Duration::from_secs(60);
    while std::fs::read_to_string(&counter).map_or(true, |n| n.trim() != "5") {
        assert!(
            Instant::now() < deadline,
            "the agent was never called a fifth time"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let group = format!("-{}", child.0.id());
    std::process::Command::new("kill")
        .args(["-9", "--", &group])
        .status()
        .unwrap();
    let _ = child.0.wait();

    endpoint.up();
    let resumed = sandbox.run(&[
        "resume",
        "hooked",
        "--agent",
        &format!("scripted:{script}"),
        "--json",
    ]);
    assert_eq!(resumed.code, 0, "{}", resumed.stderr);
    assert_eq!(resumed.json()["status"], "completed");

    // Nothing is left to deliver.
    let drained = sandbox.run(&["deliver", "hooked", "--json"]);
    assert_eq!(drained.code, 0, "{}", drained.stderr);
    let report = drained.json();
    let ops = &report["casts"][0]["sinks"][0];
    assert_eq!(ops["queued"], 0, "{report}");
    assert_eq!(ops["headers"]["Authorization"], "[redacted]");
    let total = ops["events"].as_u64().unwrap();
    assert!(total >= 10, "{report}");

    let received = endpoint.received();
    let sequences: Vec<u64> = received
        .iter()
        .map(|r| r.body["sequence"].as_u64().unwrap())
        .collect();
    assert!(
        sequences.windows(2).all(|w| w[0] <= w[1]),
        "out of order: {sequences:?}"
    );
    let mut ids: BTreeMap<u64, BTreeSet<String>> = BTreeMap::new();
    for r in &received {
        let key = r.headers["idempotency-key"].clone();
        assert_eq!(r.body["eventId"], key.as_str());
        assert_eq!(r.body["runtimeRunId"], "hooked");
        assert_eq!(r.headers["authorization"], SECRET);
        ids.entry(r.body["sequence"].as_u64().unwrap())
            .or_default()
            .insert(key);
    }
    assert!(ids.values().all(|keys| keys.len() == 1), "{ids:?}");
    let delivered: BTreeSet<u64> = received
        .iter()
        .filter(|r| r.answered == 200)
        .map(|r| r.body["sequence"].as_u64().unwrap())
        .collect();
    assert_eq!(delivered, (1..=total).collect::<BTreeSet<_>>());
    let distinct: BTreeSet<&String> = ids.values().flatten().collect();
    assert_eq!(distinct.len() as u64, total);
    assert_eq!(received[0].body["eventType"], "lifecycle.cast.started");
    assert_eq!(
        received.last().unwrap().body["eventType"],
        "lifecycle.cast.completed"
    );

    // The two 500s are recorded against the first event, then its delivery.
    let rows = delivery_rows(&sandbox, "hooked");
    assert_eq!(
        rows[..3],
        [
            (1, "failed".to_owned(), Some(500)),
            (1, "failed".to_owned(), Some(500)),
            (1, "delivered".to_owned(), Some(200)),
        ]
    );

    // While the endpoint was down, attempts failed with no answer, and were recorded.
    assert!(
        rows.iter().any(|r| r.1 == "failed" && r.2.is_none()),
        "{rows:?}"
    );

    // The header value is in the config only.
    let db = std::fs::read(sandbox.db()).unwrap();
    let secret = SECRET.as_bytes();
    assert!(!db.windows(secret.len()).any(|w| w == secret));
    let shown = sandbox.run(&["show", "hooked", "--json"]);
    assert!(!shown.stdout.contains(SECRET));
    assert!(!drained.stdout.contains(SECRET) && !resumed.stderr.contains(SECRET));

    let verified = sandbox.run(&["verify", "--all"]);
    assert_eq!(verified.code, 0, "{}", verified.stdout);
}

/// Each sink takes what its filter lets through, in the shape of its body template; what a
/// filter leaves out is recorded as skipped.
#[test]
fn filters_and_body_templates_shape_what_each_sink_gets() {
    let sandbox = Sandbox::new();
    let endpoint = Endpoint::start(0);
    let mut lifecycle = sink(&endpoint.url("/cast"));
    lifecycle["eventFilter"] = json!({ "include": ["lifecycle.cast.*"] });
    lifecycle["bodyTemplate"] = json!("envelope");
    lifecycle["typeMap"] = json!({ "lifecycle.cast.started": "run.accepted" });
    let mut sockets = sink(&endpoint.url("/sockets"));
    sockets["eventFilter"] =
        json!({ "include": ["lifecycle.**"], "exclude": ["lifecycle.cast.**", "*.*.started"] });
    sockets["bodyTemplate"] = json!("passthrough");
    let mut mapped = sink(&endpoint.url("/mapped"));
    mapped["eventFilter"] = json!({ "include": ["lifecycle.cast.completed"] });
    mapped["severityMap"] = json!({ "info": "notice" });
    mapped["bodyMapping"] = json!({ "message": "socketId", "static": { "team": "ops" } });
    let mut empty = sink(&endpoint.url("/none"));
    empty["eventFilter"] = json!({ "include": ["lifecycle.cast.completed"] });
    empty["bodyTemplate"] = json!("none");
    let config = config_with(
        &sandbox,
        "config.json",
        json!({ "enabled": true, "sinks": {
            "cast": lifecycle, "sockets": sockets, "mapped": mapped, "empty": empty } }),
    );
    let ran = sandbox.run(&[
        "run",
        &config,
        "--task",
        "greet",
        "--cast",
        "shaped",
        "--agent",
        &format!("scripted:{}", fixture("scripts/build-loop.jsonl")),
        "--json",
    ]);
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    let received = endpoint.received();
    let at = |path: &str| -> Vec<Value> {
        received
            .iter()
            .filter(|r| r.path == path)
            .map(|r| r.body.clone())
            .collect()
    };

    let cast = at("/cast");
    let types: Vec<&str> = cast.iter().map(|b| b["type"].as_str().unwrap()).collect();
    assert_eq!(types, ["run.accepted", "lifecycle.cast.completed"]);
    assert_eq!(cast[0]["data"]["type"], "lifecycle.cast.started");
    assert_eq!(cast[0]["data"]["castId"], "shaped");
    assert_eq!(cast[0]["sequence"], 1);

    let sockets = at("/sockets");
    assert!(!sockets.is_empty());
    for body in &sockets {
        assert_eq!(body["type"], "lifecycle.socket.completed", "{body}");
        assert_eq!(body["castId"], "shaped");
        assert!(
            body["materia"].is_string() && body["visit"].is_u64(),
            "{body}"
        );
    }

    let mapped = at("/mapped");
    assert_eq!(mapped.len(), 1);
    assert_eq!(mapped[0]["eventType"], "lifecycle.cast.completed");
    assert_eq!(mapped[0]["severity"], "notice");
    assert_eq!(mapped[0]["message"], "lifecycle");
    assert_eq!(mapped[0]["team"], "ops");
    assert_eq!(mapped[0]["runtimeRunId"], "shaped");
    assert_eq!(at("/none"), [json!({})]);

    let rows = delivery_rows(&sandbox, "shaped");
    let skipped = rows.iter().filter(|r| r.1 == "skipped").count();
    let delivered = rows.iter().filter(|r| r.1 == "delivered").count();
    assert_eq!(delivered, received.len());
    let total = 4
        * sandbox.run(&["deliver", "shaped", "--json"]).json()["casts"][0]["sinks"][0]["events"]
            .as_u64()
            .unwrap() as usize;
    assert_eq!(skipped + delivered, total);
}

/// A sink nobody answers: the cast completes regardless, and `deliver` records a failure
/// per attempt and reports the events as queued; a mistake in `eventing` is refused at load
/// with the field named.
#[test]
fn an_unreachable_sink_queues_and_a_bad_sink_is_refused() {
    let sandbox = Sandbox::new();
    let closed = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/hook", closed.local_addr().unwrap());
    drop(closed);
    let mut unreachable = sink(&url);
    unreachable["maxRetries"] = json!(1);
    let config = config_with(
        &sandbox,
        "config.json",
        json!({ "enabled": true, "sinks": { "ops": unreachable } }),
    );
    let ran = sandbox.run(&[
        "run",
        &config,
        "--task",
        "greet",
        "--cast",
        "lonely",
        "--agent",
        &format!("scripted:{}", fixture("scripts/build-loop.jsonl")),
        "--json",
    ]);
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    assert_eq!(ran.json()["status"], "completed");
    assert!(
        ran.stderr.contains("castlog deliver lonely"),
        "{}",
        ran.stderr
    );
    let drained = sandbox.run(&["deliver", "--all", "--json"]);
    assert_eq!(drained.code, 0, "{}", drained.stderr);
    let ops = &drained.json()["casts"][0]["sinks"][0];
    assert_eq!(ops["failed"], 2, "{ops}");
    assert_eq!(ops["queued"], ops["events"]);
    assert_eq!(ops["outcomes"][0]["sequence"], 1);
    assert!(
        ops["outcomes"][0]["reason"]
            .as_str()
            .unwrap()
            .starts_with("network_error"),
        "{ops}"
    );

    let mut bad = sink(&url);
    bad["timeoutMs"] = json!(0);
    let config = config_with(
        &sandbox,
        "bad.json",
        json!({ "enabled": true, "sinks": { "ops": bad } }),
    );
    let refused = sandbox.run(&[
        "run",
        &config,
        "--task",
        "t",
        "--agent",
        "scripted:/dev/null",
        "--json",
    ]);
    assert_eq!(refused.code, 1, "{}", refused.stderr);
    assert!(
        refused.stdout.contains("eventing.sinks.ops.timeoutMs"),
        "{}",
        refused.stdout
    );
    assert!(!refused.stdout.contains(SECRET));
}

/// A cast a worker drives delivers from the worker, and an event a materia reports in its
/// reply goes to the sink with the type it gave, enriched with its socket and visit.
#[test]
fn a_worker_delivers_and_materia_events_keep_their_type() {
    let sandbox = Sandbox::new();
    let endpoint = Endpoint::start(0);
    let config = json!({
        "activeLoadout": "L",
        "eventing": { "enabled": true, "sinks": { "ops": sink(&endpoint.url("/hook")) } },
        "loadouts": { "L": { "entry": "Socket-1", "sockets": {
            "Socket-1": { "materia": "Auto-Eval", "parse": "json",
                          "edges": [{ "when": "satisfied", "to": "end" },
                                    { "when": "not_satisfied", "to": "end" }] } } } },
        "materia": { "Auto-Eval": { "type": "agent", "tools": "none",
                                    "prompt": "Check {{request}}." } },
    });
    let config = sandbox.write("eval.json", &config.to_string());
    let reply = json!({"satisfied": true, "event": [{"type": "review.progress",
        "severity": "warning", "message": "checked", "payload": {"files": 2}}]});
    let script = sandbox.write(
        "eval.jsonl",
        &format!("{}\n", json!({"reply": reply.to_string()})),
    );
    let submitted = sandbox.run(&[
        "submit",
        &config,
        "--task",
        "t",
        "--cast",
        "queued",
        "--agent",
        &format!("scripted:{script}"),
        "--json",
    ]);
    assert_eq!(submitted.code, 0, "{}", submitted.stderr);
    let worked = sandbox.run(&["worker", "--until-idle", "--poll", "50ms", "--json"]);
    assert_eq!(worked.code, 0, "{}", worked.stderr);
    assert_eq!(
        worked.json()["casts"][0]["outcome"],
        "completed",
        "{}",
        worked.stdout
    );

    // The worker delivered everything; `deliver` finds nothing left.
    let received = endpoint.received();
    let report = sandbox.run(&["deliver", "queued", "--json"]).json();
    assert_eq!(report["casts"][0]["sinks"][0]["queued"], 0, "{report}");
    assert_eq!(report["casts"][0]["sinks"][0]["delivered"], 0, "{report}");
    let types: Vec<&str> = received
        .iter()
        .map(|r| r.body["eventType"].as_str().unwrap())
        .collect();
    assert_eq!(
        types,
        [
            "lifecycle.cast.started",
            "lifecycle.socket.started",
            "review.progress",
            "lifecycle.socket.completed",
            "lifecycle.cast.completed"
        ]
    );
    let reported = &received[2].body;
    assert_eq!(reported["severity"], "warning");
    assert_eq!(reported["message"], "checked");
    assert_eq!(reported["payload"], json!({"files": 2}));
    assert_eq!(reported["sequence"], 3);
}
