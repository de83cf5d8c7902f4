//! Running a child process without a shell: stdin in, capped stdout and stderr out, a timeout.
//!
//! Every `cmd:` program (agents, fetchers, senders, utility sockets) is run by [`run`], so they
//! share one answer to "when is it over":
//! - The program starts in a process group of its own, led by its guard (below). A shell
//!   script's `sleep` is a grandchild that holds stdout and stderr open after the shell itself
//!   is gone, so killing only the direct child does not end the run; killing the group does.
//! - The timeout bounds the whole run: the program has exited *and* both pipes are closed. A
//!   child that exits while a grandchild keeps its stdout open has not finished yet: the pipes
//!   get [`AFTER_EXIT`] to close, then the group is killed and what was written is the output
//!   (a program that answers and leaves a background job behind is not a timeout).
//! - At the timeout the group gets SIGKILL (through the `kill` program, since the crates use no
//!   `unsafe`; the direct child alone if that fails). The group id cannot have been reused
//!   then: the child is not yet reaped, or a member still holds a pipe, and a group id stays
//!   taken while the group has a member.
//! - After a kill, the output readers get [`KILL_GRACE`] to see their pipes close; a reader
//!   still blocked then (a process that left the group keeps the pipe) is abandoned with its
//!   output, so no run waits on a pipe forever. The stdin feeder is never waited for.
//! - The group is led by a guard that kills it when castlog ends, even by SIGKILL, so no
//!   program outlives castlog (see `process/guard.rs`); the group id is the guard's pid (the
//!   program's own, in a group of its own, when no guard can be started).
//! - The program gets castlog's environment less the deny list (see [`crate::secrets`] and
//!   [`Launcher`]), and what it prints is scrubbed of secrets before anyone sees it.
//! - While it runs, the program is recorded beside the database under the cast it works for,
//!   when the [`Launcher`] knows them (see `process/children.rs`), so `resume` can refuse to
//!   start a second one.

use std::io::{Read, Write};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use castlog_core::id::CastId;

use crate::secrets::{DENY_LIST, Redactor};

mod children;
mod guard;

pub use children::{RunningChild, running_children};

/// Each captured stream keeps at most this many bytes.
pub const OUTPUT_CAP: usize = 1 << 20;

/// After a kill, how long the output readers may take to reach the end of their pipes.
pub const KILL_GRACE: Duration = Duration::from_secs(1);

/// After the program exits, how long the processes it left may keep its pipes open.
pub const AFTER_EXIT: Duration = Duration::from_secs(1);

/// How often a running child is looked at.
const POLL: Duration = Duration::from_millis(5);

/// How a process ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finished {
    /// Exit code, if it exited.
    pub code: Option<i32>,
    /// Killed at the timeout.
    pub timed_out: bool,
    /// Captured stdout (lossy UTF-8, capped).
    pub stdout: String,
    /// Captured stderr (lossy UTF-8, capped).
    pub stderr: String,
    /// Whether a stream was cut at the cap.
    pub truncated: bool,
    /// Whether stdout was cut at the cap.
    pub stdout_truncated: bool,
    /// Whether stdout was still held open after the grace, by a process outside the group:
    /// what was written to it is lost, and the run counts as failed (`code` is `None`, stderr
    /// says why, and it is marked truncated).
    pub stdout_lost: bool,
    /// Whether the run was cancelled from outside (Ctrl-C) and its group killed.
    pub cancelled: bool,
}

fn capture(mut stream: impl Read) -> (Vec<u8>, bool) {
    let mut kept = Vec::new();
    let mut truncated = false;
    let mut buf = [0u8; 8192];
    loop {
        match stream.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                let room = OUTPUT_CAP.saturating_sub(kept.len());
                if n > room {
                    truncated = true;
                }
                kept.extend_from_slice(&buf[..n.min(room)]);
            }
        }
    }
    (kept, truncated)
}

type Reader = JoinHandle<(Vec<u8>, bool)>;

fn reader(stream: Option<impl Read + Send + 'static>) -> Reader {
    std::thread::spawn(move || stream.map(capture).unwrap_or_default())
}

