//! Tests of the config loader: the bundled pi-materia config and a table of bad configs.

use rstest::rstest;
use serde_json::json;

use super::*;
use crate::event::When;
use crate::id::SocketId;
use crate::loadout::{Advance, EdgeTarget, Exec, ExitRoute, Parse, Socket, SocketKind};

/// pi-materia's bundled `config/default.json` (MIT), byte for byte.
const DEFAULT: &str = include_str!("../../../../fixtures/pi-materia-default.json");

/// A small valid config (the spec's §1.7 example, trimmed) the bad cases are derived from.
const BASE: &str = r#"{
  "activeLoadout": "Mini",
  "placementPolicy": "recommended",
  "limits": { "maxNoAdvanceCycles": 4, "maxSocketVisits": 99 },
  "budget": { "maxTokens": 500000, "warnAtPercent": 80, "maxCostUsd": 3, "stopAtLimit": true },
  "loadouts": {
    "Mini": {
      "entry": "Socket-1",
      "sockets": {
        "Socket-1": { "materia": "Scan", "edges": [{ "when": "always", "to": "Socket-2" }] },
        "Socket-2": { "materia": "Planner", "edges": [{ "when": "always", "to": "Socket-3" }] },
        "Socket-3": { "materia": "Coder", "edges": [{ "when": "always", "to": "Socket-4" }] },
        "Socket-4": {
          "materia": "Checker", "assign": { "review": "$.context", "check": "$" },
          "edges": [
            { "when": "not_satisfied", "to": "Socket-3", "maxTraversals": 2 },
            { "when": "always", "to": "Socket-3" }
          ]
        },
        "Socket-5": { "materia": "Reporter" }
      },
      "loops": {
        "items": {
          "sockets": ["Socket-3", "Socket-4"],
          "consumes": { "from": "Socket-2", "output": "workItems" },
          "exit": { "from": "Socket-4", "when": "satisfied", "to": "Socket-5" }
        }
      }
    },
    "Other": {
      "entry": "Socket-1",
      "sockets": { "Socket-1": { "materia": "Reporter" } }
    }
  },
  "materia": {
    "Scan": { "type": "utility", "command": ["node", "./scan.mjs"], "parse": "json", "params": { "depth": 2 }, "timeoutMs": 10000 },
    "Planner": { "type": "agent", "tools": "readOnly", "generator": true, "prompt": "Plan: {{request}}" },
    "Coder": { "tools": "coding", "thinking": "medium", "model": "prov/model-1", "prompt": "Implement {{item.title}}" },
    "Checker": { "tools": { "type": "custom", "tools": ["read", "bash"] }, "prompt": "Check.", "label": "The Checker" },
    "Reporter": { "tools": "none", "prompt": "Summarize." }
  }
}"#;

fn sid(id: &str) -> SocketId {
    SocketId::new(id)
}

fn socket<'a>(loadout: &'a Loadout, id: &str) -> &'a Socket {
    loadout.socket(&sid(id)).expect("socket exists")
}

fn pairs(items: &[(&str, &str)]) -> Vec<(String, String)> {
    items
        .iter()
        .map(|(a, b)| ((*a).to_owned(), (*b).to_owned()))
        .collect()
}

fn advance(when: Option<&str>) -> Option<Advance> {
    Some(Advance {
        cursor: "workItemIndex".into(),
        items: "state.workItems".into(),
        when: when.map(str::to_owned),
    })
}

fn exit(id: &str, from: &str, condition: When, target: &str) -> ExitRoute {
    ExitRoute {
        id: id.into(),
        from: sid(from),
        condition,
        target: EdgeTarget::Socket(sid(target)),
    }
}

fn builtin(socket: &Socket) -> (&str, u64, &serde_json::Value) {
    match &socket.kind {
        SocketKind::Utility(u) => match &u.exec {
            Exec::Builtin { name } => (name.as_str(), u.timeout_ms, &u.params),
            other => panic!("not a builtin: {other:?}"),
        },
        _ => panic!("not a utility"),
    }
}

