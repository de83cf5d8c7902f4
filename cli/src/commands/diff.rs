//! `diff`: two casts side by side, from the log alone.
//!
//! Steps are socket visits, aligned by (socket, item, visit). For each step castlog compares the
//! rendered prompts (text diff and placements), the output, the edge taken after it and the
//! `state.data` writes it made. Text diffs come from the `similar` crate.
//!
//! The two histories are walked once, side by side; of each step only its key, a digest of
//! what is compared and where its events are stay in memory. Steps whose digests differ are
//! read again from the log and compared in full, so a long diff holds neither cast's outputs.

use std::collections::BTreeMap;
use std::path::Path;

use castlog_core::event::{Event, Placement, Target};
use castlog_core::id::{CastId, Digest, Seq};
use castlog_core::prompt::Policy;
use castlog_events::{Database, EventLog, Recorded};
use castlog_projections::prompt;
use castlog_replay::recast::with_history;
use serde::Serialize;
use serde_json::{Value, json};
use similar::TextDiff;

use crate::args::DiffArgs;
use crate::error::CliError;
use crate::output;

#[derive(Debug, Serialize)]
struct Change {
    field: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    diff: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    path: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    a: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    b: Option<Value>,
}

/// One socket visit of a cast, in full. Made while its events are read and then kept only as
/// a [`Kept`]; rebuilt from the log ([`reread`]) where two casts' steps differ.
#[derive(Debug, Clone, Default, PartialEq)]
struct Step {
    /// Each turn's prompt digest with its placements (text is rebuilt only where two differ).
    prompts: Vec<(u32, Digest, Vec<Placement>)>,
    placements: Vec<String>,
    output: Option<String>,
    routing: Option<String>,
    data: BTreeMap<String, Value>,
}

impl Step {
    fn apply(&mut self, event: Event) {
        match event {
            Event::PromptDispatched(e) => {
                // The same prompt sent again (a held or forked prompt, a retry) is one
                // prompt of the step, not a second.
                let again = self
                    .prompts
                    .last()
                    .is_some_and(|(turn, hash, _)| *turn == e.turn.get() && *hash == e.prompt_hash);
                if e.redispatch && again {
                    return;
                }
                for p in &e.placements {
                    self.placements.push(format!(
                        "turn {} {} {} #{} {}",
                        e.turn,
                        p.entry,
                        castlog_core::syntax::json_name(&p.destination),
                        p.position,
                        p.rule
                    ));
                }
                self.prompts
                    .push((e.turn.get(), e.prompt_hash, e.placements));
            }
            Event::SocketCompleted(e) => self.output = Some(e.output),
            Event::DataAssigned(e) => {
                self.data.insert(e.path, e.value);
            }
            Event::EdgeTaken(e) => {
                let to = match e.to {
                    Target::Socket(s) => s.to_string(),
                    Target::End => "end".into(),
                };
                let when = castlog_core::syntax::json_name(&e.when);
                self.routing = Some(format!("{} -> {to} ({when})", e.from));
            }
            _ => {}
        }
    }

    /// A digest of everything [`compare`] looks at, each part length-prefixed so that no two
    /// different steps encode alike: two steps with the same digest compare the same.
    fn digest(&self) -> Digest {
        let mut bytes = Vec::new();
        let mut part = |b: &[u8]| {
            bytes.extend_from_slice(&(b.len() as u64).to_be_bytes());
            bytes.extend_from_slice(b);
        };
        part(&(self.prompts.len() as u64).to_be_bytes());
        for (turn, hash, _) in &self.prompts {
            part(&turn.to_be_bytes());
            part(&hash.0);
        }
        part(&(self.placements.len() as u64).to_be_bytes());
        for p in &self.placements {
            part(p.as_bytes());
        }
        for text in [&self.output, &self.routing] {
            match text {
                Some(t) => {
                    part(b"some");
                    part(t.as_bytes());
                }
                None => part(b"none"),
            }
        }
        part(
            serde_json::to_string(&self.data)
                .unwrap_or_default()
                .as_bytes(),
        );
        castlog_events::chain::blob_hash(&bytes)
    }
}

/// Consecutive events of one cast (`first..=last`), by the cast's place in [`Steps::casts`].
#[derive(Debug, Clone, Copy)]
struct Span {
    cast: usize,
    first: u64,
    last: u64,
}

