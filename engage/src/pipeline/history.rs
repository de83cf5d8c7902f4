//! The repetition gates over the claims ledger (stage `history`), the post destination, and
//! the reply fields a send carries.
//!
//! The ledger's claims are the history: every claim that went out or may have (pending,
//! staged, approved, posted) and declined ones count, as in the reference; dry runs, refusals
//! and abandoned claims never went out and do not. Rules, in order; the first that fires wins:
//! 1. thread reuse (no time limit): a shared source message id → `thread_previously_ignored`
//!    when a person recorded that post as ignored (`castlog claims resolve CLAIM --ignored`),
//!    else `thread_already_used`; detail `posted YYYY-MM-DD`;
//! 2. member cooldown: the same tagged member less than 14 days ago (strict) →
//!    `member_recently_tagged`;
//! 3. similarity (only with a non-zero fingerprint): a question within 60 days (inclusive) at a
//!    distance of 12 or less → `question_recently_asked`;
//! 4. channel cap (only when the destination is the source channel): 3 or more posts to the
//!    destination within 7 days (inclusive) → `channel_recently_overused`.
//!
//! Unlike the reference (its weak point 11), the policy is explicit per rule: a declined post
//! never went out to the member or the channel, so it counts for the thread and similarity
//! rules (the question was turned down) but not for the member cooldown or the channel cap.

use serde_json::{Value, json};

use castlog_core::calendar::Zone;
use castlog_core::claims::{Claim, ClaimStatus};
use castlog_core::event::Response;

use super::fingerprint;
use super::input::{Allowlist, Settings};
use super::{Candidate, days};

/// Whether a claim counts as a post for the history gates: one that holds its day, or a
/// declined one (it counts for the thread and similarity rules only).
pub fn counts(claim: &Claim) -> bool {
    claim.holds_day() || (!claim.dry_run && claim.status == ClaimStatus::Declined)
}

/// Where a post about `candidate` goes: the source channel if posts may go there, else the
/// single permitted channel, else nowhere (`""`).
pub fn post_target(allowlist: &Allowlist, candidate: &Candidate) -> String {
    if allowlist.may_post(&candidate.channel_id) {
        return candidate.channel_id.clone();
    }
    match allowlist.post_channel_ids.as_slice() {
        [only] if !only.is_empty() => only.clone(),
        _ => String::new(),
    }
}

/// What a send about `candidate` to `destination` carries besides its body: the reply
/// reference (the member's own message, its channel and guild), the member to mention, and
/// whether the reply can go in place (only when the destination is the source channel; never
/// in a rehearsal or staging channel).
pub fn reply_fields(candidate: &Candidate, destination: &str, settings: &Settings) -> Value {
    json!({
        "reply_to_message_id": candidate.source_message_id,
        "reply_to_channel_id": candidate.channel_id,
        "reply_to_guild_id": settings.guild_id,
        "mention_actor_id": candidate.actor_id,
        "can_reply_in_place": !destination.is_empty() && destination == candidate.channel_id,
    })
}

/// What the gates look at.
#[derive(Debug, Clone, Copy)]
pub struct Probe<'a> {
    /// The member to be tagged (`""`: nobody).
    pub actor_id: &'a str,
    /// Source message ids the post would follow up.
    pub source_message_ids: &'a [String],
    /// The question's fingerprint (0 skips the similarity rule).
    pub fingerprint: u64,
    /// Channel the post would go to (the per-channel cap counts it).
    pub destination: &'a str,
    /// Whether the channel cap applies.
    pub apply_channel_cap: bool,
}

/// The first rule that fires, as `(reason, detail)`.
pub fn check(
    claims: &[Claim],
    probe: &Probe<'_>,
    now_ms: i64,
    zone: Zone,
    settings: &Settings,
) -> Option<(&'static str, String)> {
    let records = || claims.iter().filter(|c| counts(c));
    let date = |c: &Claim| {
        zone.date(i64::try_from(c.claimed_ms).unwrap_or(i64::MAX))
            .to_string()
    };
    let age = |c: &Claim| now_ms - i64::try_from(c.claimed_ms).unwrap_or(i64::MAX);
    for c in records() {
        if c.source_message_ids
            .iter()
            .any(|id| probe.source_message_ids.contains(id))
        {
            let reason = if c.response == Some(Response::Ignored) {
                "thread_previously_ignored"
            } else {
                "thread_already_used"
            };
            return Some((reason, format!("posted {}", date(c))));
        }
    }
    if !probe.actor_id.is_empty() {
        // The cooldown and the cap count what reached the member and the channel: the claims
        // that hold their day (a declined post did not).
        for c in records().filter(|c| c.holds_day()) {
            if c.tagged_actor.as_deref() == Some(probe.actor_id)
                && age(c) < days(i64::from(settings.member_cooldown_days))
            {
                return Some(("member_recently_tagged", format!("last tagged {}", date(c))));
            }
        }
    }
    if probe.fingerprint != 0 {
        for c in records() {
            let Some(fp) = c.fingerprint.filter(|f| *f != 0) else {
                continue;
            };
            if age(c) > days(i64::from(settings.similarity_window_days)) {
                continue;
            }
            let distance = fingerprint::distance(fp, probe.fingerprint);
            if distance <= settings.similarity_distance {
                return Some((
                    "question_recently_asked",
                    format!("distance={distance} from {}", date(c)),
                ));
            }
        }
    }
    if probe.apply_channel_cap && !probe.destination.is_empty() {
        let count = records()
            .filter(|c| {
                c.holds_day()
                    && c.destination == probe.destination
                    && age(c) <= days(i64::from(settings.channel_window_days))
            })
            .count();
        if count >= settings.channel_max_in_window as usize {
            return Some((
                "channel_recently_overused",
                format!("{count} posts in {}d", settings.channel_window_days),
            ));
        }
    }
    None
}
