//! Utility sockets: exits, timeouts and invalid output fail the cast without retry, an
//! infrastructure `ok: false` is a failure not a rework, `state` patches, and what the log keeps
//! of a run (items 4, 16, 25, 36, 37 as they apply to the pure machine).

use castlog_core::event::Target;
use castlog_core::id::SocketId;
use castlog_core::input::Input;
use castlog_core::machine::Status;
use rstest::rstest;
use serde_json::json;

use crate::harness::{Cast, config, given, kinds};

fn sid(id: &str) -> SocketId {
    SocketId::new(id)
}

/// Probe (json utility; satisfied → 3, not_satisfied → 2) with two agent targets.
fn probe() -> Cast {
    given(&config(json!({
        "entry": "Socket-1",
        "sockets": {
            "Socket-1": { "materia": "Probe", "edges": [
                { "when": "satisfied", "to": "Socket-3" },
                { "when": "not_satisfied", "to": "Socket-2" }
            ] },
            "Socket-2": { "materia": "Build", "parse": "text" },
            "Socket-3": { "materia": "Narrate", "parse": "text" }
        }
    })))
}

#[rstest]
#[case::non_zero_exit(Some(2), false, "", "boom: no such file", "exited with code 2")]
#[case::killed_by_signal(None, false, "", "", "killed by a signal")]
#[case::timeout(None, true, "", "", "timed out and was killed")]
#[case::invalid_json(Some(0), false, "not json at all", "", "printed invalid JSON")]
#[case::wrong_satisfied_type(
    Some(0),
    false,
    r#"{"satisfied": "yes"}"#,
    "",
    "$.satisfied must be a boolean"
)]
#[case::not_an_object(Some(0), false, "[1, 2]", "", "must be one JSON object")]
fn utility_failures_fail_the_cast_naming_the_socket_without_retry(
    #[case] code: Option<i32>,
    #[case] timed_out: bool,
    #[case] stdout: &str,
    #[case] stderr: &str,
    #[case] says: &str,
) {
    // Items 25 and 36.
    let mut cast = probe();
    let events = cast.utility_exit(code, timed_out, stdout, stderr);
    assert_eq!(kinds(&events), ["utility_finished", "cast_failed"]);
    let failed = of!(events, CastFailed);
    assert_eq!(failed[0].socket, Some(sid("Socket-1")));
    assert_eq!(failed[0].allowance, None);
    assert!(
        failed[0].reason.contains("Socket-1"),
        "{}",
        failed[0].reason
    );
    assert!(failed[0].reason.contains(says), "{}", failed[0].reason);
    assert!(
        failed[0].reason.contains("probe --check"),
        "{}",
        failed[0].reason
    );
    if !stderr.is_empty() {
        assert!(failed[0].reason.contains(stderr), "{}", failed[0].reason);
    }
    assert_eq!(cast.status(), Status::Failed);
}

#[test]
fn the_stderr_summary_in_a_failure_is_bounded() {
    let mut cast = probe();
    let stderr = "e".repeat(5000);
    let events = cast.utility_exit(Some(1), false, "", &stderr);
    let reason = &of!(events, CastFailed)[0].reason;
    assert!(reason.chars().count() < 1000, "{}", reason.len());
    // The log keeps the whole captured stderr.
    assert_eq!(of!(events, UtilityFinished)[0].stderr.len(), 5000);
}

#[test]
fn the_log_keeps_the_run_verbatim_with_the_truncation_flag() {
    let mut cast = probe();
    let events = cast.when(Input::UtilityFinished {
        code: Some(0),
        timed_out: false,
        stdout: r#"{"satisfied": true}"#.into(),
        stderr: "warning: slow disk".into(),
        truncated: true,
    });
    let finished = of!(events, UtilityFinished);
    assert_eq!(finished[0].stderr, "warning: slow disk");
    assert!(finished[0].truncated);
    assert_eq!(finished[0].code, Some(0));
    assert_eq!(
        of!(events, EdgeTaken)[0].to,
        Target::Socket(sid("Socket-3"))
    );
}

