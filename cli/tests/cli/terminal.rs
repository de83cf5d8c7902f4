//! castlog in a real terminal: stderr and stdout on a pseudo-terminal (util-linux `script`),
//! where a debug build once panicked in the tracing subscriber (colors asked for, the feature
//! that draws them left out) before any command ran.

use std::process::Command;

use crate::common::{Sandbox, castlog_bin, fixture};

/// Runs `castlog ARGS` on a pseudo-terminal in the sandbox, with `env` set, and returns its exit
/// code and everything the terminal showed.
pub fn on_terminal(sandbox: &Sandbox, env: &[(&str, &str)], args: &str) -> (i32, String) {
    let line = format!("{} --db {} {args}", castlog_bin(), sandbox.db().display());
    let mut cmd = Command::new("script");
    cmd.args(["-qec", &line, "/dev/null"])
        .current_dir(sandbox.dir.path())
        .env_remove("CASTLOG_DB")
        .env_remove("CASTLOG_ANCHOR")
        .env_remove("NO_COLOR")
        .env_remove("RUST_LOG");
    for (name, value) in env {
        cmd.env(name, value);
    }
    let output = cmd
        .output()
        .expect("util-linux `script` runs a command on a pseudo-terminal (Debian: bsdutils)");
    let shown = String::from_utf8_lossy(&output.stdout).into_owned();
    (output.status.code().unwrap_or(-1), shown)
}

fn assert_clean(code: i32, shown: &str) {
    assert_eq!(code, 0, "{shown}");
    assert!(!shown.contains("panicked"), "{shown}");
    assert!(!shown.contains("feature is required"), "{shown}");
}

#[test]
fn a_command_on_a_terminal_neither_panics_nor_warns_about_the_ansi_feature() {
    let sandbox = Sandbox::new();
    let (code, shown) = on_terminal(
        &sandbox,
        &[],
        &format!(
            "run {} --task greet --cast demo --agent scripted:{}",
            fixture("loadouts/build-loop.json"),
            fixture("scripts/build-loop.jsonl")
        ),
    );
    assert_clean(code, &shown);
    assert!(shown.contains("cast demo: completed"), "{shown}");
    let (code, shown) = on_terminal(&sandbox, &[], "casts");
    assert_clean(code, &shown);
    assert!(shown.contains("demo"), "{shown}");
}

#[test]
fn tracing_on_a_terminal_is_colored_unless_no_color_is_set() {
    let sandbox = Sandbox::new();
    sandbox.completed_build_loop("demo");
    let debug = ("RUST_LOG", "castlog_replay=debug");
    let (code, colored) = on_terminal(&sandbox, &[debug], "mark demo one --at 2");
    assert_clean(code, &colored);
    assert!(colored.contains("waypoint_marked"), "{colored}");
    assert!(
        colored.contains("\u{1b}["),
        "no colors on a terminal: {colored}"
    );
    let (code, plain) = on_terminal(
        &sandbox,
        &[debug, ("NO_COLOR", "1")],
        "mark demo two --at 2",
    );
    assert_clean(code, &plain);
    assert!(plain.contains("waypoint_marked"), "{plain}");
    assert!(
        !plain.contains("\u{1b}["),
        "colors despite NO_COLOR: {plain}"
    );
}
