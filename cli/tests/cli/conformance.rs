//! pi-materia conformance through the CLI: configs written in pi-materia's format behave as
//! pi-materia documents (`../shared/reference/pi-materia-spec.md`), or are refused as it
//! refuses them.

use serde_json::{Value, json};

use crate::common::{Run, Sandbox};

/// A config of one loadout `L` with these sockets and materia, in pi-materia's format.
// Built inline at the call sites, so it takes them by value.
#[allow(clippy::needless_pass_by_value)]
fn config(sockets: Value, materia: Value) -> Value {
    json!({
        "activeLoadout": "L",
        "loadouts": { "L": { "entry": "Socket-1", "sockets": sockets } },
        "materia": materia,
    })
}

/// `castlog run` of `config` (written to the sandbox) as cast `cast`, with `script` as the
/// scripted agent's lines and `extra` arguments, `--json`.
fn run(sandbox: &Sandbox, cast: &str, config: &Value, script: &[Value], extra: &[&str]) -> Run {
    let path = sandbox.write(&format!("{cast}.json"), &config.to_string());
    let lines: String = script.iter().map(|l| format!("{l}\n")).collect();
    let agent = format!(
        "scripted:{}",
        sandbox.write(&format!("{cast}.jsonl"), &lines)
    );
    let mut args = vec![
        "run", &path, "--task", "t", "--cast", cast, "--agent", &agent, "--json",
    ];
    args.extend_from_slice(extra);
    sandbox.run(&args)
}

fn end() -> Value {
    json!([{ "when": "always", "to": "end" }])
}

