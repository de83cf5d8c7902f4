//! The token budget (`budget.maxTokens`): castlog stops right after the reply is recorded and
//! before any assignment, advance or routing; revive extends the budget and commits the pending
//! reply (item 35 as it applies: the budget grows only through revive, and an extension still
//! below the tokens used stops again without committing).

use castlog_core::event::Allowance;
use castlog_core::id::SocketId;
use castlog_core::input::Input;
use castlog_core::machine::{Phase, Status};
use serde_json::{Value, json};

use crate::harness::{Cast, build_loop, config, given, kinds, plan};

fn with_budget(mut cfg: Value, max_tokens: u64) -> Cast {
    cfg["budget"] = json!({ "maxTokens": max_tokens, "warnAtPercent": 80 });
    given(&cfg)
}

/// The standard loop at Maintain of WI-1 with 300 tokens used of `max_tokens`.
fn at_maintain(max_tokens: u64) -> Cast {
    let mut cast = with_budget(build_loop(), max_tokens);
    cast.reply_using(&plan(&["A", "B"]).to_string(), 100, 0);
    cast.reply_using("built", 100, 0);
    cast.reply_using(r#"{"satisfied": true}"#, 100, 0);
    assert_eq!(cast.socket(), "Socket-4");
    cast.settle();
    cast
}

#[test]
fn a_budget_stop_happens_before_any_assignment_advance_or_routing() {
    // castlog does better: the reference checks the budget after assignments and advance, so
    // a stop leaves the cursor advanced past a completion that was never routed.
    let mut cast = at_maintain(1000);
    let events = cast.reply_using(r#"{"satisfied": true, "context": "committed"}"#, 700, 100);
    assert_eq!(
        kinds(&events),
        ["agent_replied", "allowance_exhausted", "cast_failed"]
    );
    let exhausted = of!(events, AllowanceExhausted);
    assert_eq!(exhausted[0].allowance, Allowance::Tokens);
    assert_eq!((exhausted[0].count, exhausted[0].limit), (1100, 1000));
    let failed = of!(events, CastFailed);
    assert_eq!(failed[0].allowance, Some(Allowance::Tokens));
    assert_eq!(failed[0].socket, Some(SocketId::new("Socket-4")));
    assert!(failed[0].reason.contains("1100"), "{}", failed[0].reason);
    assert_eq!(cast.status(), Status::Failed);
    assert_eq!(cast.state.cursors.get("workItemIndex"), Some(&0));
    assert_eq!(cast.socket(), "Socket-4");
    let current = cast.state.current.as_ref().unwrap();
    assert!(
        current.pending_reply.is_some(),
        "the reply is recorded, not committed"
    );
    assert_eq!(
        cast.data()["envelope"]["context"],
        json!("The plan."),
        "nothing committed"
    );
}

#[test]
fn revive_extends_the_budget_and_commits_the_pending_reply() {
    let mut cast = at_maintain(1000);
    cast.reply_using(r#"{"satisfied": true, "context": "committed"}"#, 700, 100);
    let events = cast.when(Input::Revive);
    let extended = of!(events, AllowanceExtended);
    assert_eq!(extended[0].allowance, Allowance::Tokens);
    assert_eq!(extended[0].limit, 2000, "grown by the original limit");
    let k = kinds(&events);
    let at = |kind: &str| k.iter().position(|x| *x == kind).unwrap();
    assert!(at("cast_revived") < at("socket_completed"));
    assert!(at("socket_completed") < at("cursor_advanced"));
    assert!(at("cursor_advanced") < at("edge_taken"));
    let moved = of!(events, CursorAdvanced);
    assert_eq!((moved[0].from, moved[0].to), (0, 1));
    assert_eq!(
        of!(events, SocketStarted)[0]
            .item
            .as_ref()
            .unwrap()
            .as_str(),
        "WI-2"
    );
    assert_eq!(cast.data()["envelope"]["context"], json!("committed"));
    assert!(!cast.status().is_stopped());
}

#[test]
fn an_extension_still_below_the_tokens_used_stops_again_without_committing() {
    let mut cast = with_budget(build_loop(), 1000);
    let events = cast.reply_using(&plan(&["A"]).to_string(), 2400, 100);
    assert_eq!(of!(events, CastFailed).len(), 1);
    let events = cast.when(Input::Revive);
    assert_eq!(of!(events, AllowanceExtended)[0].limit, 2000);
    assert_eq!(of!(events, AllowanceExhausted)[0].count, 2500);
    assert_eq!(of!(events, CastFailed).len(), 1);
    assert!(of!(events, SocketCompleted).is_empty());
    assert!(cast.data().get("workItems").is_none());
    let events = cast.when(Input::Revive);
    assert_eq!(
        of!(events, AllowanceExtended)[0].limit,
        3000,
        "linear growth"
    );
    assert_eq!(of!(events, SocketCompleted).len(), 1);
    assert_eq!(cast.data()["workItems"][0]["title"], json!("A"));
}

#[test]
fn a_zero_budget_is_already_exhausted_at_the_first_reply() {
    let mut cast = with_budget(build_loop(), 0);
    let events = cast.reply(&plan(&["A"]).to_string());
    let exhausted = of!(events, AllowanceExhausted);
    assert_eq!((exhausted[0].count, exhausted[0].limit), (0, 0));
    assert_eq!(cast.status(), Status::Failed);
}

#[test]
fn revive_after_a_zero_budget_stop_extends_the_budget() {
    // Revive must extend the exhausted budget so that the pending reply can be committed. With
    // `maxTokens: 0` the growth "by the original limit" adds nothing.
    let mut cast = with_budget(build_loop(), 0);
    cast.reply(&plan(&["A"]).to_string());
    let events = cast.when(Input::Revive);
    let extended = of!(events, AllowanceExtended);
    assert!(extended[0].limit > 0, "{:?}", kinds(&events));
    assert_eq!(
        of!(events, SocketCompleted).len(),
        1,
        "{:?}",
        kinds(&events)
    );
}

#[test]
fn tokens_accumulate_across_replies() {
    let mut cast = at_maintain(1_000_000);
    assert_eq!(cast.state.usage.total(), 300);
    cast.reply_using(r#"{"satisfied": true}"#, 5, 7);
    assert_eq!((cast.state.usage.input, cast.state.usage.output), (305, 7));
}

#[test]
fn a_refinement_reply_over_budget_is_kept_pending_then_recorded_on_revive() {
    let mut cast = with_budget(
        config(json!({
            "entry": "Socket-1",
            "sockets": { "Socket-1": { "materia": "Chat" } }
        })),
        50,
    );
    let events = cast.reply_using("a first draft", 40, 20);
    assert!(of!(events, RefinementRecorded).is_empty());
    assert_eq!(cast.status(), Status::Failed);
    let events = cast.when(Input::Revive);
    assert_eq!(
        of!(events, RefinementRecorded).len(),
        1,
        "{:?}",
        kinds(&events)
    );
    assert_eq!(cast.phase(), Some(Phase::AwaitingRefinement));
}

#[rstest::rstest]
#[case::just_below(999, false)]
#[case::exactly_at(1000, true)]
fn the_stop_is_at_used_greater_or_equal_to_max(#[case] used: u64, #[case] stops: bool) {
    let mut cast = with_budget(build_loop(), 1000);
    let events = cast.reply_using(&plan(&["A"]).to_string(), used, 0);
    assert_eq!(of!(events, CastFailed).len(), usize::from(stops));
    assert_eq!(of!(events, SocketCompleted).len(), usize::from(!stops));
}

/// A completion names the seq of the reply it commits instead of repeating it, even when a
/// budget stop came between them; a fork taken in between begins another cast, whose
/// completion holds the parent's reply in full.
#[test]
fn a_completion_names_the_reply_it_commits_unless_a_fork_came_between() {
    use castlog_core::event::{CastForked, Event};
    use castlog_core::id::{CastId, Digest};

    let mut cast = at_maintain(1000);
    let reply_seq = cast.state.head.next();
    let reply = r#"{"satisfied": true, "context": "committed"}"#;
    cast.reply_using(reply, 700, 100);
    let mut forked = cast.state.clone();
    let events = cast.when(Input::Revive);
    let completed = of!(events, SocketCompleted);
    assert_eq!(completed[0].output, reply);
    assert_eq!(completed[0].output_of, Some(reply_seq));
    let stored = String::from_utf8(Event::from(completed[0].clone()).encode()).unwrap();
    assert!(
        stored.contains(&format!(r#""output_of":{}"#, reply_seq.get())),
        "{stored}"
    );
    assert!(!stored.contains("committed"), "{stored}");

    forked.evolve(&Event::from(CastForked {
        cast: CastId::new("child"),
        parent: CastId::new(crate::harness::CAST),
        parent_seq: forked.head,
        parent_hash: Digest::ZERO,
        loadout_hash: None,
        tools: None,
        loadout: None,
        workdir: None,
    }));
    let decision = forked
        .decide_mut(&Input::Revive, &crate::harness::env())
        .unwrap();
    let completed = of!(decision.events, SocketCompleted);
    assert_eq!(completed[0].output, reply);
    assert_eq!(
        completed[0].output_of, None,
        "the reply is the parent's event"
    );
}
