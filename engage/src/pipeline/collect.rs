//! Collection: search results → candidates (stage `collect`).
//!
//! Checks, in order; the first that fails rejects the row: no provenance (`no_provenance`), a
//! role other than `requester` (`not_authored_by_actor`), a channel that may not be a source
//! (`channel_not_sourceable`), a message id that is not a snowflake (`no_source_message_id`),
//! a quote that is empty once the sender's prefix is taken off (`empty_quote`: there is nothing
//! for the hook detector to read, so it is not asked).
//! De-duplication (`duplicate_source_message_id`, first occurrence wins) is a separate step
//! ([`dedupe`]) that the runner applies only after the contradiction sweep has seen every row.

use std::collections::{BTreeMap, BTreeSet};

use super::input::{Allowlist, RawResult};
use super::{Candidate, Rejection};

/// 2015-01-01T00:00:00Z, the Discord epoch.
pub const DISCORD_EPOCH_MS: i64 = 1_420_070_400_000;

/// Decodes a snowflake into its time (ms since the Unix epoch): trims whitespace and accepts
/// ASCII digits only (the reference accepted fullwidth digits and crashed on superscripts).
pub fn decode_snowflake(id: &str) -> Option<i64> {
    let id = id.trim();
    if id.is_empty() || !id.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let value: u64 = id.parse().ok()?;
    i64::try_from(value >> 22)
        .ok()
        .map(|ms| ms + DISCORD_EPOCH_MS)
}

/// The id a row's rejections carry.
fn row_id(index: usize, result: &RawResult) -> String {
    result
        .provenance
        .as_ref()
        .map(|p| p.canonical_turn_id.clone())
        .filter(|t| !t.is_empty())
        .unwrap_or_else(|| format!("result-{index}"))
}

/// Collects every row that passes the four checks (no de-duplication).
pub fn collect(
    results: &[RawResult],
    allowlist: &Allowlist,
    senders: &BTreeMap<String, String>,
) -> (Vec<Candidate>, Vec<Rejection>) {
    let mut kept = Vec::new();
    let mut rejected = Vec::new();
    for (index, result) in results.iter().enumerate() {
        let id = row_id(index, result);
        let reject =
            |reason: &str, detail: String| Rejection::new(id.clone(), "collect", reason, detail);
        let Some(p) = &result.provenance else {
            rejected.push(reject("no_provenance", String::new()));
            continue;
        };
        if p.source_role != "requester" {
            rejected.push(reject(
                "not_authored_by_actor",
                format!("source_role={}", p.source_role),
            ));
            continue;
        }
        if !allowlist.may_source(&p.origin_channel_id) {
            rejected.push(reject(
                "channel_not_sourceable",
                format!("channel_id={}", p.origin_channel_id),
            ));
            continue;
        }
        let Some(sent_ms) = decode_snowflake(&p.source_message_id) else {
            rejected.push(reject("no_source_message_id", String::new()));
            continue;
        };
        let sender = senders.get(&id).cloned().unwrap_or_default();
        let text = if sender.is_empty() {
            result.text.clone()
        } else {
            result
                .text
                .strip_prefix(&format!("{sender}:"))
                .map_or_else(|| result.text.clone(), |rest| rest.trim_start().to_owned())
        };
        if text.trim().is_empty() {
            rejected.push(reject("empty_quote", String::new()));
            continue;
        }
        kept.push(Candidate {
            turn_id: id,
            source_message_id: p.source_message_id.trim().to_owned(),
            actor_id: p.actor_id.clone(),
            channel_id: p.origin_channel_id.clone(),
            text,
            sent_ms,
            sender,
            question_type: None,
            hook_kind: String::new(),
            hook_evidence: String::new(),
            stance: String::new(),
        });
    }
    (kept, rejected)
}

/// Drops repeated message ids; the first occurrence wins.
pub fn dedupe(candidates: Vec<Candidate>) -> (Vec<Candidate>, Vec<Rejection>) {
    let mut seen = BTreeSet::new();
    let mut kept = Vec::new();
    let mut rejected = Vec::new();
    for c in candidates {
        if seen.insert(c.source_message_id.clone()) {
            kept.push(c);
        } else {
            rejected.push(Rejection::new(
                c.turn_id.clone(),
                "collect",
                "duplicate_source_message_id",
                format!("message_id={}", c.source_message_id),
            ));
        }
    }
    (kept, rejected)
}
