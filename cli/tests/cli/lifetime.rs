//! A program castlog starts ends with castlog, even when castlog is killed with SIGKILL, and
//! `resume` refuses while a program recorded for the same cast still runs.

use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use crate::common::{Sandbox, fixture};

/// Kills castlog if the test panics before it does.
struct KillOnDrop(Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// How long a test waits for something that should take milliseconds.
const PATIENCE: Duration = Duration::from_secs(30);

/// A `cmd:` agent that writes its pid and its background `sleep`'s pid, then sleeps on.
fn sleeping_agent(sandbox: &Sandbox) -> (String, PathBuf, PathBuf) {
    let own = sandbox.path("agent.pid");
    let background = sandbox.path("background.pid");
    let script = sandbox.write(
        "agent.sh",
        &format!(
            "cat >/dev/null\nsleep 300 &\necho $! > {bg}.partial && mv {bg}.partial {bg}\necho $$ > {own}.partial && mv {own}.partial {own}\nwait\n",
            bg = background.display(),
            own = own.display()
        ),
    );
    (format!("cmd:sh {script}"), own, background)
}

/// The pid written in `file`, once it is there.
fn pid_in(file: &Path) -> u32 {
    let deadline = Instant::now() + PATIENCE;
    loop {
        if let Ok(text) = std::fs::read_to_string(file) {
            return text.trim().parse().unwrap();
        }
        assert!(
            Instant::now() < deadline,
            "{} never appeared",
            file.display()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Whether `pid` is a live process (a zombie waiting for a parent that does not reap it is
/// not: it runs nothing).
fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        let state = stat.rsplit_once(')').map(|(_, rest)| rest.trim_start());
        !state.is_some_and(|s| s.starts_with('Z') || s.starts_with('X'))
    })
}

/// Waits until none of `pids` is alive; panics naming those still alive after [`PATIENCE`].
fn wait_gone(pids: &[u32]) {
    let deadline = Instant::now() + PATIENCE;
    while pids.iter().any(|p| alive(*p)) {
        let left: Vec<_> = pids.iter().filter(|p| alive(**p)).collect();
        assert!(Instant::now() < deadline, "still running: {left:?}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Starts `castlog run` of the build loop as cast `cast` with the sleeping agent, and waits
/// until the agent and its background job run.
fn start_sleeping_cast(sandbox: &Sandbox, cast: &str) -> (KillOnDrop, u32, u32) {
    let (spec, own, background) = sleeping_agent(sandbox);
    let castlog = sandbox
        .build_loop(cast, &spec)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let castlog = KillOnDrop(castlog);
    let (agent, job) = (pid_in(&own), pid_in(&background));
    assert!(alive(agent) && alive(job));
    (castlog, agent, job)
}

#[test]
fn a_cmd_agent_and_its_children_end_when_castlog_is_killed() {
    let sandbox = Sandbox::new();
    let (mut castlog, agent, job) = start_sleeping_cast(&sandbox, "killed");
    castlog.0.kill().unwrap();
    castlog.0.wait().unwrap();
    wait_gone(&[agent, job]);
}

#[test]
fn resume_refuses_while_the_casts_agent_still_runs() {
    let sandbox = Sandbox::new();
    let (mut castlog, agent, job) = start_sleeping_cast(&sandbox, "busy");
    let script = format!("scripted:{}", fixture("scripts/build-loop.jsonl"));
    let refused = sandbox.run(&["resume", "busy", "--agent", &script, "--json"]);
    assert_eq!(refused.code, 1, "{}{}", refused.stdout, refused.stderr);
    let said = format!("{}{}", refused.stdout, refused.stderr);
    assert!(
        said.contains("still at work") && said.contains(&format!("pid {agent}")),
        "{said}"
    );
    // Nothing was recorded by the refusal: the cast still waits on the same prompt.
    let before = sandbox.run(&["show", "busy", "--json"]).stdout;
    // Once the castlog running it is gone, so is its agent, and resume goes on (the record
    // castlog could not remove is stale now).
    castlog.0.kill().unwrap();
    castlog.0.wait().unwrap();
    wait_gone(&[agent, job]);
    let after = sandbox.run(&["show", "busy", "--json"]).stdout;
    assert_eq!(before, after);
    let resumed = sandbox.run(&["resume", "busy", "--agent", &script, "--json"]);
    assert_eq!(resumed.code, 0, "{}", resumed.stderr);
    assert_eq!(resumed.json()["status"], "completed", "{}", resumed.stdout);
}
