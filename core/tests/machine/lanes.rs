//! Parallel lanes (§2.15): the plan a parallel generator's output makes (validated, a repair
//! turn otherwise), a lane's start from its parent's plan, a lane ending where its loop exits,
//! and the barrier: the fan-in and the loop's exit route, or the parent failing for a lane
//! that did not complete, and revive running the lanes again.

use castlog_core::event::{Event, LaneOutcome, LaneStarted, LaneStatus};
use castlog_core::id::{CastId, Digest, Seq};
use castlog_core::input::Input;
use castlog_core::machine::decide::start_lane;
use castlog_core::machine::{CastState, Next, Phase, Status};
use serde_json::{Value, json};

use crate::harness::{Cast, catalog, env, given, kinds};

/// Plan (parallel) → Prep (utility, once per lane) → loop { Build → Eval (exit on satisfied) }
/// → Narrate.
fn lanes_config() -> Value {
    let mut materia = catalog();
    materia["Plan"]["parallel"] = json!(true);
    materia["Build"]["parallelSafe"] = json!(true);
    materia["Eval"]["parallelSafe"] = json!(true);
    materia["Prep"] = json!({ "type": "utility", "parallelSafe": true, "parse": "json",
                              "params": { "output": { "state": { "prepared": true } } } });
    json!({
        "activeLoadout": "Test",
        "parallelism": { "maxConcurrency": 3 },
        "materia": materia,
        "loadouts": { "Test": {
            "entry": "Socket-1",
            "sockets": {
                "Socket-1": { "materia": "Plan", "edges": [{ "when": "always", "to": "Socket-2" }] },
                "Socket-2": { "materia": "Prep", "edges": [{ "when": "always", "to": "Socket-3" }] },
                "Socket-3": { "materia": "Build", "parse": "text",
                              "edges": [{ "when": "always", "to": "Socket-4" }] },
                "Socket-4": { "materia": "Eval", "parse": "json", "edges": [
                    { "when": "not_satisfied", "to": "Socket-3", "maxTraversals": 2 },
                    { "when": "always", "to": "Socket-3" }
                ] },
                "Socket-5": { "materia": "Narrate", "parse": "text" }
            },
            "loops": { "work": {
                "sockets": ["Socket-3", "Socket-4"],
                "consumes": { "from": "Socket-1" },
                "exit": { "from": "Socket-4", "when": "satisfied", "to": "Socket-5" }
            } }
        } }
    })
}

fn plan_output(streams: &Value) -> Value {
    json!({
        "workItems": [
            { "title": "one", "context": "first" },
            { "title": "two", "context": "second" },
            { "title": "three", "context": "third" }
        ],
        "parallelSchedule": { "version": 1, "streams": streams }
    })
}

fn planned() -> Cast {
    let mut cast = given(&lanes_config());
    let events = cast.json(&plan_output(&json!([
        { "name": "a", "workItemIndexes": [0, 2] },
        { "name": "b", "workItemIndexes": [1] }
    ])));
    assert_eq!(
        kinds(&events),
        [
            "agent_replied",
            "socket_completed",
            "data_assigned",
            "lanes_planned"
        ]
    );
    cast
}

/// A lane of `parent`, started as the driver starts it.
fn lane(parent: &Cast, name: &str) -> Cast {
    let Next::RunLanes { lanes, .. } = parent.next() else {
        panic!("no lanes run: {:?}", parent.next());
    };
    let plan = lanes.iter().find(|l| l.name == name).unwrap();
    let started = LaneStarted {
        cast: plan.cast.clone(),
        parent: parent.state.cast.clone(),
        parent_seq: parent.state.head,
        parent_hash: Digest::ZERO,
        name: name.to_owned(),
        items: plan.items.clone(),
    };
    let (state, decision) = start_lane(&parent.state, started, &env()).unwrap();
    Cast {
        state,
        log: decision.events.clone(),
        first: decision.events,
    }
}

