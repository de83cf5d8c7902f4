//! `castlog report`: the HTML file of a cast with a repair, a rework and a recast, and of its
//! diff with the recast.

use std::path::PathBuf;

use crate::common::Sandbox;

/// The farewell the recast's agent writes instead of the original one.
pub const RECAST_REPLY: &str = "Added farewell(name) printing goodbye, <name>.";

/// Cast `a`: the build-loop fixture, whose evaluator first answers in prose (a repair turn),
/// then sends item 1 back (a rework); cast `b`: `a` recast at item 2's build visit with
/// another agent.
pub fn repaired_reworked_recast(sandbox: &Sandbox) {
    let run = sandbox.completed_build_loop("a");
    assert_eq!(run.json()["status"], "completed");
    let reply = |text: &str| serde_json::json!({ "reply": text }).to_string();
    let other = sandbox.write(
        "other.jsonl",
        &[
            reply(RECAST_REPLY),
            reply(r#"{"satisfied": true, "context": "farewell names the user."}"#),
            reply(r#"{"satisfied": true, "context": "Committed."}"#),
            reply("Summary of the recast."),
        ]
        .join("\n"),
    );
    let recast = sandbox.run(&[
        "recast",
        "a",
        "--at",
        "Socket-3:3",
        "--cast",
        "b",
        "--agent",
        &format!("scripted:{other}"),
        "--json",
    ]);
    assert_eq!(recast.json()["status"], "completed", "{}", recast.stdout);
}

/// Writes the report of `cast` (with `--diff other`) and returns the file.
pub fn write_report(sandbox: &Sandbox, cast: &str, other: Option<&str>, name: &str) -> PathBuf {
    let file = sandbox.path(name);
    let mut args = vec!["report", cast, "-o", file.to_str().unwrap(), "--json"];
    if let Some(other) = other {
        args.extend(["--diff", other]);
    }
    let run = sandbox.run(&args);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(
        run.json()["bytes"].as_u64().unwrap(),
        std::fs::metadata(&file).unwrap().len()
    );
    file
}

/// The text of the element of `html` that opens with `opening` (up to its first `</tag>`).
fn element<'a>(html: &'a str, opening: &str, tag: &str) -> &'a str {
    let start = html
        .find(opening)
        .unwrap_or_else(|| panic!("no {opening} in the page"));
    let end = html[start..]
        .find(&format!("</{tag}>"))
        .map_or(html.len(), |e| start + e);
    &html[start..end]
}

#[test]
fn the_report_shows_every_visit_the_rework_reason_and_each_entrys_destination() {
    let sandbox = Sandbox::new();
    repaired_reworked_recast(&sandbox);
    let html = std::fs::read_to_string(write_report(&sandbox, "a", None, "a.html")).unwrap();
    // Self-contained: nothing is fetched from anywhere.
    assert!(html.starts_with("<!DOCTYPE html>"));
    for outside in ["<link", "src=\"http", "href=\"http", "@import"] {
        assert!(
            !html.contains(outside),
            "the page refers outside: {outside}"
        );
    }
    // Every socket visited has its visits in the timeline and a box in the graph.
    for socket in [
        "Socket-1", "Socket-2", "Socket-3", "Socket-4", "Socket-5", "Socket-6",
    ] {
        assert!(
            html.contains(&format!("class=\"visit\" data-key=\"{socket} ")),
            "{socket} has no visit"
        );
        assert!(html.contains(&format!("data-socket=\"{socket}\" data-items=")));
    }
    assert!(html.contains("data-key=\"Socket-3 WI-1 #2\""));
    // The rework is shown at the evaluator's first visit of item 1, with its reason.
    let rework = element(&html, "data-key=\"Socket-4 WI-1 #1\"", "h3");
    assert!(
        rework.contains("1 repair") && rework.contains("rework"),
        "{rework}"
    );
    let visit = element(&html, "data-key=\"Socket-4 WI-1 #1\"", "details");
    assert!(
        visit.contains("Rework to Socket-3")
            && visit
                .contains("greet() ignores the user's name; it must print hello, &lt;name&gt;."),
        "{visit}"
    );
    assert!(!element(&html, "data-key=\"Socket-4 WI-1 #2\"", "details").contains("Rework to"));
    // Every entry of every prompt names its destination in words, its rule and layer.
    let entries = html.matches("class=\"entry dest-").count();
    assert!(entries > 20, "{entries} entries");
    assert_eq!(html.matches("class=\"tag destination\"").count(), entries);
    assert!(html.contains("data-destination=\"trailing\"") && html.contains("trailing mandate #"));
    assert!(html.contains("data-destination=\"system_fold\"") && html.contains("system fold #"));
    assert!(html.contains(" · rule <code class=\"rule\">") && html.contains("layer L"));
    // The summary: status, chain check, tokens and the graph's taken back edge.
    assert!(html.contains("<span class=\"tag\">completed</span>"));
    assert!(html.contains("✓ chain ok"));
    assert!(html.contains("7167 (6960 in, 207 out)"));
    assert!(html.contains("not_satisfied ×1"));
    // The reply sits beside its prompt.
    assert!(
        html.contains("<pre class=\"reply\">greet(name) now prints 'hello, &lt;name&gt;'.</pre>")
    );
}

