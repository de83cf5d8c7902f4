//! The engage cast's machine: [`EngageState`] is folded from an engage cast's events
//! ([`EngageState::evolve`]), and [`EngageState::decide`] turns one [`Step`] (what the runner
//! found out: a stage's verdict, an agent's or the fetcher's answer, the sender's outcome) into
//! the events to record, or refuses a step the run's rules do not allow at that point.
//!
//! Like a cast's, an engage cast's inputs are not stored apart: each is read back from the
//! first event of the decision it made ([`input_of`], kept beside `decide` so that an input and
//! its first event change together). `castlog verify` re-decides an engage cast with them
//! (`crate::redecide`): every decision must produce the recorded events byte for byte. What
//! the machine works out itself, and so what a re-decision checks beyond the order of the
//! run: the ranking (scored again from the candidates' records), the end of a run (its outcome from the selected candidate's qualification, `refused`
//! from the claim and the send, a skip's dominant stage and sentence from every rejection
//! recorded), the skip that ends a run outside its schedule, and that a draft is accepted only
//! after a faithful verdict, selected only once accepted, and claimed only once selected.

use std::collections::{BTreeMap, BTreeSet};

use castlog_core::event::{Event, PostClaimed};
use serde_json::Value;

use crate::event::{
    CandidateId, EngageEvent, EngageRecord, EngagementCandidateQualified,
    EngagementCandidateRejected, EngagementDraftAttempted, EngagementDraftSelected,
    EngagementFidelityJudged, EngagementFinished, EngagementRanked, EngagementScheduleChecked,
    EngagementSourceChecked, EngagementStarted, RankedCandidate,
};
use crate::pipeline::{Candidate, Rejection, rank, select};

/// One thing the runner found out, to be decided on.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// Begin the run.
    Start(EngagementStarted),
    /// A scheduled run's check of its day's slot (a failed check also ends the run).
    Schedule(EngagementScheduleChecked),
    /// A stage dropped a candidate.
    Reject(EngagementCandidateRejected),
    /// A candidate entered the pipeline (its source record as the collect stage read it).
    See {
        /// Candidate (turn id) as the collect stage names it.
        candidate: CandidateId,
        /// The input's record for it, as the collect stage read it.
        source: Value,
    },
    /// A candidate passed qualification.
    Qualify(EngagementCandidateQualified),
    /// Rank the pool left after the history gates (the machine scores it).
    Rank {
        /// Candidates left after the history gates, to be scored and ordered.
        pool: Vec<CandidateId>,
    },
    /// The fetcher's answer for a ranked candidate, checked.
    CheckSource(EngagementSourceChecked),
    /// The judge's verdict on a draft.
    Judge(EngagementFidelityJudged),
    /// A draft attempt ended.
    Attempt(EngagementDraftAttempted),
    /// The accepted draft is chosen.
    Select(EngagementDraftSelected),
    /// A posting event of the poster (a claim, a refusal, the sender's outcome).
    Post(Event),
    /// End the run; `error` when something outside the machine stopped it early.
    Finish {
        /// What stopped the run, as a sentence.
        error: Option<String>,
    },
}

/// Why the machine refuses a step.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Refusal {
    /// The step does not fit where the run is.
    #[error("{step} is not allowed here: {why}")]
    OutOfOrder {
        /// The step's event kind.
        step: &'static str,
        /// What the run's rules say.
        why: String,
    },
}

fn refuse<T>(step: &'static str, why: impl Into<String>) -> Result<T, Refusal> {
    Err(Refusal::OutOfOrder {
        step,
        why: why.into(),
    })
}

/// How the poster's send ended.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Sent {
    Staged,
    Refused(String),
    Unknown,
}

/// The state of one engage cast, folded from its events.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EngageState {
    /// `engagement_started` was recorded.
    pub started: bool,
    /// The run may post (`--post`).
    pub post: bool,
    /// `engagement_finished` was recorded.
    pub finished: bool,
    seen: BTreeMap<String, Option<Candidate>>,
    qualified: BTreeMap<String, String>,
    ranked: BTreeSet<String>,
    rejections: Vec<Rejection>,
    attempts: u32,
    verdicts: BTreeMap<(String, u32), bool>,
    accepted: BTreeMap<(String, u32), Option<String>>,
    selected: Option<String>,
    claim: Option<PostClaimed>,
    sent: Option<Sent>,
}

