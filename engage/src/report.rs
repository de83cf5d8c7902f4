//! `EngagementReport`: the dry-run (or send) report of one engage cast, folded from its events.
//!
//! Because the report is a projection of what was recorded, it survives any error that stops
//! the run (an error after a claim included): whatever was appended is reported. The report
//! never says nothing was sent when a sender was called: its `send` field (and the text
//! header) comes from the claim events, not from the run's intent.

use std::collections::BTreeMap;

use castlog_core::event::Event;
use castlog_events::Recorded;
use castlog_projections::projection::Projection;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::event::{EngageEvent, EngageRecord};
use crate::pipeline::Candidate;

/// One group of rejections.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RejectionGroup {
    /// Stage that rejected (`collect`, `verify`, `history`, ...).
    pub stage: String,
    /// Reason code shared by the group.
    pub reason: String,
    /// Number of candidates rejected for this stage and reason.
    pub count: usize,
    /// Examples: `(candidate, detail)`, in the order seen.
    pub examples: Vec<RejectionExample>,
}

/// One example of a rejection.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RejectionExample {
    /// Candidate (turn id) rejected.
    pub candidate: String,
    /// Ids, timestamps or counts shown next to the reason.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub detail: String,
}

/// The claim of the run, if it got that far.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReportClaim {
    /// Id of the poster's claim (`clm-<hex>`).
    pub claim: String,
    /// Channel the post goes to.
    pub destination: String,
    /// Local claim day (`YYYY-MM-DD`) the post takes.
    pub day: String,
    /// `pending`, `staged`, `refused`, `dry_run`, ...
    pub status: String,
    /// Whether it was a dry run.
    pub dry_run: bool,
    /// The message id, once staged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message_id: Option<String>,
    /// Why it was refused or is unknown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// What an engage run found, chose and claimed, folded from its events.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct EngagementReport {
    /// Id of the engage cast reported.
    pub cast: String,
    /// Conversation id from `engagement_started`.
    pub conversation: String,
    /// `timed`, `personal` or `skip` (empty while running).
    pub outcome: String,
    /// The selected candidate's type.
    pub question_type: String,
    /// Hook kind of the selected candidate (personal questions only).
    pub hook_kind: String,
    /// The selected draft: the question that is (or would be) posted.
    pub question: String,
    /// The message as it would be sent, when it differs from the question.
    pub delivery_body: String,
    /// The verified quote (cut to the configured length).
    pub quote: String,
    /// Turn id of the candidate whose draft was selected.
    pub candidate: String,
    /// The fidelity verdict of the selected draft.
    pub fidelity: Option<Value>,
    /// Rejections grouped by stage and reason, most frequent first.
    pub rejections: Vec<RejectionGroup>,
    /// Rejections of every stage and reason together.
    pub rejections_total: usize,
    /// Raw results considered.
    pub considered: u32,
    /// Whether the selected candidate's source was re-fetched and checked.
    pub live_verified: bool,
    /// Why nothing was posted (`dry_run`, ...), empty when a post was staged.
    pub refused: String,
    /// Stage that rejected the most candidates, when the run skipped.
    pub skip_stage: String,
    /// The skip's sentence.
    pub skip_reason: String,
    /// The claim, if any.
    pub claim: Option<ReportClaim>,
    /// What happened on the way out: `none`, `dry_run`, `refused`, `unknown`, `staged`.
    pub send: String,
    /// Whether a sender was called (`staged` or `unknown`).
    pub sent: bool,
    /// Whether the run was started with `--post`.
    pub post: bool,
    /// An error that ended the run.
    pub error: String,
    /// Whether the run recorded its end.
    pub finished: bool,
    /// A scheduled run's check of its slot: `{"key", "slot", "ok", "reason"}`.
    pub schedule: Option<Value>,
    #[serde(skip)]
    candidates: BTreeMap<String, Candidate>,
    #[serde(skip)]
    raw: Vec<(String, String, String, String)>,
    #[serde(skip)]
    checked_ok: Vec<String>,
    #[serde(skip)]
    verdicts: BTreeMap<(String, u32), (bool, String)>,
    #[serde(skip)]
    quote_max: usize,
}

