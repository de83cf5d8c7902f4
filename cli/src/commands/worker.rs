//! `castlog worker`: takes queued casts under leases and drives them (see
//! `castlog_events::queue` for what a lease is and what its epoch fences).
//!
//! One thread per `--concurrency` slot takes a cast, drives it through the ordinary driver on
//! a [`LeasedLog`] (every append checks the lease's epoch in its own transaction) and releases
//! it at a pause or the end; one more thread renews every lease this worker holds (and every
//! endpoint slot, `--max-inflight`) each third of the lease. A cast taken over from a holder
//! whose lease expired, or submitted with its first prompt held, is resumed the way `castlog
//! resume` does: the unanswered prompt is re-dispatched, recorded as such.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use castlog_core::env::Clock;
use castlog_core::input::Input;
use castlog_core::machine::{Phase, Status};
use castlog_events::queue::Slot;
use castlog_events::{Database, Lease, LeasedLog, LogError, QueueState, RunQueue, WorkerId};
use castlog_replay::agent::{Agent, AgentTurn, TurnRequest};
use castlog_replay::clock::SystemClock;
use castlog_replay::driver::{DriveError, Driver, Stop};
use serde_json::{Value, json};

use crate::args::WorkerArgs;
use crate::error::CliError;
use crate::globals::Globals;
use crate::output;

/// What a worker holds and renews.
#[derive(Default)]
struct Held {
    leases: Mutex<Vec<Lease>>,
    slots: Mutex<Vec<Slot>>,
}

fn locked<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A list of held leases holds no invariant a panic could break.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// What the worker's run shares between its threads.
struct Work<'a> {
    db: &'a Path,
    log: &'a Database,
    worker: WorkerId,
    args: &'a WorkerArgs,
    globals: &'a Globals,
    lease_ms: u64,
    held: Held,
    /// Set when every slot's thread has stopped (the renewer stops then).
    done: AtomicBool,
    outcomes: Mutex<Vec<Value>>,
}

fn now_ms() -> u64 {
    SystemClock.now_ms()
}

/// `worker-PID@HOST`.
fn default_id() -> String {
    let host = std::fs::read_to_string("/etc/hostname")
        .ok()
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| "localhost".into());
    format!("worker-{}@{host}", std::process::id())
}

/// `castlog worker`.
pub fn run(db: &Path, args: &WorkerArgs, globals: &Globals) -> Result<(), CliError> {
    let log = super::open_or_create(db)?;
    let work = Work {
        db,
        log: &log,
        worker: WorkerId::new(args.id.clone().unwrap_or_else(default_id)),
        args,
        globals,
        lease_ms: u64::try_from(args.lease.as_millis()).unwrap_or(u64::MAX),
        held: Held::default(),
        done: AtomicBool::new(false),
        outcomes: Mutex::new(Vec::new()),
    };
    let failed = std::thread::scope(|scope| {
        let renewer = scope.spawn(|| work.renew_loop());
        let slots: Vec<_> = (0..args.concurrency)
            .map(|_| scope.spawn(|| work.slot_loop()))
            .collect();
        let mut failed = None;
        for slot in slots {
            match slot.join() {
                Ok(Ok(())) => {}
                Ok(Err(err)) => failed = failed.or(Some(err)),
                Err(_) => failed = failed.or(Some(CliError::internal("a worker thread panicked"))),
            }
        }
        work.done.store(true, Ordering::SeqCst);
        let _ = renewer.join();
        failed
    });
    if let Some(err) = failed {
        return Err(err);
    }
    let outcomes = std::mem::take(&mut *locked(&work.outcomes));
    if args.json {
        return output::json(&json!({ "worker": work.worker, "casts": outcomes }));
    }
    Ok(())
}

