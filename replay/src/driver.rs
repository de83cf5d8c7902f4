//! The driver: fold the log, ask the machine, append, act, feed the result back.
//!
//! One code path serves a first run, `resume` after a crash, and every command that adds an
//! input (refine, continue, abort, revive). Each step is: decide → store the blobs the events
//! name → append the events (one transaction, expected seq checked) → apply them to the folded
//! state → perform the effect the new state asks for (call the agent, run the utility) → turn the
//! result into the next input. An effect runs only after the events that ask for it are durable,
//! so a crash at any point leaves a log that `resume` can finish.

use std::ops::ControlFlow;
use std::path::{Path, PathBuf};

use castlog_core::env::{Clock, Env};
use castlog_core::event::{CastStarted, Event, FailureClass};
use castlog_core::id::{CastId, Seq, SocketId};
use castlog_core::input::Input;
use castlog_core::loadout::SocketKind;
use castlog_core::machine::decide::{self, Rejection};
use castlog_core::machine::{CastState, Phase, Status};
use castlog_core::prompt::Message;
use castlog_events::chain::blob_hash;
use castlog_events::{Appending, EventLog, LogError, Pending};

use crate::agent::{Agent, AgentTurn, TurnRequest};
use crate::utility;

mod post;
mod snapshot;

use snapshot::restored;
pub use snapshot::{SNAPSHOT_EVERY, check_snapshots, sealed_snapshot};

/// Steps a driver lets be begun and not yet durable while it works out the next (see
/// [`Driver::drive`]). Twice what the SQLite log holds in one transaction, so the step waited
/// for has usually been committed and is being fsynced already.
pub const STEPS_IN_FLIGHT: usize = 32;

/// Transient agent failures in a row before the driver stops and leaves the cast to `resume`,
/// unless the agent's retry policy says otherwise ([`Agent::attempts`]).
pub const TRANSIENT_LIMIT: u32 = crate::retry::DEFAULT_ATTEMPTS;

/// Everything that can stop a drive.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DriveError {
    /// The log failed.
    #[error(transparent)]
    Log(#[from] LogError),
    /// The machine refused an input.
    #[error(transparent)]
    Rejected(#[from] Rejection),
    /// The cast does not exist.
    #[error("no cast named {:?} in this database (see `castlog casts`)", .cast.as_str())]
    UnknownCast {
        /// The cast asked for.
        cast: CastId,
    },
    /// The log cannot be folded into a cast.
    #[error("cast {cast} cannot be replayed at seq {seq}: {message}")]
    Fold {
        /// The cast.
        cast: CastId,
        /// The event.
        seq: Seq,
        /// Why.
        message: String,
    },
    /// The cast is a record of another kind (an engage run, a destination's claim ledger),
    /// which the cast machine does not fold.
    #[error(
        "{cast} is not a workflow cast (its first event is {kind}): `castlog show {cast}` prints its events{hint}"
    )]
    NotACast {
        /// The cast.
        cast: CastId,
        /// Its first event's kind.
        kind: String,
        /// Where to look instead.
        hint: &'static str,
    },
    /// The agent answered something that does not fit.
    #[error("{0}")]
    Agent(String),
}

/// Why a drive stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stop {
    /// The cast's status.
    pub status: Status,
    /// A sentence for the person, when there is something to say.
    pub message: Option<String>,
}

/// What one step of [`Driver::drive`] reads of the visit in progress.
struct Step {
    socket: SocketId,
    visit: castlog_core::id::Visit,
    turn: castlog_core::id::Turn,
    phase: Phase,
    interrupted: bool,
    transient_failures: u32,
}

