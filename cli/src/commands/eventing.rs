//! The event bus of a cast (`eventing` in its config): a thread beside the driver that
//! delivers the cast's bus events to its webhook sinks as they are recorded ([`Hooks`]), and
//! `castlog deliver`, which drains what is left.
//!
//! The thread reads the events from the log (the outbox, `castlog_projections::outbox`),
//! never from the driver: a notice of a durable record only wakes it. So whatever a crash
//! cut off is still in the log, and the next `run`, `resume`, `worker` or `deliver` goes on
//! from where the delivery record says each sink is. The cast never waits for a sink; when
//! the drive ends the thread is given at most [`FLUSH_WAIT`] to deliver the rest, and what
//! is still undelivered then waits in the outbox (a note on stderr says so).
//!
//! The eventing config is read from the config file the cast was started from (the
//! `config_source` of its `cast_started`, or of the cast it was recast from), so a resume
//! delivers to the sinks the cast was run with; `deliver --config FILE` names another. Header
//! values are in that file only: nothing castlog records or prints holds one.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use castlog_core::env::Clock;
use castlog_core::event::Event;
use castlog_core::eventing::{BusEvent, Eventing};
use castlog_core::id::{CastId, Seq, SocketId};
use castlog_core::loadout::load_config;
use castlog_events::{Database, EventLog, Recorded, StreamKind};
use castlog_projections::outbox::Outbox;
use castlog_replay::clock::SystemClock;
use castlog_replay::secrets::Redactor;
use castlog_replay::webhooks::{SinkPass, Webhooks};
use serde_json::{Value, json};

use crate::args::DeliverArgs;
use crate::error::CliError;
use crate::output;

/// How long the end of a drive waits for the last deliveries.
pub const FLUSH_WAIT: Duration = Duration::from_secs(10);

/// How many records the thread reads from the log at a time.
const READ_CHUNK: u64 = 256;

/// The config file `cast` was started from (its own `cast_started`, or its root's for a
/// recast), resolved against the current directory.
pub fn config_source(log: &(impl EventLog + ?Sized), cast: &CastId) -> Option<PathBuf> {
    let mut chain = vec![cast.clone()];
    chain.extend(castlog_events::log::ancestors(log, cast).unwrap_or_default());
    chain.iter().find_map(|link| {
        let first = log.read(link, Seq::FIRST, Some(Seq::FIRST)).ok()?;
        match first.first()?.event().ok()? {
            Event::CastStarted(started) => started.config_source.map(PathBuf::from),
            _ => None,
        }
    })
}

/// The `eventing` of the config at `path`.
pub fn eventing_in(path: &Path) -> Result<Eventing, CliError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| CliError::user(format!("cannot read config {}: {e}", path.display())))?;
    let config = load_config(&text).map_err(|e| CliError::from(e).context(path.display()))?;
    Ok(config.eventing)
}

/// The eventing of `cast` when it has sinks to deliver to: from `explicit`, else from the
/// config it was started from. `Ok(None)`: eventing is off (or the cast names no config).
fn eventing_of(
    log: &Database,
    cast: &CastId,
    explicit: Option<&Path>,
) -> Result<Option<(Eventing, PathBuf)>, CliError> {
    let path = match explicit {
        Some(path) => path.to_path_buf(),
        None => match config_source(log, cast) {
            Some(path) => path,
            None => return Ok(None),
        },
    };
    let eventing = eventing_in(&path)?;
    Ok((eventing.active_sinks().count() > 0).then_some((eventing, path)))
}

/// Scrubs header values (the sinks') and the environment's secrets from a line.
fn redactor(eventing: &Eventing) -> Redactor {
    let mut values: Vec<String> = eventing
        .sinks
        .iter()
        .flat_map(|s| s.headers.iter().map(|(_, v)| v.clone()))
        .filter(|v| !v.is_empty())
        .collect();
    values.extend(
        castlog_replay::secrets::DENY_LIST
            .iter()
            .filter_map(|name| std::env::var(name).ok()),
    );
    Redactor::with_values(values)
}

/// What wakes the delivery thread.
enum Wake {
    Recorded,
    End,
}

/// Wakes the thread of a [`Hooks`] when a record is durable (cheap, never waits).
#[derive(Debug, Clone)]
pub struct Waker(mpsc::Sender<Wake>);

impl Waker {
    /// A record is durable: the thread reads the log on from where it is.
    pub fn recorded(&self) {
        let _ = self.0.send(Wake::Recorded);
    }
}