#[test]
fn default_config_lists_five_loadouts_in_file_order() {
    let config = load_config(DEFAULT).unwrap();
    assert_eq!(
        config.names,
        [
            "Full-Auto",
            "Planning-Consult",
            "Hojo-Consult",
            "Parallel-Experimental",
            "Parallel-Interactive"
        ]
    );
    assert_eq!(config.active, "Full-Auto");
    assert_eq!(config.placement_policy, None);
    assert_eq!(config.resolve(None).unwrap().name, "Full-Auto");
}

#[test]
fn default_full_auto_resolves_with_derived_facts() {
    let config = load_config(DEFAULT).unwrap();
    let l = config.resolve(Some("Full-Auto")).unwrap();
    assert_eq!(l.entry, sid("Socket-1"));
    assert_eq!(l.limits.max_no_advance_cycles, 3);
    assert_eq!(l.budget.max_tokens, 10_000_000);
    assert!((l.budget.warn_at_percent - 75.0).abs() < f64::EPSILON);

    // Utilities: castlog's built-in equivalents of the two shipped scripts.
    let s1 = socket(&l, "Socket-1");
    assert_eq!(
        builtin(s1),
        (
            "ensure-ignored",
            30_000,
            &json!({"patterns": [".pi/pi-materia/"]})
        )
    );
    assert_eq!(s1.parse, Parse::Json);
    assert_eq!(s1.label, "Ignore-Artifacts");
    assert_eq!(
        builtin(socket(&l, "Socket-2")),
        ("detect-vcs", 30_000, &json!({}))
    );

    // Generators: json + the implicit workItems assignment.
    for id in ["Socket-3", "Socket-8"] {
        let s = socket(&l, id);
        assert!(s.generator, "{id}");
        assert_eq!(s.parse, Parse::Json, "{id}");
        assert_eq!(s.assign, pairs(&[("workItems", "$.workItems")]), "{id}");
    }

    let eval = socket(&l, "Socket-5");
    assert_eq!(
        eval.assign,
        pairs(&[("lastFeedback", "$.context"), ("lastCheck", "$")])
    );
    assert_eq!(eval.edges.len(), 2);
    assert_eq!(eval.edges.get(1).and_then(|e| e.max_traversals), Some(3));
    assert_eq!(socket(&l, "Socket-4").parse, Parse::Text);

    let maintain = socket(&l, "Socket-6");
    assert_eq!(maintain.parse, Parse::Json);
    assert_eq!(maintain.advance, advance(Some("satisfied")));
    assert_eq!(maintain.assign, pairs(&[("lastMaintain", "$")]));

    assert_eq!(l.loops.len(), 1);
    let lp = l.loops.first().unwrap();
    assert_eq!(lp.id, "loopSelection");
    assert_eq!(
        lp.sockets,
        [sid("Socket-4"), sid("Socket-5"), sid("Socket-6")]
    );
    assert_eq!(lp.consumes_from, Some(sid("Socket-8")));
    assert_eq!(lp.iterator.items, "state.workItems");
    assert_eq!(lp.iterator.as_name, "workItem");
    assert_eq!(lp.iterator.cursor, "workItemIndex");
    // The legacy exit goes to `end`, so only the authored route remains.
    assert_eq!(
        lp.exits,
        [exit(
            "exit:Socket-6:always",
            "Socket-6",
            When::Always,
            "Socket-7"
        )]
    );
}

#[test]
fn default_planning_consult_and_hojo_consult_resolve() {
    let config = load_config(DEFAULT).unwrap();

    let p = config.resolve(Some("Planning-Consult")).unwrap();
    let plan = socket(&p, "Socket-3");
    assert!(plan.is_multi_turn());
    assert_eq!(plan.parse, Parse::Json);
    assert_eq!(plan.assign, pairs(&[("workItems", "$.workItems")]));
    let lp = p.loops.first().unwrap();
    assert_eq!(lp.consumes_from, Some(sid("Socket-3")));
    assert!(lp.exits.is_empty());
    assert_eq!(socket(&p, "Socket-6").advance, advance(Some("satisfied")));

    let h = config.resolve(Some("Hojo-Consult")).unwrap();
    assert!(socket(&h, "Socket-3").is_multi_turn());
    assert!(!socket(&h, "Socket-4").is_multi_turn());
    let lp = h.loops.first().unwrap();
    assert_eq!(lp.consumes_from, Some(sid("Socket-4")));
    assert_eq!(
        lp.exits,
        [exit(
            "exit:Socket-7:always",
            "Socket-7",
            When::Always,
            "Socket-8"
        )]
    );
    let eval = socket(&h, "Socket-6");
    assert!(eval.assign.is_empty());
    assert!(eval.edges.iter().all(|e| e.max_traversals.is_none()));
    assert_eq!(socket(&h, "Socket-7").advance, advance(Some("satisfied")));
}

