//! pi-materia's shipped scripts run from an install (`--pi-materia DIR`, `PI_MATERIA_HOME`)
//! where castlog has no built-in: refused without one, run with node on the utility protocol
//! with one, their hash frozen in the loadout, a different script in the middle of a cast
//! refused with nothing recorded, and the pull-request scripts never run this way.

use std::path::Path;

use serde_json::Value;

use crate::common::{Sandbox, fixture, scripted};

const SCRIPT: &str = "config/utilities/scan-repo.mjs";

/// A copy of the fixture install in the sandbox, to edit.
fn install(sandbox: &Sandbox) -> std::path::PathBuf {
    let home = sandbox.path("pi-materia");
    let script = home.join(SCRIPT);
    std::fs::create_dir_all(script.parent().unwrap()).unwrap();
    std::fs::copy(fixture(&format!("pi-materia-install/{SCRIPT}")), &script).unwrap();
    home
}

fn run(sandbox: &Sandbox, cast: &str, agent: &str, home: Option<&Path>) -> crate::common::Run {
    let mut cmd = sandbox.command_on(&sandbox.db());
    cmd.args(["run", &fixture("loadouts/shipped.json"), "--task", "scan"])
        .args(["--cast", cast, "--agent", agent, "--json"]);
    if let Some(home) = home {
        cmd.env("PI_MATERIA_HOME", home);
    }
    sandbox.finish(&mut cmd)
}

fn utility_finishes(sandbox: &Sandbox, cast: &str) -> Vec<String> {
    let show = sandbox.run(&["show", cast, "--json"]).json();
    show["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == "utility_finished")
        .map(|e| e["payload"]["socket"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn without_an_install_a_shipped_script_is_refused_before_anything_is_recorded() {
    let sandbox = Sandbox::new();
    let done = run(&sandbox, "s", &scripted("shipped.jsonl"), None);
    assert_eq!(done.code, 1, "{}", done.stderr);
    assert!(
        done.stderr.contains(
            "socket Socket-1 runs pi-materia's shipped script 'scan-repo.mjs', which castlog has no built-in for: point --pi-materia DIR (or PI_MATERIA_HOME)"
        ),
        "{}",
        done.stderr
    );
    done.assert_failure_stdout();
    assert_ne!(sandbox.run(&["show", "s"]).code, 0, "nothing was recorded");

    // An install without the script names where it looked.
    let empty = sandbox.path("empty-install");
    std::fs::create_dir(&empty).unwrap();
    let done = run(&sandbox, "s", &scripted("shipped.jsonl"), Some(&empty));
    assert_eq!(done.code, 1, "{}", done.stderr);
    assert!(
        done.stderr.contains("config/utilities/scan-repo.mjs"),
        "{}",
        done.stderr
    );
}

#[test]
fn a_shipped_script_runs_from_the_install_with_its_hash_frozen_in_the_loadout() {
    let sandbox = Sandbox::new();
    let home = install(&sandbox);
    let done = run(&sandbox, "s", &scripted("shipped.jsonl"), Some(&home));
    assert_eq!(done.code, 0, "{}", done.stderr);
    assert_eq!(done.json()["status"], "completed", "{}", done.stdout);
    let state = sandbox.run(&["state", "s", "--json"]).json();
    // The script's own output: it ran twice, in the cast's directory.
    assert_eq!(state["data"]["scan"]["pass"], 2, "{state}");
    assert_eq!(state["data"]["scan"]["socket"], "Socket-3", "{state}");
    assert!(
        state["data"]["scan"]["files"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f == "pi-materia"),
        "{state}"
    );
    let show = sandbox.run(&["show", "s", "--json"]).json();
    let socket = &show["events"][0]["payload"]["loadout"]["sockets"]["Socket-1"];
    assert_eq!(socket["exec"], "shipped", "{socket}");
    assert_eq!(socket["name"], "scan-repo.mjs", "{socket}");
    assert_eq!(socket["runtime"], "node", "{socket}");
    let hash = socket["hash"].as_str().unwrap();
    assert_eq!(hash.len(), 64, "{socket}");
    let verify = sandbox.run(&["verify", "s"]);
    assert_eq!(verify.code, 0, "{}", verify.stdout);
}

#[test]
fn a_different_script_in_the_middle_of_a_cast_is_refused_with_exit_1() {
    let sandbox = Sandbox::new();
    let home = install(&sandbox);
    let empty = sandbox.write("empty.jsonl", "");
    let paused = run(&sandbox, "s", &format!("scripted:{empty}"), Some(&home));
    assert_eq!(paused.code, 0, "{}", paused.stderr);
    assert_eq!(
        paused.json()["status"],
        "awaiting_agent",
        "{}",
        paused.stdout
    );
    assert_eq!(utility_finishes(&sandbox, "s"), ["Socket-1"]);

    let script = home.join(SCRIPT);
    let original = std::fs::read_to_string(&script).unwrap();
    std::fs::write(&script, format!("{original}// edited\n")).unwrap();
    let mut resume = sandbox.command_on(&sandbox.db());
    resume
        .args(["resume", "s", "--agent", &scripted("shipped.jsonl")])
        .env("PI_MATERIA_HOME", &home);
    let refused = sandbox.finish(&mut resume);
    assert_eq!(refused.code, 1, "{}", refused.stderr);
    assert!(
        refused
            .stderr
            .contains("pi-materia's shipped script 'scan-repo.mjs' at")
            && refused
                .stderr
                .contains("is not the one this cast started with"),
        "{}",
        refused.stderr
    );
    assert_eq!(
        utility_finishes(&sandbox, "s"),
        ["Socket-1"],
        "the edited script did not run"
    );

    // The version the cast started with goes on.
    std::fs::write(&script, original).unwrap();
    let mut resume = sandbox.command_on(&sandbox.db());
    resume
        .args([
            "resume",
            "s",
            "--agent",
            &scripted("shipped.jsonl"),
            "--json",
        ])
        .env("PI_MATERIA_HOME", &home);
    let done = sandbox.finish(&mut resume);
    assert_eq!(done.code, 0, "{}", done.stderr);
    let status: Value = done.json();
    assert_eq!(status["status"], "completed", "{status}");
    assert_eq!(utility_finishes(&sandbox, "s"), ["Socket-1", "Socket-3"]);
}

#[test]
fn the_pull_request_scripts_are_not_run_from_an_install() {
    let sandbox = Sandbox::new();
    let home = install(&sandbox);
    std::fs::write(
        home.join("config/utilities/mime-gh-pr.mjs"),
        "process.exit(0)\n",
    )
    .unwrap();
    let config = std::fs::read_to_string(fixture("loadouts/shipped.json"))
        .unwrap()
        .replace("scan-repo.mjs", "mime-gh-pr.mjs");
    let path = sandbox.write("pr.json", &config);
    let mut cmd = sandbox.command_on(&sandbox.db());
    cmd.args([
        "run",
        &path,
        "--task",
        "scan",
        "--agent",
        &scripted("shipped.jsonl"),
    ])
    .env("PI_MATERIA_HOME", &home);
    let refused = sandbox.finish(&mut cmd);
    assert_eq!(refused.code, 1, "{}", refused.stderr);
    assert!(
        refused
            .stderr
            .contains("castlog does not provide the shipped utility 'mime-gh-pr.mjs'"),
        "{}",
        refused.stderr
    );
}
