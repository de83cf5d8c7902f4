//! Running a parent's lanes (`Next::RunLanes`): create the lane casts not yet in the log, in
//! plan order; drive every lane that is not terminal, each on a thread of its own with its own
//! driver and its own agent, at most `max_concurrency` at a time; when all are terminal, join
//! them in plan order (`Input::JoinLanes`, each lane's head seq and hash).
//!
//! Nothing the parent records depends on the order lanes finish in: the lanes' first events are
//! appended in plan order before any lane runs, and the join lists the lanes in plan order. A
//! lane found in the log and not terminal was cut off (a crash, Ctrl-C): it is resumed, as
//! `castlog resume` does, so every unfinished lane goes on exactly once; with `revive` (the
//! parent was revived), failed and aborted lanes are revived, and completed ones never re-run.

use std::collections::VecDeque;
use std::ops::ControlFlow;
use std::sync::Mutex;

use castlog_core::env::Env;
use castlog_core::event::{LaneOutcome, LanePlan, LaneStarted, LaneStatus};
use castlog_core::id::{CastId, Seq};
use castlog_core::input::Input;
use castlog_core::machine::Status;
use castlog_core::machine::decide::start_lane;
use castlog_events::chain::blob_hash;
use castlog_events::{EventLog, ForkPoint};

use super::pipeline::pending;
use super::{DriveError, Driver, Stop, fold, fold_until};
use crate::agent::Agent;

/// Builds the agent of one lane: called on the lane's thread with the lane and the answers
/// its log already holds (what a script skips). Each lane gets an agent of its own.
pub type LaneAgents<'a> =
    Box<dyn Fn(&LanePlan, usize) -> Result<Box<dyn Agent>, DriveError> + Sync + 'a>;

/// Told about every recorded event and wait of every lane (a progress line per lane), from
/// the lanes' threads.
pub type LaneObserver<'a> = Box<dyn Fn(&LanePlan, super::Notice<'_>) + Sync + 'a>;

/// What one lane's drive came to.
type Driven = Option<Result<Stop, DriveError>>;

impl<'a, L: EventLog + ?Sized> Driver<'a, L> {
    /// Gives the driver the agents of a parallel generator's lanes (without them, a cast that
    /// reaches its lanes stops there, to be resumed with an agent).
    pub fn lanes_with(&mut self, agents: LaneAgents<'a>) {
        self.lane_agents = Some(agents);
    }

    /// Tells `observer` about every recorded event and every wait of the lanes.
    pub fn observe_lanes(&mut self, observer: LaneObserver<'a>) {
        self.lane_observer = Some(observer);
    }