#[test]
fn the_recasts_report_shows_its_inherited_prefix_and_the_diff_marks_the_first_divergence() {
    let sandbox = Sandbox::new();
    repaired_reworked_recast(&sandbox);
    let html = std::fs::read_to_string(write_report(&sandbox, "b", None, "b.html")).unwrap();
    assert!(html.contains("Recast of"));
    assert!(html.contains("(inherited from a)"));
    assert!(html.contains("Rework to Socket-3"));

    let diff =
        std::fs::read_to_string(write_report(&sandbox, "a", Some("b"), "diff.html")).unwrap();
    assert!(diff.contains("<title>castlog diff: a vs b</title>"));
    let first = element(&diff, "id=\"first-divergence\"", "section");
    assert!(first.contains("data-key=\"Socket-3 WI-2 #3\""), "{first}");
    assert!(first.contains("first divergence: ") && first.contains("[≠ changed]"));
    assert!(first.contains(
        "<span class=\"diff-add\">+Added farewell(name) printing goodbye, &lt;name&gt;.</span>"
    ));
    assert_eq!(diff.matches("id=\"first-divergence\"").count(), 1);
    // The steps before it are the same, folded into one list.
    assert!(diff.contains("7 steps the same: Socket-1 - #1 … Socket-5 WI-1 #1"));
}

#[test]
fn a_report_of_an_unknown_cast_or_into_a_missing_directory_is_the_users_error() {
    let sandbox = Sandbox::new();
    sandbox.completed_build_loop("a");
    let out = sandbox.path("x.html");
    let run = sandbox.run(&["report", "nope", "-o", out.to_str().unwrap()]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(
        run.stderr.contains("no cast named \"nope\""),
        "{}",
        run.stderr
    );
    let run = sandbox.run(&["report", "a", "--diff", "nope", "-o", out.to_str().unwrap()]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    let missing = sandbox.path("no/such/dir/x.html");
    let run = sandbox.run(&["report", "a", "-o", missing.to_str().unwrap()]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(
        run.stderr.contains("cannot write the report"),
        "{}",
        run.stderr
    );
}

#[test]
fn a_report_shows_the_lanes_of_a_parent_and_what_a_priced_cast_cost() {
    let sandbox = Sandbox::new();
    let run = |config: &str, script: &str, cast: &str| {
        let done = sandbox.run(&[
            "run",
            &crate::common::fixture(config),
            "--task",
            "greet",
            "--cast",
            cast,
            "--agent",
            &crate::common::scripted(script),
            "--json",
        ]);
        assert_eq!(done.json()["status"], "completed", "{}", done.stdout);
    };
    run("loadouts/lanes.json", "lanes.jsonl", "par");
    let html = std::fs::read_to_string(write_report(&sandbox, "par", None, "par.html")).unwrap();
    let lanes = element(&html, "<dd id=\"lanes\">", "dd");
    for lane in ["a", "b"] {
        assert!(
            lanes.contains(&format!(
                "<li data-lane=\"{lane}\">lane {lane} <code>par.lane-{lane}</code> <span class=\"tag\">completed</span>"
            )),
            "{lanes}"
        );
    }
    assert!(html.contains("not priced"), "no prices, no cost");
    // The plan and the barrier are marked in the timeline.
    assert!(html.matches("class=\"tag tag-lanes\">lanes<").count() >= 2);

    run("loadouts/cost.json", "full-auto.jsonl", "priced");
    let state = sandbox.run(&["state", "priced", "--json"]).json();
    let usd = state["cost"]["usd"].as_f64().unwrap();
    assert!(usd > 0.0, "{state}");
    let html = std::fs::read_to_string(write_report(&sandbox, "priced", None, "c.html")).unwrap();
    let cost = element(&html, "<dd id=\"cost\">", "dd");
    assert!(cost.contains(&format!("${usd}")), "{cost} vs {usd}");
}
