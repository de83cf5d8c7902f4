//! The tool loop: a reply with tool calls records them and asks the driver to run them one at
//! a time (`Next::RunTool`); results go back into the next prompt, inline and in order; the
//! calls of a visit are an allowance; a call cut off by a crash is run again on resume only if
//! it cannot change anything.

use castlog_core::event::{Allowance, ToolRequest};
use castlog_core::input::Input;
use castlog_core::machine::decide::input_of;
use castlog_core::machine::{Next, Phase, Status};
use serde_json::{Value, json};

use crate::harness::{Cast, config, fold, given, kinds};

/// One Build socket (coding tools, text output) to the end; `limits` when given.
fn build(limits: Option<Value>) -> Value {
    let mut cfg = config(json!({
        "entry": "Socket-1",
        "sockets": { "Socket-1": { "materia": "Build", "parse": "text",
                                   "edges": [{ "when": "always", "to": "end" }] } }
    }));
    if let Some(limits) = limits {
        cfg["limits"] = limits;
    }
    cfg
}

fn call(tool: &str, arguments: Value) -> ToolRequest {
    ToolRequest {
        call: String::new(),
        tool: tool.into(),
        arguments,
    }
}

fn calls(cast: &mut Cast, requests: Vec<ToolRequest>) -> Vec<castlog_core::event::Event> {
    cast.when(Input::AgentCalledTools {
        text: String::new(),
        usage: None,
        calls: requests,
    })
}

fn finished(cast: &mut Cast, call: &str, output: &str) -> Vec<castlog_core::event::Event> {
    cast.when(Input::ToolFinished {
        call: call.into(),
        output: output.into(),
        exit: None,
        error: false,
        truncated: false,
        duration_ms: 1,
    })
}

#[test]
fn a_reply_with_tool_calls_records_them_and_asks_for_the_first() {
    let mut cast = given(&build(None));
    let events = calls(
        &mut cast,
        vec![
            call("write", json!({"path": "a.txt", "content": "x"})),
            call("read", json!({"path": "a.txt"})),
        ],
    );
    assert_eq!(
        kinds(&events),
        ["agent_replied", "tool_called", "tool_called"]
    );
    let called = of!(events, ToolCalled);
    assert_eq!(called[0].call, "call-1");
    assert_eq!(called[1].call, "call-2");
    assert_eq!(
        called[0].arguments,
        json!({"path": "a.txt", "content": "x"})
    );
    assert_eq!(cast.phase(), Some(Phase::RunningTools));
    assert_eq!(cast.status(), Status::Running);
    assert!(
        matches!(cast.next(), Next::RunTool { call, tool, .. } if call == "call-1" && tool == "write")
    );
    assert_eq!(
        kinds(&finished(&mut cast, "call-1", "wrote 1 byte")),
        ["tool_finished"]
    );
    assert!(matches!(cast.next(), Next::RunTool { call, .. } if call == "call-2"));
}

#[test]
fn when_every_call_has_a_result_the_agent_is_asked_again_with_them_inline() {
    let mut cast = given(&build(None));
    calls(&mut cast, vec![call("read", json!({"path": "a.txt"}))]);
    let events = finished(&mut cast, "call-1", "hello");
    assert_eq!(kinds(&events), ["tool_finished", "prompt_dispatched"]);
    let dispatched = of!(events, PromptDispatched);
    assert_eq!(dispatched[0].turn.get(), 2);
    let placed: Vec<(&str, &str)> = dispatched[0]
        .placements
        .iter()
        .map(|p| (p.entry.as_str(), p.role.as_str()))
        .filter(|(e, _)| e.contains(':'))
        .collect();
    assert_eq!(
        placed,
        [
            ("assistantToolCall:call-1", "assistant"),
            ("toolResult:call-1", "tool")
        ]
    );
    assert!(cast.entry("toolResult:call-1").unwrap().contains("hello"));
    assert!(matches!(cast.next(), Next::AskAgent { .. }));
    // A reply without calls is the socket's output, as ever.
    let done = cast.reply("Done.");
    assert!(kinds(&done).contains(&"socket_completed"));
    assert_eq!(cast.status(), Status::Completed);
}

#[test]
fn a_result_for_another_call_than_the_one_running_is_refused() {
    let mut cast = given(&build(None));
    calls(&mut cast, vec![call("read", json!({"path": "a.txt"}))]);
    let rejection = cast.rejects(Input::ToolFinished {
        call: "call-9".into(),
        output: String::new(),
        exit: None,
        error: false,
        truncated: false,
        duration_ms: 0,
    });
    assert!(rejection.to_string().contains("call-1"), "{rejection}");
}

