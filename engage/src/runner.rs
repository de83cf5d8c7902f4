//! The engagement runner: one engage cast per run, every step decided by the engage machine
//! ([`crate::machine`]) and recorded before the next effect.
//!
//! collect → verify → qualify (hook detector agent) → history gates (the claims ledger of the
//! same database) → rank → attempts (at most `draft_attempt_cap`): live walk (fetcher, at most
//! `live_walk_max` per attempt) → draft (drafter agent) → repaste filter → similarity re-check →
//! fidelity (the runtime asks the judge agent itself) → select → poster.
//!
//! The poster claims before it sends, exactly like a post socket: a `post_claimed` event is
//! appended (committed) first; with `--post` the destination's day is then taken on its ledger
//! chain and the sender is called once; its answer becomes `post_staged`, `post_refused` or
//! `post_outcome_unknown` (the claim stays pending, nothing retries it). Without `--post` the
//! claim is a dry run and no sender is called. What each effect answered (a stage's verdict, an
//! agent's reply read by the pipeline's rules, the fetcher's, the sender's) is a [`Step`]: the
//! machine decides its events from the state folded so far, they are appended, and the state
//! evolves by them, so `castlog verify` can decide the same steps again. Every decision is
//! appended as it happens, so the report ([`EngagementReport`], a projection) survives any
//! later error; an error is recorded in the closing `engagement_finished` whenever the log
//! still takes it.

use std::collections::BTreeSet;

use castlog_core::calendar::Zone;
use castlog_core::claims::{self, Claim};
use castlog_core::event::{Event, PostClaimed, PostOutcomeUnknown, PostRefused, PostStaged};
use castlog_core::id::{CastId, Seq};
use castlog_core::input::SendOutcome;
use castlog_events::chain::blob_hash;
use castlog_events::{EventLog, LogError, Pending};
use castlog_projections::claims::ClaimsLedger;
use castlog_projections::projection::fold;
use castlog_replay::agent::{Agent, AskError, ask};
use castlog_replay::ledger::{DEPLOYMENT, Taken, take_day_on};
use castlog_replay::sender::{Outbound, Sender};
use serde_json::{Value, json};

use crate::event::{
    CandidateId, EngagementCandidateQualified, EngagementCandidateRejected,
    EngagementDraftAttempted, EngagementDraftSelected, EngagementFidelityJudged,
    EngagementScheduleChecked, EngagementSourceChecked, EngagementStarted,
};
use crate::fetcher::Fetcher;
use crate::machine::{EngageState, Refusal, Step};
use crate::pipeline::draft::{self, Draft};
use crate::pipeline::history::{self, Probe};
use crate::pipeline::{
    Candidate, DayScope, EngageInput, QuestionType, Rejection, collect, fingerprint, live, qualify,
    rank, schedule, select, verify,
};
use crate::report::EngagementReport;

/// Why a run stopped before it could record its own end.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EngageError {
    /// Reading or appending the engage cast failed.
    #[error(transparent)]
    Log(#[from] LogError),
    /// The engage machine refused a step the runner took (a bug in the runner, never input).
    #[error("engage cast {cast}: {source}")]
    Refused {
        /// Engage cast the step was for.
        cast: CastId,
        /// The machine's reason.
        #[source]
        source: Refusal,
    },
}

/// The step name of the engagement poster's claims.
pub const POSTER_STEP: &str = "engage:poster";

/// The agents, fetcher and sender one run calls; everything else is recorded input.
pub struct Roles<'r> {
    /// Agent that finds a continuation hook in a quote (the qualify stage).
    pub qualifier: &'r mut dyn Agent,
    /// Agent that writes the follow-up question (up to the draft attempt cap).
    pub drafter: &'r mut dyn Agent,
    /// Agent asked whether a draft is faithful to its quote.
    pub judge: &'r mut dyn Agent,
    /// Fetches a candidate's source message again before drafting.
    pub fetcher: &'r mut dyn Fetcher,
    /// The sender; `None` is a dry run (no `--post`).
    pub sender: Option<&'r mut dyn Sender>,
}

impl std::fmt::Debug for Roles<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Roles")
            .field("post", &self.sender.is_some())
            .finish_non_exhaustive()
    }
}

/// Decides each step on the engage cast's state, appends the decision, and folds it in.
struct Recorder<'l, L: EventLog + ?Sized> {
    log: &'l L,
    cast: CastId,
    next: Seq,
    now_ms: u64,
    state: EngageState,
}

