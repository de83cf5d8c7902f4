//! `--structured on|off|auto` from the command line: a JSON socket's handoff contract sent as a
//! response format, the fallback after a server refuses it (recorded, so `verify` re-decides it
//! and a `recorded:` re-run answers the same), and `off` (the default) sending none.

use crate::casts::{assert_verified, events, of_kind};
use crate::common::Sandbox;
use crate::retries::{Canned, reply, serve_recording};

/// One JSON socket whose output only needs a context.
const ONE_JSON: &str = r#"{"activeLoadout": "One", "loadouts": {"One": {"entry": "Socket-1",
  "sockets": {"Socket-1": {"materia": "Note", "parse": "json"}}}},
  "materia": {"Note": {"type": "agent", "tools": "none", "prompt": "Note something about {{request}}."}}}"#;

fn refusal() -> Canned {
    (
        "400 Bad Request",
        Vec::new(),
        r#"{"error":{"message":"Unrecognized request argument supplied: response_format","param":"response_format"}}"#.into(),
    )
}

fn run(sandbox: &Sandbox, cast: &str, agent: &str, options: &[&str]) -> crate::common::Run {
    let config = sandbox.write("one.json", ONE_JSON);
    let mut cmd = sandbox.command_on(&sandbox.db());
    cmd.args(["run", &config, "--task", "tea", "--cast", cast])
        .args(["--agent", agent, "--json"])
        .args(options);
    sandbox.finish(&mut cmd)
}

fn formats(seen: &std::sync::Mutex<Vec<String>>) -> Vec<serde_json::Value> {
    seen.lock()
        .unwrap()
        .iter()
        .map(|b| serde_json::from_str::<serde_json::Value>(b).unwrap()["response_format"].clone())
        .collect()
}

#[test]
fn auto_sends_the_contract_falls_back_once_refused_and_verifies() {
    let sandbox = Sandbox::new();
    let (spec, seen) = serve_recording(vec![refusal(), reply(r#"{"context": "noted"}"#)]);
    let done = run(&sandbox, "auto", &spec, &["--structured", "auto"]);
    assert_eq!(done.code, 0, "{}", done.stderr);
    assert_eq!(done.json()["status"], "completed", "{}", done.stdout);
    let formats = formats(&seen);
    assert_eq!(formats.len(), 2, "{formats:?}");
    assert_eq!(formats[0]["type"], "json_schema");
    assert_eq!(
        formats[0]["json_schema"]["schema"]["properties"]["context"]["type"],
        "string"
    );
    assert!(formats[1].is_null(), "{formats:?}");
    let recorded = events(&sandbox, "auto");
    let failed = of_kind(&recorded, "agent_failed");
    assert_eq!(failed.len(), 1, "{recorded:?}");
    assert_eq!(failed[0]["payload"]["structured_off"], true);
    assert_verified(&sandbox);

    // A cassette of the cast plays the refusal back where it was recorded.
    let again = run(&sandbox, "again", "recorded:auto", &[]);
    assert_eq!(again.json()["status"], "completed", "{}", again.stderr);
    let replayed = events(&sandbox, "again");
    let failed_again = of_kind(&replayed, "agent_failed");
    assert_eq!(failed_again.len(), 1, "{replayed:?}");
    assert_eq!(failed_again[0]["payload"], failed[0]["payload"]);
    assert_verified(&sandbox);
}

#[test]
fn on_sends_it_and_off_by_default_sends_none() {
    let sandbox = Sandbox::new();
    let (spec, seen) = serve_recording(vec![reply(r#"{"context": "noted"}"#)]);
    let done = run(&sandbox, "on", &spec, &["--structured", "on"]);
    assert_eq!(done.json()["status"], "completed", "{}", done.stderr);
    assert_eq!(formats(&seen)[0]["json_schema"]["name"], "handoff");

    let (spec, seen) = serve_recording(vec![reply(r#"{"context": "noted"}"#)]);
    let done = run(&sandbox, "plain", &spec, &[]);
    assert_eq!(done.json()["status"], "completed", "{}", done.stderr);
    assert!(formats(&seen).iter().all(serde_json::Value::is_null));

    let bad = run(&sandbox, "bad", &spec, &["--structured", "maybe"]);
    assert_eq!(bad.code, 1);
    assert!(bad.stderr.contains("--structured"), "{}", bad.stderr);
}
