//! Two casts side by side, from the log alone (`castlog diff`).
//!
//! Each cast's history is its full history ([`crate::history`]: a recast's ancestors' prefix,
//! then its own events) without the fork markers. The two are walked once, side by side: their
//! common prefix is the run of events that are the same once the cast id is set aside, the
//! first divergence is the pair of events after it. Steps are socket visits, aligned by
//! (socket, item, visit); for each step the rendered prompts (text diff and placements), its
//! tool calls (aligned by their place in the visit: tool, arguments, status and result), the
//! output, the edge taken after it and the `state.data` writes it made are compared. The
//! loadouts are compared by hash, then by socket and setting.
//!
//! Of each step only its key, a digest of what is compared and where its events are stay in
//! memory during the walk; steps whose digests differ are read again from the log and
//! compared in full, so a long diff holds neither cast's outputs.
//!
//! # Layout
//! - `step`: a cast's steps as its history is read, their digests, and re-reading one.
//! - `walk`: the side-by-side walk (common prefix, first divergence).
//! - [`changes`]: what differs between two aligned steps ([`Change`]).
//! - `loadout`: whether the casts ran the same loadout ([`LoadoutChange`]).

pub mod changes;
mod loadout;
mod step;
mod walk;

use std::collections::{BTreeMap, HashMap};

use castlog_core::id::CastId;
use castlog_events::{EventLog, LogError};
use serde_json::{Value, json};

pub use changes::Change;
pub use loadout::{LoadoutChange, LoadoutRef};

use crate::history::{with_histories, with_history};
use crate::prompt::{self, PromptError};
use step::{Kept, reread};

/// Why two casts could not be compared.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DiffError {
    /// Reading either cast failed (an unknown cast is [`LogError::UnknownCast`]).
    #[error(transparent)]
    Log(#[from] LogError),
    /// A prompt of a step that differs could not be rebuilt from its blobs.
    #[error(transparent)]
    Prompt(#[from] PromptError),
    /// The events of a step seen during the walk were not found when read again.
    #[error("the events of step {key} were not found when read again")]
    StepLost {
        /// The step's key.
        key: String,
    },
}

/// One event, as the timeline describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventSummary {
    /// The event's kind.
    pub kind: String,
    /// The event as the timeline describes it.
    pub summary: String,
}

/// Where two histories part: the position (1-based, fork markers not counted) of the first
/// events that differ, and each side's event there (none on a side that ended).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Divergence {
    /// The position of the first differing event: the common prefix plus one.
    pub position: u64,
    /// Cast A's event there.
    pub a: Option<EventSummary>,
    /// Cast B's event there.
    pub b: Option<EventSummary>,
}

/// How an aligned step compares.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum StepStatus {
    /// Both casts made the step, alike.
    Same,
    /// Both made it, with [`StepDiff::changes`].
    Changed,
    /// Only cast A made it.
    OnlyA,
    /// Only cast B made it.
    OnlyB,
}

impl StepStatus {
    /// The wire name (`same`, `changed`, `only_a`, `only_b`).
    pub fn as_str(self) -> &'static str {
        match self {
            StepStatus::Same => "same",
            StepStatus::Changed => "changed",
            StepStatus::OnlyA => "only_a",
            StepStatus::OnlyB => "only_b",
        }
    }
}

/// One step (socket visit) of either cast.
#[derive(Debug, Clone, PartialEq)]
pub struct StepDiff {
    /// `SOCKET ITEM #VISIT` (`-` for no item).
    pub key: String,
    /// How it compares.
    pub status: StepStatus,
    /// What differs (empty unless `Changed`).
    pub changes: Vec<Change>,
}

/// The diff of two casts: [`compare`]'s result.
#[derive(Debug, Clone, PartialEq)]
pub struct CastDiff {
    /// Cast A.
    pub a: CastId,
    /// Cast B.
    pub b: CastId,
    /// Events the two histories share from the start (fork markers not counted).
    pub common_prefix: u64,
    /// Where they part; none when the histories are the same.
    pub first_divergence: Option<Divergence>,
    /// Set when the casts ran different loadouts.
    pub loadouts: Option<LoadoutChange>,
    /// Cast A's steps in order, then those only cast B made.
    pub steps: Vec<StepDiff>,
}