impl Projection for EngagementReport {
    const NAME: &'static str = "engagement";
    const VERSION: u32 = 1;

    fn apply(&mut self, record: &Recorded, _: Option<&castlog_core::event::Event>) {
        let Ok(event) = EngageRecord::decode(record) else {
            return;
        };
        match event {
            EngageRecord::Engage(EngageEvent::Started(e)) => {
                self.cast = record.cast.to_string();
                self.conversation = e.conversation;
                self.considered = e.results;
                self.post = e.post;
                self.send = "none".into();
                self.quote_max = e
                    .settings
                    .get("quote_max_chars")
                    .and_then(Value::as_u64)
                    .map_or(500, |n| n as usize);
            }
            EngageRecord::Engage(EngageEvent::CandidateSeen(e)) => {
                if let Ok(c) = serde_json::from_value::<Candidate>(e.source) {
                    self.candidates.insert(e.candidate.to_string(), c);
                }
            }
            EngageRecord::Engage(EngageEvent::CandidateRejected(e)) => {
                self.raw
                    .push((e.stage, e.reason, e.candidate.to_string(), e.detail));
                self.group();
            }
            EngageRecord::Engage(EngageEvent::CandidateQualified(e)) => {
                if let Some(c) = self.candidates.get_mut(e.candidate.as_str()) {
                    c.question_type = match e.question_type.as_str() {
                        "timed" => Some(crate::pipeline::QuestionType::Timed),
                        "personal" => Some(crate::pipeline::QuestionType::Personal),
                        _ => None,
                    };
                    c.hook_kind = e.hook_kind;
                    c.hook_evidence = e.hook_evidence;
                    c.stance = e.stance;
                }
            }
            EngageRecord::Engage(EngageEvent::SourceChecked(e)) if e.ok => {
                self.checked_ok.push(e.candidate.to_string());
            }
            EngageRecord::Engage(EngageEvent::FidelityJudged(e)) => {
                self.verdicts
                    .insert((e.candidate.to_string(), e.attempt), (e.faithful, e.reason));
            }
            EngageRecord::Engage(EngageEvent::DraftSelected(e)) => {
                let id = e.candidate.to_string();
                self.question = e.draft;
                if let Some(c) = self.candidates.get(&id) {
                    self.quote = c.text.chars().take(self.quote_max.max(1)).collect();
                    self.question_type = c
                        .question_type
                        .map(|t| t.as_str().to_owned())
                        .unwrap_or_default();
                    self.hook_kind = c.hook_kind.clone();
                }
                if let Some((faithful, reason)) = self.verdicts.get(&(id.clone(), e.attempt)) {
                    self.fidelity =
                        Some(serde_json::json!({ "faithful": faithful, "reason": reason }));
                }
                self.live_verified = self.checked_ok.contains(&id);
                self.candidate = id;
            }
            EngageRecord::Post(Event::PostClaimed(e)) => {
                self.claim = Some(ReportClaim {
                    claim: e.claim.to_string(),
                    destination: e.destination,
                    day: e.day,
                    status: if e.dry_run { "dry_run" } else { "pending" }.into(),
                    dry_run: e.dry_run,
                    message_id: None,
                    reason: None,
                });
                self.send = if e.dry_run { "dry_run" } else { "unknown" }.into();
            }
            EngageRecord::Post(Event::PostStaged(e)) => {
                if let Some(c) = &mut self.claim {
                    c.status = "staged".into();
                    c.message_id = Some(e.message_id);
                }
                self.send = "staged".into();
                self.sent = true;
            }
            EngageRecord::Post(Event::PostOutcomeUnknown(e)) => {
                if let Some(c) = &mut self.claim {
                    c.reason = Some(e.reason);
                }
                self.send = "unknown".into();
                self.sent = true;
            }
            EngageRecord::Post(Event::PostRefused(e)) => {
                match &mut self.claim {
                    Some(c) if c.claim == e.claim.as_str() => {
                        c.status = "refused".into();
                        c.reason = Some(e.reason);
                    }
                    _ => {
                        self.claim = Some(ReportClaim {
                            claim: e.claim.to_string(),
                            destination: e.destination.unwrap_or_default(),
                            day: e.day.unwrap_or_default(),
                            status: "refused".into(),
                            dry_run: e.dry_run,
                            message_id: None,
                            reason: Some(e.reason),
                        });
                    }
                }
                self.send = "refused".into();
            }
            EngageRecord::Post(Event::PostResolved(e)) => {
                if let Some(c) = &mut self.claim {
                    let status = castlog_core::claims::Transition::of(&e.resolution).target();
                    c.status = status.as_str().into();
                    if let castlog_core::event::Resolution::Staged { message_id } = e.resolution {
                        c.message_id = Some(message_id);
                        self.send = "staged".into();
                        self.sent = true;
                    }
                }
            }
            EngageRecord::Engage(EngageEvent::ScheduleChecked(e)) => {
                self.schedule = Some(serde_json::json!({
                    "key": e.key,
                    "slot": e.slot,
                    "already_posted": e.already_posted,
                    "ok": e.ok,
                    "reason": e.reason,
                }));
            }
            EngageRecord::Engage(EngageEvent::Finished(e)) => {
                self.outcome = e.outcome;
                self.refused = e.refused;
                self.skip_stage = e.skip_stage;
                self.skip_reason = e.skip_reason;
                self.error = e.error;
                self.finished = true;
            }
            _ => {}
        }
    }
}