    /// Performs `Next::RunLanes`.
    pub(super) fn run_lanes(
        &mut self,
        plan: &[LanePlan],
        planned_at: Seq,
        max_concurrency: u32,
        revive: bool,
    ) -> Result<ControlFlow<Stop>, DriveError> {
        let parent = self.state.cast.clone();
        if self.lane_agents.is_none() {
            return Ok(ControlFlow::Break(Stop {
                status: self.state.status,
                message: Some(format!(
                    "the lanes of {parent} run only with an agent: `castlog resume {parent} --agent SPEC`"
                )),
            }));
        }
        let fresh = self.create_lanes(plan, planned_at)?;
        // What each lane needs before it is driven: `None`, a terminal lane left as it is.
        let mut work: VecDeque<(usize, Option<Input>)> = VecDeque::new();
        for (i, lane) in plan.iter().enumerate() {
            let (state, _) = fold(self.log, &lane.cast)?;
            let first = match state.status {
                Status::Completed => continue,
                Status::Failed | Status::Aborted if !revive => continue,
                Status::Failed | Status::Aborted => Some(Input::Revive),
                _ if fresh.contains(&lane.cast) => None,
                _ => Some(Input::Resume),
            };
            work.push_back((i, first));
        }
        let results: Mutex<Vec<Driven>> = Mutex::new(plan.iter().map(|_| None).collect());
        let queue = Mutex::new(work);
        let workers = usize::try_from(max_concurrency.max(1)).unwrap_or(1);
        let agents = self.lane_agents.as_ref();
        let observer = self.lane_observer.as_ref();
        let (log, clock, cwd) = (self.log, self.clock, self.cwd.clone());
        let (launcher, interrupt) = (self.launcher.clone(), self.interrupt.clone());
        std::thread::scope(|scope| {
            for _ in 0..workers.min(plan.len()) {
                scope.spawn(|| {
                    loop {
                        let next = queue.lock().ok().and_then(|mut q| q.pop_front());
                        let Some((i, first)) = next else { break };
                        let Some(lane) = plan.get(i) else { break };
                        let driven = (|| {
                            let mut driver = Driver::open(log, clock, &lane.cast, &cwd)?;
                            driver.launch_with(launcher.clone());
                            if let Some(observer) = observer {
                                driver.observe(Box::new(move |notice| observer(lane, notice)));
                            }
                            if let Some(flag) = &interrupt {
                                driver.interrupt_on(std::sync::Arc::clone(flag));
                            }
                            if let Some(input) = &first {
                                driver.apply(input)?;
                            }
                            let Some(agents) = agents else {
                                return Ok(Stop {
                                    status: driver.state.status,
                                    message: None,
                                });
                            };
                            let mut agent = agents(lane, driver.answers_used)?;
                            if let Some(flag) = &interrupt {
                                agent.cancel_on(std::sync::Arc::clone(flag));
                            }
                            driver.drive(agent.as_mut())
                        })();
                        if let Ok(mut all) = results.lock()
                            && let Some(slot) = all.get_mut(i)
                        {
                            *slot = Some(driven);
                        }
                    }
                });
            }
        });
        let results = results.into_inner().unwrap_or_default();
        for (lane, result) in plan.iter().zip(results) {
            if let Some(Err(err)) = result {
                tracing::warn!(lane = %lane.cast, "lane stopped on an error: {err}");
                return Err(err);
            }
        }
        if self
            .interrupt
            .as_ref()
            .is_some_and(|f| f.load(std::sync::atomic::Ordering::SeqCst))
        {
            // The parent records its abort at the next step.
            return Ok(ControlFlow::Continue(()));
        }
        let mut outcomes = Vec::with_capacity(plan.len());
        for lane in plan {
            let (state, _) = fold(self.log, &lane.cast)?;
            let head = self
                .log
                .head(&lane.cast)?
                .ok_or_else(|| DriveError::UnknownCast {
                    cast: lane.cast.clone(),
                })?;
            let status = match state.status {
                Status::Completed => LaneStatus::Completed,
                Status::Failed => LaneStatus::Failed,
                Status::Aborted => LaneStatus::Aborted,
                other => {
                    return Ok(ControlFlow::Break(Stop {
                        status: Status::AwaitingAgent,
                        message: Some(format!(
                            "lane {} ({}) is {} and the others wait for it; `castlog resume {parent} --agent SPEC` goes on",
                            lane.name,
                            lane.cast,
                            other.as_str()
                        )),
                    }));
                }
            };
            outcomes.push(LaneOutcome {
                name: lane.name.clone(),
                cast: lane.cast.clone(),
                status,
                head: head.seq,
                hash: head.hash,
                output: state.last_output.clone(),
                satisfied: state.last_satisfied,
                reason: state
                    .failure
                    .as_ref()
                    .map(|f| f.reason.clone())
                    .or_else(|| (status == LaneStatus::Aborted).then(|| "aborted".to_owned())),
                usage: state.usage,
                scope: state.scope.clone(),
            });
        }
        self.record(&Input::JoinLanes { lanes: outcomes }, false)?;
        Ok(ControlFlow::Continue(()))
    }

