//! The driver: fold the log, ask the machine what it needs next, perform it, feed the result
//! back.
//!
//! One code path serves a first run, `resume` after a crash, and every command that adds an
//! input (refine, continue, abort, revive). The loop ([`Driver::drive`]) asks the folded state
//! for its [`Next`] effect and performs it: a due dispatch is decided at once, an agent or a
//! person is asked, a utility runs, a post is claimed; the outcome is the next [`Input`], whose
//! decision is stored (blobs, then events in one transaction, expected seq checked) and applied
//! to the state. An effect runs only after the events that ask for it are durable, so a crash at
//! any point leaves a log that `resume` can finish.
//!
//! Layout, one role each:
//! - [`fold`](fold_until): a log (and a parent's, for a recast) into a state, from a snapshot
//!   when a sealed one fits;
//! - `pipeline`: decisions into steps of the log, held until durable, told to the observer;
//! - `effects`: the agent, the person and utilities; `post`: claim before send;
//! - `snapshot`: sealing and checking snapshots;
//! - this file: the driver, its errors and the loop.

use std::ops::ControlFlow;
use std::path::{Path, PathBuf};

use castlog_core::env::{Clock, Env};
use castlog_core::event::{CastStarted, Event};
use castlog_core::id::{CastId, Seq, SocketId};
use castlog_core::input::Input;
use castlog_core::machine::decide::{self, Rejection};
use castlog_core::machine::{CastState, Inconsistent, Next, Phase, Status};
use castlog_core::prompt::Message;
use castlog_events::chain::blob_hash;
use castlog_events::{EventLog, LogError, Recorded};

use crate::agent::Agent;

mod checkpoint;
mod effects;
mod fold;
mod lanes;
mod pipeline;
mod post;
mod snapshot;
mod tools;

use fold::fold_with;
pub use fold::{fold, fold_until, fold_until_fresh};
pub use lanes::{LaneAgents, LaneObserver, abort_lanes, check_lane_heads};
use pipeline::{InFlight, pending};
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
    /// Reading or appending the cast failed.
    #[error(transparent)]
    Log(#[from] LogError),
    /// The machine refused an input the driver gave it (nothing was recorded).
    #[error(transparent)]
    Rejected(#[from] Rejection),
    /// The cast does not exist.
    #[error("no cast named {:?} in this database (see `castlog casts`)", .cast.as_str())]
    UnknownCast {
        /// Cast id as given.
        cast: CastId,
    },
    /// The log cannot be folded into a cast.
    #[error("cast {cast} cannot be replayed at seq {seq}: {cause}")]
    Fold {
        /// Cast being folded.
        cast: CastId,
        /// Seq of the event that does not fold.
        seq: Seq,
        /// What is wrong with that event.
        #[source]
        cause: FoldError,
    },
    /// The stream is of another kind than a cast (an engage run, a destination's claim
    /// ledger, as the log records it), which the cast machine does not fold.
    #[error(
        "{cast} is not a workflow cast (the log records it as {stream}; its first event is {kind}): `castlog show {cast}` prints its events{hint}"
    )]
    NotACast {
        /// Stream id as given.
        cast: CastId,
        /// The stream's kind.
        stream: castlog_events::StreamKind,
        /// Its first event's kind.
        kind: String,
        /// Where to look instead.
        hint: &'static str,
    },
    /// The prompt in flight cannot be rebuilt from the log to be sent (again) to the agent:
    /// an entry blob is missing or damaged, or the entries no longer assemble to the recorded
    /// prompt.
    #[error("the prompt in flight: {source}")]
    Prompt {
        /// Cast whose prompt is in flight.
        cast: CastId,
        /// What is wrong with it.
        #[source]
        source: castlog_projections::prompt::PromptError,
    },
    /// A point of a cast to recast from (or an input to keep) does not name what a recast
    /// needs.
    #[error(transparent)]
    Point(#[from] crate::recast::PointError),
    /// The agent gave an answer of the wrong kind: a script line with a person's message where
    /// an agent reply is due, or a reply where a person's refinement or continue is.
    #[error(
        "{at} gives {given} where {socket} waits for {wanted}, and nothing of it was recorded: fix that line, then `castlog resume {cast} --agent SPEC` goes on",
        given = .wanted.other(),
    )]
    WrongAnswer {
        /// Cast being driven.
        cast: CastId,
        /// Socket whose visit waits.
        socket: SocketId,
        /// Where the answer came from (`line 4 of FILE`, or `answer 4`).
        at: String,
        /// What the socket waits for.
        wanted: Wanted,
    },
    /// The folded state asks for nothing the driver can do (see [`Inconsistent`]).
    #[error(transparent)]
    Inconsistent(#[from] Inconsistent),
    /// A pi-materia shipped script cannot run, or is not the one the cast recorded (nothing
    /// was run or recorded).
    #[error("cast {cast}: {source}")]
    Shipped {
        /// The cast.
        cast: CastId,
        /// What is wrong.
        #[source]
        source: Box<crate::utility::shipped::ShippedError>,
    },
    /// The agent of a parallel lane could not be made (a script that does not read, ...).
    #[error("the agent of lane {lane}: {message}")]
    LaneAgent {
        /// The lane's cast.
        lane: CastId,
        /// What went wrong.
        message: String,
    },
}

