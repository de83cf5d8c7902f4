//! Recast (fork) and the points a cast can be forked at.
//!
//! A recast is a new cast whose first event, `cast_forked`, names the parent, the fork seq and
//! the parent's chain hash there; its `prev` is that hash, so the child commits to the parent's
//! whole prefix. The child's state is the parent's state at the fork point (re-owned by the
//! child, with an edited loadout when `--config` changed it); from there it is driven live like
//! any cast. A fork point must be a decision boundary: the last event of one decision, where the
//! state is waiting for something (an agent, a utility, a dispatch, a person).

use std::path::Path;

use castlog_core::env::{Clock, Env};
use castlog_core::event::{CastForked, Event};
use castlog_core::id::{CastId, Digest, Seq};
use castlog_core::input::Input;
use castlog_core::machine::decide::input_of;
use castlog_core::machine::{CastState, Phase};
use castlog_events::chain::{blob_hash, loadout_hash};
use castlog_events::{EventLog, ForkPoint, Pending, Recorded};
use serde_json::Value;

use crate::driver::{DriveError, Driver, fold_until};

/// A cast's full history: a recast's parent prefix (recursively) followed by its own events.
pub fn history(log: &(impl EventLog + ?Sized), cast: &CastId) -> Result<Vec<Recorded>, DriveError> {
    let mut all = Vec::new();
    with_history(log, cast, &mut |records| all.extend(records))?;
    Ok(all)
}

/// Runs `consume` over [`history`]'s records of `cast`, read as they are consumed (see
/// [`castlog_events::log::with_events`]) instead of held: a few pages of each cast on the
/// way are in memory, whatever the casts' lengths.
pub fn with_history(
    log: &(impl EventLog + ?Sized),
    cast: &CastId,
    consume: &mut dyn FnMut(&mut dyn Iterator<Item = Recorded>),
) -> Result<(), DriveError> {
    castlog_projections::history::with_history(log, cast, consume).map_err(|e| match e {
        castlog_events::LogError::UnknownCast { cast } => DriveError::UnknownCast { cast },
        other => other.into(),
    })
}

/// The casts recast (directly or through other recasts) from `ancestor`, in the order the log
/// lists casts. Only the casts' heads are read (each names its fork parent).
pub fn descendants(
    log: &(impl EventLog + ?Sized),
    ancestor: &CastId,
) -> Result<Vec<CastId>, DriveError> {
    let mut parents = std::collections::BTreeMap::new();
    let mut order = Vec::new();
    for head in log.casts()? {
        if let Some(parent) = head.parent {
            parents.insert(head.cast.clone(), parent.cast);
            order.push(head.cast);
        }
    }
    let descends = |cast: &CastId| {
        let mut at = parents.get(cast);
        // A chain of forks is finite: each step goes to an older cast, bounded by the count.
        for _ in 0..=parents.len() {
            match at {
                Some(parent) if parent == ancestor => return true,
                Some(parent) => at = parents.get(parent),
                None => return false,
            }
        }
        false
    };
    Ok(order.into_iter().filter(|c| descends(c)).collect())
}

/// Whether `event`, applied to `state`, begins a new decision (it carries an input).
fn starts_decision(state: &CastState, event: &Event, previous_kind: &str) -> bool {
    match event {
        Event::CastRevived(_) => previous_kind != "allowance_extended",
        Event::AllowanceExtended(_) => true,
        Event::PromptDispatched(_) => input_of(state, event).is_some(),
        _ => input_of(state, event).is_some(),
    }
}

/// The seqs of a cast's own events that end a decision (valid fork points), in order.
pub fn decision_ends(
    log: &(impl EventLog + ?Sized),
    cast: &CastId,
) -> Result<Vec<Seq>, DriveError> {
    let own = log.read(cast, Seq::FIRST, None)?;
    let (mut state, _) = fold_until(log, cast, Seq::FIRST)?;
    let mut ends = Vec::new();
    let mut previous_kind = own.first().map_or(String::new(), |r| r.kind.clone());
    let mut decoder = castlog_events::Decoder::new();
    for record in own.iter().skip(1) {
        let event = decoder
            .event_in(log, record)
            .map_err(|e| DriveError::Fold {
                cast: cast.clone(),
                seq: record.seq,
                cause: e.into(),
            })?;
        if starts_decision(&state, &event, &previous_kind) {
            ends.push(Seq(record.seq.get() - 1));
        }
        state.evolve(&event);
        previous_kind = record.kind.clone();
    }
    if let Some(last) = own.last() {
        ends.push(last.seq);
    }
    ends.dedup();
    Ok(ends)
}