    /// Appends the first decision of every lane not in the log yet, in plan order, each
    /// forked from the parent's `lanes_planned`; returns the lanes it created.
    fn create_lanes(
        &mut self,
        plan: &[LanePlan],
        planned_at: Seq,
    ) -> Result<Vec<CastId>, DriveError> {
        let parent = self.state.cast.clone();
        let mut created = Vec::new();
        let mut at_plan = None;
        for lane in plan {
            if self.log.head(&lane.cast)?.is_some() {
                continue;
            }
            let record = self
                .log
                .read(&parent, planned_at, Some(planned_at))?
                .into_iter()
                .next()
                .ok_or_else(|| DriveError::UnknownCast {
                    cast: parent.clone(),
                })?;
            if at_plan.is_none() {
                at_plan = Some(fold_until(self.log, &parent, planned_at)?.0);
            }
            let Some(parent_state) = &at_plan else {
                continue;
            };
            let started = LaneStarted {
                cast: lane.cast.clone(),
                parent: parent.clone(),
                parent_seq: planned_at,
                parent_hash: record.hash,
                name: lane.name.clone(),
                items: lane.items.clone(),
            };
            let env = Env::from_clock(self.clock, blob_hash);
            let (_, decision) = start_lane(parent_state, started, &env)?;
            for blob in &decision.blobs {
                self.log.put_blob(blob)?;
            }
            let point = ForkPoint {
                cast: parent.clone(),
                seq: planned_at,
                hash: record.hash,
            };
            self.log
                .fork(&lane.cast, &point, &pending(&decision.events, env.now_ms))?;
            created.push(lane.cast.clone());
        }
        Ok(created)
    }
}

/// Aborts every lane of `parent`'s plan that is in the log and not stopped (what `castlog
/// abort` does after aborting the parent); returns the lanes aborted.
pub fn abort_lanes<L: EventLog + ?Sized>(
    log: &L,
    clock: &dyn castlog_core::env::Clock,
    parent: &CastId,
    reason: &str,
    cwd: &std::path::Path,
) -> Result<Vec<CastId>, DriveError> {
    let (state, _) = fold(log, parent)?;
    let Some(lanes) = state.lanes else {
        return Ok(Vec::new());
    };
    let mut aborted = Vec::new();
    for lane in &lanes.plan {
        if log.head(&lane.cast)?.is_none() {
            continue;
        }
        let mut driver = Driver::open(log, clock, &lane.cast, cwd)?;
        if driver.state.status.is_stopped() {
            continue;
        }
        driver.apply(&Input::Abort {
            reason: reason.to_owned(),
        })?;
        aborted.push(lane.cast.clone());
    }
    Ok(aborted)
}

/// Where a parent's `lanes_joined` names a lane head the lane's chain does not hold: the seq
/// of the join and what is wrong (`verify` checks lanes with their parent).
pub fn check_lane_heads(
    log: &(impl EventLog + ?Sized),
    parent: &CastId,
) -> Result<Vec<(Seq, String)>, castlog_events::LogError> {
    let mut joins = Vec::new();
    log.scan(parent, Seq::FIRST, &mut |record| {
        if record.kind == "lanes_joined"
            && let Ok(castlog_core::event::Event::LanesJoined(j)) = record.event()
        {
            joins.push((record.seq, j));
        }
        ControlFlow::Continue(())
    })?;
    let mut problems = Vec::new();
    for (seq, joined) in joins {
        for lane in &joined.lanes {
            let at = match log.read(&lane.cast, lane.head, Some(lane.head)) {
                Err(castlog_events::LogError::UnknownCast { .. }) => Vec::new(),
                other => other?,
            };
            match at.first() {
                Some(r) if r.hash == lane.hash => {}
                Some(r) => problems.push((
                    seq,
                    format!(
                        "lane {} holds {} at seq {}, not the {} the join names",
                        lane.cast,
                        r.hash.to_hex(),
                        lane.head,
                        lane.hash.to_hex()
                    ),
                )),
                None => problems.push((
                    seq,
                    format!(
                        "lane {} has no seq {} (the join names its head there)",
                        lane.cast, lane.head
                    ),
                )),
            }
        }
    }
    Ok(problems)
}