/// `l` as its frozen form keeps it: everything but the tool scopes, which `cast_started`
/// records beside the loadout.
fn frozen(mut l: Loadout) -> Loadout {
    for socket in l.sockets.values_mut() {
        if let crate::loadout::SocketKind::Agent(a) = &mut socket.kind {
            a.tools = None;
        }
    }
    l
}

#[test]
fn resolved_loadouts_round_trip_through_json() {
    let config = load_config(DEFAULT).unwrap();
    for name in ["Full-Auto", "Planning-Consult", "Hojo-Consult"] {
        let l = config.resolve(Some(name)).unwrap();
        assert_eq!(Loadout::from_json(&l.to_json()), Ok(frozen(l)));
    }
    let l = load_config(BASE).unwrap().resolve(None).unwrap();
    assert_eq!(Loadout::from_json(&l.to_json()), Ok(frozen(l)));
}

#[test]
fn unknown_loadout_name_fails_resolve() {
    let config = load_config(DEFAULT).unwrap();
    let e = config.resolve(Some("Nope")).unwrap_err();
    assert_eq!(e.path, "loadouts");
    assert!(e.reason.contains("Full-Auto, Planning-Consult"), "{e}");
}

#[test]
fn base_config_resolves_with_derivations() {
    let config = load_config(BASE).unwrap();
    assert_eq!(config.names, ["Mini", "Other"]);
    assert_eq!(config.placement_policy.as_deref(), Some("recommended"));
    let l = config.resolve(None).unwrap();
    assert_eq!(l.limits.max_no_advance_cycles, 4);
    assert_eq!(l.budget.max_tokens, 500_000);
    assert!((l.budget.warn_at_percent - 80.0).abs() < f64::EPSILON);

    let scan = socket(&l, "Socket-1");
    match &scan.kind {
        SocketKind::Utility(u) => {
            assert_eq!(
                u.exec,
                Exec::Command {
                    argv: vec!["node".into(), "./scan.mjs".into()]
                }
            );
            assert_eq!(u.timeout_ms, 10_000);
            assert_eq!(u.params, json!({"depth": 2}));
        }
        _ => panic!("Scan is a utility"),
    }
    assert_eq!(scan.parse, Parse::Json);

    let planner = socket(&l, "Socket-2");
    assert_eq!(planner.parse, Parse::Json);
    assert_eq!(planner.assign, pairs(&[("workItems", "$.workItems")]));

    match &socket(&l, "Socket-3").kind {
        SocketKind::Agent(a) => {
            assert_eq!(a.model.as_deref(), Some("prov/model-1"));
            assert_eq!(a.thinking.as_deref(), Some("medium"));
            assert!(!a.multi_turn);
        }
        _ => panic!("Coder is an agent"),
    }

    // The legacy exit on `satisfied` gives Socket-4 json parsing, the advance and a route.
    let checker = socket(&l, "Socket-4");
    assert_eq!(checker.label, "The Checker");
    assert_eq!(checker.parse, Parse::Json);
    assert_eq!(checker.advance, advance(Some("satisfied")));
    assert_eq!(
        checker.assign,
        pairs(&[("review", "$.context"), ("check", "$")])
    );
    let lp = l.loops.first().unwrap();
    assert_eq!(lp.consumes_from, Some(sid("Socket-2")));
    assert_eq!(
        lp.exits,
        [exit(
            "exit:Socket-4:satisfied",
            "Socket-4",
            When::Satisfied,
            "Socket-5"
        )]
    );
    assert_eq!(socket(&l, "Socket-5").label, "Reporter");
    assert!(socket(&l, "Socket-5").edges.is_empty());
}

