//! `casts` and `show`: reading what the log holds, and naming a point of a cast to read at.

use std::ops::ControlFlow;
use std::path::Path;

use castlog_core::event::{DecodeError, Event};
use castlog_core::id::{CastId, Seq};
use castlog_events::{CastHead, Database, Decoder, EventLog, ForkPoint, Recorded, StreamKind};
use castlog_projections::timeline::TimelineLine;
use serde::Serialize;
use serde_json::Value;

use crate::args::{CastsArgs, ShowArgs};
use crate::error::CliError;
use crate::output;

#[derive(Serialize)]
struct CastRow {
    cast: String,
    /// The stream's kind: `cast`, or (listed with `--all`) `claims_ledger` for a destination's
    /// ledger chain, `engagement` for an engage run.
    kind: &'static str,
    head: u64,
    hash: String,
    parent: Option<ForkPoint>,
    created_ms: u64,
    /// Where it is in the fleet's work (see `fleet`).
    #[serde(flatten)]
    place: super::fleet::Place,
}

impl CastRow {
    fn of(head: &CastHead, place: super::fleet::Place) -> Self {
        CastRow {
            place,
            cast: head.cast.to_string(),
            kind: head.kind.as_str(),
            head: head.seq.get(),
            hash: head.hash.to_hex(),
            parent: head.parent.clone(),
            created_ms: head.created_ms,
        }
    }
}

/// `castlog casts [--all]`.
pub fn casts(db: &Path, args: &CastsArgs) -> Result<(), CliError> {
    let json = args.json;
    let log = super::open(db)?;
    let mut heads = log.casts()?;
    if !args.all {
        heads.retain(|h| h.kind == StreamKind::Cast);
    }
    group_lanes(&mut heads);
    let fleet = super::fleet::Fleet::read(&log)?;
    let mut rows: Vec<CastRow> = heads
        .iter()
        .map(|h| CastRow::of(h, fleet.place(&log, h)))
        .collect();
    if let Some(wanted) = &args.status {
        rows.retain(|r| r.place.status == Some(wanted.as_str()));
        heads.retain(|h| rows.iter().any(|r| r.cast == h.cast.as_str()));
    }
    if json {
        return output::json(&serde_json::json!({ "casts": rows }));
    }
    if heads.is_empty() {
        crate::say!("no casts in {}", db.display());
        return Ok(());
    }
    // The cast column is as wide as the longest id, so long ids (generated ones are 30
    // characters) never push the other columns out of line.
    let width = heads
        .iter()
        .map(|h| h.cast.as_str().chars().count())
        .max()
        .unwrap_or(0)
        .max("cast".len());
    crate::say!(
        "{:<width$}  {:>7}  {:<12}  {:<24}  {:<10}  {:<24}  parent",
        "cast",
        "events",
        "head",
        "created",
        "status",
        "holder"
    );
    for (head, row) in heads.iter().zip(&rows) {
        let parent = head
            .parent
            .as_ref()
            .map(|p| format!("{}@{}", p.cast, p.seq))
            .unwrap_or_default();
        crate::say!(
            "{:<width$}  {:>7}  {:<12}  {:<24}  {:<10}  {:<24}  {parent}",
            head.cast.as_str(),
            head.seq.get(),
            head.hash.short(),
            output::timestamp(head.created_ms),
            row.place.status.unwrap_or("-"),
            row.place.holder.as_deref().unwrap_or("-"),
        );
    }
    Ok(())
}

/// Whether `head` is a parallel lane of its fork parent (`PARENT.lane-NAME`).
fn is_lane(head: &CastHead) -> bool {
    head.parent
        .as_ref()
        .is_some_and(|p| head.cast.as_str().starts_with(&format!("{}.lane-", p.cast)))
}

/// Lists every lane right after its parent (in the order the lanes were created), the other
/// casts in the order the log lists them.
fn group_lanes(heads: &mut Vec<CastHead>) {
    let all = std::mem::take(heads);
    let listed: std::collections::HashSet<CastId> = all.iter().map(|h| h.cast.clone()).collect();
    let (lanes, others): (Vec<CastHead>, Vec<CastHead>) = all
        .into_iter()
        .partition(|h| is_lane(h) && h.parent.as_ref().is_some_and(|p| listed.contains(&p.cast)));
    for head in others {
        let cast = head.cast.clone();
        heads.push(head);
        heads.extend(
            lanes
                .iter()
                .filter(|l| l.parent.as_ref().is_some_and(|p| p.cast == cast))
                .cloned(),
        );
    }
}

/// The head of `cast`, or a user error naming it.
pub fn head_of(log: &dyn EventLog, cast: &str) -> Result<CastHead, CliError> {
    log.head(&CastId::new(cast))?
        .ok_or_else(|| unknown_cast(cast))
}