impl EngageState {
    /// The state of an engage cast that has recorded nothing yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Applies one recorded event.
    pub fn evolve(&mut self, record: &EngageRecord) {
        match record {
            EngageRecord::Engage(event) => self.evolve_engage(event),
            EngageRecord::Post(Event::PostClaimed(e)) => self.claim = Some(e.clone()),
            EngageRecord::Post(Event::PostStaged(_)) => self.sent = Some(Sent::Staged),
            EngageRecord::Post(Event::PostRefused(e)) => {
                self.sent = Some(Sent::Refused(e.reason.clone()));
            }
            EngageRecord::Post(Event::PostOutcomeUnknown(_)) => self.sent = Some(Sent::Unknown),
            EngageRecord::Post(_) => {}
        }
    }

    fn evolve_engage(&mut self, event: &EngageEvent) {
        match event {
            EngageEvent::Started(e) => {
                self.started = true;
                self.post = e.post;
            }
            EngageEvent::CandidateSeen(e) => {
                let candidate = serde_json::from_value::<Candidate>(e.source.clone()).ok();
                self.seen.insert(e.candidate.to_string(), candidate);
            }
            EngageEvent::CandidateRejected(e) => self.rejections.push(Rejection::new(
                e.candidate.as_str(),
                &e.stage,
                &e.reason,
                e.detail.clone(),
            )),
            EngageEvent::CandidateQualified(e) => {
                self.qualified
                    .insert(e.candidate.to_string(), e.question_type.clone());
            }
            EngageEvent::Ranked(e) => {
                self.ranked = e.order.iter().map(|r| r.candidate.to_string()).collect();
            }
            EngageEvent::FidelityJudged(e) => {
                self.verdicts
                    .insert((e.candidate.to_string(), e.attempt), e.faithful);
            }
            EngageEvent::DraftAttempted(e) => {
                self.attempts = self.attempts.max(e.attempt);
                if e.outcome == "accepted" {
                    self.accepted
                        .insert((e.candidate.to_string(), e.attempt), e.draft.clone());
                }
            }
            EngageEvent::DraftSelected(e) => self.selected = Some(e.candidate.to_string()),
            EngageEvent::Finished(_) => self.finished = true,
            EngageEvent::SourceChecked(_) | EngageEvent::ScheduleChecked(_) => {}
        }
    }