fn outcome(lane: &Cast, status: LaneStatus) -> LaneOutcome {
    LaneOutcome {
        name: lane.state.lane.as_ref().unwrap().name.clone(),
        cast: lane.state.cast.clone(),
        status,
        head: lane.state.head,
        hash: Digest::ZERO,
        output: lane.state.last_output.clone(),
        satisfied: lane.state.last_satisfied,
        reason: lane.state.failure.as_ref().map(|f| f.reason.clone()),
        usage: lane.state.usage,
        scope: lane.state.scope.clone(),
    }
}

/// Runs a lane's items to its loop's exit: Prep, then Build and Eval for each (10 tokens a
/// reply).
fn finish(lane: &mut Cast) {
    lane.utility(r#"{"state": {"prepared": true}}"#);
    let items = lane.state.lane.as_ref().unwrap().items.len();
    for _ in 0..items {
        lane.reply_using("built", 6, 4);
        lane.reply_using(r#"{"satisfied": true, "context": "fine"}"#, 6, 4);
    }
}

#[test]
fn an_accepted_parallel_plan_records_the_lanes_and_asks_the_driver_to_run_them() {
    let cast = planned();
    assert_eq!(cast.phase(), Some(Phase::RunningLanes));
    let Next::RunLanes {
        lanes,
        max_concurrency,
        revive,
        planned_at,
    } = cast.next()
    else {
        panic!("{:?}", cast.next());
    };
    assert_eq!(max_concurrency, 3);
    assert!(!revive);
    assert_eq!(planned_at, cast.state.head);
    let names: Vec<(&str, &str, Vec<u64>)> = lanes
        .iter()
        .map(|l| (l.name.as_str(), l.cast.as_str(), l.items.clone()))
        .collect();
    assert_eq!(
        names,
        [
            ("a", "cast-1.lane-a", vec![0, 2]),
            ("b", "cast-1.lane-b", vec![1])
        ]
    );
}

#[test]
fn a_schedule_that_misses_or_repeats_an_item_gets_a_repair_turn() {
    let mut cast = given(&lanes_config());
    let events = cast.json(&plan_output(&json!([
        { "name": "a", "workItemIndexes": [0, 0] },
        { "name": "a", "workItemIndexes": [7] }
    ])));
    let rejected = of!(events, OutputRejected);
    assert_eq!(rejected.len(), 1);
    let issues = rejected[0].issues.join("\n");
    for said in [
        "\"a\" is used twice",
        "holds 7",
        "work item 0 is in 2 streams",
        "work item 1 is in no stream",
    ] {
        assert!(issues.contains(said), "{said}: {issues}");
    }
    assert!(rejected[0].repair);
    // Without a schedule at all: a repair turn too.
    let events = cast.json(&json!({ "workItems": [{ "title": "t", "context": "c" }] }));
    let issues = of!(events, OutputRejected)[0].issues.join("\n");
    assert!(issues.contains("parallelSchedule"), "{issues}");
}

#[test]
fn a_lane_walks_its_own_items_keyed_as_the_parents_and_ends_where_its_loop_exits() {
    let parent = planned();
    let mut a = lane(&parent, "a");
    assert_eq!(kinds(&a.first), ["lane_started", "socket_started"]);
    assert_eq!(a.socket(), "Socket-2");
    assert_eq!(a.data()["workItems"].as_array().unwrap().len(), 2);
    a.utility(r#"{"state": {"prepared": true}}"#);
    assert_eq!(a.item().as_deref(), Some("WI-1"));
    a.reply("built one");
    a.json(&json!({ "satisfied": true, "context": "one is fine" }));
    // The lane's second item is the parent's third.
    assert_eq!(a.item().as_deref(), Some("WI-3"));
    a.reply("built three");
    let events = a.json(&json!({ "satisfied": true, "context": "three is fine" }));
    let edges = of!(events, EdgeTaken);
    assert_eq!(
        edges.last().unwrap().to,
        castlog_core::event::Target::End,
        "a lane does not follow the parent's exit route"
    );
    assert_eq!(a.status(), Status::Completed);
}

#[test]
fn the_barrier_sets_the_fan_in_and_follows_the_loops_exit_route() {
    let mut parent = planned();
    let mut a = lane(&parent, "a");
    let mut b = lane(&parent, "b");
    finish(&mut b);
    finish(&mut a);
    let events = parent.when(Input::JoinLanes {
        lanes: vec![
            outcome(&a, LaneStatus::Completed),
            outcome(&b, LaneStatus::Completed),
        ],
    });
    assert_eq!(
        kinds(&events)[..5],
        [
            "lanes_joined",
            "data_assigned",
            "data_assigned",
            "data_assigned",
            "edge_taken"
        ]
    );
    let fan_in = &parent.data()["parallelFanIn"];
    assert_eq!(fan_in["satisfied"], true);
    assert_eq!(fan_in["lanes"][0]["name"], "a");
    assert_eq!(fan_in["lanes"][1]["workItemIndexes"], json!([1]));
    assert_eq!(parent.data()["envelope"]["satisfied"], true);
    assert_eq!(parent.socket(), "Socket-5");
    parent.reply("all done");
    assert_eq!(parent.status(), Status::Completed);
}

#[test]
fn outcomes_out_of_plan_order_are_refused() {
    let mut parent = planned();
    let mut a = lane(&parent, "a");
    let mut b = lane(&parent, "b");
    finish(&mut a);
    finish(&mut b);
    parent.rejects(Input::JoinLanes {
        lanes: vec![
            outcome(&b, LaneStatus::Completed),
            outcome(&a, LaneStatus::Completed),
        ],
    });
}

#[test]
fn a_failed_lane_fails_the_parent_and_revive_runs_the_lanes_again() {
    let mut parent = planned();
    let mut a = lane(&parent, "a");
    finish(&mut a);
    let mut b = lane(&parent, "b");
    b.utility_exit(Some(2), false, "", "no disk");
    assert_eq!(b.status(), Status::Failed);
    let events = parent.when(Input::JoinLanes {
        lanes: vec![
            outcome(&a, LaneStatus::Completed),
            outcome(&b, LaneStatus::Failed),
        ],
    });
    assert_eq!(kinds(&events), ["lanes_joined", "cast_failed"]);
    let reason = &of!(events, CastFailed)[0].reason;
    assert!(reason.contains("lane b (cast-1.lane-b) failed"), "{reason}");
    assert!(reason.contains("castlog revive cast-1"), "{reason}");
    assert_eq!(parent.status(), Status::Failed);

    let events = parent.when(Input::Revive);
    assert_eq!(kinds(&events), ["cast_revived"]);
    let Next::RunLanes { revive, .. } = parent.next() else {
        panic!("{:?}", parent.next());
    };
    assert!(revive, "failed lanes are revived when the lanes run next");

    b.when(Input::Revive);
    finish(&mut b);
    parent.when(Input::JoinLanes {
        lanes: vec![
            outcome(&a, LaneStatus::Completed),
            outcome(&b, LaneStatus::Completed),
        ],
    });
    assert_eq!(parent.socket(), "Socket-5");
    let Some(lanes) = &parent.state.lanes else {
        panic!("no lanes");
    };
    assert!(!lanes.revive);
    // Each lane's tokens count once for the parent, however often it was joined (lane a was
    // joined twice).
    assert_eq!(
        parent.state.usage.total(),
        a.state.usage.total() + b.state.usage.total()
    );
}

#[test]
fn a_lane_state_folds_back_from_its_parent_and_its_first_event() {
    let parent = planned();
    let a = lane(&parent, "a");
    let Some(Event::LaneStarted(started)) = a.first.first().cloned() else {
        panic!("no lane_started");
    };
    let mut folded = CastState::lane(&parent.state, &started);
    for event in a.first.iter().skip(1) {
        folded.evolve(event);
    }
    assert_eq!(
        serde_json::to_value(&folded).unwrap(),
        serde_json::to_value(&a.state).unwrap()
    );
    assert_eq!(folded.cast, CastId::new("cast-1.lane-a"));
    assert_eq!(folded.head, Seq(2));
}