/// A point of a cast for reading: any seq, SOCKET:VISIT, or a waypoint name.
pub fn point(log: &Database, cast: &CastId, at: &str) -> Result<Seq, CliError> {
    let Some(n) = castlog_replay::recast::seq_number(at) else {
        return Ok(castlog_replay::recast::resolve_at(log, cast, at)?);
    };
    let head = head_of(log, cast.as_str())?;
    if n == 0 || n > head.seq.get() {
        return Err(CliError::user(format!(
            "--at {n} is outside cast {cast}: its events are seq 1 to {}",
            head.seq
        )));
    }
    Ok(Seq(n))
}

/// The error for a cast the database does not have.
pub fn unknown_cast(cast: &str) -> CliError {
    CliError::user(format!(
        "no cast named {cast:?} in this database (see `castlog casts`)"
    ))
}

#[derive(Serialize)]
struct ShowEvent {
    seq: u64,
    at_ms: u64,
    kind: String,
    v: u16,
    hash: String,
    summary: String,
    payload: Value,
}

/// The `--json` shape of one event (its keys print sorted, as every `json!` object's do), given
/// what it decodes to in its cast's order.
pub(crate) fn show_event(record: &Recorded, decoded: Result<&Event, &DecodeError>) -> Value {
    let line = TimelineLine::of(record, decoded, super::CONTEXTS);
    serde_json::to_value(ShowEvent {
        seq: record.seq.get(),
        at_ms: record.at_ms,
        kind: record.kind.clone(),
        v: record.v,
        hash: record.hash.to_hex(),
        summary: line.summary,
        payload: shown_payload(record, decoded.ok()),
    })
    .unwrap_or(Value::Null)
}

/// The stored payload as JSON, with what a format version leaves out of it put back (as the
/// decoder reads it), so `--json` readers find the same fields in every version: a
/// `socket_completed` whose `parsed_from_output` is set shows its `parsed` too, as version 1
/// stored it, and one that names the reply its output is (`output_of`, version 3) its
/// `output`; a `data_assigned` that names its completion (`value_of`, version 2) shows its
/// `value`, and a `rework_routed` (`reason_of`, version 2) its `reason`.
fn shown_payload(record: &Recorded, event: Option<&Event>) -> Value {
    let mut payload = serde_json::from_slice(&record.payload).unwrap_or(Value::Null);
    let Value::Object(fields) = &mut payload else {
        return payload;
    };
    let mut put_back = |named: &str, field: &str, value: Value| {
        if fields.contains_key(named) && !fields.contains_key(field) {
            fields.insert(field.into(), value);
        }
    };
    match event {
        Some(Event::SocketCompleted(completed)) => {
            if let Some(parsed) = &completed.parsed {
                put_back("parsed_from_output", "parsed", parsed.clone());
            }
            put_back(
                "output_of",
                "output",
                Value::String(completed.output.clone()),
            );
        }
        Some(Event::DataAssigned(assigned)) => {
            put_back("value_of", "value", assigned.value.clone());
        }
        Some(Event::ReworkRouted(rework)) => {
            put_back("reason_of", "reason", Value::String(rework.reason.clone()));
        }
        _ => {}
    }
    payload
}

/// One event as `show` prints it: seq, time, kind and summary.
pub(crate) fn say_event(record: &Recorded, decoded: Result<&Event, &DecodeError>) {
    let line = TimelineLine::of(record, decoded, super::CONTEXTS);
    crate::say!(
        "{:>6}  {}  {:<26} {}",
        line.seq,
        output::timestamp(line.at_ms),
        line.kind,
        line.summary
    );
}

/// `castlog show CAST`. The events are printed as they are read (one in memory at a time).
pub fn show(db: &Path, args: &ShowArgs) -> Result<(), CliError> {
    let log = super::open(db)?;
    let head = head_of(&log, &args.cast)?;
    if args.follow {
        return super::follow::follow(&log, &head.cast, args.json, show_event);
    }
    if args.json {
        let events = output::Scanned::new(&log, &head.cast, show_event);
        let document = output::WithField::new(
            serde_json::json!({
                "cast": head.cast,
                "head": head.seq,
                "hash": head.hash,
                "parent": head.parent,
            }),
            "events",
            &events,
        );
        return output::json(&document).map_err(|e| events.failure().map_or(e, CliError::from));
    }
    if let Some(parent) = &head.parent {
        crate::say!(
            "cast {} (fork of {} at seq {}, {})",
            head.cast,
            parent.cast,
            parent.seq,
            parent.hash.short()
        );
    } else {
        crate::say!("cast {}", head.cast);
    }
    let mut decoder = Decoder::new();
    log.scan(&head.cast, Seq::FIRST, &mut |record| {
        say_event(&record, decoder.event_in(&log, &record).as_ref());
        ControlFlow::Continue(())
    })?;
    crate::say!("head {} {}", head.seq, head.hash.short());
    Ok(())
}