impl Work<'_> {
    /// Renews every lease and slot held, each third of a lease, until the worker stops.
    fn renew_loop(&self) {
        let every = Duration::from_millis((self.lease_ms / 3).max(10));
        let tick = Duration::from_millis(20).min(every);
        let mut waited = Duration::ZERO;
        while !self.done.load(Ordering::SeqCst) {
            std::thread::sleep(tick);
            waited += tick;
            if waited < every {
                continue;
            }
            waited = Duration::ZERO;
            let leases = locked(&self.held.leases).clone();
            for lease in leases {
                match self.log.renew(&lease, now_ms(), self.lease_ms) {
                    Ok(true) => {}
                    // Its next append is refused and the slot's thread stops the cast.
                    Ok(false) if locked(&self.held.leases).contains(&lease) => {
                        output::to_stderr(format_args!(
                            "{}: the lease on cast {} (epoch {}) was taken over",
                            self.worker, lease.cast, lease.epoch
                        ))
                    }
                    // Released meanwhile.
                    Ok(false) => {}
                    Err(err) => output::to_stderr(format_args!(
                        "{}: cannot renew the lease on cast {}: {err}",
                        self.worker, lease.cast
                    )),
                }
            }
            let slots = locked(&self.held.slots).clone();
            for slot in slots {
                let _ = self.log.renew_slot(&slot, now_ms(), self.lease_ms);
            }
        }
    }

    /// Takes and drives casts until there is nothing left to do (as the flags say).
    fn slot_loop(&self) -> Result<(), CliError> {
        let mut taken = 0usize;
        loop {
            if self.args.once && taken > 0 {
                return Ok(());
            }
            let Some(lease) = self.log.take(&self.worker, now_ms(), self.lease_ms)? else {
                if self.args.once || (self.args.until_idle && self.idle()?) {
                    return Ok(());
                }
                std::thread::sleep(self.args.poll);
                continue;
            };
            taken += 1;
            locked(&self.held.leases).push(lease.clone());
            let outcome = self.drive(&lease);
            locked(&self.held.leases).retain(|l| *l != lease);
            let value = self.settle(&lease, outcome)?;
            locked(&self.outcomes).push(value);
        }
    }

    /// No cast is queued or running (under any lease, expired or not).
    fn idle(&self) -> Result<bool, CliError> {
        Ok(self
            .log
            .entries()?
            .iter()
            .all(|e| matches!(e.state, QueueState::Paused | QueueState::Done)))
    }

    /// Drives the leased cast until it stops or waits.
    fn drive(&self, lease: &Lease) -> Result<Stop, Failure> {
        let leased = LeasedLog::new(self.log, self.log, lease.clone());
        let clock = SystemClock;
        let mut globals = self.globals.clone();
        globals.launcher = self.globals.launcher.detached();
        globals.launcher.record_under(self.db, &lease.cast);
        let cwd = super::cast::cwd();
        let mut driver = Driver::open(&leased, &clock, &lease.cast, &cwd)?;
        driver.launch_with(globals.launcher.clone());
        // A parallel cast's lanes are driven here too, their appends fenced by this lease.
        driver.lanes_with(super::cast::lane_agents(&lease.agent, &globals));
        let agent = super::cast::agent(
            &lease.agent,
            driver.answers_used,
            Some(self.log),
            Some(&lease.cast),
            &globals,
        )?;
        let mut agent = self.limited(&lease.agent, agent);
        let phase = driver.state.current.as_ref().map(|c| c.phase);
        if !driver.state.status.is_stopped() && phase == Some(Phase::AwaitingReply) {
            // Held at submit or at a person's input, or in flight with a holder that died:
            // sent again as `castlog resume` sends it, recorded as a re-dispatch.
            driver.apply(&Input::Resume)?;
        }
        let hooks = super::eventing::Hooks::of(self.db, self.log, &lease.cast, None);
        if let Some(waker) = hooks.as_ref().map(super::eventing::Hooks::waker) {
            driver.observe(Box::new(move |notice| {
                if let castlog_replay::driver::Notice::Recorded { .. } = notice {
                    waker.recorded();
                }
            }));
        }
        let stop = driver.drive(agent.as_mut())?;
        drop(driver);
        drop(hooks);
        Ok(stop)
    }

    /// The agent, behind the endpoint's shared limit when `--max-inflight` names it.
    fn limited<'s>(&'s self, spec: &str, agent: Box<dyn Agent>) -> Box<dyn Agent + 's> {
        match self.args.max_inflight.iter().find(|(s, _)| s == spec) {
            Some((spec, limit)) => Box::new(Limited {
                inner: agent,
                endpoint: spec.clone(),
                limit: *limit,
                work: self,
            }),
            None => agent,
        }
    }

    /// Releases the lease as the drive's outcome says, and tells of it.
    fn settle(&self, lease: &Lease, outcome: Result<Stop, Failure>) -> Result<Value, CliError> {
        let (to, outcome, message) = match outcome {
            Ok(stop) => {
                let to = if stop.status.is_stopped() || stop.status == Status::Completed {
                    QueueState::Done
                } else {
                    QueueState::Paused
                };
                (Some(to), stop.status.as_str().to_owned(), stop.message)
            }
            Err(Failure::Lost(err)) => (None, "lease_lost".to_owned(), Some(err.to_string())),
            // A cast that cannot be driven here waits for a person, not for another worker
            // to fail the same way.
            Err(Failure::Error(err)) => (
                Some(QueueState::Paused),
                "error".to_owned(),
                Some(err.message),
            ),
        };
        if let Some(to) = to
            && !self.log.release(lease, to)?
        {
            output::to_stderr(format_args!(
                "{}: cast {} was taken over before its lease was released",
                self.worker, lease.cast
            ));
        }
        output::to_stderr(format_args!(
            "{}: cast {}: {outcome}{}",
            self.worker,
            lease.cast,
            message
                .as_deref()
                .map(|m| format!(": {m}"))
                .unwrap_or_default()
        ));
        Ok(json!({
            "cast": lease.cast,
            "epoch": lease.epoch,
            "taken_over": lease.taken_over,
            "outcome": outcome,
            "message": message,
        }))
    }
}

