//! `Next`: for every phase a visit can be in, the one effect the cast asks of the driver, and
//! the states whose phase disagrees with the fields beside it, which ask for none.

use castlog_core::event::FailureClass;
use castlog_core::id::SocketId;
use castlog_core::input::{Input, SendOutcome};
use castlog_core::loadout::Exec;
use castlog_core::machine::{Inconsistent, Next, Phase, Status};
use serde_json::{Value, json};

use crate::harness::{Cast, build_loop, config, given};

fn sid(id: &str) -> SocketId {
    SocketId::new(id)
}

/// Build (text) → Announce (post to `staging`) → Probe (utility) → Chat (multi-turn).
fn every_kind() -> Value {
    let mut cfg = config(json!({
        "entry": "Socket-1",
        "sockets": {
            "Socket-1": { "materia": "Build", "parse": "text", "assign": { "announcement": "$" },
                          "edges": [{ "when": "always", "to": "Socket-2" }] },
            "Socket-2": { "materia": "Announce",
                          "edges": [{ "when": "always", "to": "Socket-3" }] },
            "Socket-3": { "materia": "Probe", "edges": [{ "when": "always", "to": "Socket-4" }] },
            "Socket-4": { "materia": "Chat" }
        }
    }));
    cfg["materia"]["Announce"] = json!({ "type": "post", "label": "Announce",
                                         "destination": "staging", "body": "state.announcement" });
    cfg
}

fn fail(cast: &mut Cast, class: FailureClass) {
    cast.when(Input::AgentFailed {
        class,
        message: "server_error".into(),
    });
}

#[test]
fn a_completed_socket_asks_for_the_dispatch_it_scheduled() {
    // The first prompt is dispatched with the start; a later one is scheduled, then due.
    let cast = given(&build_loop()).planned(&["A"]);
    assert_eq!(cast.phase(), Some(Phase::AwaitingDispatch));
    let key = cast
        .state
        .scheduled
        .clone()
        .expect("a dispatch is scheduled");
    assert_eq!(cast.next(), Next::Dispatch { key });
}

#[test]
fn a_dispatched_prompt_asks_the_agent_and_counts_transient_failures() {
    let mut cast = given(&build_loop());
    cast.settle();
    assert_eq!(cast.phase(), Some(Phase::AwaitingReply));
    assert_eq!(
        cast.next(),
        Next::AskAgent {
            socket: sid("Socket-1"),
            transient_failures: 0
        }
    );
    fail(&mut cast, FailureClass::Transient);
    assert_eq!(
        cast.next(),
        Next::AskAgent {
            socket: sid("Socket-1"),
            transient_failures: 1
        }
    );
}

#[test]
fn an_interrupted_prompt_awaits_resume_and_resume_asks_the_agent_again() {
    let mut cast = given(&build_loop());
    cast.settle();
    fail(&mut cast, FailureClass::Interruption);
    assert_eq!(cast.phase(), Some(Phase::AwaitingReply));
    assert_eq!(
        cast.next(),
        Next::AwaitResume {
            socket: sid("Socket-1")
        }
    );
    cast.when(Input::Resume);
    assert!(matches!(cast.next(), Next::AskAgent { .. }));
}