/// A cast being driven.
pub struct Driver<'a, L: EventLog + ?Sized> {
    log: &'a L,
    clock: &'a dyn Clock,
    cwd: PathBuf,
    /// The folded state.
    pub state: CastState,
    /// Agent answers consumed so far (what a scripted agent skips).
    pub answers_used: usize,
    /// Person inputs waiting to be applied when the cast next pauses for one (kept by a recast).
    queued: std::collections::VecDeque<Input>,
    /// Told about every recorded event and every wait (the progress display).
    observer: Option<Observer<'a>>,
    /// Set from outside (Ctrl-C) to abort the cast at the next step.
    interrupt: Option<std::sync::Arc<std::sync::atomic::AtomicBool>>,
    /// The sender of post sockets; `None` (the default) is a dry run: nothing is sent.
    sender: Option<Box<dyn crate::sender::Sender + 'a>>,
    /// The messages of the prompt this driver dispatched last, with their hash.
    last_prompt: Option<(castlog_core::id::Digest, Vec<Message>)>,
    /// Steps begun and not yet known durable, oldest first (see [`Driver::drive`]).
    in_flight: std::collections::VecDeque<InFlight<'a>>,
    /// The most steps `in_flight` holds.
    steps_in_flight: usize,
    /// How utility programs are started.
    launcher: crate::process::Launcher,
}

/// A begun step waiting to be durable, and its events (told to the observer once durable).
struct InFlight<'a> {
    appending: Appending<'a>,
    events: Vec<Event>,
}

impl<L: EventLog + ?Sized> std::fmt::Debug for Driver<'_, L> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Driver")
            .field("cast", &self.state.cast)
            .field("status", &self.state.status)
            .field("head", &self.state.head)
            .field("answers_used", &self.answers_used)
            .finish_non_exhaustive()
    }
}

/// A callback told about recorded events and waits.
pub type Observer<'a> = Box<dyn FnMut(Notice<'_>) + 'a>;

/// What an observer is told.
#[derive(Debug, Clone, Copy)]
pub enum Notice<'n> {
    /// The driver waits for an agent or a utility.
    Waiting {
        /// The socket.
        socket: &'n SocketId,
        /// The materia's label.
        label: &'n str,
        /// The item's label.
        item: Option<&'n str>,
        /// The attempt of this (socket, item).
        attempt: u32,
        /// The turn within the visit.
        turn: u32,
    },
    /// An event was recorded.
    Recorded(&'n Event),
}

/// Folds a cast's events into its state.
pub fn fold(
    log: &(impl EventLog + ?Sized),
    cast: &CastId,
) -> Result<(CastState, usize), DriveError> {
    fold_until(log, cast, Seq(u64::MAX))
}

/// Folds a cast's events up to and including `until` (time travel by seq), starting from the
/// latest snapshot at or before `until` when there is a usable one.
pub fn fold_until(
    log: &(impl EventLog + ?Sized),
    cast: &CastId,
    until: Seq,
) -> Result<(CastState, usize), DriveError> {
    fold_with(log, cast, until, true, &mut |_, _| {})
}

/// [`fold_until`] from the first event, trusting no snapshot (what `verify` checks against).
pub fn fold_until_fresh(
    log: &(impl EventLog + ?Sized),
    cast: &CastId,
    until: Seq,
) -> Result<(CastState, usize), DriveError> {
    fold_with(log, cast, until, false, &mut |_, _| {})
}

