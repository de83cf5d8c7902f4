//! `decide`: turning an input into events.
//!
//! A decision runs on a scratch copy of the state and applies every event it emits before
//! deciding the next one ([`Decider::emit`]), so it reads exactly the state its own events make.
//! The events and the blobs they name are returned together; the shell stores the blobs, appends
//! the events, and only then acts on them (calls the agent, runs the utility).

use crate::env::Env;
use crate::event::{
    Allowance, CastAborted, CastFailed, CastResumed, CastStarted, DispatchScheduled,
    DispatchSkipped, Event, FinalizeRequested, PromptDispatched, SkipReason, SocketStarted,
    SteeringNoted, Target, UserRefined,
};
use crate::id::{CastId, Digest, DispatchKey, SocketId, Turn, Visit};
use crate::input::Input;
use crate::loadout::{Loadout, SocketKind};
use crate::machine::{CastState, NoAdvance, Phase, Status, item_key};
use crate::prompt;

mod inverse;
mod refusals;

pub use super::lanes::{lane_id, start_lane};
pub use inverse::input_of;
use refusals::{awaiting_reply, not_now, phase_of, stopped, waiting_in};

/// What a decision produced.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Decision {
    /// The events, in order.
    pub events: Vec<Event>,
    /// Blob bodies the events name (prompts, entry texts); store them before the events.
    pub blobs: Vec<Vec<u8>>,
    /// The messages of the prompt the decision dispatched, with its hash, so the shell can hand
    /// them to the agent without reading the blob back.
    pub prompt: Option<(Digest, Vec<prompt::Message>)>,
}

