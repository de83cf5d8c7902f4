//! Post sockets: claim before send, the sender's outcome, and a person's resolution.
//!
//! A post socket's visit goes: `socket_started` (phase `awaiting_post`) → the driver checks
//! the claims ledger and sends `StartPost` → the machine claims (`post_claimed`, durable before
//! any sender runs) or refuses (`post_refused`: the destination's day is held, or the body is
//! empty) → with `--post` the driver calls the sender and sends `PostOutcome` → `post_staged`
//! (routes like `satisfied`), `post_refused` (routes like `not_satisfied`) or
//! `post_outcome_unknown` (the claim stays pending and the cast waits for a person). A dry run
//! claims with `dry_run: true` and routes like `satisfied` at once: no sender is called.
//!
//! At most once per step: a step (socket, item) whose claim went out or may have (pending,
//! staged, approved, posted) never claims again, whether it is visited again in the same cast
//! or in a recast that inherited the claim with its parent's state.

use serde_json::{Value, json};

use super::decide::{Decider, Rejection};
use super::{CastState, Phase, Status, item_key};
use crate::calendar::Zone;
use crate::claims::{self, Claim, ClaimStatus, Transition};
use crate::event::{
    Event, PostClaimed, PostOutcomeUnknown, PostRefused, PostResolutionInherited, PostResolved,
    PostResponseRecorded, PostStaged, Resolution, Response,
};
use crate::id::ClaimId;
use crate::input::{HeldDay, SendOutcome};
use crate::loadout::{PostSpec, SocketKind};
use crate::path::{self, Scope};
use crate::template;

impl CastState {
    /// The current visit's post step: `(step, spec)`, for a post socket.
    pub fn post_step(&self) -> Option<(String, PostSpec)> {
        let current = self.current.as_ref()?;
        let socket = self.loadout.socket(&current.socket)?;
        let SocketKind::Post(spec) = &socket.kind else {
            return None;
        };
        Some((
            item_key(current.socket.as_str(), current.item.as_ref()),
            spec.clone(),
        ))
    }

    /// The post body the current visit sends: a path into the last output and the state, or
    /// a template.
    pub(crate) fn post_body(&self, spec: &PostSpec) -> String {
        let source = spec.body.trim();
        let is_path = !source.contains("{{")
            && !source.contains(char::is_whitespace)
            && ["$", "state", "item", "lastJson", "lastOutput"]
                .iter()
                .any(|p| source == *p || source.starts_with(&format!("{p}.")));
        if is_path {
            let scope = Scope {
                output: self.last_json.as_ref(),
                data: &self.data,
                last_json: self.last_json.as_ref(),
                last_output: self.last_output.as_deref(),
            };
            return template::show(path::resolve(&scope, source).as_ref());
        }
        let scope = self.template_scope();
        template::render(&spec.body, &scope)
    }

    /// Applies a claim event to the cast's claims. Never fails: an event the machine recorded
    /// was legal when it was decided.
    pub(crate) fn apply_claim_event(&mut self, event: &Event) {
        match event {
            Event::PostClaimed(e) => {
                self.claims
                    .insert(e.claim.clone(), Claim::claimed(&self.cast, 0, e));
                if let Some(c) = self
                    .current
                    .as_mut()
                    .filter(|c| c.phase == Phase::AwaitingPost)
                {
                    c.claim = Some(e.claim.clone());
                    if !e.dry_run {
                        c.phase = Phase::AwaitingPostOutcome;
                        self.status = Status::AwaitingAgent;
                    }
                }
            }
            Event::PostStaged(e) => {
                if let Some(c) = self.claims.get_mut(&e.claim) {
                    c.status = ClaimStatus::Staged;
                    c.message_id = Some(e.message_id.clone());
                }
            }
            Event::PostRefused(e) => match self.claims.get_mut(&e.claim) {
                Some(c) => {
                    c.status = ClaimStatus::Refused;
                    c.reason = Some(e.reason.clone());
                }
                None => {
                    let refused = Claim::refused_unclaimed(&self.cast, 0, e);
                    self.claims.insert(e.claim.clone(), refused);
                }
            },
            Event::PostOutcomeUnknown(e) => {
                if let Some(c) = self.claims.get_mut(&e.claim) {
                    c.reason = Some(e.reason.clone());
                }
            }
            Event::PostResolved(e) => {
                if let Some(c) = self.claims.get_mut(&e.claim) {
                    c.status = Transition::of(&e.resolution).target();
                    if let Resolution::Staged { message_id } = &e.resolution {
                        c.message_id = Some(message_id.clone());
                    }
                }
            }
            Event::PostResponseRecorded(e) => {
                if let Some(c) = self.claims.get_mut(&e.claim) {
                    c.response = Some(e.response);
                }
            }
            Event::PostResolutionInherited(e) => {
                if let Some(c) = self.claims.get_mut(&e.claim) {
                    c.status = e.status;
                    if e.message_id.is_some() {
                        c.message_id = e.message_id.clone();
                    }
                }
            }
            _ => {}
        }
    }