/// The process groups of the programs running now, so a process that is about to exit can
/// stop them first ([`kill_running`]).
static RUNNING: std::sync::Mutex<Vec<u32>> = std::sync::Mutex::new(Vec::new());

fn running() -> std::sync::MutexGuard<'static, Vec<u32>> {
    RUNNING
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Kills the process group of every program [`run`] is running now (a second Ctrl-C quits at
/// once; its programs must not outlive it, as they are not in the terminal's process group).
pub fn kill_running() {
    for group in running().drain(..) {
        let _ = signal_group(group);
    }
}

/// How the programs of one command are started: which variables they do not get, how their
/// output is scrubbed, and where they are recorded while they run. A cheap handle: its clones
/// (one for the agent, one for the driver's utilities and senders) share the cast set by
/// [`Launcher::record_under`].
#[derive(Debug, Clone)]
pub struct Launcher {
    /// The deny-listed names not passed on with `--pass-env`.
    withheld: Arc<[String]>,
    redactor: Redactor,
    /// The cast the programs work for, once known; `None`: not recorded.
    records: Arc<Mutex<Option<children::Records>>>,
    /// A pi-materia install whose shipped scripts run where castlog has no built-in
    /// (`--pi-materia DIR`, `PI_MATERIA_HOME`); `None`: they are refused.
    shipped: Option<Arc<Path>>,
}

impl Default for Launcher {
    /// Withholds the whole deny list and scrubs the values set in this process's environment.
    fn default() -> Self {
        Self::new(&[])
    }
}

impl Launcher {
    /// Programs get the environment less [`DENY_LIST`], but for the names in `pass`; their
    /// output is scrubbed of the deny-listed values set in this process's environment.
    pub fn new(pass: &[String]) -> Self {
        Self {
            withheld: DENY_LIST
                .iter()
                .filter(|name| !pass.iter().any(|p| p == *name))
                .map(|name| (*name).to_owned())
                .collect(),
            redactor: Redactor::from_env(),
            records: Arc::default(),
            shipped: None,
        }
    }

    /// The same environment and scrubbing, with records of its own: a handle for one of the
    /// casts a process drives at once (a worker's), whose [`Launcher::record_under`] does not
    /// move the others'.
    #[must_use]
    pub fn detached(&self) -> Self {
        Self {
            withheld: Arc::clone(&self.withheld),
            redactor: self.redactor.clone(),
            records: Arc::default(),
            shipped: self.shipped.clone(),
        }
    }

    /// Runs pi-materia's shipped scripts from the install at `dir` (see
    /// [`crate::utility::shipped`]).
    #[must_use]
    pub fn with_shipped_scripts(mut self, dir: Option<&Path>) -> Self {
        self.shipped = dir.map(Arc::from);
        self
    }

    /// The pi-materia install shipped scripts run from, when one was given.
    pub fn shipped_scripts(&self) -> Option<&Path> {
        self.shipped.as_deref()
    }

    /// Scrubs with `redactor` instead.
    #[must_use]
    pub fn with_redactor(mut self, redactor: Redactor) -> Self {
        self.redactor = redactor;
        self
    }

    /// What recorded text from outside goes through.
    pub fn redactor(&self) -> &Redactor {
        &self.redactor
    }

    /// The variables programs do not get.
    pub fn withheld(&self) -> &[String] {
        &self.withheld
    }

    /// Records the programs started from now on, by this handle and its clones, as working for
    /// `cast` in `db` (see [`running_children`]).
    pub fn record_under(&self, db: &Path, cast: &CastId) {
        *self.records.lock().unwrap_or_else(PoisonError::into_inner) =
            Some(children::Records::new(db, cast));
    }

    fn enter(&self, pid: u32, program: &str) -> Option<children::Entry> {
        let records = self
            .records
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()?;
        records.enter(pid, program)
    }
}

/// Finds the program `run` would start for `program` in `cwd`: a name with a `/` is a path
/// (relative to `cwd`), any other name is looked up on `PATH`. `Err` says what is missing, so
/// a mistyped program is refused before anything is recorded.
pub fn locate(program: &str, cwd: &Path) -> Result<std::path::PathBuf, LocateError> {
    use std::os::unix::fs::PermissionsExt;
    let runnable = |path: &Path| {
        std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if program.contains('/') {
        let path = cwd.join(program);
        return if runnable(&path) {
            Ok(path)
        } else {
            Err(LocateError::NotExecutable {
                program: program.to_owned(),
                dir: cwd.to_path_buf(),
            })
        };
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|dir| cwd.join(dir).join(program))
        .find(|candidate| runnable(candidate))
        .ok_or_else(|| LocateError::NotOnPath {
            program: program.to_owned(),
        })
}

/// Why [`locate`] finds no program to start.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LocateError {
    /// A path that is not an executable file.
    #[error("{program} is not an executable file (looked in {})", .dir.display())]
    NotExecutable {
        /// Program as the argv gives it (a relative or absolute path).
        program: String,
        /// Directory a relative path is resolved in (the cast's working directory).
        dir: std::path::PathBuf,
    },
    /// A name no directory on `PATH` holds.
    #[error("{program} is not found on PATH")]
    NotOnPath {
        /// Program name as the argv gives it.
        program: String,
    },
}

/// Why [`run`] started nothing.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SpawnError {
    /// The argv has no program.
    #[error("the command is empty")]
    Empty,
    /// The program could not be started.
    #[error("cannot start {program}: {source}")]
    Start {
        /// Program as the argv gives it.
        program: String,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
}

/// Runs `argv` in `cwd` with `env` added to the environment and `input` on stdin, for at most
/// `timeout` (see the module documentation). Spawn failures are reported as `Err`.
pub fn run(
    launcher: &Launcher,
    argv: &[String],
    cwd: &Path,
    env: &[(String, String)],
    input: &[u8],
    timeout: Duration,
) -> Result<Finished, SpawnError> {
    spawn_and_wait(launcher, argv, cwd, env, input, timeout, None)
}

/// [`run`] without added variables, killed like at a timeout as soon as `cancel` is set (the
/// result is then marked `cancelled`).
pub fn run_cancellable(
    launcher: &Launcher,
    argv: &[String],
    cwd: &Path,
    input: &[u8],
    timeout: Duration,
    cancel: Option<&std::sync::atomic::AtomicBool>,
) -> Result<Finished, SpawnError> {
    spawn_and_wait(launcher, argv, cwd, &[], input, timeout, cancel)
}

/// [`run_cancellable`] with `env` added to the environment (a lane's `CASTLOG_LANE`).
pub fn run_cancellable_with(
    launcher: &Launcher,
    argv: &[String],
    cwd: &Path,
    env: &[(String, String)],
    input: &[u8],
    timeout: Duration,
    cancel: Option<&std::sync::atomic::AtomicBool>,
) -> Result<Finished, SpawnError> {
    spawn_and_wait(launcher, argv, cwd, env, input, timeout, cancel)
}

fn spawn_and_wait(
    launcher: &Launcher,
    argv: &[String],
    cwd: &Path,
    env: &[(String, String)],
    input: &[u8],
    timeout: Duration,
    cancel: Option<&std::sync::atomic::AtomicBool>,
) -> Result<Finished, SpawnError> {
    let (program, args) = argv.split_first().ok_or(SpawnError::Empty)?;
    let guard = guard::Guard::start();
    if guard.is_none() {
        tracing::warn!(program = %program, "no guard could be started: the program may outlive castlog");
    }
    let mut command = Command::new(program);
    command.args(args).current_dir(cwd);
    for name in launcher.withheld.iter() {
        command.env_remove(name);
    }
    // 0: a group of its own, when there is no guard to join.
    let leader = guard
        .as_ref()
        .and_then(|g| i32::try_from(g.group()).ok())
        .unwrap_or(0);
    let mut child = command
        .envs(env.iter().map(|(k, v)| (k, v)))
        .process_group(leader)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|source| SpawnError::Start {
            program: program.clone(),
            source,
        })?;
    // The group to kill: the guard's, or the program's own when it runs unguarded.
    let group = guard.as_ref().map_or(child.id(), guard::Guard::group);
    let record = launcher.enter(child.id(), &argv.join(" "));
    // Feed stdin on its own thread so a child that does not read cannot block us. It ends when
    // the input is written or the last reader of the pipe is gone.
    if let Some(mut stdin) = child.stdin.take() {
        let input = input.to_vec();
        std::thread::spawn(move || {
            let _ = stdin.write_all(&input);
        });
    }
    let out_reader = reader(child.stdout.take());
    let err_reader = reader(child.stderr.take());
    running().push(group);
    let started = Instant::now();
    let mut status: Option<ExitStatus> = None;
    let mut exited: Option<Instant> = None;
    let mut timed_out = false;
    let mut cancelled = false;
    loop {
        if cancel.is_some_and(|c| c.load(std::sync::atomic::Ordering::SeqCst)) {
            cancelled = status.is_none();
            break;
        }
        if status.is_none() {
            match child.try_wait() {
                Ok(done) => status = done,
                // The child cannot be watched any more: stop it like a timeout would.
                Err(_) => break,
            }
        }
        if status.is_some() && out_reader.is_finished() && err_reader.is_finished() {
            break;
        }
        // Exited, with its pipes held open by what it left behind: those are killed below.
        if status.is_some() && exited.get_or_insert_with(Instant::now).elapsed() >= AFTER_EXIT {
            break;
        }
        if started.elapsed() >= timeout {
            // A program that has exited answered in time; only what it left behind is cut.
            if status.is_none() {
                status = child.try_wait().ok().flatten();
            }
            timed_out = status.is_none();
            break;
        }
        std::thread::sleep(POLL);
    }
    let over = status.is_some() && out_reader.is_finished() && err_reader.is_finished();
    if !over {
        kill_group(&mut child, group);
        if status.is_none() {
            status = child.wait().ok();
        }
    }
    // The program is reaped: its record goes, and its guard (the group's other members are
    // left as the rules above left them).
    drop(record);
    drop(guard);
    running().retain(|g| *g != group);
    let grace_ends = Instant::now() + KILL_GRACE;
    let (out, out_cut, out_lost) = collect(out_reader, grace_ends);
    let (mut err, err_cut, err_lost) = collect(err_reader, grace_ends);
    if out_lost && !timed_out {
        // Whatever it answered is gone: this run did not answer.
        status = None;
        err.extend_from_slice(
            b"\ncastlog: its output was lost: a process it started outside its process group held stdout open",
        );
    }
    Ok(Finished {
        code: if timed_out {
            None
        } else {
            status.and_then(|s| s.code())
        },
        timed_out,
        stdout: launcher.redactor.scrub(&String::from_utf8_lossy(&out)),
        stderr: launcher.redactor.scrub(&String::from_utf8_lossy(&err)),
        truncated: out_cut || err_cut || out_lost || err_lost,
        stdout_truncated: out_cut,
        stdout_lost: out_lost,
        cancelled,
    })
}