/// A load-time refusal: exit 1, nothing recorded, the message naming `at` and saying `why`.
fn assert_refused(sandbox: &Sandbox, cast: &str, config: &Value, at: &str, why: &str) {
    let refused = run(sandbox, cast, config, &[], &[]);
    assert_eq!(refused.code, 1, "{}", refused.stderr);
    let message = refused.json()["error"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(
        message.contains(&format!("config error at {at}:")) && message.contains(why),
        "{message}"
    );
    let casts = sandbox.run(&["casts", "--json"]);
    assert!(
        casts.code != 0 || !casts.stdout.contains(&format!("\"{cast}\"")),
        "{}",
        casts.stdout
    );
}

/// Item 3: a utility socket's own `parse` is obsolete (unless its materia is a generator or a
/// loop exits from it on satisfied/not_satisfied), and a `command` argument must be a
/// non-empty string; the refusal names socket or materia, field and index.
#[test]
fn utility_parse_and_bad_command_arguments_are_refused_at_load() {
    let sandbox = Sandbox::new();
    let tick = |command: Value| json!({ "Tick": { "type": "utility", "command": command } });
    let socket = |extra: Value| {
        let mut s = json!({ "materia": "Tick", "edges": end() });
        s.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        json!({ "Socket-1": s })
    };
    assert_refused(
        &sandbox,
        "own-parse",
        &config(
            socket(json!({"parse": "json"})),
            tick(json!(["echo", "{}"])),
        ),
        "loadouts.L.sockets.Socket-1.parse",
        "`parse` on utility socket Socket-1 is obsolete",
    );
    assert_refused(
        &sandbox,
        "text-parse",
        &config(socket(json!({"parse": "text"})), tick(json!(["echo", "x"]))),
        "loadouts.L.sockets.Socket-1.parse",
        "set it on materia.Tick",
    );
    assert_refused(
        &sandbox,
        "empty-arg",
        &config(socket(json!({})), tick(json!(["echo", "a", ""]))),
        "materia.Tick.command[2]",
        "`command` argument 2 is an empty string",
    );
    assert_refused(
        &sandbox,
        "number-arg",
        &config(socket(json!({})), tick(json!(["echo", 3]))),
        "materia.Tick.command[1]",
        "`command` entries must be strings, found a number",
    );
    assert_refused(
        &sandbox,
        "no-argv",
        &config(socket(json!({})), tick(json!([]))),
        "materia.Tick.command",
        "`command` is empty",
    );

    // A generator utility socket may carry the derived `json`.
    let plan = json!({"workItems": [{"title": "a", "context": "b"}]}).to_string();
    let generator = json!({ "Tick": { "type": "utility", "generator": true,
                                      "command": ["echo", plan] } });
    let ok = run(
        &sandbox,
        "generator",
        &config(socket(json!({"parse": "json"})), generator),
        &[],
        &[],
    );
    assert_eq!(ok.code, 0, "{}", ok.stderr);
    assert_eq!(ok.json()["status"], "completed", "{}", ok.stdout);
}

/// Item 4: a utility that reports failure (`satisfied: false` with a `state.<ns>.ok: false`)
/// fails the cast with its own `context` as the reason, the socket named; one without a
/// context is named by the namespace that failed.
#[test]
fn a_utility_failure_keeps_the_utility_s_words() {
    let sandbox = Sandbox::new();
    let check = |output: Value| {
        config(
            json!({ "Socket-1": { "materia": "Check", "edges": [
                { "when": "satisfied", "to": "end" },
                { "when": "not_satisfied", "to": "end" } ] } }),
            json!({ "Check": { "type": "utility", "parse": "json",
                               "command": ["echo", output.to_string()] } }),
        )
    };
    let failed = run(
        &sandbox,
        "words",
        &check(
            json!({"satisfied": false, "context": "git is not installed here",
                      "state": {"vcs": {"ok": false}}}),
        ),
        &[],
        &[],
    );
    assert_eq!(failed.code, 0, "{}", failed.stderr);
    assert_eq!(failed.json()["status"], "failed", "{}", failed.stdout);
    assert_eq!(
        failed.json()["message"],
        "utility Socket-1 failed: git is not installed here"
    );
    let state = sandbox.run(&["state", "words", "--json"]).json();
    assert_eq!(
        state["failure"]["reason"], "utility Socket-1 failed: git is not installed here",
        "{state}"
    );
    let unworded = run(
        &sandbox,
        "unworded",
        &check(json!({"satisfied": false, "state": {"vcs": {"ok": false}}})),
        &[],
        &[],
    );
    assert_eq!(
        unworded.json()["message"],
        "utility Socket-1 reported a failure in state.vcs (ok: false)"
    );
    let verified = sandbox.run(&["verify", "--all", "--json"]);
    assert_eq!(verified.code, 0, "{}", verified.stdout);
}

/// Item 6: pi-materia's utility aliases `noop`, `echo`, `project.ensureIgnored` and
/// `vcs.detect` run as built-ins.
#[test]
fn the_utility_aliases_run_as_built_ins() {
    let sandbox = Sandbox::new();
    let next = |to: &str| json!([{ "when": "always", "to": to }]);
    let loadout = config(
        json!({
            "Socket-1": { "materia": "Nothing", "edges": next("Socket-2") },
            "Socket-2": { "materia": "Say", "edges": next("Socket-3") },
            "Socket-3": { "materia": "Ignore", "edges": next("Socket-4") },
            "Socket-4": { "materia": "Vcs", "edges": end() },
        }),
        json!({
            "Nothing": { "type": "utility", "utility": "noop" },
            "Say": { "type": "utility", "utility": "echo", "parse": "json",
                     "params": { "state": { "greeting": "hello" } } },
            "Ignore": { "type": "utility", "utility": "project.ensureIgnored", "parse": "json",
                        "params": { "patterns": [".pi/"] } },
            "Vcs": { "type": "utility", "utility": "vcs.detect", "parse": "json" },
        }),
    );
    let done = run(&sandbox, "aliases", &loadout, &[], &[]);
    assert_eq!(done.code, 0, "{}", done.stderr);
    assert_eq!(done.json()["status"], "completed", "{}", done.stdout);
    let state = sandbox.run(&["state", "aliases", "--json"]).json();
    let data = &state["data"];
    assert_eq!(data["greeting"], "hello", "{state}");
    assert_eq!(data["artifactIgnore"]["added"], json!([".pi/"]), "{state}");
    assert_eq!(data["vcs"]["ok"], true, "{state}");
    let show = sandbox.run(&["show", "aliases"]);
    assert!(show.stdout.contains("Socket-1:1 exit 0"), "{}", show.stdout);

    let unknown = config(
        json!({ "Socket-1": { "materia": "Odd", "edges": end() } }),
        json!({ "Odd": { "type": "utility", "utility": "vcs.publishEverything" } }),
    );
    let refused = run(&sandbox, "odd", &unknown, &[], &[]);
    assert_eq!(refused.code, 1, "{}", refused.stderr);
    assert!(
        refused.stderr.contains("'vcs.publishEverything'"),
        "{}",
        refused.stderr
    );
}

/// The event kinds of a cast, in order.
fn kinds(sandbox: &Sandbox, cast: &str) -> Vec<String> {
    let shown = sandbox.run(&["show", cast, "--json"]);
    assert_eq!(shown.code, 0, "{}", shown.stderr);
    let doc = shown.json();
    let events = doc
        .as_array()
        .or(doc["events"].as_array())
        .cloned()
        .unwrap();
    events
        .iter()
        .map(|e| e["kind"].as_str().unwrap_or_default().to_owned())
        .collect()
}

/// Item 2: an agent reply's `event` side-channel is checked (a bad one gets a repair turn),
/// recorded as `materia_event`s and taken out before routing; a socket whose `assign` reads
/// `"$"` (as the bundled Auto-Eval's `lastCheck` does) accepts extra top-level fields.
#[test]
fn the_event_side_channel_and_extra_fields_of_a_socket_reading_dollar() {
    let sandbox = Sandbox::new();
    let loadout = config(
        json!({ "Socket-1": { "materia": "Auto-Eval", "parse": "json",
                              "assign": { "lastCheck": "$" },
                              "edges": [{ "when": "satisfied", "to": "end" },
                                        { "when": "not_satisfied", "to": "end" }] } }),
        json!({ "Auto-Eval": { "type": "agent", "tools": "none",
                               "prompt": "Check {{request}}." } }),
    );
    let bad = json!({"satisfied": true, "event": [{"type": "", "severity": "loud"}]});
    let good = json!({"satisfied": true, "context": "fine", "score": 9,
                      "event": [{"type": "progress", "severity": "info", "message": "checked",
                                 "payload": {"files": 2}}]});
    let lines = [
        json!({"reply": bad.to_string()}),
        json!({"reply": good.to_string()}),
    ];
    let done = run(&sandbox, "eval", &loadout, &lines, &[]);
    assert_eq!(done.code, 0, "{}", done.stderr);
    assert_eq!(done.json()["status"], "completed", "{}", done.stdout);
    let kinds = kinds(&sandbox, "eval");
    let at = |kind: &str| kinds.iter().position(|k| k == kind).unwrap_or(usize::MAX);
    assert!(at("output_rejected") < at("materia_event"), "{kinds:?}");
    assert!(at("materia_event") < at("socket_completed"), "{kinds:?}");
    assert!(at("socket_completed") < at("cast_completed"), "{kinds:?}");
    let shown = sandbox.run(&["show", "eval", "--json"]).stdout;
    assert!(shown.contains("$.event[0].type is required"), "{shown}");
    let state = sandbox.run(&["state", "eval", "--json"]).json();
    assert_eq!(
        state["data"]["lastCheck"],
        json!({"satisfied": true, "context": "fine", "score": 9}),
        "{state}"
    );
    let verified = sandbox.run(&["verify", "--all"]);
    assert_eq!(verified.code, 0, "{}", verified.stdout);
}

/// Item 1: a loop with neither `consumes` nor `iterator` (and no generator feeding it) walks no
/// work items: its sockets run without an item, its own cursor advances, and its exit route
/// leads into a second such loop.
#[test]
fn loops_without_an_iterator_run_without_items_and_chain() {
    let sandbox = Sandbox::new();
    let agent = |prompt: &str| json!({ "type": "agent", "tools": "none", "prompt": prompt });
    let loadout = config(
        json!({
            "Socket-1": { "materia": "Work", "edges": [{ "when": "always", "to": "Socket-2" }] },
            "Socket-2": { "materia": "Check", "edges": [{ "when": "not_satisfied", "to": "Socket-1" }] },
            "Socket-3": { "materia": "Work", "edges": [{ "when": "always", "to": "Socket-4" }] },
            "Socket-4": { "materia": "Check", "edges": [{ "when": "not_satisfied", "to": "Socket-3" }] },
        }),
        json!({ "Work": agent("Do {{request}}."), "Check": agent("Check it.") }),
    );
    let mut loadout = loadout;
    loadout["loadouts"]["L"]["loops"] = json!({
        "first": { "sockets": ["Socket-1", "Socket-2"],
                   "exit": { "from": "Socket-2", "when": "satisfied", "to": "Socket-3" } },
        "second": { "sockets": ["Socket-3", "Socket-4"],
                    "exit": { "from": "Socket-4", "when": "satisfied", "to": "end" } },
    });
    let verdict = |ok: bool| json!({"reply": json!({"satisfied": ok, "context": "c"}).to_string()});
    let lines = [
        json!({"reply": "first try"}),
        verdict(false),
        json!({"reply": "second try"}),
        verdict(true),
        json!({"reply": "next stage"}),
        verdict(true),
    ];
    let done = run(&sandbox, "loops", &loadout, &lines, &[]);
    assert_eq!(done.code, 0, "{}", done.stderr);
    assert_eq!(done.json()["status"], "completed", "{}", done.stdout);
    let show = sandbox.run(&["show", "loops"]).stdout;
    for line in [
        "Socket-1 visit 2 (Work)\n",
        "Socket-3 visit 1 (Work)\n",
        "firstIndex: 0 -> 1",
        "secondIndex: 0 -> 1",
        "Socket-2 -> Socket-3 (satisfied, traversal 1)",
        "Socket-4 -> end (always, traversal 1)",
    ] {
        assert!(show.contains(line), "{line:?} not in\n{show}");
    }
    assert!(!show.contains(" item WI-"), "{show}");
    let verified = sandbox.run(&["verify", "--all"]);
    assert_eq!(verified.code, 0, "{}", verified.stdout);
}

/// Item 9: the built-in Ignore-Artifacts edits the ignore file of the cast's `--workdir`, says
/// so on stderr, and leaves the directory castlog was started in alone.
#[test]
fn ignore_artifacts_edits_the_workdir_s_ignore_file_and_says_so() {
    let sandbox = Sandbox::new();
    std::fs::create_dir(sandbox.path("project")).unwrap();
    let loadout = config(
        json!({ "Socket-1": { "materia": "Ignore-Artifacts", "edges": [{ "when": "always", "to": "Socket-2" }] },
                "Socket-2": { "materia": "Ignore-Again", "edges": end() } }),
        json!({
            "Ignore-Artifacts": { "type": "utility", "parse": "json",
                "script": { "kind": "shippedUtility", "name": "ensure-ignored.mjs" },
                "params": { "patterns": [".pi/pi-materia/"] } },
            "Ignore-Again": { "type": "utility", "utility": "project.ensureIgnored",
                "parse": "json", "params": { "patterns": [".pi/pi-materia/"] } },
        }),
    );
    let project = sandbox.path("project");
    let done = run(
        &sandbox,
        "ignore",
        &loadout,
        &[],
        &["--workdir", project.to_str().unwrap()],
    );
    assert_eq!(done.code, 0, "{}", done.stderr);
    assert_eq!(done.json()["status"], "completed", "{}", done.stdout);
    let file = std::fs::canonicalize(&project).unwrap().join(".gitignore");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), ".pi/pi-materia/\n");
    assert!(
        !sandbox.path(".gitignore").exists(),
        "the directory castlog ran in was touched"
    );
    assert!(
        done.stderr.contains(&format!(
            "castlog: note: Socket-1 added .pi/pi-materia/ to {}",
            file.display()
        )),
        "{}",
        done.stderr
    );
    assert!(
        done.stderr.contains(&format!(
            "castlog: note: Socket-2 found .pi/pi-materia/ in {} already",
            file.display()
        )),
        "{}",
        done.stderr
    );
}

