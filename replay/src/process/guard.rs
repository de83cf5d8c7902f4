//! The guard that ends a child's process group when castlog ends, however it ends.
//!
//! Before the program, [`Guard::start`] starts `/bin/sh -c 'read line; kill -s KILL 0'` as the
//! leader of a new process group, its stdout and stderr on /dev/null and its stdin a pipe whose
//! only write end castlog holds and never writes to. The program is then started in the
//! guard's group, so everything it starts without leaving the group is there too. The guard
//! blocks in `read` until that pipe reaches end of file, which happens exactly when castlog's
//! end of it is closed: when castlog exits, is killed (even with SIGKILL: the kernel closes a
//! dead process's descriptors), or drops the guard. Then `kill -s KILL 0` kills the whole
//! group, the program with it.
//!
//! Why not `PR_SET_PDEATHSIG`: it must be set in the child between fork and exec (std's
//! `pre_exec` is `unsafe`, which the workspace forbids), it covers the direct child only (a
//! shell script's `sleep` would live on), and it fires when the spawning *thread* exits, not
//! the process. A pipe's end of file is none of these: it needs no code in the child, covers
//! the group, and is portable to every Unix. The write end cannot leak into another program:
//! std creates pipes close-on-exec.
//!
//! When the run is over castlog kills the guard alone (SIGKILL) and only then closes the
//! pipe, so a normal end leaves the group as the run's own rules left it (see
//! [`crate::process`]).

use std::os::unix::process::CommandExt;
use std::process::{Child, ChildStdin, Command, Stdio};

/// The guard's program: a POSIX shell, whose `read` and `kill` are built in.
const SHELL: &str = "/bin/sh";

/// Blocks until end of file on stdin, then kills the caller's process group (pid 0).
const SCRIPT: &str = "read line; kill -s KILL 0";

/// A running guard; dropping it stops the guard without touching the rest of the group.
#[derive(Debug)]
pub(super) struct Guard {
    child: Child,
    /// castlog's end of the guard's stdin: closing it (by drop or by castlog's death) is what
    /// makes the guard kill the group. An `Option` only so a test can close it alone.
    lifeline: Option<ChildStdin>,
}

impl Guard {
    /// Starts a guard in a process group of its own, or `None` when it cannot be started
    /// (no `/bin/sh`): the program then runs unguarded, as it would without one.
    pub(super) fn start() -> Option<Self> {
        let mut child = Command::new(SHELL)
            .args(["-c", SCRIPT])
            .env_clear()
            .process_group(0)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .ok()?;
        match child.stdin.take() {
            Some(lifeline) => Some(Self {
                child,
                lifeline: Some(lifeline),
            }),
            None => {
                let _ = child.kill();
                let _ = child.wait();
                None
            }
        }
    }

    /// The guard's process group, where the program is started (the guard's pid).
    pub(super) fn group(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        // Killed before its stdin closes (fields drop after this body), so it never gets to
        // its `kill`; reaped so no zombie is left.
        let _ = self.child.kill();
        let _ = self.child.wait();
        drop(self.lifeline.take());
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::process::ExitStatusExt;

    use super::*;

    // What castlog's death does to the pipe, without the death: the group goes, the program
    // and what it started with it.
    #[test]
    fn closing_the_lifeline_kills_the_group() {
        let mut guard = Guard::start().unwrap();
        let mut program = Command::new("sh")
            .args(["-c", "sleep 30 & wait"])
            .process_group(i32::try_from(guard.group()).unwrap())
            .spawn()
            .unwrap();
        drop(guard.lifeline.take());
        let status = program.wait().unwrap();
        assert_eq!(status.signal(), Some(9), "{status:?}");
        let status = guard.child.wait().unwrap();
        assert_eq!(status.signal(), Some(9), "{status:?}");
    }

    // Dropped at the end of a run, the guard goes alone: what the run left is not touched.
    #[test]
    fn dropping_the_guard_leaves_the_group() {
        let guard = Guard::start().unwrap();
        let mut program = Command::new("sleep")
            .arg("30")
            .process_group(i32::try_from(guard.group()).unwrap())
            .spawn()
            .unwrap();
        drop(guard);
        assert!(program.try_wait().unwrap().is_none());
        program.kill().unwrap();
        program.wait().unwrap();
    }
}