/// Why a drive stopped early.
enum Failure {
    /// The lease was taken over: nothing more of this worker's is in the cast.
    Lost(LogError),
    /// Anything else.
    Error(CliError),
}

impl From<DriveError> for Failure {
    fn from(err: DriveError) -> Self {
        match lease_lost(&err) {
            Some(lost) => Failure::Lost(lost.clone()),
            None => Failure::Error(err.into()),
        }
    }
}

impl From<CliError> for Failure {
    fn from(err: CliError) -> Self {
        Failure::Error(err)
    }
}

/// The lease error somewhere in `err`'s chain.
fn lease_lost<'e>(err: &'e (dyn std::error::Error + 'static)) -> Option<&'e LogError> {
    let mut at = Some(err);
    while let Some(e) = at {
        if let Some(log @ LogError::LeaseLost { .. }) = e.downcast_ref::<LogError>() {
            return Some(log);
        }
        if let Some(DriveError::Log(log @ LogError::LeaseLost { .. })) =
            e.downcast_ref::<DriveError>()
        {
            return Some(log);
        }
        at = e.source();
    }
    None
}

/// An agent whose every turn holds one of its endpoint's slots (`--max-inflight`).
struct Limited<'w> {
    inner: Box<dyn Agent>,
    endpoint: String,
    limit: u32,
    work: &'w Work<'w>,
}

impl Limited<'_> {
    /// Waits for a free slot; `None` if the queue cannot be read (the turn goes ahead: a
    /// limit that cannot be kept must not stop the cast).
    fn slot(&self) -> Option<Slot> {
        let work = self.work;
        loop {
            match work.log.take_slot(
                &self.endpoint,
                self.limit,
                &work.worker,
                now_ms(),
                work.lease_ms,
            ) {
                Ok(Some(slot)) => return Some(slot),
                Ok(None) => std::thread::sleep(Duration::from_millis(20)),
                Err(err) => {
                    output::to_stderr(format_args!(
                        "{}: cannot take a slot of {}: {err}",
                        work.worker, self.endpoint
                    ));
                    return None;
                }
            }
        }
    }
}

impl Agent for Limited<'_> {
    fn turn(&mut self, request: &TurnRequest<'_>) -> AgentTurn {
        let slot = self.slot();
        if let Some(slot) = &slot {
            locked(&self.work.held.slots).push(slot.clone());
        }
        let turn = self.inner.turn(request);
        if let Some(slot) = slot {
            locked(&self.work.held.slots).retain(|s| *s != slot);
            let _ = self.work.log.release_slot(&slot);
        }
        turn
    }

    fn origin(&self) -> Option<String> {
        self.inner.origin()
    }

    fn local(&self) -> bool {
        self.inner.local()
    }

    fn attempts(&self) -> u32 {
        self.inner.attempts()
    }

    fn cancel_on(&mut self, flag: std::sync::Arc<std::sync::atomic::AtomicBool>) {
        self.inner.cancel_on(flag);
    }

    fn last_answer_at(&self) -> Option<String> {
        self.inner.last_answer_at()
    }

    fn wants_schema(&self) -> bool {
        self.inner.wants_schema()
    }

    fn runs_tools(&self) -> bool {
        self.inner.runs_tools()
    }

    fn recorded_tool(
        &mut self,
        call: &str,
        tool: &str,
        arguments: &serde_json::Value,
    ) -> Option<castlog_core::input::Input> {
        self.inner.recorded_tool(call, tool, arguments)
    }
}