/// Sends SIGKILL to the child's process group, or to the child alone when the group cannot be
/// signalled (no `kill` program, or the group is already empty).
fn kill_group(child: &mut Child, group: u32) {
    if !signal_group(group) {
        let _ = child.kill();
    }
}

/// SIGKILL to process group `group`; whether it was delivered.
fn signal_group(group: u32) -> bool {
    Command::new("kill")
        .args(["-KILL", "--", &format!("-{group}")])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// What a reader captured, waiting for it until `by` at the latest; a reader still blocked
/// then is abandoned and counts as having captured nothing.
/// The bytes a reader kept, whether they were cut at the cap, and whether the reader had to be
/// abandoned (its pipe still open at `by`: its bytes are lost).
fn collect(reader: Reader, by: Instant) -> (Vec<u8>, bool, bool) {
    while !reader.is_finished() && Instant::now() < by {
        std::thread::sleep(POLL);
    }
    if reader.is_finished() {
        let (bytes, cut) = reader.join().unwrap_or_default();
        (bytes, cut, false)
    } else {
        (Vec::new(), false, true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(script: &str) -> Vec<String> {
        vec!["sh".into(), "-c".into(), script.into()]
    }

    /// `sh -c script` in `dir` with nothing on stdin.
    fn run_sh(dir: &Path, script: &str, timeout: Duration) -> Finished {
        run(&Launcher::default(), &sh(script), dir, &[], b"", timeout).unwrap()
    }

    #[test]
    fn a_run_captures_output_exit_code_and_environment() {
        let dir = tempfile::tempdir().unwrap();
        let env = [("CASTLOG_TEST".to_owned(), "seen".to_owned())];
        let done = run(
            &Launcher::default(),
            &sh("cat; echo \" $CASTLOG_TEST\"; echo oops >&2; exit 3"),
            dir.path(),
            &env,
            b"in",
            Duration::from_secs(10),
        )
        .unwrap();
        assert_eq!(done.code, Some(3));
        assert!(!done.timed_out);
        assert_eq!(done.stdout, "in seen\n");
        assert_eq!(done.stderr, "oops\n");
        assert!(
            run(
                &Launcher::default(),
                &[],
                dir.path(),
                &[],
                b"",
                Duration::from_secs(1)
            )
            .is_err()
        );
        assert!(
            run(
                &Launcher::default(),
                &["/nonexistent/x".into()],
                dir.path(),
                &[],
                b"",
                Duration::from_secs(1)
            )
            .is_err()
        );
    }

    // The timeout must stop what the program started, not only the program: here the shell
    // waits on a `sleep` that holds the pipes.
    #[test]
    fn a_timeout_stops_the_grandchildren_holding_the_pipes() {
        let dir = tempfile::tempdir().unwrap();
        let started = Instant::now();
        let script = "sleep 30; echo late";
        let done = run_sh(dir.path(), script, Duration::from_secs(1));
        let took = started.elapsed();
        assert!(done.timed_out, "{done:?}");
        assert_eq!(done.code, None);
        assert!(!done.stdout.contains("late"), "{done:?}");
        assert!(took < Duration::from_secs(10), "took {took:?}");
    }

    // A process that left the group (setsid) keeps the pipe after the group is killed: its
    // reader is abandoned, and the run says its output was lost instead of passing for an
    // empty answer.
    #[test]
    fn output_held_outside_the_group_is_marked_lost() {
        let dir = tempfile::tempdir().unwrap();
        let started = Instant::now();
        let script = "echo hi; setsid sleep 4 &";
        let done = run_sh(dir.path(), script, Duration::from_secs(20));
        let took = started.elapsed();
        assert!(done.stdout_lost && done.truncated, "{done:?}");
        assert!(!done.timed_out);
        assert_eq!(
            done.code, None,
            "a run whose answer was lost did not answer"
        );
        assert!(done.stderr.contains("output was lost"), "{done:?}");
        assert!(took < Duration::from_secs(4), "{took:?}");
        // Only stderr held: stdout was read to its end, and the run answered.
        let script = "echo whole; setsid sleep 4 >/dev/null </dev/null &";
        let done = run_sh(dir.path(), script, Duration::from_secs(20));
        assert!(!done.stdout_lost && done.truncated, "{done:?}");
        assert_eq!((done.code, done.stdout.as_str()), (Some(0), "whole\n"));
    }

    // A shell that answers and exits while a background `sleep` still holds the pipes has
    // answered, whether the timeout or the grace after its exit comes first: its output is
    // kept and the `sleep` is stopped.
    #[test]
    fn a_program_that_exits_leaving_a_job_behind_has_answered() {
        let dir = tempfile::tempdir().unwrap();
        for timeout in [Duration::from_millis(300), Duration::from_secs(5)] {
            let started = Instant::now();
            let done = run_sh(dir.path(), "sleep 30 & echo early", timeout);
            assert!(!done.timed_out, "{timeout:?}: {done:?}");
            assert_eq!(done.code, Some(0));
            assert_eq!(done.stdout, "early\n");
            assert!(started.elapsed() < Duration::from_secs(4), "{timeout:?}");
        }
    }
}
