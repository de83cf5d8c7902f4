//! Every cycle is bounded: sockets that go round without advancing (two utilities joined by
//! `always` edges, two agents answered by a `cmd:` agent that always says the same) stop the
//! cast as failed on the no-advance guard within their limit, `revive` extends it, and a cycle
//! no cast could ever leave is refused before a cast exists.

use serde_json::Value;

use crate::casts::{assert_no_panic, assert_verified, events, of_kind, report, state};
use crate::common::{Sandbox, fixture};

/// The one `allowance_exhausted` of the events after `after`, as `(count, limit)`.
fn exhausted_after(events: &[Value], after: usize) -> (u64, u64) {
    let exhausted = of_kind(events.get(after..).unwrap(), "allowance_exhausted");
    assert_eq!(exhausted.len(), 1, "{exhausted:?}");
    let payload = &exhausted[0]["payload"];
    assert_eq!(payload["allowance"], "no_advance", "{payload}");
    assert_eq!(payload["item"], Value::Null, "{payload}");
    (
        payload["count"].as_u64().unwrap(),
        payload["limit"].as_u64().unwrap(),
    )
}

/// Runs `config` as cast `name` with `agent`, expects it failed on the guard outside loops with
/// `limit`, revives it and expects it failed again at twice the limit; returns the events.
fn stops_and_revives(config: &str, agent: &str, name: &str, limit: u64) -> Vec<Value> {
    let sandbox = Sandbox::new();
    let args = [
        "run", config, "--task", "spin", "--agent", agent, "--cast", name,
    ];
    let out = report(&sandbox, &args);
    assert_eq!(out["status"], "failed", "{out}");
    let message = out["message"].as_str().unwrap();
    assert!(
        message.contains("sockets outside loops went around Socket-1 -> Socket-2 -> Socket-1"),
        "{message}"
    );
    let first = events(&sandbox, name);
    assert_eq!(exhausted_after(&first, 0), (limit + 1, limit));
    assert_eq!(first.last().unwrap()["kind"], "cast_failed");
    let visits = &state(&sandbox, name)["visits"];
    assert_eq!(visits["Socket-1"], limit + 1, "{visits}");

    let out = report(&sandbox, &["revive", name, "--agent", agent]);
    assert_eq!(out["status"], "failed", "{out}");
    let all = events(&sandbox, name);
    let extended = of_kind(&all, "allowance_extended");
    assert_eq!(extended[0]["payload"]["limit"], 2 * limit, "{extended:?}");
    assert_eq!(
        exhausted_after(&all, first.len()),
        (2 * limit + 1, 2 * limit)
    );
    // Each round writes the same few events, so the whole cast stays within a bound fixed by
    // the limit: nothing ran on past it.
    let rounds = 2 * limit + 1;
    assert!(
        all.len() as u64 <= 20 * rounds,
        "{} events in {rounds} rounds",
        all.len()
    );
    assert_verified(&sandbox);
    all
}

#[test]
fn two_utilities_joined_by_always_edges_stop_within_their_limit_and_revive_extends_it() {
    let all = stops_and_revives(
        &fixture("loadouts/spin-utilities.json"),
        "scripted:/dev/null",
        "tick",
        3,
    );
    assert_eq!(of_kind(&all, "utility_finished").len(), 2 * 7);
}

#[test]
fn an_agent_cycle_with_a_cmd_agent_stops_within_its_limit_and_revive_extends_it() {
    let agent = format!("cmd:sh {}", fixture("scripts/same-answer.sh"));
    let all = stops_and_revives(&fixture("loadouts/spin-agents.json"), &agent, "same", 2);
    assert_eq!(of_kind(&all, "agent_replied").len(), 2 * 5);
}

#[test]
fn a_cycle_no_cast_could_leave_is_refused_at_load_naming_it() {
    let sandbox = Sandbox::new();
    let text = std::fs::read_to_string(fixture("loadouts/spin-utilities.json")).unwrap();
    let closed = text.replace(
        r#"[{ "when": "satisfied", "to": "end" }, { "when": "always", "to": "Socket-1" }]"#,
        r#"[{ "when": "always", "to": "Socket-1" }]"#,
    );
    assert_ne!(closed, text);
    let config = sandbox.write("closed.json", &closed);
    let run = sandbox.run(&[
        "run",
        &config,
        "--task",
        "spin",
        "--agent",
        "scripted:/dev/null",
    ]);
    assert_no_panic(&run);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(
        run.stderr
            .contains("the cycle Socket-1 -> Socket-2 -> Socket-1 never ends"),
        "{}",
        run.stderr
    );
    assert!(!sandbox.db().exists(), "nothing is recorded");
}