/// The delivery thread of one driven cast. Dropping it ends the drive's part: the thread
/// delivers what is left for at most [`FLUSH_WAIT`].
#[derive(Debug)]
pub struct Hooks {
    cast: CastId,
    wake: mpsc::Sender<Wake>,
    done: mpsc::Receiver<Vec<String>>,
}

impl Hooks {
    /// The thread for `cast` of the database `db`, when its eventing has sinks. `eventing`
    /// is the config's when the command has it (`run`), else it is read from the config the
    /// cast was started from; a config that cannot be read then starts no thread (the events
    /// wait in the outbox for `castlog deliver`).
    /// `log` is the command's own; the thread opens a log of its own only when there are
    /// sinks.
    pub fn of(
        db: &Path,
        log: &(impl EventLog + ?Sized),
        cast: &CastId,
        eventing: Option<Eventing>,
    ) -> Option<Hooks> {
        let eventing = match eventing {
            Some(e) => e,
            None => eventing_in(&config_source(log, cast)?).ok()?,
        };
        if eventing.active_sinks().count() == 0 {
            return None;
        }
        let log = Database::open_existing(db).ok()?;
        let (wake, woken) = mpsc::channel();
        // What the log already holds goes first.
        let _ = wake.send(Wake::Recorded);
        let (finished, done) = mpsc::channel();
        let thread_cast = cast.clone();
        std::thread::Builder::new()
            .name("castlog-eventing".into())
            .spawn(move || {
                let notes = run_thread(&log, &thread_cast, &eventing, &woken);
                let _ = finished.send(notes);
            })
            .ok()?;
        Some(Hooks {
            cast: cast.clone(),
            wake,
            done,
        })
    }

    /// The waker a driver's observer holds.
    pub fn waker(&self) -> Waker {
        Waker(self.wake.clone())
    }
}

impl Drop for Hooks {
    fn drop(&mut self) {
        let _ = self.wake.send(Wake::End);
        match self.done.recv_timeout(FLUSH_WAIT + Duration::from_secs(1)) {
            Ok(notes) => {
                for note in notes {
                    output::to_stderr(format_args!("{note}"));
                }
            }
            Err(_) => output::to_stderr(format_args!(
                "note: eventing: cast {} still has events on the way to its sinks; `castlog deliver {}` sends what they have not taken",
                self.cast, self.cast
            )),
        }
    }
}

/// The events read from the log that some sink still needs, and where the reading is.
struct Reader {
    outbox: Outbox,
    next: Seq,
    pending: VecDeque<BusEvent>,
    socket: Option<SocketId>,
}

impl Reader {
    fn new(cast: &CastId) -> Self {
        Reader {
            outbox: Outbox::new(cast.clone()),
            next: Seq::FIRST,
            pending: VecDeque::new(),
            socket: None,
        }
    }

    /// Reads the log on until `batch` events are pending or the log ends; false when a read
    /// failed (the thread stops: the events wait in the outbox).
    fn fill(&mut self, log: &Database, cast: &CastId, through: u64, batch: usize) -> bool {
        while self.pending.len() < batch {
            let to = Seq(self.next.get() + READ_CHUNK - 1);
            let Ok(records) = log.read(cast, self.next, Some(to)) else {
                return false;
            };
            if records.is_empty() {
                return true;
            }
            for record in &records {
                if !self.observe(record, through) {
                    return false;
                }
            }
        }
        true
    }

    /// Folds the rest of the log without keeping its events; the outbox's length then.
    fn count_rest(&mut self, log: &Database, cast: &CastId) -> u64 {
        loop {
            let to = Seq(self.next.get() + READ_CHUNK - 1);
            let Ok(records) = log.read(cast, self.next, Some(to)) else {
                break;
            };
            if records.is_empty() {
                break;
            }
            for record in &records {
                if self.outbox.observe(record).is_err() {
                    return self.outbox.sequence();
                }
                self.next = record.seq.next();
            }
        }
        self.outbox.sequence()
    }