    /// The next attempt number for `step` and `destination`.
    fn next_attempt(&self, step: &str, destination: &str) -> u32 {
        let used = self
            .claims
            .values()
            .filter(|c| c.step == step && c.destination == destination)
            .count();
        u32::try_from(used).unwrap_or(u32::MAX).saturating_add(1)
    }
}

fn not_now(state: &CastState, input: &'static str, reason: impl Into<String>) -> Rejection {
    Rejection::NotNow {
        cast: state.cast.clone(),
        input,
        reason: reason.into(),
    }
}

impl Decider<'_, '_> {
    /// Right after a post socket's `socket_started`: a step that already posted (or may have)
    /// completes at once, without a new claim.
    pub fn enter_post(&mut self) {
        let Some((step, spec)) = self.state.post_step() else {
            return;
        };
        let done = self
            .state
            .claims
            .values()
            .find(|c| {
                c.step == step
                    && c.destination == spec.destination
                    && !c.dry_run
                    && c.status.went_out()
            })
            .cloned();
        if let Some(claim) = done {
            let outcome = self.went_out(&claim, "again");
            self.complete_post(outcome);
        }
    }

    /// The `satisfied` outcome of a post socket whose claim went out; `how` (`again`,
    /// `resolved`) says why no sender ran in this visit.
    fn went_out(&self, claim: &Claim, how: &str) -> Value {
        let mut outcome = json!({
            "satisfied": true,
            "claim": claim.claim,
            "status": claim.status,
            "message_id": claim.message_id,
            "destination": claim.destination,
            "inherited": claim.cast != self.state.cast,
        });
        outcome[how] = json!(true);
        outcome
    }

    /// Completes the post socket with an outcome object (its `satisfied` routes).
    fn complete_post(&mut self, outcome: Value) {
        let Some(current) = self.state.current.clone() else {
            return;
        };
        let text = outcome.to_string();
        self.complete(&current.socket, &text, Some(outcome));
    }

    /// Records a refusal made before claiming and completes the visit as not satisfied.
    fn refuse_post(&mut self, refusal: PostRefused) {
        let outcome = json!({
            "satisfied": false,
            "claim": refusal.claim,
            "status": "refused",
            "destination": refusal.destination,
            "context": refusal.reason,
        });
        self.emit(refusal);
        self.complete_post(outcome);
    }

