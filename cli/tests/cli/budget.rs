//! Budgets (pi-materia's `budget`): the one-shot `budget_warning` at `warnAtPercent`, and
//! `castlog budget CAST N` (the reference's `/materia budget`) raising a cast's token budget so
//! that `revive` continues a cast its budget stopped. The loadout is pi-materia's format
//! (`fixtures/loadouts/budget.json`: 3000 tokens, warned at 50%), the agent a shipped script
//! whose replies carry usage (480, 1002, 1540, ... 7167 tokens in all).

use crate::common::{Sandbox, fixture, scripted};

fn stopped_cast(sb: &Sandbox) {
    let loadout = fixture("loadouts/budget.json");
    let agent = scripted("build-loop.jsonl");
    let run = sb.run(&[
        "run", &loadout, "--task", "greet", "--cast", "b", "--agent", &agent,
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run.stdout.contains("cast b: failed"), "{}", run.stdout);
}

fn lines_of<'a>(text: &'a str, kind: &str) -> Vec<&'a str> {
    text.lines().filter(|l| l.contains(kind)).collect()
}

#[test]
fn the_warning_is_recorded_once_at_the_reply_that_crosses_the_threshold() {
    let sb = Sandbox::new();
    stopped_cast(&sb);
    let show = sb.run(&["show", "b"]);
    assert_eq!(show.code, 0, "{}", show.stderr);
    let warnings = lines_of(&show.stdout, "budget_warning");
    assert_eq!(warnings.len(), 1, "{}", show.stdout);
    assert!(
        warnings[0].contains("1540 of 3000 tokens used (51%, warned at 50%)"),
        "{}",
        warnings[0]
    );
    assert!(
        show.stdout
            .contains("token budget reached: 3483 tokens used of 3000"),
        "{}",
        show.stdout
    );
    let verify = sb.run(&["verify", "b"]);
    assert_eq!(verify.code, 0, "{}{}", verify.stdout, verify.stderr);
}

#[test]
fn a_raised_budget_lets_revive_continue_the_stopped_cast_to_the_end() {
    let sb = Sandbox::new();
    stopped_cast(&sb);
    let raised = sb.run(&["budget", "b", "10000"]);
    assert_eq!(raised.code, 0, "{}", raised.stderr);
    assert!(
        raised
            .stdout
            .contains("budget raised to 10000 tokens (was 3000, 3483 used)"),
        "{}",
        raised.stdout
    );
    assert!(
        raised.stdout.contains("cast b: failed"),
        "revive continues it"
    );
    let agent = scripted("build-loop.jsonl");
    let revived = sb.run(&["revive", "b", "--agent", &agent]);
    assert_eq!(revived.code, 0, "{}", revived.stderr);
    assert!(
        revived.stdout.contains("cast b: completed"),
        "{}",
        revived.stdout
    );
    assert!(
        lines_of(&revived.stdout, "allowance_extended").is_empty(),
        "the raise is the extension: {}",
        revived.stdout
    );
    let again = lines_of(&revived.stdout, "budget_warning");
    assert_eq!(again.len(), 1, "{}", revived.stdout);
    assert!(again[0].contains("5597 of 10000"), "{}", again[0]);
    let verify = sb.run(&["verify", "b"]);
    assert_eq!(verify.code, 0, "{}{}", verify.stdout, verify.stderr);
}

#[test]
fn a_budget_not_above_the_current_one_is_refused_and_nothing_is_recorded() {
    let sb = Sandbox::new();
    stopped_cast(&sb);
    for tokens in ["2000", "3000"] {
        let refused = sb.run(&["budget", "b", tokens]);
        assert_eq!(refused.code, 1, "{}", refused.stderr);
        assert!(
            refused
                .stderr
                .contains("the budget is already 3000 tokens (3483 used); give more than that"),
            "{}",
            refused.stderr
        );
        refused.assert_failure_stdout();
    }
    let show = sb.run(&["show", "b"]);
    assert!(lines_of(&show.stdout, "budget_raised").is_empty());
}