/// The bundled Full-Auto and Planning-Consult run to completion when their evaluator replies
/// carry an extra field: every shipped reply with a `satisfied` (Auto-Eval's, which assigns
/// `lastCheck ← $`, and Maintain's, which assigns `lastMaintain ← $`) gets `"verdict": "pass"`,
/// which pi-materia accepts there, and so does castlog.
#[test]
fn bundled_loadouts_complete_with_extra_fields_in_evaluator_replies() {
    let sandbox = Sandbox::new();
    for (loadout, script) in [
        ("Full-Auto", "full-auto.jsonl"),
        ("Planning-Consult", "planning-consult.jsonl"),
    ] {
        let mut extra = 0;
        let lines: Vec<String> = crate::common::fixture_lines(&format!("scripts/{script}"))
            .into_iter()
            .filter(|l| !l.trim().is_empty())
            .map(|l| {
                let mut line: Value = serde_json::from_str(&l).unwrap();
                let reply = line["reply"].as_str().unwrap_or_default();
                if let Ok(Value::Object(mut out)) = serde_json::from_str::<Value>(reply)
                    && out.contains_key("satisfied")
                    && !out.contains_key("workItems")
                {
                    out.insert("verdict".into(), json!("pass"));
                    line["reply"] = json!(Value::Object(out).to_string());
                    extra += 1;
                }
                line.to_string()
            })
            .collect();
        assert!(extra >= 2, "{script}: {extra} evaluator replies");
        let agent = format!(
            "scripted:{}",
            sandbox.write(&format!("extra-{script}"), &(lines.join("\n") + "\n"))
        );
        let done = sandbox.run(&[
            "run",
            &crate::common::fixture("pi-materia-default.json"),
            "--loadout",
            loadout,
            "--task",
            "build a config loader",
            "--agent",
            &agent,
            "--json",
        ]);
        assert_eq!(done.code, 0, "{}", done.stderr);
        assert_eq!(
            done.json()["status"],
            "completed",
            "{loadout}: {}",
            done.stdout
        );
    }
}