#[test]
fn satisfied_false_with_a_failed_state_namespace_fails_instead_of_reworking() {
    // Item 16: the state patch is still applied; no rework routing.
    let mut cast = probe();
    let events = cast
        .utility(r#"{"satisfied": false, "state": {"vcs": {"ok": false, "error": "no repo"}}}"#);
    assert_eq!(
        kinds(&events),
        ["utility_finished", "socket_completed", "cast_failed"]
    );
    let failed = of!(events, CastFailed);
    assert_eq!(failed[0].socket, Some(sid("Socket-1")));
    assert!(
        failed[0].reason.contains("state.vcs"),
        "{}",
        failed[0].reason
    );
    assert_eq!(cast.data()["vcs"]["ok"], json!(false));
    assert!(cast.state.rework.is_empty());
}

#[test]
fn a_failing_utility_s_context_is_the_failure_reason_under_the_conformance_rules() {
    let output = r#"{"satisfied": false, "context": "git is not installed here",
                     "state": {"vcs": {"ok": false}}}"#;
    let mut cast = probe();
    let events = cast.utility(output);
    assert_eq!(
        of!(events, CastFailed)[0].reason,
        "utility Socket-1 failed: git is not installed here"
    );
    // A cast recorded before the rules keeps the reason it was recorded with.
    let mut older = probe();
    older.state.conformance = 0;
    let events = older.utility(output);
    assert_eq!(
        of!(events, CastFailed)[0].reason,
        "utility Socket-1 reported a failure in state.vcs (ok: false)"
    );
}

#[test]
fn satisfied_false_without_a_failed_namespace_takes_the_rework_edge() {
    let mut cast = probe();
    let events = cast.utility(
        r#"{"satisfied": false, "context": "lint errors", "state": {"vcs": {"ok": true}}}"#,
    );
    assert_eq!(
        of!(events, EdgeTaken)[0].to,
        Target::Socket(sid("Socket-2"))
    );
    assert_eq!(of!(events, ReworkRouted)[0].reason, "lint errors");
    assert!(of!(events, CastFailed).is_empty());
}

#[test]
fn state_patches_merge_shallowly_but_cannot_set_work_items_or_satisfied() {
    // Item 4.
    let mut cast = given(&config(json!({
        "entry": "Socket-1",
        "sockets": {
            "Socket-1": { "materia": "Probe", "edges": [{ "when": "always", "to": "Socket-2" }] },
            "Socket-2": { "materia": "Probe", "edges": [{ "when": "always", "to": "Socket-3" }] },
            "Socket-3": { "materia": "Narrate" }
        }
    })));
    cast.utility(
        r#"{"context": "scanned", "state": {"scan": {"files": 3}, "vcs": "git",
            "workItems": [{"title": "X", "context": "x"}], "satisfied": true}}"#,
    );
    assert_eq!(cast.data()["scan"], json!({"files": 3}));
    assert!(cast.data().get("workItems").is_none());
    assert!(cast.data().get("satisfied").is_none());
    assert_eq!(cast.data()["context"], json!("[Socket-1 Probe] scanned"));
    cast.utility(r#"{"state": {"scan": {"dirs": 1}}}"#);
    assert_eq!(
        cast.data()["scan"],
        json!({"dirs": 1}),
        "shallow: the key is replaced"
    );
    assert_eq!(cast.data()["vcs"], json!("git"));
}

#[test]
fn an_agent_cannot_patch_state() {
    let mut cast = given(&config(json!({
        "entry": "Socket-1",
        "sockets": { "Socket-1": { "materia": "Eval", "parse": "json",
                                    "assign": { "s": "$.state" } } }
    })));
    cast.json(&json!({"state": {"vcs": "hacked"}}));
    assert!(cast.data().get("vcs").is_none());
    assert_eq!(cast.data()["s"], json!({"vcs": "hacked"}));
}

#[test]
fn a_text_utility_completes_with_its_stdout() {
    let mut cast = given(&config(json!({
        "entry": "Socket-1", "sockets": { "Socket-1": { "materia": "Echo" } }
    })));
    let events = cast.utility("hi\n");
    let completed = of!(events, SocketCompleted);
    assert_eq!(
        (completed[0].output.as_str(), completed[0].parsed.clone()),
        ("hi\n", None)
    );
    assert_eq!(cast.status(), Status::Completed);
}

#[test]
fn a_utility_result_when_no_utility_runs_is_rejected() {
    let mut cast = given(&config(json!({
        "entry": "Socket-1", "sockets": { "Socket-1": { "materia": "Narrate" } }
    })));
    let rejection = cast.rejects(Input::UtilityFinished {
        code: Some(0),
        timed_out: false,
        stdout: String::new(),
        stderr: String::new(),
        truncated: false,
    });
    assert!(
        rejection.to_string().contains("no utility is running"),
        "{rejection}"
    );
}