pub(super) fn fold_with(
    log: &(impl EventLog + ?Sized),
    cast: &CastId,
    until: Seq,
    snapshots: bool,
    visit: &mut dyn FnMut(&CastState, usize),
) -> Result<(CastState, usize), DriveError> {
    let restored = if snapshots {
        restored(log, cast, until)
    } else {
        None
    };
    let (mut state, mut used, from) = match restored {
        Some((state, used)) => {
            let from = state.head.next();
            (Some(state), used, from)
        }
        None => (None, 0, Seq::FIRST),
    };
    let mut failure: Option<DriveError> = None;
    let scanned = log.scan(cast, from, &mut |record| {
        if record.seq > until {
            return ControlFlow::Break(());
        }
        let event = match record.event() {
            Ok(event) => event,
            Err(err) => {
                failure = Some(DriveError::Fold {
                    cast: cast.clone(),
                    seq: record.seq,
                    message: err.to_string(),
                });
                return ControlFlow::Break(());
            }
        };
        used += answers_in(&event);
        match (&mut state, &event) {
            (None, Event::CastStarted(started)) => match CastState::started(started) {
                Ok(s) => state = Some(s),
                Err(message) => {
                    failure = Some(DriveError::Fold {
                        cast: cast.clone(),
                        seq: record.seq,
                        message,
                    });
                    return ControlFlow::Break(());
                }
            },
            (None, Event::CastForked(forked)) => {
                // A recast: the parent's state at the fork point, then the child's own events.
                // The parent's answers were consumed by the parent's agent, not the child's.
                let parent = fold_with(
                    log,
                    &forked.parent,
                    forked.parent_seq,
                    snapshots,
                    &mut |_, _| {},
                )
                .and_then(|(parent, _)| {
                    CastState::forked(&parent, forked).map_err(|message| DriveError::Fold {
                        cast: cast.clone(),
                        seq: record.seq,
                        message,
                    })
                });
                match parent {
                    Ok(s) => state = Some(s),
                    Err(err) => {
                        failure = Some(err);
                        return ControlFlow::Break(());
                    }
                }
            }
            (None, Event::EngagementStarted(_) | Event::DayClaimed(_)) => {
                failure = Some(DriveError::NotACast {
                    cast: cast.clone(),
                    kind: record.kind.clone(),
                    hint: if record.kind == "engagement_started" {
                        " and its report; `castlog claims` lists its claim"
                    } else {
                        "; `castlog claims` lists the claims it records"
                    },
                });
                return ControlFlow::Break(());
            }
            (None, _) => {
                failure = Some(DriveError::Fold {
                    cast: cast.clone(),
                    seq: record.seq,
                    message: format!(
                        "the first event is {}, not cast_started or cast_forked",
                        record.kind
                    ),
                });
                return ControlFlow::Break(());
            }
            (Some(s), event) => s.evolve(event),
        }
        if let Some(s) = &state {
            visit(s, used);
        }
        ControlFlow::Continue(())
    });
    match scanned {
        Err(LogError::UnknownCast { .. }) => {
            return Err(DriveError::UnknownCast { cast: cast.clone() });
        }
        Err(err) => return Err(err.into()),
        Ok(()) => {}
    }
    if let Some(err) = failure {
        return Err(err);
    }
    state
        .map(|s| (s, used))
        .ok_or_else(|| DriveError::UnknownCast { cast: cast.clone() })
}

/// The events of one decision, stamped `now` for the log.
fn pending(events: &[Event], now: u64) -> Vec<Pending> {
    events.iter().map(|e| Pending::new(now, e)).collect()
}

/// How many agent answers an event accounts for.
fn answers_in(event: &Event) -> usize {
    match event {
        Event::AgentReplied(_) | Event::AgentFailed(_) => 1,
        Event::UserRefined(e) if e.origin.as_deref() == Some("script") => 1,
        Event::FinalizeRequested(e) if e.origin.as_deref() == Some("script") => 1,
        _ => 0,
    }
}

impl<'a, L: EventLog + ?Sized> Driver<'a, L> {
    /// Starts a new cast.
    pub fn start(
        log: &'a L,
        clock: &'a dyn Clock,
        started: CastStarted,
        cwd: &Path,
    ) -> Result<Self, DriveError> {
        let env = Env::from_clock(clock, blob_hash);
        let cast = started.cast.clone();
        let (state, decision) = decide::start(started, &env)?;
        let mut driver = Self::adopt(log, clock, state, cwd);
        log.append_with_blobs(
            &cast,
            Seq::FIRST,
            &decision.blobs,
            &pending(&decision.events, env.now_ms),
        )?;
        driver.last_prompt = decision.prompt;
        // The start is recorded before anyone can watch: it is traced like every later step.
        let _cast = tracing::info_span!("cast", cast = %cast).entered();
        driver.recorded(&decision.events);
        Ok(driver)
    }

    /// Opens an existing cast by folding its log.
    pub fn open(
        log: &'a L,
        clock: &'a dyn Clock,
        cast: &CastId,
        cwd: &Path,
    ) -> Result<Self, DriveError> {
        let (state, used) = fold(log, cast)?;
        let mut driver = Self::adopt(log, clock, state, cwd);
        driver.answers_used = used;
        Ok(driver)
    }