/// Why an event of a cast does not fold.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FoldError {
    /// A stored event does not decode into the cast vocabulary.
    #[error(transparent)]
    Decode(#[from] castlog_core::event::DecodeError),
    /// The first event gives no state (its loadout does not decode).
    #[error(transparent)]
    Start(#[from] castlog_core::machine::StartError),
    /// The first event is not one a cast starts with.
    #[error("the first event is {kind}, not cast_started or cast_forked")]
    NotAStart {
        /// Kind of the stream's first event.
        kind: String,
    },
}

/// What a socket waits for, when an agent answered something else.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wanted {
    /// An agent's reply (or failure).
    AgentReply,
    /// A person's refinement or `continue`.
    PersonInput,
}

impl Wanted {
    /// The kind of answer that is not this one.
    fn other(self) -> Wanted {
        match self {
            Wanted::AgentReply => Wanted::PersonInput,
            Wanted::PersonInput => Wanted::AgentReply,
        }
    }
}

impl std::fmt::Display for Wanted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Wanted::AgentReply => "an agent reply",
            Wanted::PersonInput => "a person's refinement or continue",
        })
    }
}

/// Why a drive stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stop {
    /// The cast's status.
    pub status: Status,
    /// A sentence for the person, when there is something to say.
    pub message: Option<String>,
}