impl<L: EventLog + ?Sized> Recorder<'_, L> {
    fn step(&mut self, step: &Step) -> Result<(), EngageError> {
        let events = self
            .state
            .decide(step)
            .map_err(|source| EngageError::Refused {
                cast: self.cast.clone(),
                source,
            })?;
        let pending: Vec<Pending> = events.iter().map(|e| e.pending(self.now_ms)).collect();
        self.log.append(&self.cast, self.next, &pending)?;
        for event in &events {
            self.state.evolve(event);
            self.next = self.next.next();
        }
        Ok(())
    }

    fn post(&mut self, event: impl Into<Event>) -> Result<(), EngageError> {
        self.step(&Step::Post(event.into()))
    }

    fn reject(&mut self, r: &Rejection) -> Result<(), EngageError> {
        self.step(&Step::Reject(EngagementCandidateRejected {
            candidate: CandidateId::new(r.candidate.as_str()),
            stage: r.stage.clone(),
            reason: r.reason.clone(),
            detail: r.detail.clone(),
        }))
    }
}

/// Runs one engagement and returns its report (folded from what was recorded).
///
/// `now_ms` is the run's time (INPUT.json's `now`, else the clock): every event is recorded at
/// it, and the windows, the history gates and the claim day are computed from it. An error of
/// the log before the first event is returned; any later error ends the run with an
/// `engagement_finished` naming it (when the log still takes one) and the report is returned.
///
/// With `schedule` (a seed), the run first checks its day's slot ([`schedule::check`]): outside
/// it, or after an engagement post that day, it records the check and ends as a named skip
/// without asking any agent.
pub fn engage(
    log: &(impl EventLog + ?Sized),
    cast: &CastId,
    input: &EngageInput,
    roles: Roles<'_>,
    now_ms: u64,
    specs: Value,
    schedule: Option<&str>,
) -> Result<EngagementReport, EngageError> {
    let mut rec = Recorder {
        log,
        cast: cast.clone(),
        next: Seq::FIRST,
        now_ms,
        state: EngageState::new(),
    };
    rec.step(&Step::Start(EngagementStarted {
        conversation: input.conversation.clone(),
        settings: serde_json::to_value(&input.settings).unwrap_or(Value::Null),
        results: u32::try_from(input.results.len()).unwrap_or(u32::MAX),
        post: roles.sender.is_some(),
        specs,
    }))?;
    if let Err(e) = pipeline(&mut rec, input, roles, schedule) {
        // The log failed mid-run: record that if it still takes an event.
        let _ = rec.step(&Step::Finish {
            error: Some(e.to_string()),
        });
    }
    Ok(report(log, cast)?)
}

/// The report of an engage cast.
pub fn report(log: &(impl EventLog + ?Sized), cast: &CastId) -> Result<EngagementReport, LogError> {
    let records = log.read(cast, Seq::FIRST, None)?;
    Ok(fold(&records))
}

/// Records a rejection and keeps it for the skip summary.
fn note<L: EventLog + ?Sized>(
    rec: &mut Recorder<'_, L>,
    r: Rejection,
    all: &mut Vec<Rejection>,
) -> Result<(), EngageError> {
    let out = rec.reject(&r);
    all.push(r);
    out
}

/// A scheduled run's check of its day's slot, recorded; a run that may not go ahead ends as a
/// named skip (stage `schedule`). Returns whether the run goes ahead.
fn on_schedule<L: EventLog + ?Sized>(
    rec: &mut Recorder<'_, L>,
    seed: &str,
) -> Result<bool, EngageError> {
    let now = i64::try_from(rec.now_ms).unwrap_or(i64::MAX);
    let plan = schedule::plan_day(schedule::ZONE.date(now), seed, blob_hash);
    // A post that went out (or may have) that New York day, from any engage run.
    let already_posted = ClaimsLedger::load(rec.log)?.claims().any(|c| {
        c.step == POSTER_STEP
            && c.holds_day()
            && schedule::ZONE.date(i64::try_from(c.claimed_ms).unwrap_or(i64::MAX)) == plan.day
    });
    let verdict = schedule::check(&plan, now, already_posted);
    let (reason, detail) = match &verdict {
        Ok(()) => (String::new(), String::new()),
        Err(skip) => (skip.reason().to_owned(), skip.sentence(&plan, now)),
    };
    // A check that fails also ends the run: the machine decides that skip.
    rec.step(&Step::Schedule(EngagementScheduleChecked {
        key: plan.key(),
        slot: plan.slot(),
        slot_ms: plan.at_ms,
        already_posted,
        ok: verdict.is_ok(),
        reason,
        detail,
    }))?;
    Ok(verdict.is_ok())
}