/// Why an input was refused. Nothing is recorded for a refused input.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Rejection {
    /// The cast has stopped.
    #[error("cast {cast} is {status}: {hint}")]
    Stopped {
        /// Cast the input was for.
        cast: CastId,
        /// Status word (`completed`, `failed`, `aborted`).
        status: &'static str,
        /// What to do instead.
        hint: &'static str,
    },
    /// The input does not fit what the cast is waiting for.
    #[error("cast {cast} cannot take {input} now: {reason}")]
    NotNow {
        /// Cast the input was for.
        cast: CastId,
        /// The input's name.
        input: &'static str,
        /// What the cast waits for instead.
        reason: String,
    },
    /// The cast names a placement policy castlog does not know.
    #[error(
        "cannot start the loadout: unknown placement policy {policy:?}: use recommended, legacy or a policy file"
    )]
    UnknownPolicy {
        /// Policy name as the cast records it.
        policy: String,
    },
    /// A recorded placement policy document names another policy than the cast does.
    #[error(
        "cannot start the loadout: the placement policy document is named {document:?}, not {named:?}"
    )]
    PolicyNameMismatch {
        /// The `name` the policy document gives itself.
        document: String,
        /// Policy name `cast_started` records.
        named: String,
    },
    /// A policy file takes the name of a built-in policy but is not it.
    #[error(
        "cannot start the loadout: a placement policy file may not take the built-in name {name:?}: rename it"
    )]
    PolicyTakesBuiltInName {
        /// The built-in name taken.
        name: String,
    },
    /// The cast's prompts are fenced with a version newer than this castlog's.
    #[error(
        "cannot start the loadout: the cast's prompts are fenced with version {version}, newer than this castlog's {supported}: use a newer castlog"
    )]
    FenceTooNew {
        /// The cast's fence version.
        version: u32,
        /// Newest fence version this castlog renders (`prompt::fence::VERSION`).
        supported: u32,
    },
    /// The cast's handoff-context rule is newer than this castlog's.
    #[error(
        "cannot start the loadout: the cast's handoff context follows rule {rule}, newer than this castlog's {supported}: use a newer castlog"
    )]
    HandoffRuleTooNew {
        /// The cast's rule.
        rule: u32,
        /// Newest handoff-context rule this castlog applies.
        supported: u32,
    },
    /// The cast follows pi-materia conformance rules newer than this castlog's.
    #[error(
        "cannot start the loadout: the cast follows pi-materia conformance rules {version}, newer than this castlog's {supported}: use a newer castlog"
    )]
    ConformanceTooNew {
        /// The cast's version.
        version: u32,
        /// The newest this castlog knows.
        supported: u32,
    },
    /// The loadout has no entry socket, or its entry cannot start.
    #[error("cannot start the loadout: {0}")]
    Loadout(#[from] super::StartError),
    /// An illegal claim transition (names the claim's current state).
    #[error(transparent)]
    Claim(#[from] crate::claims::TransitionError),
}

/// A decision in progress: the state it applies its events to, and what it emitted so far.
pub(crate) struct Decider<'s, 'a> {
    pub state: &'s mut CastState,
    pub env: &'a Env,
    pub out: Decision,
}

impl<'s, 'a> Decider<'s, 'a> {
    pub fn new(state: &'s mut CastState, env: &'a Env) -> Self {
        Self {
            state,
            env,
            out: Decision::default(),
        }
    }

    /// Applies and records one event.
    pub fn emit(&mut self, event: impl Into<Event>) {
        let event = event.into();
        self.state.evolve(&event);
        self.out.events.push(event);
    }

    /// Stores a blob and returns its address.
    pub fn blob(&mut self, bytes: Vec<u8>) -> Digest {
        let digest = (self.env.digest)(&bytes);
        if !self.out.blobs.contains(&bytes) {
            self.out.blobs.push(bytes);
        }
        digest
    }

    pub fn fail(&mut self, reason: String, socket: Option<SocketId>, allowance: Option<Allowance>) {
        self.emit(CastFailed {
            reason,
            socket,
            allowance,
        });
    }

    /// Starts a visit of `target`. `deferred` schedules the first prompt instead of sending it.
    pub fn enter(&mut self, target: &SocketId, deferred: bool) {
        self.enter_skipping(target, deferred, &mut Vec::new());
    }

    /// [`Decider::enter`], having skipped the used-up loops `skipped` on the way here.
    fn enter_skipping(&mut self, target: &SocketId, deferred: bool, skipped: &mut Vec<SocketId>) {
        let loadout = std::sync::Arc::clone(&self.state.loadout);
        let Some(socket) = loadout.socket(target) else {
            self.fail(
                format!("socket {target} does not exist in the loadout"),
                None,
                None,
            );
            return;
        };
        let in_loop = self.state.iterator_of(target).is_some();
        let selection = self.state.select_item(target);
        if in_loop && selection.is_none() {
            // Empty loop (or a list already walked): leave through the loop's `always` exit.
            // The reference looks the route up by the entered socket and so falls to `end`,
            // skipping e.g. Narrate; castlog uses the loop's exit route whatever member owns it.
            // Exits that lead back to a loop already skipped here would skip forever (no list
            // on the way can grow, since nothing runs): the cast fails, naming them.
            if skipped.contains(target) {
                let mut round: Vec<String> = skipped.iter().map(ToString::to_string).collect();
                round.push(target.to_string());
                self.fail(
                    format!(
                        "the exits of loops whose items are all used lead back into them: {}; give one of these loops an exit out of the cycle, or recast with a changed loadout",
                        round.join(" -> ")
                    ),
                    Some(target.clone()),
                    None,
                );
                return;
            }
            skipped.push(target.clone());
            let exit = self
                .state
                .loadout
                .loops_of(target)
                .flat_map(|l| l.exits.iter())
                .find(|r| r.condition == crate::event::When::Always)
                .map(|r| r.target.clone());
            let to = match exit {
                // A lane ends where its loop exits.
                Some(crate::loadout::EdgeTarget::Socket(s)) if self.state.lane.is_none() => {
                    Target::Socket(s)
                }
                _ => Target::End,
            };
            self.emit(crate::event::EdgeTaken {
                from: target.clone(),
                to: to.clone(),
                when: crate::event::When::Always,
                item: None,
                traversal: 1,
            });
            match to {
                Target::Socket(next) => self.enter_skipping(&next, deferred, skipped),
                Target::End => self.finish(),
            }
            return;
        }
        let item = selection.as_ref().map(|s| s.key.clone());
        let (tracker, counted) = self.state.next_tracker(target, item.as_ref());
        if counted && self.no_advance_exhausted(target, &tracker) {
            return;
        }
        let visit = Visit(self.state.visits.get(target).copied().unwrap_or(0) + 1);
        let attempt = self
            .state
            .attempts
            .get(&item_key(target.as_str(), item.as_ref()))
            .copied()
            .unwrap_or(0)
            + 1;
        self.emit(SocketStarted {
            socket: target.clone(),
            materia: socket.materia.clone(),
            materia_label: socket.label.clone(),
            visit,
            item,
            item_label: selection.map(|s| s.label),
            attempt,
        });
        if let SocketKind::Post(_) = socket.kind {
            self.enter_post();
            return;
        }
        if let SocketKind::Agent(_) = socket.kind {
            if deferred {
                let source = self
                    .state
                    .last_source
                    .clone()
                    .unwrap_or_else(|| (target.clone(), Visit(0)));
                let key = DispatchKey::new(format!(
                    "{}:{}:{}:{}:{}",
                    self.state.cast, source.0, source.1, target, visit
                ));
                self.emit(DispatchScheduled {
                    key,
                    socket: target.clone(),
                    visit,
                });
            } else {
                self.dispatch(Turn(1), false);
            }
        }
    }

    /// Fails the cast if the start of `target` closes one cycle more than the no-advance guard
    /// allows: per work item (`maxNoAdvanceCycles`), or outside loops, before any item
    /// (`maxCyclesOutsideLoops`). Refused before the visit is counted.
    fn no_advance_exhausted(&mut self, target: &SocketId, tracker: &NoAdvance) -> bool {
        let loadout = &self.state.loadout;
        let configured = match &tracker.item {
            Some(_) => loadout.limits.max_no_advance_cycles,
            None => loadout
                .max_cycles_outside_loops
                .unwrap_or(loadout.limits.max_no_advance_cycles),
        };
        let allowance = Allowance::NoAdvance {
            item: tracker.item.clone(),
        };
        let limit = self.state.limit(&allowance, u64::from(configured));
        if u64::from(tracker.count) <= limit {
            return false;
        }
        let mut cycle: Vec<String> = self
            .state
            .no_advance
            .path
            .iter()
            .map(|s| s.to_string())
            .collect();
        cycle.push(target.to_string());
        let cycle = cycle.join(" -> ");
        self.emit(crate::event::AllowanceExhausted {
            allowance: allowance.clone(),
            count: u64::from(tracker.count),
            limit,
        });
        // The item's wording is the one recorded casts carry; keep it byte for byte.
        let reason = match &tracker.item {
            Some(item) => format!(
                "no-advance guard: item \"{item}\" went around {cycle} without advancing more than {limit} times; revive to allow more cycles or recast with a changed loadout"
            ),
            None => format!(
                "no-advance guard: sockets outside loops went around {cycle} without advancing more than {limit} times; revive to allow more cycles or recast with a changed loadout"
            ),
        };
        self.fail(reason, Some(target.clone()), Some(allowance));
        true
    }

    /// Records that the unanswered prompt is sent again (after a crash, or for a fork made
    /// while it was in flight) and dispatches it at its turn.
    fn send_again(&mut self, after_fork: bool) {
        let turn = self.state.current.as_ref().map_or(Turn(1), |c| c.turn);
        self.emit(CastResumed {
            redispatch: true,
            after_fork,
        });
        self.dispatch(turn, true);
    }

    /// Renders and dispatches the current visit's prompt for `turn`.
    pub fn dispatch(&mut self, turn: Turn, redispatch: bool) {
        let Some(current) = self.state.current.clone() else {
            return;
        };
        let entries = self.state.entries();
        let rendered = prompt::render(&entries, self.state.placement_policy(), self.env.digest);
        // Each entry's body, once per decision; the placements already carry its digest.
        for (entry, placement) in entries.into_iter().zip(&rendered.placements) {
            if self.state.sent_bodies.contains(&placement.body) {
                continue;
            }
            debug_assert_eq!((self.env.digest)(entry.text.as_bytes()), placement.body);
            self.state.sent_bodies.insert(placement.body);
            self.out.blobs.push(entry.text.into_bytes());
        }
        // The rendered prompt and the system fold are named by their digests but not stored:
        // both are rebuilt from the placements and the entry blobs (`prompt::assemble`), so a
        // reply repeated in later prompts is stored once, as its entry.
        let system_hash =
            (!rendered.system.is_empty()).then(|| (self.env.digest)(rendered.system.as_bytes()));
        let prompt_hash = (self.env.digest)(&prompt::messages_json(&rendered.messages));
        self.out.prompt = Some((prompt_hash, rendered.messages));
        self.emit(PromptDispatched {
            socket: current.socket,
            visit: current.visit,
            turn,
            prompt_hash,
            system_hash,
            placements: rendered.placements,
            redispatch,
        });
    }

    /// The cast reached `end`.
    /// `agent_failed` for the reply the prompt in flight waits for (`structured_off`: the
    /// server refused the response format, which is not sent again in this cast).
    fn agent_failed(
        &mut self,
        input: &'static str,
        class: crate::event::FailureClass,
        message: &str,
        structured_off: bool,
    ) -> Result<(), Rejection> {
        let current = waiting_in(
            self.state,
            Phase::AwaitingReply,
            input,
            "no prompt is waiting for a reply",
        )?;
        self.emit(crate::event::AgentFailed {
            socket: current.socket.clone(),
            visit: current.visit,
            turn: current.turn,
            class,
            message: message.to_owned(),
            attempt: current.transient_failures + 1,
            structured_off,
        });
        Ok(())
    }

    pub fn finish(&mut self) {
        self.emit(crate::event::CastCompleted {
            usage: self.state.usage,
        });
    }
}

/// Starts a cast: `cast_started`, then the entry socket's first visit.
pub fn start(started: CastStarted, env: &Env) -> Result<(CastState, Decision), Rejection> {
    match &started.policy_document {
        None if prompt::Policy::named(&started.policy).is_none() => {
            return Err(Rejection::UnknownPolicy {
                policy: started.policy,
            });
        }
        None => {}
        Some(doc) => {
            let policy = prompt::Policy::from_json(doc)
                .map_err(|e| Rejection::Loadout(super::StartError::Policy(e)))?;
            if policy.name != started.policy {
                return Err(Rejection::PolicyNameMismatch {
                    document: policy.name,
                    named: started.policy,
                });
            }
            if prompt::Policy::is_built_in(&policy.name) {
                return Err(Rejection::PolicyTakesBuiltInName { name: policy.name });
            }
        }
    }
    if let Some(version) = started.fence.filter(|&v| v > prompt::fence::VERSION) {
        return Err(Rejection::FenceTooNew {
            version,
            supported: prompt::fence::VERSION,
        });
    }
    if let Some(rule) = started.handoff.filter(|&r| r > super::turn::HANDOFF_RULE) {
        return Err(Rejection::HandoffRuleTooNew {
            rule,
            supported: super::turn::HANDOFF_RULE,
        });
    }
    if let Some(version) = started.conformance.filter(|&v| v > super::CONFORMANCE) {
        return Err(Rejection::ConformanceTooNew {
            version,
            supported: super::CONFORMANCE,
        });
    }
    let mut state = CastState::started(&started)?;
    let entry = state.loadout.entry.clone();
    let mut d = Decider::new(&mut state, env);
    d.out.events.push(Event::CastStarted(started));
    d.enter(&entry, false);
    let out = d.out;
    Ok((state, out))
}

/// Builds the `cast_started` event for a loadout.
pub fn started_event(
    cast: CastId,
    loadout: &Loadout,
    loadout_hash: Digest,
    request: String,
    policy: String,
    config_source: Option<String>,
) -> CastStarted {
    // A legacy cast keeps the audited handoff context, so an audit shows the difference.
    let handoff = (policy != "legacy").then_some(super::turn::HANDOFF_RULE);
    CastStarted {
        cast,
        loadout_name: loadout.name.clone(),
        loadout: loadout.to_json(),
        loadout_hash,
        request,
        policy,
        policy_document: None,
        config_source,
        fence: Some(prompt::fence::VERSION),
        workdir: None,
        handoff,
        conformance: Some(super::CONFORMANCE),
        tools: tool_scopes(loadout),
    }
}

/// The tool scopes of a loadout's agent materia, by materia (`None`: no materia has one).
pub fn tool_scopes(
    loadout: &Loadout,
) -> Option<std::collections::BTreeMap<crate::id::MateriaName, serde_json::Value>> {
    let scopes: std::collections::BTreeMap<_, _> = loadout
        .sockets
        .values()
        .filter_map(|s| match &s.kind {
            SocketKind::Agent(a) => a.tools.clone().map(|t| (s.materia.clone(), t)),
            _ => None,
        })
        .collect();
    (!scopes.is_empty()).then_some(scopes)
}

impl CastState {
    /// Decides what `input` means for this cast. Pure: the state is not changed.
    pub fn decide(&self, input: &Input, env: &Env) -> Result<Decision, Rejection> {
        let mut scratch = self.clone();
        scratch.decide_mut(input, env)
    }

    /// Decides what `input` means and applies the events to this state as they are emitted
    /// (what `decide` followed by `evolve` of every event would do, without copying the state).
    /// A refused input changes nothing: every refusal comes before the first event.
    pub fn decide_mut(&mut self, input: &Input, env: &Env) -> Result<Decision, Rejection> {
        let mut d = Decider::new(self, env);
        match input {
            Input::Abort { reason } => {
                if let Some(r) = stopped(d.state) {
                    return Err(r);
                }
                d.emit(CastAborted {
                    reason: reason.clone(),
                });
            }
            Input::Steer {
                text,
                locked,
                origin,
            } => {
                if let Some(r) = stopped(d.state) {
                    return Err(r);
                }
                d.emit(SteeringNoted {
                    text: text.clone(),
                    locked: *locked,
                    origin: origin.clone(),
                });
            }
            Input::Revive => d.revive()?,
            Input::RaiseBudget { tokens } => d.raise_budget(*tokens)?,
            Input::Resume => {
                // An aborted cast (Ctrl-C, `castlog abort`) is resumed like a revive: it
                // continues where it stopped, recorded as `cast_revived`.
                if d.state.status == Status::Aborted {
                    d.revive()?;
                    return Ok(d.out);
                }
                if let Some(r) = stopped(d.state) {
                    return Err(r);
                }
                match phase_of(d.state) {
                    Some(Phase::AwaitingReply) => d.send_again(false),
                    Some(Phase::RunningTools) => {
                        d.emit(CastResumed {
                            redispatch: false,
                            after_fork: false,
                        });
                        d.recover_tools();
                    }
                    Some(Phase::AwaitingRefinement) => {
                        return Err(not_now(
                            d.state,
                            "resume",
                            "it waits for a refinement: use `castlog refine` or `castlog continue`",
                        ));
                    }
                    _ => d.emit(CastResumed {
                        redispatch: false,
                        after_fork: false,
                    }),
                }
            }
            Input::HoldPrompt => {
                let held = d
                    .state
                    .current
                    .as_ref()
                    .filter(|c| c.phase == Phase::AwaitingReply && !c.held)
                    .map(|c| (c.socket.clone(), c.visit, c.turn));
                let Some((socket, visit, turn)) = held else {
                    return Err(not_now(
                        d.state,
                        "holding the prompt",
                        "no unsent prompt is in flight",
                    ));
                };
                d.emit(crate::event::PromptHeld {
                    socket,
                    visit,
                    turn,
                });
            }
            Input::ForkRedispatch => {
                if phase_of(d.state) != Some(Phase::AwaitingReply) {
                    return Err(not_now(
                        d.state,
                        "re-dispatch after a fork",
                        "no prompt was in flight at the fork point",
                    ));
                }
                d.send_again(true);
            }
            Input::DispatchDue { key } => {
                if d.state.status == Status::Completed
                    && let Some(r) = stopped(d.state)
                {
                    return Err(r);
                }
                if d.state.dispatched.contains(key) {
                    d.emit(DispatchSkipped {
                        key: key.clone(),
                        reason: SkipReason::Duplicate,
                    });
                } else if d.state.scheduled.as_ref() != Some(key)
                    || phase_of(d.state) != Some(Phase::AwaitingDispatch)
                    || d.state.status.is_stopped()
                {
                    d.emit(DispatchSkipped {
                        key: key.clone(),
                        reason: SkipReason::Stale,
                    });
                } else {
                    d.dispatch(Turn(1), false);
                }
            }
            Input::AgentReplied { text, usage } => {
                awaiting_reply(d.state)?;
                d.on_reply(text.clone(), *usage);
            }
            Input::AgentCalledTools { text, usage, calls } => {
                awaiting_reply(d.state)?;
                if calls.is_empty() {
                    d.on_reply(text.clone(), *usage);
                } else {
                    d.on_tool_reply(text.clone(), *usage, calls);
                }
            }
            Input::ToolFinished {
                call,
                output,
                exit,
                error,
                truncated,
                duration_ms,
            } => {
                if let Some(r) = stopped(d.state) {
                    return Err(r);
                }
                d.tool_finished(call, output, *exit, *error, *truncated, *duration_ms)?;
            }
            Input::CheckpointWorkspace {
                socket,
                visit,
                start,
                tree,
            } => {
                d.emit(crate::event::WorkspaceCheckpointed {
                    socket: socket.clone(),
                    visit: *visit,
                    start: *start,
                    tree: tree.clone(),
                });
            }
            Input::AgentFailed { class, message } => {
                d.agent_failed("an agent failure", *class, message, false)?;
            }
            Input::StructuredOutputRefused { message } => {
                let class = crate::event::FailureClass::Transient;
                d.agent_failed("a refused response format", class, message, true)?;
            }
            Input::UserRefined { text, origin } => {
                let current = waiting_in(
                    d.state,
                    Phase::AwaitingRefinement,
                    "a refinement",
                    "no multi-turn socket is paused",
                )?;
                d.emit(UserRefined {
                    socket: current.socket.clone(),
                    visit: current.visit,
                    text: text.clone(),
                    origin: origin.clone(),
                });
                d.dispatch(current.turn.next(), false);
            }
            Input::Continue { origin } => {
                let current = waiting_in(
                    d.state,
                    Phase::AwaitingRefinement,
                    "continue",
                    "no multi-turn socket is paused",
                )?;
                d.emit(FinalizeRequested {
                    socket: current.socket.clone(),
                    visit: current.visit,
                    origin: origin.clone(),
                });
                d.dispatch(current.turn.next(), false);
            }
            Input::UtilityFinished {
                code,
                timed_out,
                stdout,
                stderr,
                truncated,
            } => {
                if let Some(r) = stopped(d.state) {
                    return Err(r);
                }
                if phase_of(d.state) != Some(Phase::RunningUtility) {
                    return Err(not_now(
                        d.state,
                        "a utility result",
                        "no utility is running",
                    ));
                }
                d.on_utility(*code, *timed_out, stdout, stderr, *truncated);
            }
            Input::Mark { name, at } => {
                if name.trim().is_empty()
                    || name.chars().all(|c| c.is_ascii_digit())
                    || name.contains(':')
                {
                    return Err(not_now(
                        d.state,
                        "a waypoint",
                        format!(
                            "{name:?} would be read as a seq or SOCKET:VISIT; pick a name with a letter and no colon"
                        ),
                    ));
                }
                if *at > d.state.head || at.get() == 0 {
                    return Err(not_now(
                        d.state,
                        "a waypoint",
                        format!("seq {at} is not in the cast (head {})", d.state.head),
                    ));
                }
                d.emit(crate::event::WaypointMarked {
                    name: name.clone(),
                    at: *at,
                });
            }
            Input::ResolveClaim { claim, message_id } => {
                let resolution = match message_id {
                    Some(id) => crate::event::Resolution::Staged {
                        message_id: id.clone(),
                    },
                    None => crate::event::Resolution::Abandoned,
                };
                d.resolve_claim(claim, &resolution)?;
            }
            Input::ResolveClaimAs { claim, resolution } => d.resolve_claim(claim, resolution)?,
            Input::RecordResponse { claim, response } => d.record_response(claim, *response)?,
            Input::InheritedClaimResolved {
                claim,
                status,
                message_id,
            } => d.adopt_resolution(claim, *status, message_id.as_deref())?,
            Input::StartPost {
                dry_run,
                held,
                sent_before,
            } => d.start_post(*dry_run, held, sent_before.as_ref())?,
            Input::PostOutcome { claim, outcome } => d.post_outcome(claim, outcome)?,
            Input::JoinLanes { lanes } => d.join_lanes(lanes)?,
        }
        Ok(d.out)
    }
}