    /// Drives a given state (the start of a cast, a folded cast, or a fresh fork).
    pub fn adopt(log: &'a L, clock: &'a dyn Clock, state: CastState, cwd: &Path) -> Self {
        Driver {
            log,
            clock,
            cwd: cwd.to_path_buf(),
            state,
            answers_used: 0,
            queued: Default::default(),
            observer: None,
            interrupt: None,
            sender: None,
            last_prompt: None,
            in_flight: Default::default(),
            steps_in_flight: STEPS_IN_FLIGHT,
            launcher: crate::process::Launcher::default(),
        }
    }

    /// Starts utility programs with `launcher` (their environment, scrubbing and records)
    /// instead of a default one.
    pub fn launch_with(&mut self, launcher: crate::process::Launcher) {
        self.launcher = launcher;
    }

    /// Lets at most `steps` (at least one) of a local agent's steps wait to be durable, instead
    /// of [`STEPS_IN_FLIGHT`]: fewer steps for `resume` to redo after a power cut, more waits.
    pub fn limit_steps_in_flight(&mut self, steps: usize) {
        self.steps_in_flight = steps.max(1);
    }

    /// Tells `observer` about every recorded event and every wait.
    pub fn observe(&mut self, observer: Observer<'a>) {
        self.observer = Some(observer);
    }

    /// Aborts the cast (recording `cast_aborted`) at the next step after `flag` is set.
    pub fn interrupt_on(&mut self, flag: std::sync::Arc<std::sync::atomic::AtomicBool>) {
        self.interrupt = Some(flag);
    }

    fn wait_notice(&mut self) {
        // Borrowed, not copied: this runs before every agent and utility call.
        let (Some(observer), Some(current)) = (self.observer.as_mut(), self.state.current.as_ref())
        else {
            return;
        };
        let label = self
            .state
            .loadout
            .socket(&current.socket)
            .map_or("", |s| s.label.as_str());
        observer(Notice::Waiting {
            socket: &current.socket,
            label,
            item: current.item_label.as_deref(),
            attempt: current.attempt,
            turn: current.turn.get(),
        });
    }

    /// Queues a person's input (refinement or continue) for the next pause.
    pub fn queue(&mut self, input: Input) {
        self.queued.push_back(input);
    }

    /// Records that the prompt in flight is not sent now, when this driver dispatched it and
    /// there is no agent to send it to: a later `resume` then sends it as it is, not as a
    /// recovery after a crash. (`last_prompt` is the prompt this driver dispatched and has not
    /// handed to an agent, so no read of the log is needed to tell.)
    pub fn hold_unsent(&mut self) -> Result<(), DriveError> {
        let dispatched_here = self.state.current.as_ref().is_some_and(|c| {
            c.phase == Phase::AwaitingReply
                && !c.held
                && self
                    .last_prompt
                    .as_ref()
                    .is_some_and(|(hash, _)| c.prompt == Some(*hash))
        });
        if dispatched_here {
            self.apply(&Input::HoldPrompt)?;
        }
        Ok(())
    }

    /// Decides and records one input; it is durable when this returns.
    pub fn apply(&mut self, input: &Input) -> Result<(), DriveError> {
        self.record(input, false)?;
        self.settle(0)
    }

    /// Waits until no more than `keep` begun steps are not yet durable, telling the
    /// observer about the events of each step that is.
    fn settle(&mut self, keep: usize) -> Result<(), DriveError> {
        while self.in_flight.len() > keep
            && let Some(step) = self.in_flight.pop_front()
        {
            step.appending.wait()?;
            self.recorded(&step.events);
        }
        Ok(())
    }

    fn recorded(&mut self, events: &[Event]) {
        for event in events {
            tracing::debug!(kind = event.kind(), "recorded");
            if let Some(observer) = self.observer.as_mut() {
                observer(Notice::Recorded(event));
            }
        }
    }