/// What is kept of a step for the whole walk: its key, its digest and where its events are (a
/// recast's step that began before the fork point has events in two casts).
#[derive(Debug)]
struct Kept {
    key: String,
    digest: Digest,
    spans: Vec<Span>,
}

/// A cast's steps, made as its history is read: only the step the next events belong to is
/// held in full, so what the walk keeps per step does not grow with its outputs or prompts.
#[derive(Debug, Default)]
struct Steps {
    kept: Vec<Kept>,
    /// The casts the history's events come from (the cast and its ancestors).
    casts: Vec<CastId>,
    /// The step the next events belong to.
    open: Option<Step>,
}

impl Steps {
    fn push(&mut self, record: &Recorded) {
        let Ok(event) = record.event() else { return };
        if let Event::SocketStarted(e) = &event {
            self.close();
            let item = e
                .item
                .as_ref()
                .map_or_else(|| "-".to_owned(), ToString::to_string);
            let key = format!("{} {item} #{}", e.socket, e.visit);
            self.kept.push(Kept {
                key,
                digest: Digest([0; 32]),
                spans: Vec::new(),
            });
            self.open = Some(Step::default());
        }
        let Some(step) = self.open.as_mut() else {
            return;
        };
        step.apply(event);
        let cast = match self.casts.iter().position(|c| *c == record.cast) {
            Some(i) => i,
            None => {
                self.casts.push(record.cast.clone());
                self.casts.len() - 1
            }
        };
        let seq = record.seq.get();
        if let Some(kept) = self.kept.last_mut() {
            match kept.spans.last_mut() {
                Some(span) if span.cast == cast && span.last < seq => span.last = seq,
                _ => kept.spans.push(Span {
                    cast,
                    first: seq,
                    last: seq,
                }),
            }
        }
    }

    /// Seals the open step: its digest is all that stays of its content.
    fn close(&mut self) {
        if let (Some(step), Some(kept)) = (self.open.take(), self.kept.last_mut()) {
            kept.digest = step.digest();
        }
    }

    fn finish(mut self) -> Self {
        self.close();
        self
    }
}

/// A kept step in full again, from its events in the log.
fn reread(log: &Database, casts: &[CastId], kept: &Kept) -> Result<Step, CliError> {
    let mut steps = Steps::default();
    for span in &kept.spans {
        let cast = casts
            .get(span.cast)
            .ok_or_else(|| CliError::internal("a step names a cast the walk did not read"))?;
        for record in log.read(cast, Seq(span.first), Some(Seq(span.last)))? {
            steps.push(&record);
        }
    }
    steps.open.ok_or_else(|| {
        CliError::internal(format!("the events of step {} were not found", kept.key))
    })
}

/// The text of a step's prompts, rebuilt from the log (`=== turn N` then each message).
fn prompt_text(log: &Database, policy: &Policy, step: &Step) -> Result<String, CliError> {
    let mut text = String::new();
    for (turn, hash, placements) in &step.prompts {
        text.push_str(&format!("=== turn {turn}\n"));
        for m in prompt::messages(log, policy, hash, placements)? {
            text.push_str(&format!("--- {}\n{}\n", m.role.as_str(), m.content));
        }
    }
    Ok(text)
}

fn text_diff(a: &str, b: &str) -> String {
    TextDiff::from_lines(a, b)
        .unified_diff()
        .context_radius(2)
        .header("a", "b")
        .to_string()
}

/// The two casts' steps and how to rebuild each side's prompt text.
struct Sides<'a> {
    log: &'a Database,
    a: &'static Policy,
    b: &'static Policy,
}

fn compare(sides: &Sides<'_>, a: &Step, b: &Step) -> Result<Vec<Change>, CliError> {
    let mut changes = Vec::new();
    let digests = |s: &Step| s.prompts.iter().map(|p| (p.0, p.1)).collect::<Vec<_>>();
    if digests(a) != digests(b) {
        let (ta, tb) = (
            prompt_text(sides.log, sides.a, a)?,
            prompt_text(sides.log, sides.b, b)?,
        );
        changes.push(Change {
            field: "prompt",
            diff: Some(text_diff(&ta, &tb)),
            path: None,
            a: None,
            b: None,
        });
    }
    if a.placements != b.placements {
        changes.push(Change {
            field: "placements",
            diff: Some(text_diff(
                &a.placements.join("\n"),
                &b.placements.join("\n"),
            )),
            path: None,
            a: None,
            b: None,
        });
    }
    if a.output != b.output {
        changes.push(Change {
            field: "output",
            diff: Some(text_diff(
                a.output.as_deref().unwrap_or(""),
                b.output.as_deref().unwrap_or(""),
            )),
            path: None,
            a: None,
            b: None,
        });
    }
    if a.routing != b.routing {
        changes.push(Change {
            field: "routing",
            diff: None,
            path: None,
            a: a.routing.clone().map(Value::String),
            b: b.routing.clone().map(Value::String),
        });
    }
    let paths: std::collections::BTreeSet<&String> = a.data.keys().chain(b.data.keys()).collect();
    for path in paths {
        let (va, vb) = (a.data.get(path), b.data.get(path));
        if va != vb {
            changes.push(Change {
                field: "data",
                diff: None,
                path: Some(format!("state.{path}")),
                a: va.cloned(),
                b: vb.cloned(),
            });
        }
    }
    Ok(changes)
}