#[test]
fn revive_after_a_utility_failure_runs_the_utility_again() {
    let mut cast = probe();
    cast.utility_exit(Some(1), false, "", "flaky");
    let events = cast.when(Input::Revive);
    assert_eq!(kinds(&events), ["cast_revived", "socket_started"]);
    assert_eq!(of!(events, SocketStarted)[0].visit.get(), 2);
    cast.utility(r#"{"satisfied": true}"#);
    assert_eq!(cast.socket(), "Socket-3");
}

#[test]
fn a_scope_transition_is_recorded_taken_out_and_held_in_state_until_base() {
    // Item 37: the transition becomes `scope_activated` (pi-materia's
    // `execution_scope_activated`), before the completion, and the state holds the scope the
    // driver runs later sockets in; `state.data` never sees it.
    let mut cast = given(&config(json!({
        "entry": "Socket-1",
        "sockets": {
            "Socket-1": { "materia": "Probe", "edges": [{ "when": "always", "to": "Socket-2" }] },
            "Socket-2": { "materia": "Probe", "edges": [{ "when": "always", "to": "Socket-3" }] },
            "Socket-3": { "materia": "Build", "parse": "text" }
        }
    })));
    let stdout = r#"{"satisfied": true, "scopeTransition": {"kind": "replace",
                     "scope": {"id": "ws-1", "cwd": "/tmp/ws-1", "exports": {"branch": "b"}}}}"#;
    let events = cast.utility(stdout);
    assert_eq!(
        &kinds(&events)[..3],
        ["utility_finished", "scope_activated", "socket_completed"]
    );
    let activated = of!(events, ScopeActivated)[0].clone();
    assert_eq!(activated.previous, None);
    let scope = activated.scope.unwrap();
    assert_eq!(
        (scope.id.as_str(), scope.cwd.as_str()),
        ("ws-1", "/tmp/ws-1")
    );
    assert_eq!(scope.exports, Some(json!({"branch": "b"})));
    let parsed = of!(events, SocketCompleted)[0].parsed.clone().unwrap();
    assert_eq!(parsed, json!({"satisfied": true}));
    assert!(cast.data().get("scopeTransition").is_none());
    assert_eq!(
        cast.state.scope.as_ref().map(|s| s.id.as_str()),
        Some("ws-1")
    );
    let events = cast.utility(r#"{"scopeTransition": {"kind": "base"}}"#);
    let back = of!(events, ScopeActivated)[0].clone();
    assert_eq!((back.previous.as_deref(), back.scope), (Some("ws-1"), None));
    assert_eq!(cast.state.scope, None);
    assert_eq!(cast.socket(), "Socket-3");
}

#[test]
fn a_bad_scope_transition_fails_the_cast_naming_the_socket_and_the_field() {
    let mut cast = probe();
    let events = cast.utility(r#"{"scopeTransition": {"kind": "replace", "scope": {"id": "a"}}}"#);
    assert_eq!(kinds(&events), ["utility_finished", "cast_failed"]);
    let reason = &of!(events, CastFailed)[0].reason;
    assert!(reason.contains("utility Socket-1"), "{reason}");
    assert!(
        reason.contains("bad scopeTransition: $.scopeTransition.scope.cwd is required"),
        "{reason}"
    );
    assert_eq!(cast.state.scope, None);
}

#[test]
fn a_cast_recorded_before_scopes_keeps_the_transition_in_its_output() {
    // Conformance 2 and older: no scope, the output as it came, so such casts re-decide as
    // recorded.
    let mut cast = probe();
    cast.state.conformance = 2;
    let stdout = r#"{"satisfied": true, "scopeTransition": {"kind": "replace",
                     "scope": {"id": "ws-1", "cwd": "/tmp/ws-1"}}}"#;
    let events = cast.utility(stdout);
    assert!(!kinds(&events).contains(&"scope_activated"));
    let parsed = of!(events, SocketCompleted)[0].parsed.clone().unwrap();
    assert_eq!(
        parsed["scopeTransition"]["scope"]["cwd"],
        json!("/tmp/ws-1")
    );
    assert_eq!(cast.state.scope, None);
    assert_eq!(cast.socket(), "Socket-3");
}