/// `seq` if it is one of `ends`, or an error naming the nearest boundaries (`waypoint` names
/// the waypoint the seq came from).
fn boundary(
    ends: &[Seq],
    cast: &CastId,
    seq: Seq,
    len: u64,
    waypoint: Option<&str>,
) -> Result<Seq, PointError> {
    if ends.contains(&seq) {
        return Ok(seq);
    }
    let before = ends.iter().rev().find(|s| **s < seq);
    let after = ends.iter().find(|s| **s > seq);
    Err(PointError::NotABoundary {
        cast: cast.clone(),
        seq,
        waypoint: waypoint.map(str::to_owned),
        past_end: seq.get() > len,
        nearest: [before, after].into_iter().flatten().copied().collect(),
    })
}

/// Why a point named for a recast (or for reading a cast at) does not do.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PointError {
    /// A seq (given, or named by a waypoint) that does not end a decision.
    #[error(
        "{}seq {seq} is not a decision boundary of cast {cast}{}; pick one of the nearest: {}",
        .waypoint.as_ref().map(|w| format!("waypoint {w:?} names {seq}, but ")).unwrap_or_default(),
        if *.past_end { " (past its end)" } else { "" },
        .nearest.iter().map(ToString::to_string).collect::<Vec<_>>().join(" or ")
    )]
    NotABoundary {
        /// Cast the seq was asked of.
        cast: CastId,
        /// Seq asked for: inside a decision, or past the cast's end.
        seq: Seq,
        /// The waypoint that named it, if one did.
        waypoint: Option<String>,
        /// Whether it lies past the cast's last event.
        past_end: bool,
        /// The nearest boundaries before and after it.
        nearest: Vec<Seq>,
    },
    /// A visit of the prefix a recast was forked from, asked of the recast.
    #[error(
        "cast {cast} has no visit {visit} of {socket} of its own; it was forked from {parent} at seq {parent_seq}, so a visit before that is read there: `--at` it on cast {parent}"
    )]
    VisitOfParent {
        /// The recast asked for the visit.
        cast: CastId,
        /// Socket asked for (`SOCKET` of `SOCKET:VISIT`).
        socket: String,
        /// Visit asked for (`VISIT` of `SOCKET:VISIT`).
        visit: u32,
        /// Cast the recast was forked from, where the visit is.
        parent: CastId,
        /// Last parent seq the recast's state includes.
        parent_seq: Seq,
    },
    /// A visit the cast never made.
    #[error("cast {cast} has no visit {visit} of {socket}")]
    NoVisit {
        /// Cast asked of.
        cast: CastId,
        /// Socket asked for (`SOCKET` of `SOCKET:VISIT`).
        socket: String,
        /// Visit asked for (`VISIT` of `SOCKET:VISIT`).
        visit: u32,
    },
    /// A visit whose decision never ended.
    #[error("no decision boundary after {socket}:{visit}")]
    NoBoundaryAfter {
        /// Socket asked for (`SOCKET` of `SOCKET:VISIT`).
        socket: String,
        /// Visit asked for (`VISIT` of `SOCKET:VISIT`).
        visit: u32,
    },
    /// Neither a seq, nor `SOCKET:VISIT`, nor a waypoint of the cast.
    #[error(
        "{at:?} is not a seq, SOCKET:VISIT or a waypoint of cast {cast} (see `castlog show {cast}`)"
    )]
    Unknown {
        /// Cast whose points were searched.
        cast: CastId,
        /// What was given.
        at: String,
    },
    /// A fork point while the parent's lanes run: the lanes are the parent's, so a child
    /// forked there would share them.
    #[error(
        "seq {seq} of cast {cast} is while its parallel lanes run; recast from before its plan (the child plans again), after the lanes were joined, or recast one lane"
    )]
    InsideLanes {
        /// Cast asked of.
        cast: CastId,
        /// The fork seq.
        seq: Seq,
    },
    /// A fork seq past the parent's end.
    #[error("cast {cast} has no seq {seq}")]
    NoSeq {
        /// Cast asked of.
        cast: CastId,
        /// Seq asked for, past the cast's last event.
        seq: Seq,
    },
    /// `--keep-inputs` names an event that is not a person's input after the fork point.
    #[error(
        "--keep-inputs {seq}: not a refinement, continue or steering note of {parent} after the fork seq {at}"
    )]
    NotAnInput {
        /// Seq given to `--keep-inputs`.
        seq: Seq,
        /// Cast the recast forks from.
        parent: CastId,
        /// The fork point (`--at`) the input must come after.
        at: Seq,
    },
}