    /// `StartPost`: claim, or refuse when the step went out in an earlier run of this cast's
    /// lineage, when the day is held, or when the body is empty.
    pub fn start_post(
        &mut self,
        dry_run: bool,
        held: &[HeldDay],
        sent_before: Option<&ClaimId>,
    ) -> Result<(), Rejection> {
        let state = &self.state;
        if state.status.is_stopped()
            || state.current.as_ref().map(|c| c.phase) != Some(Phase::AwaitingPost)
        {
            return Err(not_now(state, "a post start", "no post socket is waiting"));
        }
        let Some((step, spec)) = state.post_step() else {
            return Err(not_now(state, "a post start", "the socket is not a post"));
        };
        let zone = Zone::parse(&spec.zone).unwrap_or_default();
        let day = zone.day(self.env.now_ms);
        let attempt = state.next_attempt(&step, &spec.destination);
        let claim = claims::claim_id(
            self.env.digest,
            &state.cast,
            &step,
            &spec.destination,
            attempt,
        );
        let body = state.post_body(&spec);
        // The day rule, over the ledger's holders and this cast's own (and inherited) claims.
        let own = claims::day_holder(state.claims.values(), &spec.destination, &day, None)
            .map(|c| c.claim.clone());
        let holder = held
            .iter()
            .find(|h| h.day == day && h.claim != claim)
            .map(|h| h.claim.clone())
            .or(own);
        let refuse = |reason: String, held_by: Option<ClaimId>| PostRefused {
            claim: claim.clone(),
            reason,
            held_by,
            destination: Some(spec.destination.clone()),
            day: Some(day.clone()),
            step: Some(step.clone()),
            attempt: Some(attempt),
            dry_run,
        };
        if let Some(earlier) = sent_before {
            // Recorded with no day: a re-decide tells this refusal from a held day by that.
            let reason = format!(
                "sent_by_an_earlier_run: {step} already sent to {} as claim {earlier} in a cast this one was recast from",
                spec.destination
            );
            self.refuse_post(PostRefused {
                day: None,
                ..refuse(reason, Some(earlier.clone()))
            });
            return Ok(());
        }
        if let Some(holder) = holder {
            let reason = claims::day_taken_reason(&holder, &spec.destination, &day);
            self.refuse_post(refuse(reason, Some(holder)));
            return Ok(());
        }
        if body.trim().is_empty() {
            let reason = format!(
                "empty_body: the post body {:?} rendered empty; nothing to send",
                spec.body
            );
            self.refuse_post(refuse(reason, None));
            return Ok(());
        }
        let digest = self.blob(body.into_bytes());
        self.emit(PostClaimed {
            claim: claim.clone(),
            destination: spec.destination.clone(),
            day,
            attempt,
            body: digest,
            step,
            dry_run,
            tagged_actor: None,
            source_message_ids: Vec::new(),
            fingerprint: None,
        });
        if dry_run {
            self.complete_post(json!({
                "satisfied": true,
                "claim": claim,
                "status": "dry_run",
                "destination": spec.destination,
            }));
        }
        Ok(())
    }

    /// `PostOutcome`: what the sender said about the claim in flight.
    pub fn post_outcome(
        &mut self,
        claim: &ClaimId,
        outcome: &SendOutcome,
    ) -> Result<(), Rejection> {
        let state = &self.state;
        let waiting = state
            .current
            .as_ref()
            .filter(|c| c.phase == Phase::AwaitingPostOutcome)
            .and_then(|c| c.claim.clone());
        if state.status.is_stopped() || waiting.as_ref() != Some(claim) {
            return Err(not_now(
                state,
                "a send outcome",
                format!("no post waits on claim {claim}"),
            ));
        }
        let destination = state
            .claims
            .get(claim)
            .map(|c| c.destination.clone())
            .unwrap_or_default();
        match outcome {
            SendOutcome::Staged { message_id } => {
                self.emit(PostStaged {
                    claim: claim.clone(),
                    message_id: message_id.clone(),
                });
                self.complete_post(json!({
                    "satisfied": true,
                    "claim": claim,
                    "status": "staged",
                    "message_id": message_id,
                    "destination": destination,
                }));
            }
            SendOutcome::Refused { reason } => {
                self.emit(PostRefused::of_claim(claim.clone(), reason.clone()));
                self.complete_post(json!({
                    "satisfied": false,
                    "claim": claim,
                    "status": "refused",
                    "destination": destination,
                    "context": reason,
                }));
            }
            SendOutcome::Unknown { reason } => {
                self.emit(PostOutcomeUnknown {
                    claim: claim.clone(),
                    reason: reason.clone(),
                });
            }
        }
        Ok(())
    }

    /// One of this cast's own claims (not one it inherited), for a person's input about it.
    fn own_claim(&self, claim: &ClaimId, input: &'static str) -> Result<&Claim, Rejection> {
        let state = &self.state;
        state
            .claims
            .get(claim)
            .filter(|c| c.cast == state.cast)
            .ok_or_else(|| {
                not_now(
                    state,
                    input,
                    format!(
                        "claim {claim} is not a claim of this cast (see `castlog claims` for its cast)"
                    ),
                )
            })
    }

