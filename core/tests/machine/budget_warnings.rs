//! `budget.warnAtPercent`: one `budget_warning` when token use first reaches the threshold of
//! the budget in force; `castlog budget` (`Input::RaiseBudget`) raises the budget as an event,
//! and revive then continues a cast its budget stopped without growing the budget again. With a
//! price table, each reply's cost is recorded and `budget.maxCostUsd` warns and stops likewise.

use castlog_core::event::{BudgetRaised, BudgetWarning};
use castlog_core::id::CastId;
use castlog_core::input::Input;
use castlog_core::machine::decide::{self, Rejection, started_event};
use castlog_core::machine::{Phase, Status};
use serde_json::json;

use crate::harness::{Cast, build_loop, digest, env, given, kinds, loadout, plan};

/// The standard loop with a budget of 1000 tokens, warned at 80%.
fn budgeted() -> Cast {
    let mut cfg = build_loop();
    cfg["budget"] = json!({ "maxTokens": 1000, "warnAtPercent": 80 });
    given(&cfg)
}

#[test]
fn the_warning_is_given_once_at_the_reply_that_crosses_the_threshold() {
    let mut cast = budgeted();
    let events = cast.reply_using(&plan(&["A", "B", "C"]).to_string(), 500, 100);
    assert!(
        of!(events, BudgetWarning).is_empty(),
        "{:?}",
        kinds(&events)
    );
    let events = cast.reply_using("built", 150, 50);
    assert_eq!(
        of!(events, BudgetWarning),
        [&BudgetWarning {
            used: 800,
            limit: 1000,
            percent: 80,
            threshold: 80.0,
            cost: None,
        }]
    );
    let k = kinds(&events);
    assert_eq!(k[0], "agent_replied");
    assert_eq!(
        k[1], "budget_warning",
        "right after the reply, before routing"
    );
    assert!(cast.state.budget_warned);
    let events = cast.reply_using(r#"{"satisfied": true}"#, 50, 0);
    assert!(of!(events, BudgetWarning).is_empty(), "only once");
    assert!(!cast.status().is_stopped());
}

#[test]
fn a_reply_that_reaches_the_budget_stops_without_a_warning() {
    let mut cast = budgeted();
    let events = cast.reply_using(&plan(&["A"]).to_string(), 1000, 0);
    assert_eq!(
        kinds(&events),
        ["agent_replied", "allowance_exhausted", "cast_failed"]
    );
}

#[test]
fn a_cast_recorded_before_the_warning_rule_never_warns() {
    let mut cfg = build_loop();
    cfg["budget"] = json!({ "maxTokens": 1000, "warnAtPercent": 80 });
    let l = loadout(&cfg);
    let mut started = started_event(
        CastId::new("c-old"),
        &l,
        digest(b"old"),
        "the request".into(),
        "recommended".into(),
        None,
    );
    started.conformance = Some(1);
    let (state, decision) = decide::start(started, &env()).unwrap();
    let mut cast = Cast {
        state,
        log: decision.events.clone(),
        first: decision.events,
    };
    let events = cast.reply_using(&plan(&["A"]).to_string(), 900, 0);
    assert!(
        of!(events, BudgetWarning).is_empty(),
        "{:?}",
        kinds(&events)
    );
    assert!(!cast.state.budget_warned);
}

#[test]
fn a_raise_is_recorded_and_refuses_a_budget_not_above_the_current_one() {
    let mut cast = budgeted();
    cast.reply_using(&plan(&["A"]).to_string(), 100, 0);
    for tokens in [500, 1000] {
        match cast.rejects(Input::RaiseBudget { tokens }) {
            Rejection::NotNow { reason, .. } => {
                assert!(reason.contains("already 1000 tokens"), "{reason}");
            }
            other => panic!("{other:?}"),
        }
    }
    let events = cast.when(Input::RaiseBudget { tokens: 5000 });
    assert_eq!(
        of!(events, BudgetRaised),
        [&BudgetRaised {
            tokens: 5000,
            previous: 1000,
            used: 100
        }]
    );
    assert_eq!(cast.state.token_budget(), 5000);
    let events = cast.reply_using("built", 3900, 0);
    assert_eq!(
        of!(events, BudgetWarning)[0].limit,
        5000,
        "against the new budget"
    );
}

#[test]
fn a_raise_below_the_threshold_lets_the_warning_come_again() {
    let mut cast = budgeted();
    cast.reply_using(&plan(&["A", "B"]).to_string(), 850, 0);
    assert!(cast.state.budget_warned);
    cast.when(Input::RaiseBudget { tokens: 1050 });
    assert!(cast.state.budget_warned, "850 of 1050 is still past 80%");
    cast.when(Input::RaiseBudget { tokens: 10_000 });
    assert!(!cast.state.budget_warned);
    let events = cast.reply_using("built", 7150, 0);
    assert_eq!(of!(events, BudgetWarning)[0].used, 8000);
}

#[test]
fn revive_after_a_raise_continues_without_growing_the_budget() {
    let mut cast = budgeted();
    let events = cast.reply_using(&plan(&["A"]).to_string(), 1200, 0);
    assert_eq!(of!(events, CastFailed).len(), 1);
    let events = cast.when(Input::RaiseBudget { tokens: 3000 });
    assert_eq!(kinds(&events), ["budget_raised"]);
    assert_eq!(
        cast.status(),
        Status::Failed,
        "a raise alone does not continue"
    );
    let events = cast.when(Input::Revive);
    assert!(
        of!(events, AllowanceExtended).is_empty(),
        "{:?}",
        kinds(&events)
    );
    assert_eq!(of!(events, SocketCompleted).len(), 1);
    assert_eq!(cast.state.token_budget(), 3000);
    assert!(!cast.status().is_stopped());
    assert_eq!(cast.data()["workItems"][0]["title"], json!("A"));
    assert_ne!(cast.phase(), Some(Phase::AwaitingRefinement));
}

/// The standard loop with a price table (`*`: $1 per million input tokens, $4 per million
/// output tokens) and a cost budget of $0.001 (1000 millionths), warned at 50%.
fn priced() -> Cast {
    let mut cfg = build_loop();
    cfg["budget"] = json!({ "maxTokens": 1_000_000, "maxCostUsd": 0.001, "warnAtPercent": 50 });
    cfg["prices"] = json!({ "*": { "inputUsdPerMillion": 1, "outputUsdPerMillion": 4 } });
    given(&cfg)
}

#[test]
fn a_priced_reply_records_its_cost_and_the_cost_warns_once_then_stops_and_revive_grows_it() {
    let mut cast = priced();
    // 200 × $1/M + 50 × $4/M = 400 millionths: below the 50% threshold.
    let events = cast.reply_using(&plan(&["A", "B"]).to_string(), 200, 50);
    let replied = of!(events, AgentReplied);
    assert_eq!(
        replied[0].cost,
        Some(castlog_core::event::ReplyCost {
            model: "*".into(),
            micros: 400
        })
    );
    assert!(
        of!(events, BudgetWarning).is_empty(),
        "{:?}",
        kinds(&events)
    );
    // 600 in all: one warning of the cost.
    let events = cast.reply_using("built", 200, 0);
    let warning = of!(events, BudgetWarning);
    assert_eq!(warning.len(), 1, "{:?}", kinds(&events));
    assert_eq!(warning[0].percent, 60);
    assert_eq!(
        warning[0].cost,
        Some(castlog_core::event::CostUse {
            used_micros: 600,
            limit_micros: 1000
        })
    );
    // 1000 reaches the budget: the cast stops as the token budget stops it.
    let events = cast.json(&json!({ "satisfied": true }));
    assert!(of!(events, BudgetWarning).is_empty(), "only once");
    let events = cast.reply_using("built B", 400, 0);
    assert!(
        kinds(&events).contains(&"allowance_exhausted"),
        "{:?}",
        kinds(&events)
    );
    assert_eq!(cast.status(), Status::Failed);
    assert_eq!(cast.state.cost_budget(), Some(1000));
    let events = cast.when(Input::Revive);
    assert_eq!(of!(events, AllowanceExtended)[0].limit, 2000);
    assert!(!cast.status().is_stopped());
}

#[test]
fn without_a_price_table_max_cost_usd_is_dropped_and_no_reply_is_priced() {
    let mut cfg = build_loop();
    cfg["budget"] = json!({ "maxCostUsd": 0.000001 });
    let mut cast = given(&cfg);
    let events = cast.reply_using(&plan(&["A"]).to_string(), 100_000, 100_000);
    assert_eq!(of!(events, AgentReplied)[0].cost, None);
    assert_eq!(cast.state.cost_budget(), None);
    assert!(!cast.status().is_stopped());
}