/// Everything after `engagement_started`.
fn pipeline<L: EventLog + ?Sized>(
    rec: &mut Recorder<'_, L>,
    input: &EngageInput,
    roles: Roles<'_>,
    schedule: Option<&str>,
) -> Result<(), EngageError> {
    if let Some(seed) = schedule
        && !on_schedule(rec, seed)?
    {
        return Ok(());
    }
    let Roles {
        qualifier,
        drafter,
        judge,
        fetcher,
        sender,
    } = roles;
    let settings = &input.settings;
    let zone = Zone::parse(&settings.zone).unwrap_or_default();
    let now = i64::try_from(rec.now_ms).unwrap_or(i64::MAX);
    let mut rejections: Vec<Rejection> = Vec::new();

    // Collect every row, sweep contradictions over all of them, then de-duplicate and verify.
    let (rows, dropped) = collect::collect(&input.results, &input.allowlist, &input.senders);
    for r in dropped {
        note(rec, r, &mut rejections)?;
    }
    let (rows, contradicted) = verify::contradiction_sweep(rows, &input.sources);
    let (rows, duplicates) = collect::dedupe(rows);
    for r in contradicted.into_iter().chain(duplicates) {
        note(rec, r, &mut rejections)?;
    }
    for c in &rows {
        rec.step(&Step::See {
            candidate: CandidateId::new(c.turn_id.as_str()),
            source: serde_json::to_value(c).unwrap_or(Value::Null),
        })?;
    }
    let (verified, mismatched) = verify::verify(rows, &input.sources);
    for r in mismatched {
        note(rec, r, &mut rejections)?;
    }

    // Qualify: the timed window, else a hook (the detector is asked once per candidate).
    let mut qualified = Vec::new();
    for mut c in verified {
        if qualify::timed_eligibility(c.sent_ms, now, settings).is_ok() {
            c.question_type = Some(QuestionType::Timed);
        } else {
            let reply = ask(&mut *qualifier, qualify::detector_prompt(&c));
            match qualify::read_hook(reply.as_deref().map_err(AskError::message), &c.text) {
                Ok(hook) => {
                    c.question_type = Some(QuestionType::Personal);
                    c.hook_kind = hook.kind;
                    c.hook_evidence = hook.evidence;
                }
                Err((reason, detail)) => {
                    note(
                        rec,
                        Rejection::new(c.turn_id.clone(), "continuation", reason, detail),
                        &mut rejections,
                    )?;
                    continue;
                }
            }
        }
        let later = input
            .later_texts
            .get(&c.turn_id)
            .map_or(&[][..], Vec::as_slice);
        let terms = input
            .subject_terms
            .get(&c.turn_id)
            .map_or(&[][..], Vec::as_slice);
        let thread = qualify::assess_thread(later, terms, now, settings);
        if thread.blocks {
            let reason = if thread.reason.is_empty() {
                "blocked"
            } else {
                thread.reason
            };
            note(
                rec,
                Rejection::new(
                    c.turn_id.clone(),
                    "resolution",
                    reason,
                    thread.resolving_text,
                ),
                &mut rejections,
            )?;
            continue;
        }
        c.stance = thread.stance.to_owned();
        rec.step(&Step::Qualify(EngagementCandidateQualified {
            candidate: CandidateId::new(c.turn_id.as_str()),
            question_type: c.question_type.map_or("", |t| t.as_str()).to_owned(),
            hook_kind: c.hook_kind.clone(),
            hook_evidence: c.hook_evidence.clone(),
            stance: c.stance.clone(),
        }))?;
        qualified.push(c);
    }

    // History gates over the ledger, before ranking.
    let ledger = ClaimsLedger::load(rec.log)?;
    let past: Vec<Claim> = ledger.claims().cloned().collect();
    let mut pool = Vec::new();
    for c in qualified {
        let destination = history::post_target(&input.allowlist, &c);
        let ids = [c.source_message_id.clone()];
        let probe = Probe {
            actor_id: &c.actor_id,
            source_message_ids: &ids,
            fingerprint: 0,
            destination: &destination,
            apply_channel_cap: !destination.is_empty() && destination == c.channel_id,
        };
        if let Some((reason, detail)) = history::check(&past, &probe, now, zone, settings) {
            note(
                rec,
                Rejection::new(c.turn_id.clone(), "history", reason, detail),
                &mut rejections,
            )?;
            continue;
        }
        pool.push(c);
    }
    let ranked = rank::rank(pool);
    // The machine scores the pool again from the candidates it saw, to the same order.
    rec.step(&Step::Rank {
        pool: ranked
            .iter()
            .map(|(c, _)| CandidateId::new(c.turn_id.as_str()))
            .collect(),
    })?;

    // Attempts: live walk, draft, filters, fidelity, selection.
    let mut remaining: Vec<Candidate> = ranked.into_iter().map(|(c, _)| c).collect();
    let mut attempts = 0u32;
    let mut fetched: BTreeSet<String> = BTreeSet::new();
    let mut chosen: Option<(Candidate, Draft)> = None;
    while !remaining.is_empty() && attempts < settings.draft_attempt_cap {
        let attempt = attempts + 1;
        let mut pick = None;
        for (i, c) in remaining
            .iter()
            .enumerate()
            .take(settings.live_walk_max as usize)
        {
            if !fetched.insert(c.source_message_id.clone()) {
                continue;
            }
            let got = fetcher.fetch(&c.channel_id, &c.source_message_id);
            let check = live::check(c, &got);
            rec.step(&Step::CheckSource(EngagementSourceChecked {
                candidate: CandidateId::new(c.turn_id.as_str()),
                attempt,
                ok: check.ok,
                reason: check.reason.clone(),
                detail: check.detail.clone(),
                content_matched: check.content_matched,
            }))?;
            if check.ok {
                pick = Some(i);
                break;
            }
            note(
                rec,
                Rejection::new(
                    c.turn_id.clone(),
                    "live_source",
                    &check.reason,
                    check.detail,
                ),
                &mut rejections,
            )?;
            if live::stops_walk(&check.reason) {
                break;
            }
        }
        let Some(i) = pick else {
            break;
        };
        let candidate = remaining[i].clone();
        remaining = remaining.split_off(i + 1);
        attempts = attempt;
        let id = CandidateId::new(candidate.turn_id.as_str());
        let label = input
            .allowlist
            .labels
            .get(&candidate.channel_id)
            .cloned()
            .unwrap_or_default();
        let draft = match draft::precheck(&candidate) {
            Some(reason) => Draft {
                reason: reason.into(),
                ..Draft::default()
            },
            None => {
                let reply = ask(&mut *drafter, draft::drafter_prompt(&candidate, &label));
                draft::read_draft(reply.as_deref().map_err(AskError::message))
            }
        };
        let attempted = |outcome: &str| {
            Step::Attempt(EngagementDraftAttempted {
                candidate: id.clone(),
                attempt,
                draft: (!draft.text.is_empty()).then(|| draft.text.clone()),
                outcome: outcome.to_owned(),
            })
        };
        if draft::asks_for_a_repaste(&draft.text) {
            let excerpt: String = draft.text.chars().take(120).collect();
            note(
                rec,
                Rejection::new(
                    candidate.turn_id.clone(),
                    "draft",
                    "asks_for_a_repaste",
                    excerpt,
                ),
                &mut rejections,
            )?;
            rec.step(&attempted("asks_for_a_repaste"))?;
            continue;
        }
        if draft.usable() {
            let destination = history::post_target(&input.allowlist, &candidate);
            let probe = Probe {
                actor_id: &candidate.actor_id,
                source_message_ids: &[],
                fingerprint: fingerprint::fingerprint(&draft.text),
                destination: &destination,
                apply_channel_cap: false,
            };
            if let Some((reason, detail)) = history::check(&past, &probe, now, zone, settings) {
                note(
                    rec,
                    Rejection::new(candidate.turn_id.clone(), "history", reason, detail),
                    &mut rejections,
                )?;
                rec.step(&attempted(reason))?;
                continue;
            }
        }
        // The runtime asks the judge itself, about this quote and the very text that would be
        // sent (the rendered body when the drafter gave one, which may say more than the
        // question).
        let (faithful, verdict) = if draft.usable() {
            let reply = ask(
                &mut *judge,
                draft::judge_prompt(&candidate.text, draft.sent_text()),
            );
            let (faithful, reason) =
                draft::read_verdict(reply.as_deref().map_err(AskError::message));
            rec.step(&Step::Judge(EngagementFidelityJudged {
                candidate: id.clone(),
                attempt,
                faithful,
                reason: reason.clone(),
            }))?;
            (faithful, reason)
        } else {
            (false, String::new())
        };
        match select::accept(&candidate, &draft, faithful, &verdict) {
            Ok(_) => {
                rec.step(&attempted("accepted"))?;
                rec.step(&Step::Select(EngagementDraftSelected {
                    candidate: id.clone(),
                    attempt,
                    draft: draft.text.clone(),
                }))?;
                chosen = Some((candidate, draft));
                break;
            }
            Err((reason, detail)) => {
                note(
                    rec,
                    Rejection::new(candidate.turn_id.clone(), "draft", reason, detail),
                    &mut rejections,
                )?;
                rec.step(&attempted(reason))?;
            }
        }
    }

    // The machine works out the run's end (its outcome, a skip's dominant rejection, what
    // the claim and the send came to) from what was recorded.
    if let Some((candidate, draft)) = chosen {
        post(rec, input, &ledger, &candidate, &draft, zone, sender)?;
    }
    rec.step(&Step::Finish { error: None })
}