    /// Decides `input` and appends the events; `begin` lets them be stored and durable later
    /// ([`EventLog::begin_append_with_blobs`]), when the driver next settles.
    fn record(&mut self, input: &Input, begin: bool) -> Result<(), DriveError> {
        let env = Env::from_clock(self.clock, blob_hash);
        let cast = self.state.cast.clone();
        let expected = self.state.head.next();
        let first = self.state.decide_mut(input, &env)?;
        // `decide_mut` applies the events to the state as it emits them, so the state moves
        // ahead of the log here; if the append below fails the driver returns
        // the error and is not used again, and the log (the truth) is unchanged.
        let mut events = first.events;
        let mut blobs = first.blobs;
        let mut prompt = first.prompt;
        // A dispatch the decision scheduled is due at once: decide it now and commit both
        // decisions together (one fsync). The log still holds two decisions, in order, and a
        // crash keeps both or neither; `resume` handles either.
        if let (Some(key), Some(Phase::AwaitingDispatch)) = (
            self.state.scheduled.clone(),
            self.state.current.as_ref().map(|c| c.phase),
        ) && !self.state.status.is_stopped()
        {
            let due = self.state.decide_mut(&Input::DispatchDue { key }, &env)?;
            events.extend(due.events);
            blobs.extend(due.blobs);
            prompt = due.prompt.or(prompt);
        }
        let pending = pending(&events, env.now_ms);
        // A step that crosses a multiple of `SNAPSHOT_EVERY` events takes a snapshot of the
        // state right after it, naming its last hash (a cache, kept after the step: the log
        // writes it with the step or later, never before).
        let last = (expected.get() + events.len() as u64).saturating_sub(1);
        let snapshot_due =
            last / SNAPSHOT_EVERY > expected.get().saturating_sub(1) / SNAPSHOT_EVERY;
        // At most `steps_in_flight` steps are not yet durable, this one included; a step
        // appended durably waits for every one before it.
        self.settle(if begin { self.steps_in_flight - 1 } else { 0 })?;
        let (recorded, begun) = if begin {
            let appending = self
                .log
                .begin_append_with_blobs(&cast, expected, &blobs, &pending)?;
            (
                appending.records().last().map(|r| (r.seq, r.hash)),
                Some(appending),
            )
        } else {
            let recorded = self
                .log
                .append_with_blobs(&cast, expected, &blobs, &pending)?;
            (recorded.last().map(|r| (r.seq, r.hash)), None)
        };
        if prompt.is_some() {
            self.last_prompt = prompt;
        }
        self.answers_used += events.iter().map(answers_in).sum::<usize>();
        if snapshot_due && let Some((seq, hash)) = recorded {
            self.keep_snapshot(seq, hash, begun.is_some());
        }
        match begun {
            Some(appending) => self.in_flight.push_back(InFlight { appending, events }),
            None => self.recorded(&events),
        }
        Ok(())
    }

    /// Keeps a snapshot of the state just appended (`begun`: with its step, which may not be
    /// stored yet); a cache: failing to keep one is only logged.
    fn keep_snapshot(&self, seq: Seq, hash: castlog_core::id::Digest, begun: bool) {
        let snapshot = sealed_snapshot(&self.state, self.answers_used, seq, hash);
        let cast = &self.state.cast;
        let kept = if begun {
            self.log.begin_put_snapshot(cast, snapshot)
        } else {
            self.log.put_snapshot(cast, snapshot)
        };
        if let Err(err) = kept {
            tracing::warn!(%cast, %seq, %err, "snapshot not kept");
        }
    }