#[test]
fn the_calls_of_a_visit_are_an_allowance_that_revive_extends() {
    let mut cast = given(&build(Some(json!({ "maxToolCalls": 2 }))));
    calls(&mut cast, vec![call("read", json!({"path": "a"}))]);
    finished(&mut cast, "call-1", "a");
    let events = calls(
        &mut cast,
        vec![
            call("read", json!({"path": "b"})),
            call("read", json!({"path": "c"})),
        ],
    );
    assert_eq!(
        kinds(&events),
        ["agent_replied", "allowance_exhausted", "cast_failed"]
    );
    let exhausted = of!(events, AllowanceExhausted);
    assert!(matches!(
        exhausted[0].allowance,
        Allowance::ToolCalls { .. }
    ));
    assert_eq!((exhausted[0].count, exhausted[0].limit), (3, 2));
    assert_eq!(cast.status(), Status::Failed);
    let revived = cast.when(Input::Revive);
    assert_eq!(
        kinds(&revived),
        [
            "allowance_extended",
            "cast_revived",
            "tool_called",
            "tool_called"
        ]
    );
    assert!(matches!(cast.next(), Next::RunTool { call, .. } if call == "call-2"));
}

#[test]
fn resume_interrupts_a_cut_off_write_and_runs_a_cut_off_read_again() {
    let mut cast = given(&build(None));
    calls(
        &mut cast,
        vec![
            call("write", json!({"path": "a.txt", "content": "x"})),
            call("ls", json!({})),
        ],
    );
    let resumed = cast.when(Input::Resume);
    assert_eq!(kinds(&resumed), ["cast_resumed", "tool_interrupted"]);
    // The read-only call behind it was never started; it runs, and so would a cut-off one.
    assert!(
        matches!(cast.next(), Next::RunTool { call, tool, .. } if call == "call-2" && tool == "ls")
    );
    let again = cast.when(Input::Resume);
    assert_eq!(kinds(&again), ["cast_resumed"]);
    let events = finished(&mut cast, "call-2", "a.txt");
    assert_eq!(kinds(&events), ["tool_finished", "prompt_dispatched"]);
    let note = cast.entry("toolResult:call-1").unwrap();
    assert!(note.contains("effect is unknown"), "{note}");
}

#[test]
fn the_first_event_of_each_tool_decision_gives_back_its_input() {
    let mut cast = given(&build(None));
    calls(&mut cast, vec![call("bash", json!({"command": "ls"}))]);
    finished(&mut cast, "call-1", "a.txt");
    cast.reply("Done.");
    // Re-deciding every recorded decision from its first event gives the same log.
    let log = cast.log.clone();
    let mut state = fold(&cast.first);
    let mut at = cast.first.len();
    while at < log.len() {
        let input = input_of(&state, &log[at]).expect("a decision's first event");
        let decision = state.decide_mut(&input, &crate::harness::env()).unwrap();
        assert_eq!(decision.events, log[at..at + decision.events.len()]);
        at += decision.events.len();
    }
}

/// Three identical failing calls, each answered with the same error.
fn failing_three_times(policy: &str) -> castlog_core::event::PromptDispatched {
    let mut cast = given(&build(None));
    cast.state.policy = policy.into();
    let mut last = Vec::new();
    for _ in 0..3 {
        let events = calls(
            &mut cast,
            vec![call("read", json!({"path": "missing.txt"}))],
        );
        let id = of!(events, ToolCalled)[0].call.clone();
        last = cast.when(Input::ToolFinished {
            call: id,
            output: "cannot read missing.txt: No such file or directory".into(),
            exit: None,
            error: true,
            truncated: false,
            duration_ms: 1,
        });
    }
    of!(last, PromptDispatched)[0].clone()
}

fn ticket(
    dispatched: &castlog_core::event::PromptDispatched,
) -> Vec<&castlog_core::event::Placement> {
    dispatched
        .placements
        .iter()
        .filter(|p| p.source_type == "recoveryTicket")
        .collect()
}

#[test]
fn three_identical_failing_calls_raise_one_recovery_ticket_in_the_trailing_block() {
    let dispatched = failing_three_times("recommended");
    let tickets = ticket(&dispatched);
    assert_eq!(tickets.len(), 1, "{tickets:?}");
    assert_eq!(tickets[0].entry, "recoveryTicket:toolLoop");
    assert_eq!(
        tickets[0].destination,
        castlog_core::event::Destination::Trailing
    );
    // The failures themselves stay inline where they happened.
    assert!(
        dispatched
            .placements
            .iter()
            .filter(|p| p.source_type == "toolResult")
            .all(|p| p.destination == castlog_core::event::Destination::Inline)
    );
}

#[test]
fn under_the_legacy_policy_the_recovery_ticket_folds_into_the_system_message() {
    let tickets_of = failing_three_times("legacy");
    let tickets = ticket(&tickets_of);
    assert_eq!(tickets.len(), 1, "{tickets:?}");
    assert_eq!(
        tickets[0].destination,
        castlog_core::event::Destination::SystemFold
    );
}

#[test]
fn two_failures_or_three_different_ones_raise_no_ticket() {
    let mut cast = given(&build(None));
    for path in ["a", "b", "c"] {
        let events = calls(&mut cast, vec![call("read", json!({ "path": path }))]);
        let id = of!(events, ToolCalled)[0].call.clone();
        cast.when(Input::ToolFinished {
            call: id,
            output: "cannot read".into(),
            exit: None,
            error: true,
            truncated: false,
            duration_ms: 1,
        });
    }
    assert!(
        !cast
            .entry_ids()
            .iter()
            .any(|e| e.starts_with("recoveryTicket"))
    );
}