impl EngagementReport {
    /// Regroups the raw rejections: by (stage, reason), most frequent first, then by the pair.
    fn group(&mut self) {
        let mut groups: Vec<RejectionGroup> = Vec::new();
        for (stage, reason, candidate, detail) in &self.raw {
            let example = RejectionExample {
                candidate: candidate.clone(),
                detail: detail.clone(),
            };
            match groups
                .iter_mut()
                .find(|g| &g.stage == stage && &g.reason == reason)
            {
                Some(g) => {
                    g.count += 1;
                    g.examples.push(example);
                }
                None => groups.push(RejectionGroup {
                    stage: stage.clone(),
                    reason: reason.clone(),
                    count: 1,
                    examples: vec![example],
                }),
            }
        }
        groups.sort_by(|a, b| {
            b.count
                .cmp(&a.count)
                .then_with(|| (&a.stage, &a.reason).cmp(&(&b.stage, &b.reason)))
        });
        self.rejections_total = self.raw.len();
        self.rejections = groups;
    }

    /// The report as text. The header and footer say what was really sent.
    pub fn render(&self, examples: usize) -> String {
        let rule = "=".repeat(72);
        let title = match self.send.as_str() {
            "staged" => format!(
                "COMMUNITY ENGAGEMENT — SENT (staged as {})",
                self.claim
                    .as_ref()
                    .and_then(|c| c.message_id.clone())
                    .unwrap_or_default()
            ),
            "unknown" => {
                "COMMUNITY ENGAGEMENT — A SEND WAS ATTEMPTED, ITS OUTCOME IS UNKNOWN".into()
            }
            // A run with --post that sent nothing is not a dry run: it was refused or found
            // nothing to send.
            _ if self.post => "COMMUNITY ENGAGEMENT — POSTING RUN, NOTHING SENT".into(),
            _ => "COMMUNITY ENGAGEMENT — DRY RUN (no messages sent)".into(),
        };
        let mut out = vec![rule.clone(), title, rule.clone()];
        out.push(format!("cast         : {}", self.cast));
        out.push(format!("conversation : {}", self.conversation));
        out.push(format!("outcome      : {}", self.outcome));
        if !self.question_type.is_empty() {
            let hook = if self.hook_kind.is_empty() {
                String::new()
            } else {
                format!(" (hook: {})", self.hook_kind)
            };
            out.push(format!("question type: {}{hook}", self.question_type));
        }
        out.push(format!("considered   : {} result(s)", self.considered));
        if let Some(s) = &self.schedule {
            let text = |key: &str| s.get(key).and_then(Value::as_str).unwrap_or("");
            let verdict = if s.get("ok").and_then(Value::as_bool) == Some(true) {
                "on schedule"
            } else {
                text("reason")
            };
            out.push(format!(
                "schedule     : {} (key {}): {verdict}",
                text("slot"),
                text("key")
            ));
        }
        if !self.refused.is_empty() {
            out.push(format!("refused      : {}", self.refused));
        }
        if !self.quote.is_empty() {
            out.push(String::new());
            out.push("VERIFIED QUOTE".into());
            out.push(format!("  {}", self.quote));
        }
        if let Some(f) = &self.fidelity {
            out.push(String::new());
            out.push(format!(
                "FIDELITY GATE: faithful={}",
                f.get("faithful").and_then(Value::as_bool).unwrap_or(false)
            ));
        }
        out.push(String::new());
        if self.outcome == "skip" || self.question.is_empty() {
            out.push("SKIPPED".into());
            out.push(format!("  stage  : {}", self.skip_stage));
            out.push(format!("  reason : {}", self.skip_reason));
        } else {
            out.push("PROPOSED QUESTION".into());
            out.push(format!("  {}", self.question));
        }
        out.push(String::new());
        if self.rejections.is_empty() {
            out.push("WHY CANDIDATES WERE REJECTED (none)".into());
        } else {
            out.push(format!(
                "WHY CANDIDATES WERE REJECTED ({} total)",
                self.rejections_total
            ));
            for g in &self.rejections {
                out.push(format!("  [{}] {}: {}", g.stage, g.reason, g.count));
                for e in g.examples.iter().take(examples) {
                    if e.detail.is_empty() {
                        out.push(format!("    e.g. {}", e.candidate));
                    } else {
                        out.push(format!("    e.g. {} — {}", e.candidate, e.detail));
                    }
                }
                if g.examples.len() > examples {
                    out.push(format!("    … and {} more", g.examples.len() - examples));
                }
            }
        }
        out.push(String::new());
        out.push(if self.live_verified {
            "SOURCE RE-FETCHED LIVE: author, channel and (when returned) the message text were checked.".into()
        } else if self.candidate.is_empty() && !self.checked_ok.is_empty() {
            // Nothing was chosen: the live check passed for some, which the drafts then lost.
            format!(
                "NO QUESTION WAS CHOSEN: {} source(s) were confirmed live, but no draft from them was accepted.",
                self.checked_ok.len()
            )
        } else {
            "NO SOURCE WAS CONFIRMED LIVE: an edited or deleted message cannot be ruled out.".into()
        });
        if let Some(c) = &self.claim {
            out.push(format!(
                "CLAIM {} for {} on {}: {}{}{}",
                c.claim,
                c.destination,
                c.day,
                c.status,
                c.message_id
                    .as_ref()
                    .map(|m| format!(" as {m}"))
                    .unwrap_or_default(),
                c.reason
                    .as_ref()
                    .map(|r| format!(" ({r})"))
                    .unwrap_or_default()
            ));
        }
        if !self.error.is_empty() {
            out.push(format!("ERROR: {}", self.error));
        }
        out.push(match self.send.as_str() {
            "staged" => "ONE MESSAGE WAS SENT.".into(),
            "unknown" => format!(
                "A MESSAGE MAY HAVE BEEN SENT: resolve the claim with `castlog claims resolve {}`.",
                self.claim.as_ref().map(|c| c.claim.as_str()).unwrap_or("")
            ),
            _ => "NO MESSAGES WERE SENT.".into(),
        });
        out.push(rule);
        out.join("\n")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The header says what the run was: a dry run, a posting run that sent nothing (refused,
    /// or nothing to send), a send, or a send of unknown outcome.
    #[test]
    fn the_title_names_a_posting_run_that_sent_nothing() {
        let title = |post: bool, send: &str| {
            let report = EngagementReport {
                post,
                send: send.into(),
                ..EngagementReport::default()
            };
            report
                .render(1)
                .lines()
                .nth(1)
                .unwrap_or_default()
                .to_owned()
        };
        assert!(title(false, "dry_run").contains("DRY RUN"));
        for send in ["refused", "none"] {
            let posting = title(true, send);
            assert!(posting.contains("POSTING RUN, NOTHING SENT"), "{posting}");
            assert!(!posting.contains("DRY RUN"), "{posting}");
        }
        assert!(title(true, "staged").contains("SENT (staged as"));
        assert!(title(true, "unknown").contains("OUTCOME IS UNKNOWN"));
    }
}