    /// The events `step` records, or why the run's rules refuse it here.
    pub fn decide(&self, step: &Step) -> Result<Vec<EngageRecord>, Refusal> {
        let kind = kind_of(step);
        if let Step::Post(e @ (Event::PostResolved(_) | Event::PostResponseRecorded(_))) = step {
            return self.decide_resolution(kind, e);
        }
        if self.finished {
            return refuse(kind, "the run has ended");
        }
        if !self.started && !matches!(step, Step::Start(_)) {
            return refuse(kind, "the run has not started");
        }
        let one = |event: EngageRecord| Ok(vec![event]);
        match step {
            Step::Start(e) if !self.started => one(e.clone().into()),
            Step::Start(_) => refuse(kind, "the run has already started"),
            Step::Schedule(e) => {
                let mut events = vec![e.clone().into()];
                if !e.ok {
                    events.push(
                        EngagementFinished {
                            outcome: "skip".into(),
                            refused: e.reason.clone(),
                            skip_stage: "schedule".into(),
                            skip_reason: e.detail.clone(),
                            error: String::new(),
                        }
                        .into(),
                    );
                }
                Ok(events)
            }
            Step::Reject(e) => one(e.clone().into()),
            Step::See { candidate, source } => one(crate::event::EngagementCandidateSeen {
                candidate: candidate.clone(),
                source: source.clone(),
            }
            .into()),
            Step::Qualify(e) => {
                if !self.seen.contains_key(e.candidate.as_str()) {
                    return refuse(kind, format!("candidate {} was never seen", e.candidate));
                }
                if !matches!(e.question_type.as_str(), "timed" | "personal") {
                    return refuse(
                        kind,
                        format!("{:?} is not a question type", e.question_type),
                    );
                }
                one(e.clone().into())
            }
            Step::Rank { pool } => {
                let mut candidates = Vec::with_capacity(pool.len());
                for id in pool {
                    if !self.qualified.contains_key(id.as_str()) {
                        return refuse(kind, format!("candidate {id} is not qualified"));
                    }
                    match self.seen.get(id.as_str()) {
                        Some(Some(candidate)) => candidates.push(candidate.clone()),
                        _ => return refuse(kind, format!("candidate {id} has no readable record")),
                    }
                }
                let order = rank::rank(candidates)
                    .into_iter()
                    .map(|(c, score)| RankedCandidate {
                        candidate: CandidateId::new(c.turn_id),
                        score,
                    })
                    .collect();
                one(EngagementRanked { order }.into())
            }
            Step::CheckSource(e) => {
                if !self.ranked.contains(e.candidate.as_str()) {
                    return refuse(kind, format!("candidate {} is not ranked", e.candidate));
                }
                one(e.clone().into())
            }
            Step::Judge(e) => one(e.clone().into()),
            Step::Attempt(e) => {
                if e.outcome == "accepted"
                    && self.verdicts.get(&(e.candidate.to_string(), e.attempt)) != Some(&true)
                {
                    return refuse(
                        kind,
                        format!(
                            "draft {} of candidate {} was not judged faithful",
                            e.attempt, e.candidate
                        ),
                    );
                }
                one(e.clone().into())
            }
            Step::Select(e) => {
                match self.accepted.get(&(e.candidate.to_string(), e.attempt)) {
                    Some(draft) if draft.as_deref() == Some(e.draft.as_str()) => {}
                    Some(_) => return refuse(kind, "the draft is not the accepted one"),
                    None => {
                        return refuse(
                            kind,
                            format!(
                                "draft {} of candidate {} was not accepted",
                                e.attempt, e.candidate
                            ),
                        );
                    }
                }
                if self.selected.is_some() {
                    return refuse(kind, "a draft is already selected");
                }
                one(e.clone().into())
            }
            Step::Post(event) => self.decide_post(kind, event),
            Step::Finish { error } => Ok(vec![self.finish(error.as_deref()).into()]),
        }
    }

    fn decide_post(&self, kind: &'static str, event: &Event) -> Result<Vec<EngageRecord>, Refusal> {
        if self.selected.is_none() {
            return refuse(kind, "no draft is selected");
        }
        if self.sent.is_some() {
            return refuse(kind, "the post has already ended");
        }
        match (event, &self.claim) {
            (Event::PostClaimed(e), None) => {
                if e.dry_run == self.post {
                    return refuse(
                        kind,
                        "a claim is a dry run exactly when the run may not post",
                    );
                }
            }
            (Event::PostClaimed(_), Some(_)) => return refuse(kind, "the post is claimed"),
            // A refusal before the claim (no destination, the day taken) or by the sender.
            (Event::PostRefused(_), _) => {}
            (Event::PostStaged(_) | Event::PostOutcomeUnknown(_), Some(claim))
                if !claim.dry_run => {}
            (Event::PostStaged(_) | Event::PostOutcomeUnknown(_), _) => {
                return refuse(kind, "nothing was sent: there is no claim that may send");
            }
            _ => return refuse(kind, "not an event of the poster"),
        }
        Ok(vec![event.clone().into()])
    }

    /// A person's record about the run's claim (`castlog claims resolve`), at any time after
    /// the claim; the claims ledger checks the transition before it is recorded.
    fn decide_resolution(
        &self,
        kind: &'static str,
        event: &Event,
    ) -> Result<Vec<EngageRecord>, Refusal> {
        let claim = match event {
            Event::PostResolved(e) => &e.claim,
            Event::PostResponseRecorded(e) => &e.claim,
            _ => return refuse(kind, "not a record about a claim"),
        };
        match &self.claim {
            Some(own) if own.claim == *claim => Ok(vec![event.clone().into()]),
            _ => refuse(kind, format!("claim {claim} is not this run's")),
        }
    }