/// A cast being driven.
pub struct Driver<'a, L: EventLog + ?Sized> {
    log: &'a L,
    clock: &'a dyn Clock,
    cwd: PathBuf,
    /// The cast's state after every event appended so far (`state.head` is the last seq).
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
    /// The tool calls this driver recorded (and so may run): a call recorded by an earlier
    /// process and left without an outcome is `resume`'s to decide.
    calls_recorded: std::collections::HashSet<String>,
    /// Whether socket completions are checkpointed (a git working directory).
    checkpoints: checkpoint::Checkpoints,
    /// The agents of a parallel generator's lanes, one built per lane.
    lane_agents: Option<LaneAgents<'a>>,
    /// Told about the lanes' events and waits.
    lane_observer: Option<LaneObserver<'a>>,
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
        /// Socket whose agent or program is running.
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
    /// An event was recorded and is durable.
    Recorded {
        /// The event as decided, before encoding.
        event: &'n Event,
        /// Its record as the log holds it (seq, time, kind, hash).
        record: &'n Recorded,
    },
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
        let records = log.append_with_blobs(
            &cast,
            Seq::FIRST,
            &decision.blobs,
            &pending(&decision.events, env.now_ms),
        )?;
        driver.last_prompt = decision.prompt;
        // The start is recorded before anyone can watch: it is traced like every later step.
        let _cast = tracing::info_span!("cast", cast = %cast).entered();
        driver.recorded(&decision.events, &records);
        driver.checkpoint_start()?;
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
            calls_recorded: Default::default(),
            checkpoints: Default::default(),
            lane_agents: None,
            lane_observer: None,
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

    /// The directory the cast's utilities run in outside an execution scope.
    pub fn cwd(&self) -> &Path {
        &self.cwd
    }

    /// The cast's own working directory (its base scope): the `workdir` its `cast_started` or
    /// recast records, else the directory it is driven from.
    pub fn base_dir(&self) -> PathBuf {
        self.state
            .workdir
            .as_deref()
            .map_or_else(|| self.cwd.clone(), PathBuf::from)
    }

    /// The directory of the execution scope in force (`scope_activated`; a relative `cwd` in
    /// [`base_dir`](Self::base_dir)), or `None` in the base scope.
    pub fn scope_dir(&self) -> Option<PathBuf> {
        self.state
            .scope
            .as_ref()
            .map(|scope| self.base_dir().join(&scope.cwd))
    }

    /// Aborts the cast (recording `cast_aborted`) at the next step after `flag` is set.
    pub fn interrupt_on(&mut self, flag: std::sync::Arc<std::sync::atomic::AtomicBool>) {
        self.interrupt = Some(flag);
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

    /// The loop: ask the machine what it needs next, perform it, feed the result back.
    fn drive_steps(&mut self, agent: &mut dyn Agent) -> Result<Stop, DriveError> {
        let local = agent.local();
        loop {
            let next = self.state.next()?;
            if let Next::Stopped { status } = next {
                let message = status
                    .is_stopped()
                    .then(|| self.state.failure.as_ref().map(|f| f.reason.clone()))
                    .flatten();
                return Ok(Stop { status, message });
            }
            if self
                .interrupt
                .as_ref()
                .is_some_and(|f| f.load(std::sync::atomic::Ordering::SeqCst))
            {
                return self.interrupted();
            }
            // Only a local agent's turn and a due dispatch (a decision) run before the steps in
            // flight are durable.
            let effect_free = match next {
                Next::Dispatch { .. } => true,
                Next::AskAgent { .. } | Next::AwaitResume { .. } | Next::AskPerson { .. } => local,
                _ => false,
            };
            if !effect_free {
                self.settle(0)?;
            }
            let _step = self.step_span();
            let flow = match next {
                Next::Dispatch { key } => {
                    self.record(&Input::DispatchDue { key }, local)?;
                    ControlFlow::Continue(())
                }
                Next::RunUtility { spec } => {
                    self.run_utility(&spec)?;
                    ControlFlow::Continue(())
                }
                Next::RunTool {
                    socket,
                    call,
                    tool,
                    arguments,
                } => self.run_tool(agent, &socket, &call, &tool, &arguments)?,
                Next::AwaitResume { socket } => ControlFlow::Break(Stop {
                    status: Status::AwaitingAgent,
                    message: Some(format!(
                        "the agent was interrupted at {socket}; run `castlog resume {} --agent SPEC` to send the prompt again",
                        self.state.cast
                    )),
                }),
                Next::AskAgent {
                    socket,
                    transient_failures,
                } if transient_failures >= agent.attempts() => ControlFlow::Break(Stop {
                    status: Status::AwaitingAgent,
                    message: Some(format!(
                        "{} transient agent failures in a row at {socket}; run `castlog resume {} --agent SPEC` to try again",
                        agent.attempts(),
                        self.state.cast
                    )),
                }),
                Next::AskAgent { socket, .. } => self.ask_agent(agent, &socket, local)?,
                Next::AskPerson { socket } => self.ask_person(agent, &socket, local)?,
                Next::StartPost { step, spec } => {
                    self.start_post(&step, &spec)?;
                    ControlFlow::Continue(())
                }
                Next::RunLanes {
                    lanes,
                    planned_at,
                    max_concurrency,
                    revive,
                } => self.run_lanes(&lanes, planned_at, max_concurrency, revive)?,
                Next::AwaitClaim { .. } => {
                    if self.adopt_inherited_resolution()? {
                        ControlFlow::Continue(())
                    } else {
                        ControlFlow::Break(self.pending_stop())
                    }
                }
                // `Stopped` returned above; a variant added later stops the drive where it is.
                _ => ControlFlow::Break(Stop {
                    status: self.state.status,
                    message: None,
                }),
            };
            if let ControlFlow::Break(stop) = flow {
                return Ok(stop);
            }
        }
    }

    /// Ctrl-C: records the abort and says how to go on.
    fn interrupted(&mut self) -> Result<Stop, DriveError> {
        let socket = self
            .state
            .current
            .as_ref()
            .map(|c| c.socket.to_string())
            .unwrap_or_default();
        self.apply(&Input::Abort {
            reason: "interrupted (Ctrl-C)".into(),
        })?;
        Ok(Stop {
            status: self.state.status,
            message: Some(format!(
                "aborted at {socket}; `castlog resume {} --agent SPEC` continues it",
                self.state.cast
            )),
        })
    }

    /// The tracing span of one step, named by the visit in progress.
    fn step_span(&self) -> tracing::span::EnteredSpan {
        let current = self.state.current.as_ref();
        tracing::info_span!(
            "step",
            socket = %current.map_or("", |c| c.socket.as_str()),
            visit = current.map_or(0, |c| c.visit.get()),
            turn = current.map_or(0, |c| c.turn.get())
        )
        .entered()
    }
}
