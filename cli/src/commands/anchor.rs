//! `anchor`, and the anchor file kept up to date by the commands that write (`--anchor FILE`
//! or `CASTLOG_ANCHOR`). The format and what an anchor proves are in `castlog_events::anchor`.

use std::io::Write;
use std::path::Path;

use castlog_core::id::CastId;
use castlog_events::anchor::{Advance, Anchor, check};
use castlog_events::verify::Problem;
use castlog_events::{CastHead, Database, EventLog};
use serde::Serialize;

use crate::args::AnchorArgs;
use crate::error::CliError;
use crate::output;

/// Reads the anchor at `path`; a file that does not exist is an empty anchor only when
/// `missing_ok` (a command that keeps an anchor starts one).
pub fn read(path: &Path, missing_ok: bool) -> Result<Anchor, CliError> {
    match std::fs::read(path) {
        Ok(bytes) => Anchor::parse(&bytes).map_err(|e| {
            CliError::user(format!(
                "cannot read anchor {}: {e}; an anchor is written by `castlog anchor -o FILE`",
                path.display()
            ))
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && missing_ok => Ok(Anchor::new()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(CliError::user(format!(
            "no anchor file at {}: write one with `castlog anchor --all -o {}`",
            path.display(),
            path.display()
        ))),
        Err(e) => Err(CliError::user(format!(
            "cannot read anchor {}: {e}",
            path.display()
        ))),
    }
}

/// Writes `anchor` to `path` whole: a temporary file beside it, synced, then renamed over it,
/// so a crash leaves either the old anchor or the new one, never half of one.
fn write(path: &Path, anchor: &Anchor) -> Result<(), CliError> {
    let failed =
        |e: std::io::Error| CliError::user(format!("cannot write anchor {}: {e}", path.display()));
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    let name = path
        .file_name()
        .map_or_else(|| "anchor".into(), |n| n.to_string_lossy().into_owned());
    let temp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
    let result = (|| {
        let mut file = std::fs::File::create(&temp)?;
        file.write_all(anchor.render().as_bytes())?;
        file.sync_all()?;
        std::fs::rename(&temp, path)?;
        // The rename is durable once the directory is; a directory that cannot be opened
        // for syncing (some file systems) still has the file renamed.
        if let Ok(dir) = std::fs::File::open(dir) {
            let _ = dir.sync_all();
        }
        Ok(())
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&temp);
    }
    result.map_err(failed)
}

/// The problems of the casts in `anchor` against the log, as one integrity error that names
/// the first of them, or `None` when the log holds every anchored head.
fn refusal(problems: &[Problem], path: &Path, what: &str) -> Option<CliError> {
    let first = problems.first()?;
    Some(CliError::integrity(format!(
        "the log no longer holds what anchor {} recorded: cast {} seq {}: {}; {what}; `castlog \
         verify --anchor {}` lists every such cast",
        path.display(),
        first.cast,
        first.seq,
        first.message,
        path.display()
    )))
}

/// Before a command that writes: the log must still hold every head the anchor recorded,
/// so nothing is appended on top of a truncated or rewritten history.
pub fn check_before_writing(db: &Path, path: &Path) -> Result<(), CliError> {
    let anchor = read(path, true)?;
    if anchor.is_empty() {
        return Ok(());
    }
    let problems = match Database::open_existing(db) {
        Ok(log) => check(&log, &anchor, None)?,
        // A database that is gone (or empty) lost every anchored cast; it is not created to
        // say so.
        Err(castlog_events::LogError::NoDatabase { .. }) => {
            check(&castlog_events::InMemoryLog::new(), &anchor, None)?
        }
        Err(e) => return Err(e.into()),
    };
    match refusal(&problems, path, "nothing was written") {
        Some(err) => Err(err),
        None => Ok(()),
    }
}

/// After a command that wrote: the anchor moves to every stream's head (an entry whose stream
/// no longer holds it is kept as it was).
pub fn advance_after_writing(db: &Path, path: &Path) -> Result<(), CliError> {
    let log = match Database::open_existing(db) {
        Ok(log) => log,
        // Nothing was written (the command failed before it created the database).
        Err(castlog_events::LogError::NoDatabase { .. }) => return Ok(()),
        Err(e) => return Err(e.into()),
    };
    let mut anchor = read(path, true)?;
    let before = anchor.clone();
    for head in log.casts()? {
        anchor.advance(&log, &head)?;
    }
    if anchor != before || !path.exists() {
        write(path, &anchor)?;
    }
    Ok(())
}

#[derive(Serialize)]
struct Written<'a> {
    anchor: String,
    casts: Vec<AnchoredJson<'a>>,
}

#[derive(Serialize)]
struct AnchoredJson<'a> {
    cast: &'a CastId,
    seq: u64,
    hash: String,
    /// `added`, `moved` (the log extends what was anchored, or equals it) or `kept` (the log
    /// no longer holds the anchored head; the entry was not changed).
    change: &'static str,
}

/// `castlog anchor [CAST|--all] -o FILE`.
pub fn run(db: &Path, args: &AnchorArgs, global_anchor: Option<&Path>) -> Result<(), CliError> {
    let path = args.output.as_deref().or(global_anchor).ok_or_else(|| {
        CliError::user("name the anchor file: castlog anchor --all -o FILE (or set CASTLOG_ANCHOR)")
    })?;
    let log: Database = super::open(db)?;
    let heads: Vec<CastHead> = match &args.cast {
        Some(cast) => {
            let head = super::inspect::head_of(&log, cast)?;
            let mut heads = Vec::new();
            // A recast's history includes its ancestors' prefixes: anchor them too.
            for ancestor in castlog_events::log::ancestors(&log, &head.cast)? {
                heads.extend(log.head(&ancestor)?);
            }
            heads.push(head);
            heads
        }
        None => log.casts()?,
    };
    let mut anchor = read(path, true)?;
    let mut refused = Vec::new();
    let mut changes = Vec::new();
    for head in &heads {
        let change = match anchor.advance(&log, head)? {
            Advance::Added => "added",
            Advance::Moved => "moved",
            Advance::Refused(problem) => {
                refused.push(problem);
                "kept"
            }
        };
        changes.push((head, change));
    }
    // An anchor never drops history the log lost: the refused entries stay, the others move.
    write(path, &anchor)?;
    if args.json {
        output::json(&Written {
            anchor: path.display().to_string(),
            casts: changes
                .iter()
                .map(|(head, change)| {
                    let anchored = anchor.get(&head.cast);
                    AnchoredJson {
                        cast: &head.cast,
                        seq: anchored.map_or(head.seq.get(), |a| a.seq.get()),
                        hash: anchored.map_or(head.hash, |a| a.hash).to_hex(),
                        change,
                    }
                })
                .collect(),
        })?;
    } else {
        for (head, change) in &changes {
            if *change != "kept" {
                crate::say!("{} seq {} {}", head.cast, head.seq, head.hash.to_hex());
            }
        }
        crate::say!(
            "anchored {} casts in {}",
            changes.len() - refused.len(),
            path.display()
        );
    }
    match refusal(&refused, path, "its entry was kept as it was") {
        Some(err) => Err(err),
        None => Ok(()),
    }
}
