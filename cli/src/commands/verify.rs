//! `verify`: every chain, every link, every referenced blob.

use std::path::Path;

use castlog_core::event::Event;
use castlog_core::id::Seq;
use castlog_events::chain::blob_hash;
use castlog_events::sqlite::{DamagedCast, MisplacedEvent, Place};
use castlog_events::verify::{Problem, ProblemKind, verify_cast_visiting};
use castlog_events::{CastHead, Database, EventLog, LogError};
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
///
/// Damage found anywhere (a row or a page that cannot be read, a damaged `casts` table) is a
/// problem in the report, never an error that ends it: the report is always printed, and
/// only a failure that is not damage (the disk, a lock) ends the command without it.
pub fn run(db: &Path, args: &VerifyArgs, anchor: Option<&Path>) -> Result<(), CliError> {
    let anchor = anchor
        .map(|path| super::anchor::read(path, false))
        .transpose()?;
    let log = super::open(db)?;
    let mut report = Report {
        ok: true,
        casts: 0,
        events: 0,
        problems: Vec::new(),
    };
    let heads = match &args.cast {
        Some(cast) => named(&log, cast, &mut report.problems)?,
        None => listed(&log, &mut report.problems)?,
    };
    for head in &heads {
        report.casts += 1;
        let cast = head.cast.clone();
        if let Err(err) = verify_one(&log, head, &mut report) {
            report.problems.push(damage(err, &cast, Seq(0))?);
        }
    }
    if args.cast.is_none() {
        match log.orphaned_events() {
            Ok(orphaned) => {
                for (key, first, count) in orphaned {
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
            Err(err) => report.problems.push(damage(err, &table("events"), Seq(0))?),
        }
    }
    let verified: Vec<castlog_core::id::CastId> = heads.iter().map(|h| h.cast.clone()).collect();
    let only = args.cast.as_ref().map(|_| verified.as_slice());
    match log.misplaced_events(only) {
        Ok(rows) => report.problems.extend(rows.into_iter().map(misplaced)),
        Err(err) => report.problems.push(damage(err, &table("events"), Seq(0))?),
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

/// How a place that is not one cast is named in a problem: `#casts`, `#events` (a key of no
/// listed cast is `#KEY`, see [`misplaced`]).
fn table(name: &str) -> castlog_core::id::CastId {
    castlog_core::id::CastId::new(format!("#{name}"))
}

/// `err` as a problem at `cast` and `seq` when it is damage; any other error ends the command.
fn damage(err: LogError, cast: &castlog_core::id::CastId, seq: Seq) -> Result<Problem, CliError> {
    match err {
        LogError::Corrupt { .. } => Ok(Problem {
            cast: cast.clone(),
            seq,
            kind: ProblemKind::Unreadable,
            message: err.to_string(),
        }),
        other => Err(other.into()),
    }
}

/// Every cast the log lists; rows of `casts` that cannot be read, and damage of the table or
/// of its index of names, are problems.
fn listed(log: &Database, problems: &mut Vec<Problem>) -> Result<Vec<CastHead>, CliError> {
    let audit = log.audit_casts()?;
    problems.extend(audit.damaged.into_iter().map(damaged_cast));
    Ok(audit.heads)
}

/// A damaged row of `casts` (named by its cast id when readable, else by its key), or
/// damage of the whole table (`#casts`).
fn damaged_cast(row: DamagedCast) -> Problem {
    let cast = match (row.cast, row.key) {
        (Some(cast), _) => cast,
        (None, Some(key)) => castlog_core::id::CastId::new(format!("#{key}")),
        (None, None) => table("casts"),
    };
    let message = match row.key {
        Some(key) => format!(
            "its row in casts (key {key}) cannot be read: {}",
            row.message
        ),
        None => row.message,
    };
    Problem {
        cast,
        seq: Seq(0),
        kind: ProblemKind::Unreadable,
        message,
    }
}

/// The named cast and the casts it was recast from (its prefix is their events). A cast the
/// log does not find is a user's mistake only if the `casts` table is intact: a damaged one
/// (a row that does not decode, a name its index lacks) may be what hides it.
fn named(
    log: &Database,
    cast: &str,
    problems: &mut Vec<Problem>,
) -> Result<Vec<CastHead>, CliError> {
    let id = castlog_core::id::CastId::new(cast);
    let head = match log.head(&id) {
        Ok(Some(head)) => head,
        Ok(None) => {
            let audit = log.audit_casts()?;
            if audit.damaged.is_empty() {
                return Err(super::inspect::unknown_cast(cast));
            }
            problems.extend(audit.damaged.into_iter().map(damaged_cast));
            return Ok(Vec::new());
        }
        Err(err) => {
            problems.push(damage(err, &id, Seq(0))?);
            return Ok(Vec::new());
        }
    };
    let mut heads = vec![head.clone()];
    let ancestors = castlog_events::log::ancestors(log, &head.cast).and_then(|ancestors| {
        ancestors
            .iter()
            .map(|ancestor| log.head(ancestor))
            .collect::<Result<Vec<_>, _>>()
    });
    match ancestors {
        Ok(found) => heads.extend(found.into_iter().flatten()),
        Err(err) => problems.push(damage(err, &head.cast, Seq(0))?),
    }
    Ok(heads)
}

/// Verifies one cast into `report`: its chain, blobs, prompts, kept snapshots and
/// checkpoints, and a re-decision of its inputs.
fn verify_one(log: &Database, head: &CastHead, report: &mut Report) -> Result<(), LogError> {
    // The blobs and prompts the events name are gathered in the chain check's own pass.
    let mut named = Named::default();
    let verified = verify_cast_visiting(log, head, super::CONTEXTS, &mut |record| {
        named.gather(record);
    })?;
    report.events += verified.events;
    let intact = verified.problems.is_empty();
    // Re-deciding (a pass of its own over the cast) runs beside the checks of the blobs, the
    // prompts and the caches; their problems are reported in the same order as one after the
    // other.
    let (checked, diverged) = std::thread::scope(|scope| {
        let redecided = intact.then(|| scope.spawn(|| redecide_one(log, head)));
        let checked = check_stored(log, head, &verified.problems, intact, named);
        let diverged = match redecided {
            Some(thread) => thread
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic)),
            None => Ok(None),
        };
        (checked, diverged)
    });
    report.problems.extend(verified.problems);
    report.problems.extend(checked?);
    if let Some(d) = diverged? {
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
    Ok(())
}

/// Re-decides an intact cast: each re-decide passes over a stream that is not its context's
/// (a cast, an engage run). A damaged chain is not re-decided: it is already reported at its
/// seq.
fn redecide_one(
    log: &Database,
    head: &CastHead,
) -> Result<Option<castlog_replay::redecide::Divergence>, LogError> {
    match redecide(log, &head.cast)? {
        Some(d) => Ok(Some(d)),
        None => castlog_engage::redecide::redecide(log, &head.cast),
    }
}

/// The problems of a cast's blobs and prompts, its lane heads and its caches, after the chain
/// check found `chain` (`intact`: none).
fn check_stored(
    log: &Database,
    head: &CastHead,
    chain: &[Problem],
    intact: bool,
    named: Named,
) -> Result<Vec<Problem>, LogError> {
    let mut problems = Vec::new();
    // Rebuilding a recast's prompts reads its ancestors; without its parent (reported
    // above) they cannot be checked. Rows the chain check could not read are reported
    // there, and their blobs are not looked for.
    let orphan = chain.iter().any(|p| p.kind == ProblemKind::ForkParent);
    if !orphan {
        problems.extend(check_blobs(log, head, named)?);
    }
    // Kept state snapshots and projection checkpoints are caches (`state --at`, `replay`,
    // `export --artifacts` start from them): each must be the fold of the log at its seq.
    if intact {
        let snapshots =
            castlog_replay::driver::check_snapshots(log, &head.cast).or_else(|e| match e {
                DriveError::Log(log) => Err(log),
                // A cast the machine does not fold keeps no snapshots.
                _ => Ok(Vec::new()),
            })?;
        for (seq, message) in castlog_replay::driver::check_lane_heads(log, &head.cast)? {
            problems.push(Problem {
                cast: head.cast.clone(),
                seq,
                kind: ProblemKind::Lane,
                message,
            });
        }
        let checkpoints = projection_checkpoints(log, &head.cast)?;
        for (seq, message) in snapshots.into_iter().chain(checkpoints) {
            problems.push(Problem {
                cast: head.cast.clone(),
                seq,
                kind: ProblemKind::Snapshot,
                message,
            });
        }
    }
    Ok(problems)
}

/// What a cast's events name in the blob store, gathered while its chain is checked: the
/// blobs each references, the prompts each dispatched and the system folds an older castlog
/// also stored. Rows that cannot be read or decoded name nothing (the chain check reports
/// them).
#[derive(Default)]
struct Named {
    refs: Vec<(Seq, castlog_core::id::Digest)>,
    prompts: Vec<(
        Seq,
        castlog_core::id::Digest,
        Vec<castlog_core::event::Placement>,
    )>,
    stored_by_older: Vec<(Seq, castlog_core::id::Digest)>,
}

impl Named {
    fn gather(&mut self, record: &castlog_events::Recorded) {
        let Ok(event) = record.event() else { return };
        for hash in event.blob_refs() {
            self.refs.push((record.seq, hash));
        }
        if let Event::PromptDispatched(e) = event {
            // The system fold is named by digest; an older castlog also stored it.
            if let Some(system) = e.system_hash {
                self.stored_by_older.push((record.seq, system));
            }
            self.prompts.push((record.seq, e.prompt_hash, e.placements));
        }
    }
}

/// Every blob an event references must be present and match its address, and every
/// dispatched prompt must rebuild from its entry blobs to its recorded digest.
fn check_blobs(log: &Database, head: &CastHead, named: Named) -> Result<Vec<Problem>, LogError> {
    let Named {
        refs,
        prompts,
        stored_by_older,
    } = named;
    // Every blob read below shares one read transaction, taken after the events that name
    // them were read (blobs are only added, so none of theirs is missing from it).
    let _pinned = log.pin_blob_reads()?;
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
                    Err(e) => return Err(e),
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
        Err(PromptError::Log(e)) => return Err(e),
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
        match prompt::messages(log, &policy, &hash, &placements) {
            Ok(_) => {}
            Err(PromptError::Log(e @ LogError::Corrupt { .. })) => {
                problem(seq, format!("the prompt cannot be read: {e}"));
            }
            Err(PromptError::Log(e)) => return Err(e),
            Err(e) => problem(seq, format!("the prompt does not rebuild: {e}")),
        }
    }
    Ok(problems)
}

/// What is wrong with the kept checkpoints of the projections `replay` and `export` use.
fn projection_checkpoints(
    log: &Database,
    cast: &castlog_core::id::CastId,
) -> Result<Vec<(Seq, String)>, LogError> {
    use castlog_projections::manifest::Manifest;
    use castlog_projections::projection::check_checkpoint;
    use castlog_projections::views::{CastView, Timeline, Usage};
    Ok([
        check_checkpoint::<CastView>(log, log, cast)?,
        check_checkpoint::<Usage>(log, log, cast)?,
        check_checkpoint::<Timeline>(log, log, cast)?,
        check_checkpoint::<Manifest>(log, log, cast)?,
    ]
    .into_iter()
    .flatten()
    .collect())
}
