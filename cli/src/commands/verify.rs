//! `verify`: every chain, every link, every referenced blob.

use std::ops::ControlFlow;
use std::path::Path;

use castlog_core::event::Event;
use castlog_core::id::Seq;
use castlog_events::chain::blob_hash;
use castlog_events::sqlite::{MisplacedEvent, Place};
use castlog_events::verify::{Problem, ProblemKind, verify_cast};
use castlog_events::{CastHead, EventLog, LogError, SqliteLog};
use castlog_projections::prompt::{self, PromptError};
use castlog_replay::driver::DriveError;
use castlog_replay::redecide::redecide;
use serde::Serialize;

use crate::args::VerifyArgs;
use crate::error::{CliError, INTEGRITY};
use crate::output;

#[derive(Serialize)]
struct Report {
    ok: bool,
    casts: u64,
    events: u64,
    problems: Vec<Problem>,
}

/// The problem a row no read of its cast sees where its fields put it is.
fn misplaced(row: MisplacedEvent) -> Problem {
    let under = match row.place {
        Place::InPlace {
            range_key: Some(key),
        } => key.to_string(),
        _ => row.key.clone(),
    };
    let cast = row
        .cast
        .unwrap_or_else(|| castlog_core::id::CastId::new(format!("#{under}")));
    let seq = row.seq.unwrap_or(Seq(0));
    let (kind, message) = match row.place {
        Place::InPlace { .. } => (
            ProblemKind::Misplaced,
            format!(
                "the row read as seq {seq} names cast key {} and seq {}: it was changed in place",
                row.key, row.seq_shown
            ),
        ),
        Place::Apart {
            old_row,
            shadowed: true,
        } => (
            ProblemKind::Duplicate,
            format!(
                "another copy of seq {seq} is kept apart from the cast's events (in \
                 events_apart, row {old_row} before the schema v6 upgrade)"
            ),
        ),
        Place::Apart { old_row, .. } if row.seq.is_some() => (
            ProblemKind::Misplaced,
            format!(
                "a row for seq {seq} holding a value of another type is kept apart from the \
                 cast's events (in events_apart, row {old_row} before the schema v6 upgrade)"
            ),
        ),
        Place::Apart { old_row, .. } => (
            ProblemKind::Misplaced,
            format!(
                "a row naming cast key {} and seq {}, which are not an event's address (both \
                 whole numbers, the seq from 1 to 2^32-1), is kept apart (in events_apart, row \
                 {old_row} before the schema v6 upgrade)",
                row.key, row.seq_shown
            ),
        ),
    };
    Problem {
        cast,
        seq,
        kind,
        message,
    }
}

/// `castlog verify [CAST|--all]`.
pub fn run(db: &Path, args: &VerifyArgs, anchor: Option<&Path>) -> Result<(), CliError> {
    let anchor = anchor
        .map(|path| super::anchor::read(path, false))
        .transpose()?;
    let log = super::open(db)?;
    let heads = match &args.cast {
        // A recast's prefix is its ancestors' events: they are verified with it.
        Some(cast) => {
            let head = super::inspect::head_of(&log, cast)?;
            let mut heads = vec![head.clone()];
            for ancestor in castlog_events::log::ancestors(&log, &head.cast)? {
                heads.extend(log.head(&ancestor)?);
            }
            heads
        }
        None => log.casts()?,
    };
    let mut report = Report {
        ok: true,
        casts: 0,
        events: 0,
        problems: Vec::new(),
    };
    for head in &heads {
        let verified = verify_cast(&log, head)?;
        report.casts += 1;
        report.events += verified.events;
        let intact = verified.problems.is_empty();
        // Rebuilding a recast's prompts reads its ancestors; without its parent (reported
        // above) they cannot be checked.
        let orphan = verified
            .problems
            .iter()
            .any(|p| p.kind == ProblemKind::ForkParent);
        report.problems.extend(verified.problems);
        if !orphan {
            report.problems.extend(check_blobs(&log, head)?);
        }
        // Snapshots are checked against a fold from the first event (they are only caches).
        // Kept state snapshots and projection checkpoints are caches (`state --at`, `replay`,
        // `export --artifacts` start from them): each must be the fold of the log at its seq.
        if intact {
            let snapshots =
                castlog_replay::driver::check_snapshots(&log, &head.cast).or_else(|e| match e {
                    DriveError::Log(log) => Err(CliError::from(log)),
                    // A cast the machine does not fold keeps no snapshots.
                    _ => Ok(Vec::new()),
                })?;
            let checkpoints = projection_checkpoints(&log, &head.cast)?;
            for (seq, message) in snapshots.into_iter().chain(checkpoints) {
                report.problems.push(Problem {
                    cast: head.cast.clone(),
                    seq,
                    kind: ProblemKind::Snapshot,
                    message,
                });
            }
        }
        // Re-decide only an intact chain: a damaged one is already reported at its seq.
        if intact && let Some(d) = redecide(&log, &head.cast)? {
            report.problems.push(Problem {
                cast: d.cast,
                seq: d.seq,
                kind: ProblemKind::Divergence,
                message: format!(
                    "replay diverges: the machine produces {} but the log holds {}",
                    d.expected, d.found
                ),
            });
        }
    }
    if args.cast.is_none() {
        for (key, first, count) in log.orphaned_events()? {
            report.problems.push(Problem {
                cast: castlog_core::id::CastId::new(format!("#{key}")),
                seq: first,
                kind: ProblemKind::Orphaned,
                message: format!(
                    "{count} events are stored under cast key {key}, which no cast in the log has (its row in casts was deleted)"
                ),
            });
        }
    }
    let verified: Vec<castlog_core::id::CastId> = heads.iter().map(|h| h.cast.clone()).collect();
    let only = args.cast.as_ref().map(|_| verified.as_slice());
    for row in log.misplaced_events(only)? {
        report.problems.push(misplaced(row));
    }
    if let Some(anchor) = &anchor {
        // Without a cast named, a cast the anchor names that the log lost is reported too.
        let problems = castlog_events::anchor::check(&log, anchor, only)?;
        report.problems.extend(problems);
    }
    report.ok = report.problems.is_empty();
    if args.json {
        output::json(&report)?;
    } else {
        for p in &report.problems {
            let kind = castlog_core::syntax::json_name(&p.kind);
            crate::say!("{} seq {}: {kind}: {}", p.cast, p.seq, p.message);
        }
        crate::say!(
            "{}: {} casts, {} events, {} problems",
            if report.ok { "ok" } else { "FAILED" },
            report.casts,
            report.events,
            report.problems.len()
        );
    }
    if report.ok {
        Ok(())
    } else {
        let first = &report.problems[0];
        Err(CliError {
            code: INTEGRITY,
            message: format!(
                "verification failed: {} problems, first at cast {} seq {}",
                report.problems.len(),
                first.cast,
                first.seq
            ),
        })
    }
}