    fn prompt(&mut self) -> Result<Vec<Message>, DriveError> {
        let Some(hash) = self.state.current.as_ref().and_then(|c| c.prompt) else {
            return Ok(Vec::new());
        };
        // The prompt this driver just dispatched is at hand; a prompt dispatched by an earlier
        // process (resume) is read back from its blob.
        // Taken, not cloned: a later call for the same prompt (after a transient failure)
        // rebuilds it from the log.
        if let Some((rendered, messages)) = self.last_prompt.take()
            && rendered == hash
        {
            return Ok(messages);
        }
        // What is read back must be durable first (only this driver's steps are not yet).
        self.settle(0)?;
        let placements = self
            .state
            .current
            .as_ref()
            .map(|c| c.placements.as_slice())
            .unwrap_or_default();
        let policy = castlog_core::prompt::Policy::named(&self.state.policy)
            .unwrap_or(&castlog_core::prompt::policy::RECOMMENDED);
        castlog_projections::prompt::messages(self.log, policy, &hash, placements)
            .map_err(|e| DriveError::Agent(format!("the prompt of {}: {e}", self.state.cast)))
    }

    /// Drives the cast until it stops or waits for something the agent cannot give; everything
    /// it recorded is durable when it returns.
    ///
    /// No prompt, utility or post runs before the events that ask for it are durable, and the
    /// observer hears of a step once it is durable. With a [local](Agent::local) agent (a
    /// script, a recording), whose turn has no effect outside the process, the driver does not
    /// wait for each step: it begins its append ([`EventLog::begin_append_with_blobs`]; the
    /// SQLite log holds them and writes up to 16 in one transaction, fsynced on a thread of its
    /// own) and
    /// asks the agent for the next, with at most [`STEPS_IN_FLIGHT`] steps not yet durable. A
    /// crash may lose those last steps, which nobody has been told of and which `resume` asks
    /// the same agent again.
    pub fn drive(&mut self, agent: &mut dyn Agent) -> Result<Stop, DriveError> {
        let _cast = tracing::info_span!("cast", cast = %self.state.cast).entered();
        let stop = self.drive_steps(agent);
        let settled = self.settle(0);
        let stop = stop?;
        settled?;
        Ok(stop)
    }