#[test]
fn an_unknown_cast_or_a_bad_number_is_a_clear_error() {
    let sb = Sandbox::new();
    stopped_cast(&sb);
    let unknown = sb.run(&["budget", "nope", "9000"]);
    assert_eq!(unknown.code, 1, "{}", unknown.stderr);
    assert!(
        unknown.stderr.contains("no cast named \"nope\""),
        "{}",
        unknown.stderr
    );
    let json = sb.run(&["budget", "nope", "9000", "--json"]);
    assert_eq!(json.code, 1);
    json.assert_failure_stdout();
    let bad = sb.run(&["budget", "b", "lots"]);
    assert_ne!(bad.code, 0);
    assert!(bad.stderr.contains("lots"), "{}", bad.stderr);
}

/// `fixtures/loadouts/cost.json`: the budget fixture with a price table (`prices`: the Plan
/// materia's model `planner-large`, and `*` for the rest) and `budget.maxCostUsd` 0.40.
fn costly_cast(sb: &Sandbox) -> String {
    let loadout = fixture("loadouts/cost.json");
    let agent = scripted("build-loop.jsonl");
    let run = sb.run(&[
        "run", &loadout, "--task", "greet", "--cast", "c", "--agent", &agent,
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run.stdout.contains("cast c: failed"), "{}", run.stdout);
    agent
}

#[test]
fn priced_replies_warn_once_at_the_cost_threshold_and_stop_the_cast_over_max_cost_usd() {
    let sb = Sandbox::new();
    let agent = costly_cast(&sb);
    let show = sb.run(&["show", "c"]);
    assert_eq!(show.code, 0, "{}", show.stderr);
    // Each reply is priced by its materia's model, else `*`.
    assert!(
        show.stdout.contains("[$0.132 at planner-large]"),
        "{}",
        show.stdout
    );
    assert!(show.stdout.contains("[$0.0279 at *]"), "{}", show.stdout);
    let warnings = lines_of(&show.stdout, "budget_warning");
    assert_eq!(warnings.len(), 1, "{}", show.stdout);
    assert!(
        warnings[0].contains("budget warning: $0.223 of $0.40 cost used (55%, warned at 50%)"),
        "{}",
        warnings[0]
    );
    assert!(
        show.stdout
            .contains("cost budget reached: $0.4039 used of $0.40; revive to extend the budget"),
        "{}",
        show.stdout
    );
    let state = sb.run(&["state", "c", "--json"]);
    let cost = &state.json()["cost"];
    assert_eq!(cost["usd"], 0.4039, "{cost}");
    assert_eq!(cost["max_usd"], 0.4, "{cost}");
    assert_eq!(cost["warned"], true, "{cost}");
    let text = sb.run(&["state", "c"]);
    assert!(
        text.stdout.contains("cost $0.4039 of $0.40 (warned)"),
        "{}",
        text.stdout
    );
    // Revive grows the cost budget by its configured size and the cast goes on to the end.
    let revived = sb.run(&["revive", "c", "--agent", &agent]);
    assert_eq!(revived.code, 0, "{}", revived.stderr);
    assert!(
        revived.stdout.contains("cost budget extended to $0.80"),
        "{}",
        revived.stdout
    );
    assert!(
        revived.stdout.contains("cast c: completed"),
        "{}",
        revived.stdout
    );
    let verify = sb.run(&["verify", "c"]);
    assert_eq!(verify.code, 0, "{}{}", verify.stdout, verify.stderr);
}

#[test]
fn max_cost_usd_without_a_price_table_is_dropped_and_a_bad_price_is_refused() {
    let sb = Sandbox::new();
    // The bundled default sets maxCostUsd 20 and has no prices: no cost is counted.
    let loadout = fixture("pi-materia-default.json");
    let agent = scripted("full-auto.jsonl");
    let run = sb.run(&[
        "run",
        &loadout,
        "--task",
        "t",
        "--cast",
        "d",
        "--agent",
        &agent,
        "--workdir",
        ".",
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let state = sb.run(&["state", "d", "--json"]);
    assert!(state.json().get("cost").is_none(), "{}", state.stdout);
    let bad = sb.write(
        "bad.json",
        &std::fs::read_to_string(fixture("loadouts/cost.json"))
            .unwrap()
            .replace(
                "\"outputUsdPerMillion\": 800",
                "\"outputUsdPerMilion\": 800",
            ),
    );
    let refused = sb.run(&["run", &bad, "--task", "t", "--agent", &agent]);
    assert_eq!(refused.code, 1, "{}", refused.stderr);
    assert!(
        refused
            .stderr
            .contains("prices.planner-large.outputUsdPerMilion"),
        "{}",
        refused.stderr
    );
}