/// Every blob an event references must be present and match its address, and every
/// dispatched prompt must rebuild from its entry blobs to its recorded digest.
fn check_blobs(log: &SqliteLog, head: &CastHead) -> Result<Vec<Problem>, CliError> {
    let mut refs = Vec::new();
    let mut prompts = Vec::new();
    let mut stored_by_older = Vec::new();
    log.scan(&head.cast, Seq::FIRST, &mut |record| {
        if let Ok(event) = record.event() {
            for hash in event.blob_refs() {
                refs.push((record.seq, hash));
            }
            if let Event::PromptDispatched(e) = event {
                // The system fold is named by digest; an older castlog also stored it.
                if let Some(system) = e.system_hash {
                    stored_by_older.push((record.seq, system));
                }
                prompts.push((record.seq, e.prompt_hash, e.placements));
            }
        }
        ControlFlow::Continue(())
    })?;
    let mut problems = Vec::new();
    let mut problem = |seq: Seq, message: String| {
        problems.push(Problem {
            cast: head.cast.clone(),
            seq,
            kind: ProblemKind::Blob,
            message,
        });
    };
    for (seq, hash) in stored_by_older {
        if let Some(bytes) = log.get_blob(&hash)?
            && blob_hash(&bytes) != hash
        {
            problem(
                seq,
                format!("blob {} does not match its content", hash.short()),
            );
        }
    }
    let mut damaged = std::collections::BTreeSet::new();
    // A body placed in many prompts is read and hashed once; each placing seq is reported.
    let mut checked: std::collections::HashMap<castlog_core::id::Digest, Option<String>> =
        std::collections::HashMap::new();
    for (seq, hash) in refs {
        let verdict = match checked.get(&hash) {
            Some(verdict) => verdict.clone(),
            None => {
                let verdict = match log.get_blob(&hash) {
                    Err(LogError::Corrupt { message, .. }) => {
                        Some(format!("blob {} is damaged: {message}", hash.short()))
                    }
                    Err(e) => return Err(e.into()),
                    Ok(None) => Some(format!("blob {} is missing", hash.short())),
                    Ok(Some(bytes)) if blob_hash(&bytes) != hash => {
                        Some(format!("blob {} does not match its content", hash.short()))
                    }
                    Ok(Some(_)) => None,
                };
                checked.insert(hash, verdict.clone());
                verdict
            }
        };
        if let Some(message) = verdict {
            damaged.insert(seq);
            problem(seq, message);
        }
    }
    if prompts.is_empty() {
        return Ok(problems);
    }
    let policy = match prompt::policy_of(log, &head.cast) {
        Ok(policy) => policy,
        Err(PromptError::Log(e)) => return Err(e.into()),
        Err(e) => {
            problem(prompts[0].0, format!("prompts cannot be rebuilt: {e}"));
            return Ok(problems);
        }
    };
    for (seq, hash, placements) in prompts {
        // A prompt whose entry blob is already reported is not reported twice.
        if damaged.contains(&seq) {
            continue;
        }
        match prompt::messages(log, policy, &hash, &placements) {
            Ok(_) => {}
            Err(PromptError::Log(e)) => return Err(e.into()),
            Err(e) => problem(seq, format!("the prompt does not rebuild: {e}")),
        }
    }
    Ok(problems)
}

/// What is wrong with the kept checkpoints of the projections `replay` and `export` use.
fn projection_checkpoints(
    log: &SqliteLog,
    cast: &castlog_core::id::CastId,
) -> Result<Vec<(Seq, String)>, LogError> {
    use castlog_projections::manifest::Manifest;
    use castlog_projections::projection::{check_checkpoint, check_checkpoint_seal};
    use castlog_projections::views::{CastView, Timeline, Usage};
    Ok([
        check_checkpoint::<CastView>(log, log, cast)?,
        check_checkpoint::<Usage>(log, log, cast)?,
        check_checkpoint_seal::<Timeline>(log, log, cast)?,
        check_checkpoint::<Manifest>(log, log, cast)?,
    ]
    .into_iter()
    .flatten()
    .collect())
}