    /// Reads on and delivers, a batch at a time, until every sink has taken all the log holds
    /// or stops at an event it failed; the outcomes of every batch, per sink.
    fn drain(
        &mut self,
        log: &Database,
        cast: &CastId,
        hooks: &mut Webhooks,
        clock: &dyn Clock,
        deadline: Option<Instant>,
    ) -> Result<Vec<SinkPass>, CliError> {
        let mut all: Vec<SinkPass> = Vec::new();
        loop {
            if !self.fill(log, cast, hooks.through(), hooks.batch()) {
                return Err(CliError::user(format!(
                    "cannot read the events of cast {cast} after seq {}",
                    self.next.get().saturating_sub(1)
                )));
            }
            if self.pending.is_empty() {
                break;
            }
            let before = hooks.through();
            let events: Vec<BusEvent> = self.pending.iter().cloned().collect();
            let passes = hooks.deliver(log, &events, clock, deadline)?;
            if all.is_empty() {
                all = passes;
            } else {
                for (kept, pass) in all.iter_mut().zip(passes) {
                    kept.through = pass.through;
                    kept.outcomes.extend(pass.outcomes);
                }
            }
            let through = hooks.through();
            self.pending.retain(|e| e.sequence > through);
            if through == before {
                // A sink failed: the next wake (or the end) tries again.
                break;
            }
        }
        Ok(all)
    }

    fn observe(&mut self, record: &Recorded, through: u64) -> bool {
        let Ok(made) = self.outbox.observe(record) else {
            return false;
        };
        self.next = record.seq.next();
        for event in made {
            if event.kind == "lifecycle.socket.started" {
                self.socket = Some(SocketId::new(event.socket_id.as_str()));
            }
            if event.sequence > through {
                self.pending.push_back(event);
            }
        }
        true
    }
}

/// The thread: on every wake, reads the log on and delivers; a heartbeat when nothing was
/// recorded for `heartbeatIntervalMs`; at the end, a last pass with a deadline. Returns the
/// notes to print (what is still undelivered, and why).
fn run_thread(
    log: &Database,
    cast: &CastId,
    eventing: &Eventing,
    woken: &mpsc::Receiver<Wake>,
) -> Vec<String> {
    let clock = SystemClock;
    let Ok(mut hooks) = Webhooks::load(log, cast, eventing, redactor(eventing)) else {
        return vec![format!(
            "note: eventing: cannot read the delivery record of cast {cast}; `castlog deliver {cast}` tries again"
        )];
    };
    let started = Instant::now();
    let beat_every = (eventing.heartbeat_interval_ms > 0)
        .then(|| Duration::from_millis(eventing.heartbeat_interval_ms));
    let mut reader = Reader::new(cast);
    let mut beats = 0;
    let mut last_failure: Vec<SinkPass> = Vec::new();
    loop {
        let wake = match beat_every {
            Some(every) => woken.recv_timeout(every),
            None => woken
                .recv()
                .map_err(|_| mpsc::RecvTimeoutError::Disconnected),
        };
        let end = match wake {
            Ok(Wake::Recorded) => woken.try_iter().any(|w| matches!(w, Wake::End)),
            Ok(Wake::End) | Err(mpsc::RecvTimeoutError::Disconnected) => true,
            Err(mpsc::RecvTimeoutError::Timeout) => {
                beats += 1;
                let elapsed = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
                let beat =
                    reader
                        .outbox
                        .heartbeat(beats, clock.now_ms(), elapsed, reader.socket.as_ref());
                hooks.beat(&beat);
                continue;
            }
        };
        beats = 0;
        let deadline = end.then(|| Instant::now() + FLUSH_WAIT);
        match reader.drain(log, cast, &mut hooks, &clock, deadline) {
            Ok(passes) if !passes.is_empty() => last_failure = passes,
            Ok(_) => {}
            Err(_) => break,
        }
        if end {
            break;
        }
    }
    let total = reader.count_rest(log, cast);
    undelivered_notes(cast, total, &hooks, &last_failure)
}

/// A note for each sink that has not taken every event of the cast.
fn undelivered_notes(
    cast: &CastId,
    total: u64,
    hooks: &Webhooks,
    passes: &[SinkPass],
) -> Vec<String> {
    hooks
        .positions()
        .into_iter()
        .filter(|(_, through)| *through < total)
        .map(|(sink, through)| {
            let why = passes
                .iter()
                .find(|p| p.sink == sink.id)
                .and_then(|p| p.outcomes.last())
                .and_then(|o| o.reason.clone())
                .map(|r| format!(" (last: {r})"))
                .unwrap_or_default();
            format!(
                "note: eventing: sink {} has {} of the {total} events of cast {cast} still to take{why}; `castlog deliver {cast}` sends them",
                sink.id,
                total - through
            )
        })
        .collect()
}