/// `at` as a seq number: ASCII digits only (`+7` is a name, as a waypoint may be called).
pub fn seq_number(at: &str) -> Option<u64> {
    if at.is_empty() || !at.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    at.parse().ok()
}

/// Resolves `--at` for a recast: as [`resolve_at`], and a waypoint (which may name any seq, for
/// reading) must name a decision boundary.
pub fn resolve_boundary(
    log: &(impl EventLog + ?Sized),
    cast: &CastId,
    at: &str,
) -> Result<Seq, DriveError> {
    resolve(log, cast, at, true)
}

/// Resolves `--at`: a seq, `SOCKET:VISIT` (the end of the decision that started that visit), or
/// a waypoint name. A seq must be a decision boundary.
pub fn resolve_at(
    log: &(impl EventLog + ?Sized),
    cast: &CastId,
    at: &str,
) -> Result<Seq, DriveError> {
    resolve(log, cast, at, false)
}

/// [`resolve_at`]; with `waypoint_on_boundary`, a waypoint must name a decision boundary too.
fn resolve(
    log: &(impl EventLog + ?Sized),
    cast: &CastId,
    at: &str,
    waypoint_on_boundary: bool,
) -> Result<Seq, DriveError> {
    let own = log.read(cast, Seq::FIRST, None)?;
    if own.is_empty() {
        return Err(DriveError::UnknownCast { cast: cast.clone() });
    }
    let ends = decision_ends(log, cast)?;
    if let Some(n) = seq_number(at) {
        return Ok(boundary(&ends, cast, Seq(n), own.len() as u64, None)?);
    }
    if let Some((socket, visit)) = at.split_once(':')
        && let Ok(visit) = visit.parse::<u32>()
    {
        let started = own.iter().find_map(|r| match r.event() {
            Ok(Event::SocketStarted(e))
                if e.socket.as_str() == socket && e.visit.get() == visit =>
            {
                Some(r.seq)
            }
            _ => None,
        });
        let Some(started) = started else {
            // A recast's seqs are its own: a visit of the prefix it was forked from is read on
            // the cast that made it.
            if let Ok(Event::CastForked(forked)) = own[0].event() {
                return Err(PointError::VisitOfParent {
                    cast: cast.clone(),
                    socket: socket.to_owned(),
                    visit,
                    parent: forked.parent,
                    parent_seq: forked.parent_seq,
                }
                .into());
            }
            return Err(PointError::NoVisit {
                cast: cast.clone(),
                socket: socket.to_owned(),
                visit,
            }
            .into());
        };
        return Ok(ends
            .iter()
            .copied()
            .find(|s| *s >= started)
            .ok_or_else(|| PointError::NoBoundaryAfter {
                socket: socket.to_owned(),
                visit,
            })?);
    }
    let marked = own.iter().rev().find_map(|r| match r.event() {
        Ok(Event::WaypointMarked(w)) if w.name == at => Some(w.at),
        _ => None,
    });
    let seq = marked.ok_or_else(|| PointError::Unknown {
        cast: cast.clone(),
        at: at.to_owned(),
    })?;
    if !waypoint_on_boundary {
        return Ok(seq);
    }
    Ok(boundary(&ends, cast, seq, own.len() as u64, Some(at))?)
}

