//! `castlog copy --from DB --to DB [CAST|--all]`: casts moved between databases (a SQLite
//! file and a PostgreSQL database, either way) as an export and an import would move them,
//! without a file between: the same records, bytes and hashes, so the copy has the source's
//! head hash and verifies on both. A cast the target holds already with the same head is
//! left as it is (a copy can be run again); with another head it is refused.

use castlog_core::id::CastId;
use castlog_events::codec;
use castlog_events::{CastHead, Database, EventLog};
use serde::Serialize;

use crate::args::CopyArgs;
use crate::error::CliError;
use crate::output;

#[derive(Serialize)]
struct Copied {
    cast: CastId,
    events: u64,
    head: String,
    /// `copied`, or `present` (the target held the same head already).
    outcome: &'static str,
}

#[derive(Serialize)]
struct Summary {
    from: String,
    to: String,
    casts: Vec<Copied>,
}

/// `castlog copy`.
pub fn run(args: &CopyArgs) -> Result<(), CliError> {
    let source = Database::open_existing(&args.from)?;
    let heads = match &args.cast {
        Some(cast) => with_ancestors(&source, cast)?,
        None => source.casts()?,
    };
    let target = Database::open(&args.to)?;
    let mut copied = Vec::with_capacity(heads.len());
    for head in &heads {
        copied.push(copy_one(&source, &target, head)?);
    }
    let summary = Summary {
        from: shown(&args.from),
        to: shown(&args.to),
        casts: copied,
    };
    if args.json {
        return output::json(&summary);
    }
    for cast in &summary.casts {
        crate::say!(
            "{} {} events, head {} ({})",
            cast.cast,
            cast.events,
            &cast.head[..12.min(cast.head.len())],
            cast.outcome
        );
    }
    let fresh = summary
        .casts
        .iter()
        .filter(|c| c.outcome == "copied")
        .count();
    crate::say!(
        "copied {fresh} of {} casts from {} to {}",
        summary.casts.len(),
        summary.from,
        summary.to
    );
    Ok(())
}

/// A `--from`/`--to` value as printed: a URL without its password.
fn shown(db: &std::path::Path) -> String {
    let text = db.display().to_string();
    castlog_events::postgres::Locator::parse(&text).map_or(text, |locator| locator.shown)
}

/// The named cast's ancestors (the root first), then the cast: a recast's parent must be in
/// the target before it.
fn with_ancestors(log: &Database, cast: &str) -> Result<Vec<CastHead>, CliError> {
    let head = super::inspect::head_of(log, cast)?;
    let mut heads = Vec::new();
    for ancestor in castlog_events::log::ancestors(log, &head.cast)?
        .into_iter()
        .rev()
    {
        heads.extend(log.head(&ancestor)?);
    }
    heads.push(head);
    Ok(heads)
}

fn copy_one(source: &Database, target: &Database, head: &CastHead) -> Result<Copied, CliError> {
    let done = |outcome| Copied {
        cast: head.cast.clone(),
        events: head.seq.get(),
        head: head.hash.to_string(),
        outcome,
    };
    if let Some(there) = target.head(&head.cast)? {
        if (there.seq, there.hash) == (head.seq, head.hash) {
            return Ok(done("present"));
        }
        return Err(CliError::user(format!(
            "cast {} is in the target already with another head (seq {} {}, the source's is seq {} {}); nothing of it was copied",
            head.cast,
            there.seq,
            there.hash.short(),
            head.seq,
            head.hash.short()
        )));
    }
    // The head as read with the events (a cast appended to meanwhile is copied as it is now).
    let export = codec::collect(source, &head.cast)?;
    let head = &export.head;
    // The chain is checked record by record before anything is stored (as `import` does).
    codec::import_in(target, &export, super::CONTEXTS)?;
    let stored = target.head(&head.cast)?;
    match stored {
        Some(stored) if (stored.seq, stored.hash) == (head.seq, head.hash) => Ok(Copied {
            cast: head.cast.clone(),
            events: head.seq.get(),
            head: head.hash.to_string(),
            outcome: "copied",
        }),
        other => Err(CliError::internal(format!(
            "cast {} was copied but the target's head is {:?}, not seq {} {}",
            head.cast,
            other.map(|h| (h.seq.get(), h.hash.short())),
            head.seq,
            head.hash.short()
        ))),
    }
}
