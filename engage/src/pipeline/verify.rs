//! Verification against attested source records (stage `verify`).
//!
//! The contradiction sweep runs first, over every collected row **before** de-duplication
//! (castlog's fix: the reference de-duplicated first, so a second row claiming the same message
//! for another speaker was dropped as a duplicate and the first one passed). Any message id
//! claimed by more than one actor, in the rows or in the attested records, rejects every row
//! naming it (`contradictory_speaker`). Then each remaining candidate is checked against its
//! record: `no_attested_source`, `message_id_mismatch`, `author_mismatch`, `channel_mismatch`.
//! Disagreements are rejected, never repaired; candidates are never changed.

use std::collections::{BTreeMap, BTreeSet};

use super::input::SourceRecord;
use super::{Candidate, Rejection};

/// Rejects every row whose message id is claimed for more than one speaker.
pub fn contradiction_sweep(
    rows: Vec<Candidate>,
    sources: &BTreeMap<String, SourceRecord>,
) -> (Vec<Candidate>, Vec<Rejection>) {
    let mut by_row: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    let mut by_record: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for c in &rows {
        by_row
            .entry(c.source_message_id.as_str())
            .or_default()
            .insert(c.actor_id.as_str());
        if let Some(r) = sources.get(&c.turn_id)
            && !r.source_actor_id.is_empty()
        {
            by_record
                .entry(r.message_id.as_str())
                .or_default()
                .insert(r.source_actor_id.as_str());
        }
    }
    let contradicted: BTreeMap<String, Vec<String>> = by_row
        .iter()
        .chain(by_record.iter())
        .filter(|(_, actors)| actors.len() > 1)
        .map(|(id, _)| {
            let mut all: BTreeSet<&str> = BTreeSet::new();
            all.extend(by_row.get(id).into_iter().flatten());
            all.extend(by_record.get(id).into_iter().flatten());
            (
                (*id).to_owned(),
                all.into_iter().map(str::to_owned).collect(),
            )
        })
        .collect();
    let mut kept = Vec::new();
    let mut rejected = Vec::new();
    for c in rows {
        match contradicted.get(&c.source_message_id) {
            Some(actors) => rejected.push(Rejection::new(
                c.turn_id.clone(),
                "verify",
                "contradictory_speaker",
                format!(
                    "message_id={} claimed for [{}]",
                    c.source_message_id,
                    actors.join(", ")
                ),
            )),
            None => kept.push(c),
        }
    }
    (kept, rejected)
}

/// Checks each candidate against its attested record.
pub fn verify(
    candidates: Vec<Candidate>,
    sources: &BTreeMap<String, SourceRecord>,
) -> (Vec<Candidate>, Vec<Rejection>) {
    let mut kept = Vec::new();
    let mut rejected = Vec::new();
    for c in candidates {
        let reject = |reason: &str, detail: String| {
            Rejection::new(c.turn_id.clone(), "verify", reason, detail)
        };
        let Some(record) = sources.get(&c.turn_id) else {
            rejected.push(reject("no_attested_source", String::new()));
            continue;
        };
        if record.message_id.trim() != c.source_message_id {
            rejected.push(reject(
                "message_id_mismatch",
                format!("row={} attested={}", c.source_message_id, record.message_id),
            ));
            continue;
        }
        let tail = c.actor_id.rsplit(':').next().unwrap_or("").trim();
        let author = record.author_id.trim();
        if tail.is_empty() || author.is_empty() || tail != author {
            rejected.push(reject(
                "author_mismatch",
                format!(
                    "row_actor={} attested_author={}",
                    c.actor_id, record.author_id
                ),
            ));
            continue;
        }
        if record.channel_id.trim() != c.channel_id {
            rejected.push(reject(
                "channel_mismatch",
                format!("row={} attested={}", c.channel_id, record.channel_id),
            ));
            continue;
        }
        kept.push(c);
    }
    (kept, rejected)
}