/// What a recast changes.
#[derive(Debug, Clone)]
pub struct Recast {
    /// Cast whose prefix up to `at` the child starts from.
    pub parent: CastId,
    /// The fork seq (a decision boundary, see [`resolve_at`]).
    pub at: Seq,
    /// Id of the child to create; it must not exist yet.
    pub child: CastId,
    /// A new frozen loadout (from `--config`), if any.
    pub loadout: Option<Value>,
    /// Its materia's tool scopes (`decide::tool_scopes` of the resolved loadout), if any.
    pub tools: Option<std::collections::BTreeMap<castlog_core::id::MateriaName, Value>>,
    /// Parent seqs of human inputs (refinements, continue, steering) to re-apply.
    pub keep: Vec<Seq>,
    /// The child's own working directory (`--workdir`), already holding the files of the
    /// checkpoint at the fork point; absent: the parent's.
    pub workdir: Option<String>,
}

/// Forks `plan.parent` at `plan.at` into `plan.child` and returns a driver ready to drive it.
pub fn recast<'a, L: EventLog + ?Sized>(
    log: &'a L,
    clock: &'a dyn Clock,
    plan: &Recast,
    cwd: &Path,
) -> Result<Driver<'a, L>, DriveError> {
    let at = log.read(&plan.parent, plan.at, Some(plan.at))?;
    let Some(record) = at.first() else {
        return Err(PointError::NoSeq {
            cast: plan.parent.clone(),
            seq: plan.at,
        }
        .into());
    };
    let (parent_state, _) = fold_until(log, &plan.parent, plan.at)?;
    if parent_state
        .current
        .as_ref()
        .is_some_and(|c| c.phase == Phase::RunningLanes)
    {
        return Err(PointError::InsideLanes {
            cast: plan.parent.clone(),
            seq: plan.at,
        }
        .into());
    }
    let loadout_hash: Option<Digest> = plan.loadout.as_ref().map(loadout_hash);
    let forked = CastForked {
        cast: plan.child.clone(),
        parent: plan.parent.clone(),
        parent_seq: plan.at,
        parent_hash: record.hash,
        loadout_hash,
        tools: plan.tools.clone(),
        loadout: plan.loadout.clone(),
        workdir: plan.workdir.clone(),
    };
    let state = CastState::forked(&parent_state, &forked).map_err(|err| DriveError::Fold {
        cast: plan.child.clone(),
        seq: Seq::FIRST,
        cause: err.into(),
    })?;
    let env = Env::from_clock(clock, blob_hash);
    let point = ForkPoint {
        cast: plan.parent.clone(),
        seq: plan.at,
        hash: record.hash,
    };
    // Kept human inputs are checked before anything is recorded, and re-applied in order after
    // the fork, each recorded with its origin.
    let mut kept = Vec::new();
    // In the parent's order, whatever order they were named in: a continue named before the
    // refinement that preceded it would finalize first and leave the refinement unused.
    let mut keep = plan.keep.clone();
    keep.sort_unstable();
    keep.dedup();
    for seq in &keep {
        let records = log.read(&plan.parent, *seq, Some(*seq))?;
        let event = records.first().and_then(|r| r.event().ok());
        let origin = Some(format!("{}:{seq}", plan.parent));
        let input = match event {
            Some(Event::UserRefined(e)) if *seq > plan.at => Input::UserRefined {
                text: e.text,
                origin,
            },
            Some(Event::FinalizeRequested(_)) if *seq > plan.at => Input::Continue { origin },
            Some(Event::SteeringNoted(e)) if *seq > plan.at => Input::Steer {
                text: e.text,
                locked: e.locked,
                origin,
            },
            _ => {
                return Err(PointError::NotAnInput {
                    seq: *seq,
                    parent: plan.parent.clone(),
                    at: plan.at,
                }
                .into());
            }
        };
        kept.push(input);
    }
    log.fork(
        &plan.child,
        &point,
        &[Pending::new(env.now_ms, &Event::CastForked(forked))],
    )?;
    let mut driver = Driver::adopt(log, clock, state, cwd);
    for input in kept {
        match input {
            Input::Steer { .. } => driver.apply(&input)?,
            other => driver.queue(other),
        }
    }
    // A prompt in flight at the fork point is rendered again for the child (its loadout may
    // differ) and dispatched, recorded as a re-dispatch.
    if driver
        .state
        .current
        .as_ref()
        .is_some_and(|c| c.phase == Phase::AwaitingReply)
    {
        driver.apply(&Input::ForkRedispatch)?;
    }
    Ok(driver)
}