    fn drive_steps(&mut self, agent: &mut dyn Agent) -> Result<Stop, DriveError> {
        let local = agent.local();
        loop {
            if self.state.status.is_stopped() {
                let message = self.state.failure.as_ref().map(|f| f.reason.clone());
                return Ok(Stop {
                    status: self.state.status,
                    message,
                });
            }
            // The few fields a step reads, not a clone of the whole visit (transcript,
            // placements).
            let Some(current) = self.state.current.as_ref().map(|c| Step {
                socket: c.socket.clone(),
                visit: c.visit,
                turn: c.turn,
                phase: c.phase,
                interrupted: c.interrupted,
                transient_failures: c.transient_failures,
            }) else {
                return Ok(Stop {
                    status: self.state.status,
                    message: None,
                });
            };
            if self
                .interrupt
                .as_ref()
                .is_some_and(|f| f.load(std::sync::atomic::Ordering::SeqCst))
            {
                self.apply(&Input::Abort {
                    reason: "interrupted (Ctrl-C)".into(),
                })?;
                return Ok(Stop {
                    status: self.state.status,
                    message: Some(format!(
                        "aborted at {}; `castlog resume {} --agent SPEC` continues it",
                        current.socket, self.state.cast
                    )),
                });
            }
            // Only a local agent's turn and a due dispatch (a decision) run before the steps in
            // flight are durable.
            let effect_free = match current.phase {
                Phase::AwaitingDispatch => true,
                Phase::AwaitingReply | Phase::AwaitingRefinement => local,
                _ => false,
            };
            if !effect_free {
                self.settle(0)?;
            }
            let _step = tracing::info_span!(
                "step",
                socket = %current.socket,
                visit = current.visit.get(),
                turn = current.turn.get()
            )
            .entered();
            match current.phase {
                Phase::AwaitingDispatch => {
                    let Some(key) = self.state.scheduled.clone() else {
                        return Err(DriveError::Agent(
                            "a dispatch is awaited but none is scheduled".into(),
                        ));
                    };
                    self.record(&Input::DispatchDue { key }, local)?;
                }
                Phase::RunningUtility => {
                    let Some(SocketKind::Utility(spec)) =
                        self.state.current_socket().map(|s| s.kind.clone())
                    else {
                        return Err(DriveError::Agent(
                            "the running socket is not a utility".into(),
                        ));
                    };
                    self.wait_notice();
                    let input = utility::input(&self.state, &self.cwd);
                    let done = utility::run(&spec, &input, &self.cwd, &self.launcher);
                    self.record(
                        &Input::UtilityFinished {
                            code: done.code,
                            timed_out: done.timed_out,
                            stdout: done.stdout,
                            stderr: done.stderr,
                            truncated: done.truncated,
                        },
                        // A program's output cannot be asked again: durable at once.
                        false,
                    )?;
                }
                Phase::AwaitingReply => {
                    if current.interrupted {
                        return Ok(Stop {
                            status: Status::AwaitingAgent,
                            message: Some(format!(
                                "the agent was interrupted at {}; run `castlog resume {} --agent SPEC` to send the prompt again",
                                current.socket, self.state.cast
                            )),
                        });
                    }
                    let limit = agent.attempts();
                    if current.transient_failures >= limit {
                        return Ok(Stop {
                            status: Status::AwaitingAgent,
                            message: Some(format!(
                                "{limit} transient agent failures in a row at {}; run `castlog resume {} --agent SPEC` to try again",
                                current.socket, self.state.cast
                            )),
                        });
                    }
                    let messages = self.prompt()?;
                    self.wait_notice();
                    let spec = match self.state.current_socket().map(|s| &s.kind) {
                        Some(castlog_core::loadout::SocketKind::Agent(a)) => Some(a),
                        _ => None,
                    };
                    let turn = agent.turn(&TurnRequest {
                        messages: &messages,
                        refinement: false,
                        model: spec.and_then(|a| a.model.as_deref()),
                        thinking: spec.and_then(|a| a.thinking.as_deref()),
                    });
                    match turn {
                        AgentTurn::Reply { text, usage } => {
                            self.record(&Input::AgentReplied { text, usage }, local)?
                        }
                        AgentTurn::Failed { class, message } => {
                            self.record(&Input::AgentFailed { class, message }, local)?;
                            if class == FailureClass::Interruption {
                                continue;
                            }
                        }
                        AgentTurn::Exhausted(message) => {
                            return Ok(Stop {
                                status: Status::AwaitingAgent,
                                message: Some(message),
                            });
                        }
                        AgentTurn::Refine(_) | AgentTurn::Continue => {
                            return Err(DriveError::Agent(format!(
                                "the agent script gives a person's message where {} waits for an agent reply (answer {})",
                                current.socket,
                                self.answers_used + 1
                            )));
                        }
                    }
                }
                Phase::AwaitingRefinement => {
                    if let Some(input) = self.queued.pop_front() {
                        self.record(&input, local)?;
                        continue;
                    }
                    let turn = agent.turn(&TurnRequest {
                        messages: &[],
                        refinement: true,
                        model: None,
                        thinking: None,
                    });
                    let origin = agent.origin();
                    match turn {
                        AgentTurn::Refine(text) => {
                            self.record(&Input::UserRefined { text, origin }, local)?
                        }
                        AgentTurn::Continue => self.record(&Input::Continue { origin }, local)?,
                        AgentTurn::Exhausted(_) => {
                            return Ok(Stop {
                                status: Status::AwaitingRefinement,
                                message: Some(format!(
                                    "{} waits for you: `castlog refine {} TEXT` to answer, `castlog continue {}` to finalize",
                                    current.socket, self.state.cast, self.state.cast
                                )),
                            });
                        }
                        AgentTurn::Reply { .. } | AgentTurn::Failed { .. } => {
                            return Err(DriveError::Agent(format!(
                                "the agent script gives a reply where {} waits for a person's refinement or continue (answer {})",
                                current.socket,
                                self.answers_used + 1
                            )));
                        }
                    }
                }
                Phase::AwaitingPost => self.start_post()?,
                Phase::AwaitingPostOutcome => {
                    if !self.adopt_inherited_resolution()? {
                        return Ok(self.pending_stop());
                    }
                }
                Phase::Done => {
                    return Ok(Stop {
                        status: self.state.status,
                        message: None,
                    });
                }
            }
        }
    }
}