    /// The end of the run, worked out from what it recorded.
    fn finish(&self, error: Option<&str>) -> EngagementFinished {
        if let Some(error) = error {
            return EngagementFinished {
                outcome: "skip".into(),
                refused: "error".into(),
                skip_stage: String::new(),
                skip_reason: String::new(),
                error: error.to_owned(),
            };
        }
        let Some(selected) = &self.selected else {
            let (stage, sentence) = select::skip_summary(&self.rejections);
            return EngagementFinished {
                outcome: "skip".into(),
                refused: if self.attempts > 0 {
                    "every_draft_rejected"
                } else {
                    "no_verified_candidate"
                }
                .into(),
                skip_stage: stage,
                skip_reason: sentence,
                error: String::new(),
            };
        };
        let refused = match (&self.sent, &self.claim) {
            (Some(Sent::Refused(reason)), _) => reason.clone(),
            (Some(Sent::Unknown), _) => "send_outcome_unknown".into(),
            (Some(Sent::Staged), _) => String::new(),
            (None, Some(claim)) if claim.dry_run => "dry_run".into(),
            // Claimed and not sent, or never claimed: stopped before the sender answered.
            (None, _) => "error".into(),
        };
        EngagementFinished {
            outcome: self.qualified.get(selected).cloned().unwrap_or_default(),
            refused,
            skip_stage: String::new(),
            skip_reason: String::new(),
            error: String::new(),
        }
    }
}

fn kind_of(step: &Step) -> &'static str {
    match step {
        Step::Start(_) => "engagement_started",
        Step::Schedule(_) => "engagement_schedule_checked",
        Step::Reject(_) => "engagement_candidate_rejected",
        Step::See { .. } => "engagement_candidate_seen",
        Step::Qualify(_) => "engagement_candidate_qualified",
        Step::Rank { .. } => "engagement_ranked",
        Step::CheckSource(_) => "engagement_source_checked",
        Step::Judge(_) => "engagement_fidelity_judged",
        Step::Attempt(_) => "engagement_draft_attempted",
        Step::Select(_) => "engagement_draft_selected",
        Step::Post(e) => e.kind(),
        Step::Finish { .. } => "engagement_finished",
    }
}

/// The input whose decision begins with `first`: the inverse of [`EngageState::decide`] on a
/// decision's first event. `None` for an event no decision of an engage cast begins with.
pub fn input_of(first: &EngageRecord) -> Option<Step> {
    Some(match first {
        EngageRecord::Engage(event) => match event {
            EngageEvent::Started(e) => Step::Start(e.clone()),
            EngageEvent::ScheduleChecked(e) => Step::Schedule(e.clone()),
            EngageEvent::CandidateRejected(e) => Step::Reject(e.clone()),
            EngageEvent::CandidateSeen(e) => Step::See {
                candidate: e.candidate.clone(),
                source: e.source.clone(),
            },
            EngageEvent::CandidateQualified(e) => Step::Qualify(e.clone()),
            EngageEvent::Ranked(e) => Step::Rank {
                pool: e.order.iter().map(|r| r.candidate.clone()).collect(),
            },
            EngageEvent::SourceChecked(e) => Step::CheckSource(e.clone()),
            EngageEvent::FidelityJudged(e) => Step::Judge(e.clone()),
            EngageEvent::DraftAttempted(e) => Step::Attempt(e.clone()),
            EngageEvent::DraftSelected(e) => Step::Select(e.clone()),
            EngageEvent::Finished(e) => Step::Finish {
                error: (!e.error.is_empty()).then(|| e.error.clone()),
            },
        },
        EngageRecord::Post(
            e @ (Event::PostClaimed(_)
            | Event::PostRefused(_)
            | Event::PostStaged(_)
            | Event::PostOutcomeUnknown(_)
            | Event::PostResolved(_)
            | Event::PostResponseRecorded(_)),
        ) => Step::Post(e.clone()),
        EngageRecord::Post(_) => return None,
    })
}

#[cfg(test)]
mod tests;