#[test]
fn authored_exit_route_wins_over_the_legacy_exit() {
    let text = BASE.replace(
        r#""consumes": { "from": "Socket-2", "output": "workItems" },"#,
        r#""consumes": { "from": "Socket-2", "output": "workItems" },
          "exits": [{ "id": "mine", "from": "Socket-4", "condition": "satisfied", "targetSocketId": "end" }],"#,
    );
    assert_ne!(text, BASE);
    let l = load_config(&text).unwrap().resolve(None).unwrap();
    let lp = l.loops.first().unwrap();
    assert_eq!(lp.exits.len(), 1);
    assert_eq!(lp.exits.first().map(|r| r.id.as_str()), Some("mine"));
    assert_eq!(lp.exits.first().map(|r| &r.target), Some(&EdgeTarget::End));
}

#[test]
fn loop_without_consumes_or_feeding_generator_has_no_consumes_from() {
    let text = BASE
        .replace(
            r#""consumes": { "from": "Socket-2", "output": "workItems" },"#,
            r#""iterator": { "items": "state.tasks", "cursor": "taskIndex" },"#,
        )
        .replace(r#""generator": true, "#, "");
    let l = load_config(&text).unwrap().resolve(None).unwrap();
    let lp = l.loops.first().unwrap();
    assert_eq!(lp.consumes_from, None);
    assert_eq!(lp.iterator.items, "state.tasks");
    assert_eq!(lp.iterator.cursor, "taskIndex");
    assert_eq!(
        socket(&l, "Socket-4").advance,
        Some(Advance {
            cursor: "taskIndex".into(),
            items: "state.tasks".into(),
            when: Some("satisfied".into()),
        })
    );
    assert_eq!(socket(&l, "Socket-2").parse, Parse::Text);
}

#[test]
fn loop_members_need_an_edge_cycle() {
    let text = BASE
        .replace(
            r#""exit": { "from": "Socket-4", "when": "satisfied", "to": "Socket-5" }"#,
            r#""exits": []"#,
        )
        .replace(
            r#"{ "when": "not_satisfied", "to": "Socket-3", "maxTraversals": 2 },
            { "when": "always", "to": "Socket-3" }"#,
            r#"{ "when": "always", "to": "Socket-5" }"#,
        );
    let e = load_config(&text).unwrap_err();
    assert_eq!(e.path, "loadouts.Mini.loops.items.sockets");
    assert!(e.reason.contains("no edge cycle"), "{e}");
}

#[test]
fn a_shipped_script_without_a_built_in_resolves_to_be_run_from_an_install_and_a_path_is_refused() {
    let shipped = |name: &str| {
        BASE.replace(
            r#""command": ["node", "./scan.mjs"], "parse": "json", "params": { "depth": 2 }, "timeoutMs": 10000"#,
            &format!(r#""script": {{ "kind": "shippedUtility", "name": "{name}" }}, "parse": "json""#),
        )
    };
    let loadout = load_config(&shipped("scan-repo.mjs"))
        .unwrap()
        .resolve(Some("Mini"))
        .unwrap();
    let SocketKind::Utility(spec) = &loadout.socket(&SocketId::new("Socket-1")).unwrap().kind
    else {
        panic!("a utility");
    };
    assert_eq!(
        spec.exec,
        Exec::Shipped {
            name: "scan-repo.mjs".into(),
            runtime: "node".into(),
            hash: None
        }
    );
    for name in ["../x.mjs", "sub/x.mjs", ".hidden.mjs"] {
        let e = load_config(&shipped(name)).unwrap_err();
        assert!(e.path.ends_with("script.name"), "{name}: {e}");
        assert!(e.reason.contains("not a path"), "{name}: {e}");
    }
}

#[test]
fn unsupported_shipped_utility_fails_only_resolve_of_loadouts_using_it() {
    let text = BASE.replace(
        r#""command": ["node", "./scan.mjs"], "parse": "json", "params": { "depth": 2 }, "timeoutMs": 10000"#,
        r#""script": { "kind": "shippedUtility", "name": "mime-gh-pr.mjs", "runtime": "node" }"#,
    );
    assert_ne!(text, BASE);
    let config = load_config(&text).unwrap();
    let e = config.resolve(Some("Mini")).unwrap_err();
    assert_eq!(e.path, "loadouts.Mini.sockets.Socket-1");
    assert!(
        e.reason
            .contains("castlog does not provide the shipped utility 'mime-gh-pr.mjs'"),
        "{e}"
    );
    assert!(
        e.reason.contains("give the materia a `command` instead"),
        "{e}"
    );
    assert!(config.resolve(Some("Other")).is_ok());

    let alias = BASE.replace(
        r#""command": ["node", "./scan.mjs"], "parse": "json", "params": { "depth": 2 }, "timeoutMs": 10000"#,
        r#""utility": "vcs.publishEverything""#,
    );
    let e = load_config(&alias).unwrap().resolve(None).unwrap_err();
    assert!(e.reason.contains("'vcs.publishEverything'"), "{e}");
}

#[test]
fn utility_exec_precedence_is_command_then_output_then_alias_then_script() {
    let with = |fields: &str| {
        let text = BASE.replace(
            r#""command": ["node", "./scan.mjs"], "parse": "json", "params": { "depth": 2 }, "timeoutMs": 10000"#,
            fields,
        );
        let l = load_config(&text).unwrap().resolve(None);
        l.map(|l| match &socket(&l, "Socket-1").kind {
            SocketKind::Utility(u) => u.exec.clone(),
            _ => panic!("utility expected"),
        })
    };
    let script = r#""script": { "kind": "shippedUtility", "name": "detect-vcs.mjs" }"#;
    assert_eq!(
        with(&format!(
            r#""command": ["x"], "params": {{"output": "o"}}, {script}"#
        )),
        Ok(Exec::Command {
            argv: vec!["x".into()]
        })
    );
    assert_eq!(
        with(&format!(
            r#""utility": "vcs.x", "params": {{"output": {{"a": 1}}}}, {script}"#
        )),
        Ok(Exec::Output {
            output: json!({"a": 1})
        })
    );
    assert!(with(&format!(r#""utility": "vcs.x", {script}"#)).is_err());
    assert_eq!(
        with(script),
        Ok(Exec::Builtin {
            name: "detect-vcs".into()
        })
    );
}

#[test]
fn truncated_and_garbled_input_never_panics() {
    let mut cut = 0;
    while cut < DEFAULT.len() {
        if DEFAULT.is_char_boundary(cut) {
            let _ = load_config(&DEFAULT[..cut]);
        }
        cut += 61;
    }
    for text in [
        "",
        "null",
        "1e999",
        "[[[[[[[[",
        "{\"loadouts\": 1}",
        "\"x\"",
    ] {
        assert!(load_config(text).is_err(), "{text}");
    }
    let deep = format!("{}{}", "[".repeat(10_000), "]".repeat(10_000));
    assert!(load_config(&deep).is_err());
}

/// `(from, to)` rewrites [`BASE`]; an empty `from` makes `to` the whole text.
#[rstest]
#[case::unknown_active_loadout(
    r#""activeLoadout": "Mini""#,
    r#""activeLoadout": "Maxi""#,
    "activeLoadout",
    "no loadout named \"Maxi\"; use one of: Mini, Other"
)]
#[case::bad_socket_id(
    r#""Socket-5": { "materia": "Reporter" }"#,
    r#""Socket-05": { "materia": "Reporter" }"#,
    "loadouts.Mini.sockets.Socket-05",
    "invalid socket id"
)]
#[case::named_socket_id(
    r#""Socket-5": { "materia": "Reporter" }"#,
    r#""report": { "materia": "Reporter" }"#,
    "loadouts.Mini.sockets.report",
    "socket ids are Socket-1, Socket-2"
)]
#[case::unknown_materia(
    r#""Socket-5": { "materia": "Reporter" }"#,
    r#""Socket-5": { "materia": "Reportr" }"#,
    "loadouts.Mini.sockets.Socket-5.materia",
    "unknown materia \"Reportr\""
)]
#[case::bad_when(
    r#"{ "when": "not_satisfied", "to": "Socket-3", "maxTraversals": 2 }"#,
    r#"{ "when": "failed", "to": "Socket-3", "maxTraversals": 2 }"#,
    "loadouts.Mini.sockets.Socket-4.edges[0].when",
    "unknown condition \"failed\""
)]
#[case::edge_after_always(
    r#"[{ "when": "always", "to": "Socket-2" }]"#,
    r#"[{ "when": "always", "to": "Socket-2" }, { "when": "satisfied", "to": "Socket-5" }]"#,
    "loadouts.Mini.sockets.Socket-1.edges[1]",
    "unreachable"
)]
#[case::edge_to_unknown_socket(
    r#""Socket-3": { "materia": "Coder", "edges": [{ "when": "always", "to": "Socket-4" }] }"#,
    r#""Socket-3": { "materia": "Coder", "edges": [{ "when": "always", "to": "Socket-9" }] }"#,
    "loadouts.Mini.sockets.Socket-3.edges[0].to",
    "unknown socket \"Socket-9\""
)]
#[case::max_traversals_zero(
    r#""maxTraversals": 2"#,
    r#""maxTraversals": 0"#,
    "loadouts.Mini.sockets.Socket-4.edges[0].maxTraversals",
    "must be an integer from 1"
)]
#[case::generator_with_parse_text(
    r#""Socket-2": { "materia": "Planner","#,
    r#""Socket-2": { "materia": "Planner", "parse": "text","#,
    "loadouts.Mini.sockets.Socket-2.parse",
    "is a generator"
)]
#[case::generator_with_other_work_items(
    r#""Socket-2": { "materia": "Planner","#,
    r#""Socket-2": { "materia": "Planner", "assign": { "workItems": "$.tasks" },"#,
    "loadouts.Mini.sockets.Socket-2.assign.workItems",
    "always assigns workItems from \"$.workItems\""
)]
#[case::exit_from_non_member(
    r#""exit": { "from": "Socket-4""#,
    r#""exit": { "from": "Socket-2""#,
    "loadouts.Mini.loops.items.exit.from",
    "not a member of this loop"
)]
#[case::exits_route_from_non_member(
    r#""consumes": { "from": "Socket-2", "output": "workItems" },"#,
    r#""consumes": { "from": "Socket-2" }, "exits": [{ "id": "x", "from": "Socket-5", "condition": "always", "targetSocketId": "end" }],"#,
    "loadouts.Mini.loops.items.exits[0].from", "not a member of this loop"
)]
#[case::duplicate_exit_route(
    r#""consumes": { "from": "Socket-2", "output": "workItems" },"#,
    r#""exits": [{ "id": "a", "from": "Socket-4", "condition": "always", "targetSocketId": "end" }, { "id": "b", "from": "Socket-4", "condition": "always", "targetSocketId": "Socket-5" }],"#,
    "loadouts.Mini.loops.items.exits[1]", "one route per source and condition"
)]
#[case::exit_route_to_unknown_socket(
    r#""consumes": { "from": "Socket-2", "output": "workItems" },"#,
    r#""exits": [{ "id": "a", "from": "Socket-4", "condition": "always", "targetSocketId": "Socket-7" }],"#,
    "loadouts.Mini.loops.items.exits[0].targetSocketId", "unknown socket \"Socket-7\""
)]
#[case::exit_from_text_socket(
    r#""materia": "Checker", "assign""#,
    r#""materia": "Checker", "parse": "text", "assign""#,
    "loadouts.Mini.sockets.Socket-4.parse",
    "needs JSON output"
)]
#[case::conflicting_advance(
    r#""materia": "Checker", "assign""#,
    r#""materia": "Checker", "advance": { "cursor": "i", "items": "state.workItems" }, "assign""#,
    "loadouts.Mini.sockets.Socket-4.advance.cursor",
    "conflicts with loop \"items\"'s `exit`"
)]
#[case::loop_member_unknown(
    r#""sockets": ["Socket-3", "Socket-4"]"#,
    r#""sockets": ["Socket-3", "Socket-6"]"#,
    "loadouts.Mini.loops.items.sockets[1]",
    "unknown socket \"Socket-6\""
)]
#[case::exit_without_continuation(
    r#"{ "when": "not_satisfied", "to": "Socket-3", "maxTraversals": 2 },
            { "when": "always", "to": "Socket-3" }"#,
    r#"{ "when": "always", "to": "end" }"#,
    "loadouts.Mini.loops.items.exit.from",
    "no edge back into the loop"
)]
#[case::consumes_without_generator(
    r#""Planner": { "type": "agent", "tools": "readOnly", "generator": true,"#,
    r#""Planner": { "type": "agent", "tools": "readOnly","#,
    "loadouts.Mini.loops.items.consumes.from",
    "no generator socket outside the loop"
)]
#[case::utility_with_prompt(
    r#""Scan": { "type": "utility","#,
    r#""Scan": { "type": "utility", "prompt": "hi","#,
    "materia.Scan.prompt",
    "a utility materia runs a program"
)]
#[case::agent_without_prompt(
    r#""prompt": "Summarize.""#,
    r#""label": "Summarize.""#,
    "materia.Reporter.prompt",
    "an agent materia needs a `prompt`"
)]
#[case::agent_without_tools(
    r#""Reporter": { "tools": "none","#,
    r#""Reporter": {"#,
    "materia.Reporter.tools",
    "an agent materia needs `tools`"
)]
#[case::bad_thinking(
    r#""thinking": "medium""#,
    r#""thinking": "deep""#,
    "materia.Coder.thinking",
    "unknown thinking level \"deep\""
)]
#[case::materia_system_prompt(
    r#""Reporter": { "tools": "none","#,
    r#""Reporter": { "tools": "none", "systemPrompt": "x","#,
    "materia.Reporter.systemPrompt",
    "system prompts are obsolete"
)]
#[case::socket_system_prompt(
    r#""Socket-5": { "materia": "Reporter" }"#,
    r#""Socket-5": { "materia": "Reporter", "systemPrompt": "x" }"#,
    "loadouts.Mini.sockets.Socket-5.systemPrompt",
    "obsolete socket field"
)]
#[case::generates(
    r#""Reporter": { "tools": "none","#,
    r#""Reporter": { "tools": "none", "generates": {},"#,
    "materia.Reporter.generates",
    "`generates` is obsolete"
)]
#[case::utility_socket_assign(
    r#""Socket-1": { "materia": "Scan","#,
    r#""Socket-1": { "materia": "Scan", "assign": { "a": "$" },"#,
    "loadouts.Mini.sockets.Socket-1.assign",
    "move `assign` to materia.Scan"
)]
#[case::utility_socket_command(
    r#""Socket-1": { "materia": "Scan","#,
    r#""Socket-1": { "materia": "Scan", "command": ["x"],"#,
    "loadouts.Mini.sockets.Socket-1.command",
    "move it to materia.Scan"
)]
#[case::empty_command(
    r#""command": ["node", "./scan.mjs"]"#,
    r#""command": []"#,
    "materia.Scan.command",
    "`command` is empty"
)]
#[case::utility_socket_parse_json(
    r#""Socket-1": { "materia": "Scan","#,
    r#""Socket-1": { "materia": "Scan", "parse": "json","#,
    "loadouts.Mini.sockets.Socket-1.parse",
    "`parse` on utility socket Socket-1 is obsolete: a utility's parse mode is its materia's (materia.Scan)"
)]
#[case::empty_command_argument(
    r#""command": ["node", "./scan.mjs"]"#,
    r#""command": ["node", ""]"#,
    "materia.Scan.command[1]",
    "`command` argument 1 is an empty string"
)]
#[case::non_string_command_argument(
    r#""command": ["node", "./scan.mjs"]"#,
    r#""command": ["node", 3]"#,
    "materia.Scan.command[1]",
    "`command` entries must be strings, found a number"
)]
#[case::unknown_entry(
    r#""entry": "Socket-1",
      "sockets": {
        "Socket-1": { "materia": "Scan""#,
    r#""entry": "Socket-6",
      "sockets": {
        "Socket-1": { "materia": "Scan""#,
    "loadouts.Mini.entry",
    "entry socket \"Socket-6\" does not exist"
)]
#[case::duplicate_key(
    r#""Socket-5": { "materia": "Reporter" }"#,
    r#""Socket-5": { "materia": "Reporter", "materia": "Coder" }"#,
    "loadouts.Mini.sockets.Socket-5.materia",
    "duplicate key"
)]
#[case::zero_no_advance_cycles(
    r#""maxNoAdvanceCycles": 4"#,
    r#""maxNoAdvanceCycles": 0"#,
    "limits.maxNoAdvanceCycles",
    "must be an integer from 1"
)]
#[case::negative_max_tokens(
    r#""maxTokens": 500000"#,
    r#""maxTokens": -1"#,
    "budget.maxTokens",
    "must be an integer of at least 0"
)]
#[case::invalid_json(
    r#""entry": "Socket-1",
      "sockets": {
        "Socket-1": { "materia": "Scan""#,
    r#""entry": "Socket-1"
      "sockets": {
        "Socket-1": { "materia": "Scan""#,
    "$",
    "invalid JSON at line 9, column 7: expected `,` or `}`"
)]
#[case::non_object_top_level("", "[1, 2]", "$", "the config must be a JSON object")]
#[case::missing_loadouts(
    "",
    r#"{"activeLoadout": "x", "materia": {}}"#,
    "loadouts",
    "`loadouts` is missing"
)]
#[case::empty_loadouts(
    "",
    r#"{"loadouts": {}, "materia": {}}"#,
    "loadouts",
    "`loadouts` is empty"
)]
#[case::unknown_placement_policy(
    r#""placementPolicy": "recommended""#,
    r#""placementPolicy": "clever""#,
    "placementPolicy",
    "unknown placement policy \"clever\""
)]
fn bad_configs_name_path_and_reason(
    #[case] from: &str,
    #[case] to: &str,
    #[case] path: &str,
    #[case] reason: &str,
) {
    let text = if from.is_empty() {
        to.to_owned()
    } else {
        assert!(BASE.contains(from), "case does not apply: {from}");
        BASE.replacen(from, to, 1)
    };
    let e = load_config(&text).expect_err("config must be rejected");
    assert_eq!(e.path, path, "{e}");
    assert!(e.reason.contains(reason), "{e}");
    assert!(
        e.reason.starts_with(|c: char| !c.is_uppercase()),
        "reasons are lowercase: {e}"
    );
}