#[test]
fn each_kind_of_socket_asks_for_its_own_effect() {
    let mut cast = given(&every_kind());
    cast.reply("Release 1.2 is out.");
    assert_eq!(cast.phase(), Some(Phase::AwaitingPost));
    let Next::StartPost { step, spec } = cast.next() else {
        panic!("a post socket asks for its claim, not {:?}", cast.next());
    };
    assert_eq!(
        (step.as_str(), spec.destination.as_str()),
        ("Socket-2", "staging")
    );

    cast.when(Input::StartPost {
        dry_run: false,
        held: Vec::new(),
        sent_before: None,
    });
    assert_eq!(cast.phase(), Some(Phase::AwaitingPostOutcome));
    let claim = cast.state.current.as_ref().and_then(|c| c.claim.clone());
    assert_eq!(
        cast.next(),
        Next::AwaitClaim {
            claim: claim.expect("the visit names its claim")
        }
    );

    cast.when(Input::PostOutcome {
        claim: cast.state.current.as_ref().unwrap().claim.clone().unwrap(),
        outcome: SendOutcome::Staged {
            message_id: "m-1".into(),
        },
    });
    assert_eq!(cast.phase(), Some(Phase::RunningUtility));
    let Next::RunUtility { spec } = cast.next() else {
        panic!(
            "a utility socket asks for its program, not {:?}",
            cast.next()
        );
    };
    assert_eq!(
        spec.exec,
        Exec::Command {
            argv: vec!["probe".into(), "--check".into()]
        }
    );

    cast.utility(&json!({ "satisfied": true }).to_string());
    cast.reply("a first draft");
    assert_eq!(cast.phase(), Some(Phase::AwaitingRefinement));
    assert_eq!(
        cast.next(),
        Next::AskPerson {
            socket: sid("Socket-4")
        }
    );
    cast.when(Input::Continue { origin: None });
    cast.reply("the final draft");
    assert_eq!(cast.status(), Status::Completed);
    assert_eq!(
        cast.next(),
        Next::Stopped {
            status: Status::Completed
        }
    );
}

#[test]
fn a_failed_or_aborted_cast_is_stopped() {
    let mut cast = given(&build_loop());
    cast.when(Input::Abort {
        reason: "enough".into(),
    });
    assert_eq!(
        cast.next(),
        Next::Stopped {
            status: Status::Aborted
        }
    );

    let mut cast = given(&config(json!({
        "entry": "Socket-1",
        "sockets": { "Socket-1": { "materia": "Echo" } }
    })));
    cast.utility_exit(Some(2), false, "", "boom");
    assert_eq!(
        cast.next(),
        Next::Stopped {
            status: Status::Failed
        }
    );
}

#[test]
fn a_phase_that_disagrees_with_its_fields_is_named_not_guessed() {
    // Not states `evolve` produces (the harness checks every decision's state), but a state
    // folded from a log this machine did not write can hold them.
    let planned = given(&build_loop()).planned(&["A"]);

    let mut state = planned.state.clone();
    state.scheduled = None;
    assert!(matches!(
        state.next(),
        Err(Inconsistent::NoDispatchScheduled { socket, .. }) if socket == sid("Socket-2")
    ));

    for (phase, wanted) in [
        (Phase::RunningUtility, "a utility"),
        (Phase::AwaitingPost, "a post"),
    ] {
        let mut state = planned.state.clone();
        state.current.as_mut().unwrap().phase = phase;
        assert!(matches!(
            state.next(),
            Err(Inconsistent::WrongKind { wanted: w, .. }) if w == wanted
        ));
    }

    let mut state = planned.state;
    state.current.as_mut().unwrap().phase = Phase::AwaitingPostOutcome;
    let err = state.next().unwrap_err();
    assert!(matches!(err, Inconsistent::NoClaim { .. }));
    assert!(err.to_string().contains("castlog verify cast-1"), "{err}");
}

#[test]
fn every_state_of_a_long_build_loop_says_what_it_needs_next() {
    // The harness checks `next` after every decision; this walks the whole loop, reworks
    // included, through to the end.
    let mut cast = given(&build_loop()).planned(&["A", "B"]);
    for _ in 0..2 {
        cast.reply("built");
        cast.json(&json!({ "satisfied": false, "context": "again" }));
        cast.reply("built again");
        cast.json(&json!({ "satisfied": true }));
        cast.json(&json!({ "satisfied": true }));
    }
    cast.reply("the summary");
    assert_eq!(
        cast.next(),
        Next::Stopped {
            status: Status::Completed
        }
    );
}