/// `castlog deliver`.
pub fn deliver(db: &Path, args: &DeliverArgs) -> Result<(), CliError> {
    let log = super::open(db)?;
    let casts: Vec<CastId> = match &args.cast {
        Some(cast) => vec![super::inspect::head_of(&log, cast)?.cast],
        None => log
            .casts()?
            .into_iter()
            .filter(|h| h.kind == StreamKind::Cast)
            .map(|h| h.cast)
            .collect(),
    };
    let clock = SystemClock;
    let mut reports = Vec::new();
    for cast in &casts {
        let found = match eventing_of(&log, cast, args.config.as_deref()) {
            Ok(found) => found,
            // With --all, one cast whose config is gone does not stop the others.
            Err(err) if args.cast.is_none() => {
                reports.push(json!({"cast": cast, "error": err.message}));
                continue;
            }
            Err(err) => return Err(err),
        };
        let Some((eventing, path)) = found else {
            if args.cast.is_some() {
                reports.push(json!({"cast": cast, "eventing": false, "sinks": []}));
            }
            continue;
        };
        let mut hooks = Webhooks::load(&log, cast, &eventing, redactor(&eventing))?;
        let mut reader = Reader::new(cast);
        let passes = reader.drain(&log, cast, &mut hooks, &clock, None)?;
        let total = reader.count_rest(&log, cast);
        reports.push(report(cast, &path, &eventing, &hooks, &passes, total));
    }
    if args.json {
        return output::json(&json!({ "casts": reports }));
    }
    for report in &reports {
        say_report(report);
    }
    Ok(())
}

/// The JSON report of one cast's pass.
fn report(
    cast: &CastId,
    path: &Path,
    eventing: &Eventing,
    hooks: &Webhooks,
    passes: &[SinkPass],
    total: u64,
) -> Value {
    let sinks: Vec<Value> = hooks
        .positions()
        .into_iter()
        .map(|(sink, through)| {
            let pass = passes.iter().find(|p| p.sink == sink.id);
            let outcomes = pass.map(|p| p.outcomes.as_slice()).unwrap_or_default();
            let count = |status: &str| {
                outcomes
                    .iter()
                    .filter(|o| o.status.as_str() == status)
                    .count()
            };
            json!({
                "sink": sink.id,
                "method": sink.method,
                "url": sink.shown_url(),
                "headers": sink.redacted_headers(),
                "bodyTemplate": sink.body_template.as_str(),
                "events": total,
                "through": through,
                "queued": total - through,
                "delivered": count("delivered"),
                "skipped": count("skipped"),
                "failed": count("failed"),
                "misconfigured": count("misconfigured"),
                "outcomes": outcomes.iter().map(|o| json!({
                    "sequence": o.sequence,
                    "eventId": o.event_id,
                    "type": o.event_type,
                    "status": o.status.as_str(),
                    "attempt": o.attempt,
                    "statusCode": o.status_code,
                    "reason": o.reason,
                })).collect::<Vec<_>>(),
            })
        })
        .collect();
    json!({
        "cast": cast,
        "eventing": eventing.enabled,
        "config": path.display().to_string(),
        "sinks": sinks,
    })
}

fn say_report(report: &Value) {
    let cast = report["cast"].as_str().unwrap_or_default();
    if let Some(error) = report["error"].as_str() {
        crate::say!("cast {cast}: {error}");
        return;
    }
    let sinks = report["sinks"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    if sinks.is_empty() {
        crate::say!("cast {cast}: eventing is off, nothing to deliver");
        return;
    }
    for sink in sinks {
        let n = |key: &str| sink[key].as_u64().unwrap_or(0);
        let failed = match n("failed") {
            1 => "1 attempt failed".to_owned(),
            k => format!("{k} attempts failed"),
        };
        crate::say!(
            "cast {cast}: sink {} ({} {}): {} events; now {} delivered, {} skipped, {failed}; {} queued",
            sink["sink"].as_str().unwrap_or_default(),
            sink["method"].as_str().unwrap_or_default(),
            sink["url"].as_str().unwrap_or_default(),
            n("events"),
            n("delivered"),
            n("skipped"),
            n("queued"),
        );
        let last = sink["outcomes"]
            .as_array()
            .and_then(|o| o.iter().rev().find(|o| o["status"] != "delivered"));
        if let Some(last) = last
            && let Some(reason) = last["reason"].as_str()
        {
            crate::say!(
                "  {} {} (sequence {}): {reason}",
                last["status"].as_str().unwrap_or_default(),
                last["type"].as_str().unwrap_or_default(),
                last["sequence"],
            );
        }
    }
}