/// An event made comparable across casts: the cast id (in `cast_started` and in dispatch keys)
/// is the only expected difference between two runs of the same thing.
fn normalized(record: &Recorded) -> (String, Vec<u8>) {
    let own = |key: &castlog_core::id::DispatchKey| {
        castlog_core::id::DispatchKey::new(
            key.as_str()
                .strip_prefix(&format!("{}:", record.cast))
                .unwrap_or(key.as_str()),
        )
    };
    let event = match record.event() {
        Ok(Event::CastStarted(mut e)) => {
            e.cast = CastId::new("");
            Event::CastStarted(e)
        }
        Ok(Event::DispatchScheduled(mut e)) => {
            e.key = own(&e.key);
            Event::DispatchScheduled(e)
        }
        Ok(Event::DispatchSkipped(mut e)) => {
            e.key = own(&e.key);
            Event::DispatchSkipped(e)
        }
        Ok(other) => other,
        Err(_) => return (record.kind.clone(), record.payload.clone()),
    };
    (record.kind.clone(), event.encode())
}

/// Two histories walked side by side: their common prefix, where they part, their steps.
struct Walked {
    common: u64,
    first_divergence: Option<Value>,
    a: Steps,
    b: Steps,
}

fn walk(ha: &mut dyn Iterator<Item = Recorded>, hb: &mut dyn Iterator<Item = Recorded>) -> Walked {
    let decision = |r: &Recorded| r.kind != "cast_forked";
    let (mut ha, mut hb) = (ha.filter(decision), hb.filter(decision));
    // A shared ancestor's record is the same record on both sides: no need to re-encode it.
    let same = |x: &Recorded, y: &Recorded| {
        (x.cast == y.cast && x.seq == y.seq && x.hash == y.hash) || normalized(x) == normalized(y)
    };
    let (mut sa, mut sb) = (Steps::default(), Steps::default());
    let mut common = 0u64;
    let (x, y) = loop {
        match (ha.next(), hb.next()) {
            (Some(x), Some(y)) if same(&x, &y) => {
                common += 1;
                sa.push(&x);
                sb.push(&y);
            }
            parted => break parted,
        }
    };
    let describe = |r: &Option<Recorded>| {
        r.as_ref().map(|r| {
            let line = castlog_projections::timeline::TimelineLine::of(r);
            json!({ "kind": line.kind, "summary": line.summary })
        })
    };
    let first_divergence = (x.is_some() || y.is_some())
        .then(|| json!({ "position": common + 1, "a": describe(&x), "b": describe(&y) }));
    for r in x.into_iter().chain(ha) {
        sa.push(&r);
    }
    for r in y.into_iter().chain(hb) {
        sb.push(&r);
    }
    Walked {
        common,
        first_divergence,
        a: sa.finish(),
        b: sb.finish(),
    }
}

/// `castlog diff A B`.
pub fn diff(db: &Path, args: &DiffArgs) -> Result<(), CliError> {
    let log = super::open(db)?;
    let report = compute(&log, &args.a, &args.b)?;
    if args.json {
        return output::json(&report);
    }
    print_text(&report);
    Ok(())
}