    /// A person's record of how a sent post was received; the claim's status stays.
    pub fn record_response(
        &mut self,
        claim: &ClaimId,
        response: Response,
    ) -> Result<(), Rejection> {
        let current = self.own_claim(claim, "a response")?;
        claims::check_response(claim, current.status)
            .map_err(|e| not_now(self.state, "a response", e.to_string()))?;
        self.emit(PostResponseRecorded {
            claim: claim.clone(),
            response,
        });
        Ok(())
    }

    /// A person's resolution of one of this cast's claims. When the post socket waits on the
    /// claim, `staged` routes like `satisfied` and `abandoned` like `not_satisfied`.
    pub fn resolve_claim(
        &mut self,
        claim: &ClaimId,
        resolution: &Resolution,
    ) -> Result<(), Rejection> {
        let current = self.own_claim(claim, "a claim resolution")?;
        let state = &self.state;
        if let Resolution::Staged { message_id } = resolution
            && message_id.trim().is_empty()
        {
            return Err(not_now(
                state,
                "a claim resolution",
                "the message id is empty; give the id the destination shows, or resolve with --abandoned",
            ));
        }
        // Refused before anything is recorded if the claim may not move that way.
        claims::next(claim, current.status, Transition::of(resolution))?;
        let waiting = self.waits_on(claim);
        self.emit(PostResolved {
            claim: claim.clone(),
            resolution: resolution.clone(),
        });
        // The claim as the event left it.
        if let Some(changed) = waiting
            .then(|| self.state.claims.get(claim).cloned())
            .flatten()
        {
            self.complete_resolved(&changed, "by a person");
        }
        Ok(())
    }

    /// A pending claim this cast inherited was resolved in its owner's log (the driver read the
    /// ledger): adopt the resolution; a post socket waiting on it goes on as if resolved here.
    pub fn adopt_resolution(
        &mut self,
        claim: &ClaimId,
        status: ClaimStatus,
        message_id: Option<&str>,
    ) -> Result<(), Rejection> {
        let state = &self.state;
        let input = "an inherited resolution";
        let Some(current) = state.claims.get(claim) else {
            return Err(not_now(
                state,
                input,
                format!("claim {claim} is not in this cast"),
            ));
        };
        if current.cast == state.cast {
            return Err(not_now(
                state,
                input,
                format!(
                    "claim {claim} is this cast's own; resolve it with `castlog claims resolve`"
                ),
            ));
        }
        if current.status != ClaimStatus::Pending || status == ClaimStatus::Pending {
            return Err(not_now(
                state,
                input,
                format!(
                    "claim {claim} is {} here and {status} in cast {}; only a pending claim adopts a resolution",
                    current.status, current.cast
                ),
            ));
        }
        let owner = current.cast.clone();
        let waiting = self.waits_on(claim);
        self.emit(PostResolutionInherited {
            claim: claim.clone(),
            owner: owner.clone(),
            status,
            message_id: message_id.map(str::to_owned),
        });
        // The claim as the event left it.
        if let Some(changed) = waiting
            .then(|| self.state.claims.get(claim).cloned())
            .flatten()
        {
            self.complete_resolved(&changed, &format!("in cast {owner}"));
        }
        Ok(())
    }

    /// Whether the current visit's post socket waits on `claim`.
    fn waits_on(&self, claim: &ClaimId) -> bool {
        !self.state.status.is_stopped()
            && self.state.current.as_ref().is_some_and(|c| {
                c.phase == Phase::AwaitingPostOutcome && c.claim.as_ref() == Some(claim)
            })
    }

    /// Completes a post socket that waited on a claim a person resolved (`by`: where): a post
    /// that went out routes like `satisfied`, anything else like `not_satisfied`.
    fn complete_resolved(&mut self, claim: &Claim, by: &str) {
        if claim.status.went_out() {
            let outcome = self.went_out(claim, "resolved");
            self.complete_post(outcome);
        } else {
            self.complete_post(json!({
                "satisfied": false,
                "claim": claim.claim,
                "status": claim.status,
                "destination": claim.destination,
                "context": format!("claim {} was resolved as {} {by}", claim.claim, claim.status),
            }));
        }
    }
}