/// The poster: checks, claims, and (with a sender) takes the day and sends once.
fn post<L: EventLog + ?Sized>(
    rec: &mut Recorder<'_, L>,
    input: &EngageInput,
    ledger: &ClaimsLedger,
    candidate: &Candidate,
    draft: &Draft,
    zone: Zone,
    sender: Option<&mut dyn Sender>,
) -> Result<(), EngageError> {
    let dry_run = sender.is_none();
    let destination = history::post_target(&input.allowlist, candidate);
    let day = zone.day(rec.now_ms);
    let attempt = 1;
    let claim = claims::claim_id(blob_hash, &rec.cast, POSTER_STEP, &destination, attempt);
    let refuse_early = |reason: String, held_by| PostRefused {
        claim: claim.clone(),
        reason,
        held_by,
        destination: Some(destination.clone()),
        day: Some(day.clone()),
        step: Some(POSTER_STEP.into()),
        attempt: Some(attempt),
        dry_run,
    };
    if destination.is_empty() {
        let reason =
            "no_destination: the allowlist names no single permitted post channel".to_owned();
        return rec.post(refuse_early(reason, None));
    }
    // The day rule against the ledger; the ledger chain settles races below. One day for
    // the whole deployment unless the settings scope it per destination.
    let per_destination = input.settings.day_scope == DayScope::Destination;
    let fresh = ClaimsLedger::load(rec.log)?;
    let holder = if per_destination {
        fresh
            .day_holder(&destination, &day, None)
            .or_else(|| ledger.day_holder(&destination, &day, None))
    } else {
        claims::step_day_holder(fresh.claims(), POSTER_STEP, &day, None)
            .or_else(|| claims::step_day_holder(ledger.claims(), POSTER_STEP, &day, None))
    };
    let taken_reason = |holder: &castlog_core::id::ClaimId| {
        if per_destination {
            claims::day_taken_reason(holder, &destination, &day)
        } else {
            claims::deployment_day_taken_reason(holder, &day)
        }
    };
    if let Some(holder) = holder {
        let reason = taken_reason(&holder.claim);
        return rec.post(refuse_early(reason, Some(holder.claim.clone())));
    }
    let day_ledger = if per_destination {
        destination.as_str()
    } else {
        DEPLOYMENT
    };
    let content = draft.sent_text().to_owned();
    let body = rec.log.put_blob(content.as_bytes())?;
    let claimed = PostClaimed {
        claim: claim.clone(),
        destination: destination.clone(),
        day: day.clone(),
        attempt,
        body,
        step: POSTER_STEP.into(),
        dry_run,
        tagged_actor: Some(candidate.actor_id.clone()).filter(|a| !a.is_empty()),
        source_message_ids: vec![candidate.source_message_id.clone()],
        fingerprint: Some(fingerprint::fingerprint(&draft.text)),
    };
    rec.post(claimed.clone())?;
    let Some(sender) = sender else {
        return Ok(());
    };
    // The claim is durable. Take the day, then send once; nothing after this loses the report.
    let mine = Claim::claimed(&rec.cast, rec.now_ms, &claimed);
    let mut extra = history::reply_fields(candidate, &destination, &input.settings);
    extra["question"] = json!(draft.text);
    let outcome = match take_day_on(rec.log, day_ledger, &mine, rec.now_ms) {
        Ok(Taken::Won) => sender.send(&Outbound {
            claim: &claim,
            cast: &rec.cast,
            destination: &destination,
            body: &content,
            extra: &extra,
        }),
        Ok(Taken::Held { holder }) => SendOutcome::Refused {
            reason: taken_reason(&holder),
        },
        Err(e) => SendOutcome::Refused {
            reason: format!("day_not_taken: cannot take {day} on {destination}: {e}"),
        },
    };
    match outcome {
        SendOutcome::Staged { message_id } => rec.post(PostStaged { claim, message_id }),
        SendOutcome::Refused { reason } => rec.post(PostRefused::of_claim(claim, reason)),
        SendOutcome::Unknown { reason } => rec.post(PostOutcomeUnknown { claim, reason }),
    }
}