/// pi-materia derives `parse: "json"` on a loop's conditional exit source and on a generator,
/// so a utility socket may carry it there; anywhere else it is refused (see the bad cases).
#[test]
fn a_utility_socket_may_carry_parse_json_where_the_reference_derives_it() {
    let config = r#"{
      "activeLoadout": "L",
      "loadouts": { "L": {
        "entry": "Socket-1",
        "sockets": {
          "Socket-1": { "materia": "Gen", "parse": "json", "edges": [{ "when": "always", "to": "Socket-2" }] },
          "Socket-2": { "materia": "Work", "edges": [{ "when": "always", "to": "Socket-3" }] },
          "Socket-3": { "materia": "Check", "parse": "json", "edges": [{ "when": "always", "to": "Socket-2" }] },
          "Socket-4": { "materia": "Done" }
        },
        "loops": { "items": {
          "sockets": ["Socket-2", "Socket-3"],
          "consumes": { "from": "Socket-1", "output": "workItems" },
          "exit": { "from": "Socket-3", "when": "satisfied", "to": "Socket-4" }
        } }
      } },
      "materia": {
        "Gen": { "type": "utility", "generator": true, "command": ["gen"] },
        "Work": { "tools": "none", "prompt": "Do {{item.title}}" },
        "Check": { "type": "utility", "command": ["check"], "parse": "json" },
        "Done": { "tools": "none", "prompt": "Summarize." }
      }
    }"#;
    let config = load_config(config).expect("loads");
    let loadout = config.resolve(None).expect("resolves");
    assert_eq!(socket(&loadout, "Socket-3").parse, Parse::Json);
}