/// The diff of two casts as the `--json` document.
pub fn compute(log: &Database, a: &str, b: &str) -> Result<Value, CliError> {
    let a = super::inspect::head_of(log, a)?;
    let b = super::inspect::head_of(log, b)?;
    // Full histories (a recast's ancestors' prefix, then its own events), without the fork
    // markers: a recast that decided what its parent decided shares that much more with it.
    // Both are read side by side as they are compared, never held.
    let mut walked = None;
    let mut failed = None;
    with_history(log, &a.cast, &mut |ha| {
        if let Err(e) = with_history(log, &b.cast, &mut |hb| walked = Some(walk(ha, hb))) {
            failed = Some(e);
        }
    })?;
    if let Some(e) = failed {
        return Err(e.into());
    }
    let Walked {
        common,
        first_divergence,
        a: sa,
        b: sb,
    } = walked.ok_or_else(|| CliError::internal("the histories were not read"))?;
    let loadouts = {
        let (mut la, mut lb) = (None, None);
        with_history(log, &a.cast, &mut |h| la = loadout_of(h))?;
        with_history(log, &b.cast, &mut |h| lb = loadout_of(h))?;
        loadout_change(la, lb)
    };
    let sides = Sides {
        log,
        a: prompt::policy_of(log, &a.cast)?,
        b: prompt::policy_of(log, &b.cast)?,
    };
    // Steps by key, for lookups that stay linear on long casts.
    let by_a: std::collections::HashMap<&str, &Kept> =
        sa.kept.iter().map(|s| (s.key.as_str(), s)).collect();
    let by_b: std::collections::HashMap<&str, &Kept> =
        sb.kept.iter().map(|s| (s.key.as_str(), s)).collect();
    let mut keys: Vec<String> = sa.kept.iter().map(|s| s.key.clone()).collect();
    keys.extend(
        sb.kept
            .iter()
            .filter(|s| !by_a.contains_key(s.key.as_str()))
            .map(|s| s.key.clone()),
    );
    let mut counts = BTreeMap::from([("same", 0), ("changed", 0), ("only_a", 0), ("only_b", 0)]);
    let mut rows = Vec::new();
    for key in &keys {
        let (x, y) = (
            by_a.get(key.as_str()).copied(),
            by_b.get(key.as_str()).copied(),
        );
        let (status, changes) = match (x, y) {
            (Some(x), Some(y)) => {
                // Only steps whose digests differ are read again and compared in full.
                let changes = if x.digest == y.digest {
                    Vec::new()
                } else {
                    let x = reread(log, &sa.casts, x)?;
                    let y = reread(log, &sb.casts, y)?;
                    compare(&sides, &x, &y)?
                };
                (
                    if changes.is_empty() {
                        "same"
                    } else {
                        "changed"
                    },
                    changes,
                )
            }
            (Some(_), None) => ("only_a", Vec::new()),
            _ => ("only_b", Vec::new()),
        };
        *counts.entry(status).or_default() += 1;
        rows.push(json!({ "key": key, "status": status, "changes": changes }));
    }
    let outcome = |cast: &CastId| {
        castlog_replay::driver::fold(log, cast)
            .map(|(s, _)| s.status.as_str())
            .unwrap_or("unknown")
    };
    let (oa, ob) = (outcome(&a.cast), outcome(&b.cast));
    let summary = format!(
        "{} same, {} changed, {} only in {}, {} only in {}; {} {oa}, {} {ob}",
        counts["same"],
        counts["changed"],
        counts["only_a"],
        a.cast,
        counts["only_b"],
        b.cast,
        a.cast,
        b.cast
    );
    Ok(json!({
        "common_prefix": common,
        "first_divergence": first_divergence,
        "loadouts": loadouts,
        "steps": rows,
        "summary": summary,
    }))
}

/// The loadout a history runs under at its end: its start's, or the one a recast's `--config`
/// put in its place (name, hash, frozen JSON).
fn loadout_of(history: &mut dyn Iterator<Item = Recorded>) -> Option<(String, Digest, Value)> {
    let mut found = None;
    for record in history {
        match record.kind.as_str() {
            "cast_started" => {
                if let Ok(Event::CastStarted(e)) = record.event() {
                    found = Some((e.loadout_name, e.loadout_hash, e.loadout));
                }
            }
            "cast_forked" => {
                if let Ok(Event::CastForked(e)) = record.event()
                    && let (Some(hash), Some(loadout)) = (e.loadout_hash, e.loadout)
                {
                    let name = loadout["name"].as_str().unwrap_or_default().to_owned();
                    found = Some((name, hash, loadout));
                }
            }
            _ => {}
        }
    }
    found
}