/// Compares two casts of `log`.
///
/// ```
/// use castlog_core::id::CastId;
/// use castlog_events::InMemoryLog;
/// use castlog_events::LogError;
/// use castlog_projections::diff::{DiffError, compare};
///
/// // A cast the log does not have cannot be compared.
/// let log = InMemoryLog::default();
/// let err = compare(&log, &CastId::new("a"), &CastId::new("b")).unwrap_err();
/// assert!(matches!(err, DiffError::Log(LogError::UnknownCast { .. })));
/// ```
pub fn compare<L: EventLog + ?Sized>(
    log: &L,
    a: &CastId,
    b: &CastId,
) -> Result<CastDiff, DiffError> {
    // Both histories are read side by side as they are compared, never held.
    let mut walked = None;
    with_histories(log, a, b, &mut |ha, hb| walked = Some(walk::walk(ha, hb)))?;
    let Some(walk::Walked {
        common,
        first_divergence,
        a: sa,
        b: sb,
    }) = walked
    else {
        return Err(LogError::UnknownCast { cast: b.clone() }.into());
    };
    let loadouts = {
        let (mut la, mut lb) = (None, None);
        with_history(log, a, &mut |h| la = loadout::loadout_of(h))?;
        with_history(log, b, &mut |h| lb = loadout::loadout_of(h))?;
        loadout::loadout_change(la, lb)
    };
    let sides = changes::Sides {
        log,
        a: prompt::policy_of(log, a)?,
        b: prompt::policy_of(log, b)?,
    };
    // Steps by key, for lookups that stay linear on long casts.
    let by_a: HashMap<&str, &Kept> = sa.kept.iter().map(|s| (s.key.as_str(), s)).collect();
    let by_b: HashMap<&str, &Kept> = sb.kept.iter().map(|s| (s.key.as_str(), s)).collect();
    let keys = sa.kept.iter().map(|s| s.key.as_str()).chain(
        sb.kept
            .iter()
            .filter(|s| !by_a.contains_key(s.key.as_str()))
            .map(|s| s.key.as_str()),
    );
    let mut steps = Vec::new();
    for key in keys {
        let (status, changes) = match (by_a.get(key).copied(), by_b.get(key).copied()) {
            (Some(x), Some(y)) => {
                // Only steps whose digests differ are read again and compared in full.
                let changes = if x.digest == y.digest {
                    Vec::new()
                } else {
                    let x = reread(log, &sa.casts, x)?;
                    let y = reread(log, &sb.casts, y)?;
                    changes::compare(&sides, &x, &y)?
                };
                let status = if changes.is_empty() {
                    StepStatus::Same
                } else {
                    StepStatus::Changed
                };
                (status, changes)
            }
            (Some(_), None) => (StepStatus::OnlyA, Vec::new()),
            _ => (StepStatus::OnlyB, Vec::new()),
        };
        steps.push(StepDiff {
            key: key.to_owned(),
            status,
            changes,
        });
    }
    Ok(CastDiff {
        a: a.clone(),
        b: b.clone(),
        common_prefix: common,
        first_divergence,
        loadouts,
        steps,
    })
}

impl CastDiff {
    /// How many steps have each status.
    pub fn counts(&self) -> BTreeMap<StepStatus, usize> {
        let mut counts = BTreeMap::from([
            (StepStatus::Same, 0),
            (StepStatus::Changed, 0),
            (StepStatus::OnlyA, 0),
            (StepStatus::OnlyB, 0),
        ]);
        for step in &self.steps {
            *counts.entry(step.status).or_default() += 1;
        }
        counts
    }

    /// One line: the step counts and how each cast ended (`outcome_a`, `outcome_b`: the
    /// status its fold gives, e.g. `completed`).
    pub fn summary(&self, outcome_a: &str, outcome_b: &str) -> String {
        let counts = self.counts();
        let n = |s: StepStatus| counts.get(&s).copied().unwrap_or_default();
        format!(
            "{} same, {} changed, {} only in {}, {} only in {}; {} {outcome_a}, {} {outcome_b}",
            n(StepStatus::Same),
            n(StepStatus::Changed),
            n(StepStatus::OnlyA),
            self.a,
            n(StepStatus::OnlyB),
            self.b,
            self.a,
            self.b
        )
    }

    /// The `castlog diff --json` document: `common_prefix`, `first_divergence` (null or
    /// `{position, a, b}` with each side `{kind, summary}` or null), `loadouts` (null or `{a,
    /// b, sockets_changed, settings_changed}`), `steps` (`{key, status, changes}`) and
    /// `summary`.
    pub fn to_json(&self, outcome_a: &str, outcome_b: &str) -> Value {
        let event = |e: &Option<EventSummary>| {
            e.as_ref()
                .map(|e| json!({ "kind": e.kind, "summary": e.summary }))
        };
        let first_divergence = self
            .first_divergence
            .as_ref()
            .map(|d| json!({ "position": d.position, "a": event(&d.a), "b": event(&d.b) }));
        let loadouts = self.loadouts.as_ref().map_or(Value::Null, |l| {
            json!({
                "a": {"name": l.a.name, "hash": l.a.hash},
                "b": {"name": l.b.name, "hash": l.b.hash},
                "sockets_changed": l.sockets_changed,
                "settings_changed": l.settings_changed,
            })
        });
        let steps: Vec<Value> = self
            .steps
            .iter()
            .map(|s| json!({ "key": s.key, "status": s.status.as_str(), "changes": s.changes }))
            .collect();
        json!({
            "common_prefix": self.common_prefix,
            "first_divergence": first_divergence,
            "loadouts": loadouts,
            "steps": steps,
            "summary": self.summary(outcome_a, outcome_b),
        })
    }
}
