//! The engagement runner's effects: one engage cast per run, every step an event.
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
//! claim is a dry run and no sender is called. Every event is appended as it happens, so the
//! report ([`EngagementReport`], a projection) survives any later error; an error is recorded
//! in the closing `engagement_finished` whenever the log still takes it.

use std::collections::BTreeSet;

use castlog_core::calendar::Zone;
use castlog_core::claims::{self, Claim};
use castlog_core::engage::draft::{self, Draft};
use castlog_core::engage::history::{self, Probe};
use castlog_core::engage::live::{self};
use castlog_core::engage::qualify::{self};
use castlog_core::engage::{
    Candidate, EngageInput, QuestionType, Rejection, collect, fingerprint, rank, schedule, select,
    verify,
};
use castlog_core::event::{
    EngagementCandidateQualified, EngagementCandidateRejected, EngagementCandidateSeen,
    EngagementDraftAttempted, EngagementDraftSelected, EngagementFidelityJudged,
    EngagementFinished, EngagementRanked, EngagementScheduleChecked, EngagementSourceChecked,
    EngagementStarted, Event, PostClaimed, PostOutcomeUnknown, PostRefused, PostStaged,
    RankedCandidate,
};
use castlog_core::id::{CandidateId, CastId, Seq};
use castlog_core::input::SendOutcome;
use castlog_events::chain::blob_hash;
use castlog_events::{EventLog, LogError, Pending};
use castlog_projections::claims::ClaimsLedger;
use castlog_projections::engagement::EngagementReport;
use castlog_projections::projection::fold;
use serde_json::{Value, json};

use crate::agent::{Agent, ask};
use crate::fetcher::Fetcher;
use crate::ledger::{Taken, take_day};
use crate::sender::{Outbound, Sender};

/// The step name of the engagement poster's claims.
pub const POSTER_STEP: &str = "engage:poster";

/// The outside world of one run.
pub struct Roles<'r> {
    /// The hook detector.
    pub qualifier: &'r mut dyn Agent,
    /// The drafter.
    pub drafter: &'r mut dyn Agent,
    /// The fidelity judge.
    pub judge: &'r mut dyn Agent,
    /// The live source fetcher.
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

/// Appends one event at a time to the engage cast.
struct Recorder<'l, L: EventLog + ?Sized> {
    log: &'l L,
    cast: CastId,
    next: Seq,
    now_ms: u64,
}

impl<L: EventLog + ?Sized> Recorder<'_, L> {
    fn record(&mut self, event: impl Into<Event>) -> Result<(), LogError> {
        let event = event.into();
        self.log
            .append(&self.cast, self.next, &[Pending::new(self.now_ms, &event)])?;
        self.next = self.next.next();
        Ok(())
    }

    fn reject(&mut self, r: &Rejection) -> Result<(), LogError> {
        self.record(EngagementCandidateRejected {
            candidate: CandidateId::new(r.candidate.as_str()),
            stage: r.stage.clone(),
            reason: r.reason.clone(),
            detail: r.detail.clone(),
        })
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
) -> Result<EngagementReport, LogError> {
    let mut rec = Recorder {
        log,
        cast: cast.clone(),
        next: Seq::FIRST,
        now_ms,
    };
    rec.record(EngagementStarted {
        conversation: input.conversation.clone(),
        settings: serde_json::to_value(&input.settings).unwrap_or(Value::Null),
        results: u32::try_from(input.results.len()).unwrap_or(u32::MAX),
        post: roles.sender.is_some(),
        specs,
    })?;
    if let Err(e) = pipeline(&mut rec, input, roles, schedule) {
        // The log failed mid-run: record that if it still takes an event.
        let _ = rec.record(EngagementFinished {
            outcome: "skip".into(),
            refused: "error".into(),
            skip_stage: String::new(),
            skip_reason: String::new(),
            error: e.to_string(),
        });
    }
    report(log, cast)
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
) -> Result<(), LogError> {
    let out = rec.reject(&r);
    all.push(r);
    out
}

/// A scheduled run's check of its day's slot, recorded; a run that may not go ahead ends as a
/// named skip (stage `schedule`). Returns whether the run goes ahead.
fn on_schedule<L: EventLog + ?Sized>(
    rec: &mut Recorder<'_, L>,
    seed: &str,
) -> Result<bool, LogError> {
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
    rec.record(EngagementScheduleChecked {
        key: plan.key(),
        slot: plan.slot(),
        slot_ms: plan.at_ms,
        already_posted,
        ok: verdict.is_ok(),
        reason: reason.clone(),
        detail: detail.clone(),
    })?;
    if verdict.is_ok() {
        return Ok(true);
    }
    rec.record(EngagementFinished {
        outcome: "skip".into(),
        refused: reason,
        skip_stage: "schedule".into(),
        skip_reason: detail,
        error: String::new(),
    })?;
    Ok(false)
}