/// `null` when both casts ran the same loadout; otherwise both names and hashes, the sockets
/// whose definition differs (or that only one has), and the other settings that differ.
fn loadout_change(a: Option<(String, Digest, Value)>, b: Option<(String, Digest, Value)>) -> Value {
    let (Some((name_a, hash_a, la)), Some((name_b, hash_b, lb))) = (a, b) else {
        return Value::Null;
    };
    if hash_a == hash_b {
        return Value::Null;
    }
    let empty = serde_json::Map::new();
    let sockets = |l: &Value| l["sockets"].as_object().cloned().unwrap_or_default();
    let (sa, sb) = (sockets(&la), sockets(&lb));
    let mut changed: Vec<&String> = sa
        .iter()
        .filter(|(id, def)| sb.get(*id) != Some(*def))
        .map(|(id, _)| id)
        .chain(sb.keys().filter(|id| !sa.contains_key(*id)))
        .collect();
    changed.sort();
    let (ta, tb) = (
        la.as_object().unwrap_or(&empty),
        lb.as_object().unwrap_or(&empty),
    );
    let mut settings: Vec<&String> = ta
        .keys()
        .chain(tb.keys().filter(|k| !ta.contains_key(*k)))
        .filter(|k| *k != "sockets" && *k != "name" && ta.get(*k) != tb.get(*k))
        .collect();
    settings.sort();
    json!({
        "a": {"name": name_a, "hash": hash_a},
        "b": {"name": name_b, "hash": hash_b},
        "sockets_changed": changed,
        "settings_changed": settings,
    })
}

fn print_text(report: &Value) {
    let common = &report["common_prefix"];
    let first_divergence = report["first_divergence"]
        .as_object()
        .map(|_| &report["first_divergence"]);
    let rows = report["steps"].as_array().cloned().unwrap_or_default();
    let summary = report["summary"].as_str().unwrap_or("");
    crate::say!("common prefix: {common} events");
    if let Some(l) = report["loadouts"].as_object() {
        let hash = |side: &str| {
            l[side]["hash"]
                .as_str()
                .map(|h| h.chars().take(12).collect::<String>())
                .unwrap_or_default()
        };
        let names = |field: &str| {
            let list: Vec<&str> = l[field]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect();
            if list.is_empty() {
                "none".to_owned()
            } else {
                list.join(", ")
            }
        };
        crate::say!(
            "loadouts differ: a {} {} / b {} {}; sockets changed: {}; settings changed: {}",
            l["a"]["name"].as_str().unwrap_or(""),
            hash("a"),
            l["b"]["name"].as_str().unwrap_or(""),
            hash("b"),
            names("sockets_changed"),
            names("settings_changed")
        );
    }
    if let Some(d) = &first_divergence {
        crate::say!(
            "first divergence at position {}: a {} / b {}",
            d["position"],
            d["a"],
            d["b"]
        );
    }
    for row in &rows {
        crate::say!(
            "{:<8} {}",
            row["status"].as_str().unwrap_or(""),
            row["key"].as_str().unwrap_or("")
        );
        for c in row["changes"].as_array().into_iter().flatten() {
            match c["field"].as_str() {
                Some("routing") => crate::say!("  routing: {} => {}", c["a"], c["b"]),
                Some("data") => crate::say!(
                    "  {}: {} => {}",
                    c["path"].as_str().unwrap_or(""),
                    c["a"],
                    c["b"]
                ),
                Some(field) => crate::say!("  {field}:\n{}", c["diff"].as_str().unwrap_or("")),
                None => {}
            }
        }
    }
    crate::say!("{summary}");
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A step whose digest matches another's is printed `same` without being read again, so
    /// steps that differ in any compared part, however slightly, must not share a digest.
    #[test]
    fn steps_that_compare_differently_have_different_digests() {
        let base = Step::default();
        let variants = [
            Step {
                output: Some(String::new()),
                ..Step::default()
            },
            Step {
                routing: Some(String::new()),
                ..Step::default()
            },
            Step {
                placements: vec!["ab".into()],
                ..Step::default()
            },
            Step {
                placements: vec!["a".into(), "b".into()],
                ..Step::default()
            },
            Step {
                data: BTreeMap::from([("x".to_owned(), Value::Null)]),
                ..Step::default()
            },
            Step {
                prompts: vec![(1, Digest([0; 32]), Vec::new())],
                ..Step::default()
            },
        ];
        let mut digests = vec![base.digest()];
        for step in &variants {
            let digest = step.digest();
            assert!(!digests.contains(&digest), "{step:?}");
            digests.push(digest);
        }
    }
}