/// Everything after `engagement_started`.
fn pipeline<L: EventLog + ?Sized>(
    rec: &mut Recorder<'_, L>,
    input: &EngageInput,
    roles: Roles<'_>,
    schedule: Option<&str>,
) -> Result<(), LogError> {
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
        rec.record(EngagementCandidateSeen {
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
            match qualify::read_hook(reply.as_deref().map_err(String::as_str), &c.text) {
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
        rec.record(EngagementCandidateQualified {
            candidate: CandidateId::new(c.turn_id.as_str()),
            question_type: c.question_type.map_or("", |t| t.as_str()).to_owned(),
            hook_kind: c.hook_kind.clone(),
            hook_evidence: c.hook_evidence.clone(),
            stance: c.stance.clone(),
        })?;
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
    rec.record(EngagementRanked {
        order: ranked
            .iter()
            .map(|(c, score)| RankedCandidate {
                candidate: CandidateId::new(c.turn_id.as_str()),
                score: *score,
            })
            .collect(),
    })?;

    // Attempts: live walk, draft, filters, fidelity, selection.
    let mut remaining: Vec<Candidate> = ranked.into_iter().map(|(c, _)| c).collect();
    let mut attempts = 0u32;
    let mut fetched: BTreeSet<String> = BTreeSet::new();
    let mut chosen: Option<(Candidate, Draft, QuestionType, u32)> = None;
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
            rec.record(EngagementSourceChecked {
                candidate: CandidateId::new(c.turn_id.as_str()),
                attempt,
                ok: check.ok,
                reason: check.reason.clone(),
                detail: check.detail.clone(),
                content_matched: check.content_matched,
            })?;
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
                draft::read_draft(reply.as_deref().map_err(String::as_str))
            }
        };
        let attempted = |outcome: &str| EngagementDraftAttempted {
            candidate: id.clone(),
            attempt,
            draft: (!draft.text.is_empty()).then(|| draft.text.clone()),
            outcome: outcome.to_owned(),
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
            rec.record(attempted("asks_for_a_repaste"))?;
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
                rec.record(attempted(reason))?;
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
            let (faithful, reason) = draft::read_verdict(reply.as_deref().map_err(String::as_str));
            rec.record(EngagementFidelityJudged {
                candidate: id.clone(),
                attempt,
                faithful,
                reason: reason.clone(),
            })?;
            (faithful, reason)
        } else {
            (false, String::new())
        };
        match select::accept(&candidate, &draft, faithful, &verdict) {
            Ok(kind) => {
                rec.record(attempted("accepted"))?;
                rec.record(EngagementDraftSelected {
                    candidate: id.clone(),
                    attempt,
                    draft: draft.text.clone(),
                })?;
                chosen = Some((candidate, draft, kind, attempt));
                break;
            }
            Err((reason, detail)) => {
                note(
                    rec,
                    Rejection::new(candidate.turn_id.clone(), "draft", reason, detail),
                    &mut rejections,
                )?;
                rec.record(attempted(reason))?;
            }
        }
    }

    let Some((candidate, draft, kind, _)) = chosen else {
        let (stage, sentence) = select::skip_summary(&rejections);
        rec.record(EngagementFinished {
            outcome: "skip".into(),
            refused: if attempts > 0 {
                "every_draft_rejected"
            } else {
                "no_verified_candidate"
            }
            .into(),
            skip_stage: stage,
            skip_reason: sentence,
            error: String::new(),
        })?;
        return Ok(());
    };
    let refused = post(rec, input, &ledger, &candidate, &draft, zone, sender)?;
    rec.record(EngagementFinished {
        outcome: kind.as_str().into(),
        refused,
        skip_stage: String::new(),
        skip_reason: String::new(),
        error: String::new(),
    })
}

/// The poster: checks, claims, and (with a sender) takes the day and sends once. Returns the
/// run's `refused` value (empty when staged).
fn post<L: EventLog + ?Sized>(
    rec: &mut Recorder<'_, L>,
    input: &EngageInput,
    ledger: &ClaimsLedger,
    candidate: &Candidate,
    draft: &Draft,
    zone: Zone,
    sender: Option<&mut dyn Sender>,
) -> Result<String, LogError> {
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
        rec.record(refuse_early(reason.clone(), None))?;
        return Ok(reason);
    }
    // The day rule against the ledger; the ledger chain settles races below.
    let fresh = ClaimsLedger::load(rec.log)?;
    if let Some(holder) = fresh
        .day_holder(&destination, &day, None)
        .or_else(|| ledger.day_holder(&destination, &day, None))
    {
        let reason = claims::day_taken_reason(&holder.claim, &destination, &day);
        rec.record(refuse_early(reason.clone(), Some(holder.claim.clone())))?;
        return Ok(reason);
    }
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
    rec.record(claimed.clone())?;
    let Some(sender) = sender else {
        return Ok("dry_run".into());
    };
    // The claim is durable. Take the day, then send once; nothing after this loses the report.
    let mine = Claim::claimed(&rec.cast, rec.now_ms, &claimed);
    let mut extra = history::reply_fields(candidate, &destination, &input.settings);
    extra["question"] = json!(draft.text);
    let outcome = match take_day(rec.log, &mine, rec.now_ms) {
        Ok(Taken::Won) => sender.send(&Outbound {
            claim: &claim,
            cast: &rec.cast,
            destination: &destination,
            body: &content,
            extra: &extra,
        }),
        Ok(Taken::Held { holder }) => SendOutcome::Refused {
            reason: claims::day_taken_reason(&holder, &destination, &day),
        },
        Err(e) => SendOutcome::Refused {
            reason: format!("day_not_taken: cannot take {day} on {destination}: {e}"),
        },
    };
    Ok(match outcome {
        SendOutcome::Staged { message_id } => {
            rec.record(PostStaged { claim, message_id })?;
            String::new()
        }
        SendOutcome::Refused { reason } => {
            rec.record(PostRefused::of_claim(claim, reason.clone()))?;
            reason
        }
        SendOutcome::Unknown { reason } => {
            rec.record(PostOutcomeUnknown { claim, reason })?;
            "send_outcome_unknown".into()
        }
    })
}
