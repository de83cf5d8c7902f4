//! Delivering a cast's bus events to its webhook sinks (`eventing.sinks`).
//!
//! The events come from the cast's outbox (`castlog_projections::outbox`, a fold of its log);
//! what was done with each is recorded in the delivery record beside the log
//! (`castlog_events::deliveries`) as it happens, before the next attempt. Each sink goes
//! through the outbox in sequence order from the first event it is not past: an event is
//! sent with its id as `Idempotency-Key`, retried `maxRetries` times on a 5xx, 408 or 429
//! answer, a timeout or a network error (waiting `retryBackoffMs`, doubling, at most
//! `maxBackoffMs`), and when it still fails the sink stops there, so events reach a sink in
//! order. A live deliverer tries that sink again on a later wake, no sooner than the backoff
//! for the number of failed deliveries in a row; after `discardingAfter` of them it leaves
//! the sink alone for the rest of the drive. Nothing is given up: what a sink has not taken
//! waits in the outbox for the end of the drive, `castlog deliver`, or the next run or
//! resume. A crash between a sink's answer and its record makes the event go again with the
//! same id: delivery is at least once, and the receiver drops a repeat by its id.
//!
//! Nothing here reaches the cast: the driver never waits for a sink, and a sink's answers
//! are not part of the cast's log.

use std::time::{Duration, Instant};

use castlog_core::env::Clock;
use castlog_core::eventing::{BusEvent, Eventing, Sink};
use castlog_core::id::{CastId, SinkId};
use castlog_events::LogError;
use castlog_events::deliveries::{
    Delivery, DeliveryLog, DeliveryStatus, attempts_of, settled_through,
};

use crate::secrets::Redactor;

/// One sink and where it is in a cast's outbox.
#[derive(Debug)]
struct SinkState {
    sink: Sink,
    client: Result<reqwest::blocking::Client, String>,
    /// Every event up to this sequence is delivered or skipped.
    through: u64,
    /// The highest attempt number at the event after `through`.
    head_attempt: u32,
    /// Deliveries that failed in a row (each after its retries) in this process.
    failed_in_a_row: u32,
    /// A live pass leaves the sink alone until then.
    retry_at: Option<Instant>,
}

/// What one pass did for one sink.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SinkPass {
    /// The sink.
    pub sink: SinkId,
    /// Every event up to this sequence is delivered or skipped.
    pub through: u64,
    /// The outcomes recorded in this pass, in order.
    pub outcomes: Vec<Delivery>,
}

/// The deliverer of one cast's events.
#[derive(Debug)]
pub struct Webhooks {
    cast: CastId,
    sinks: Vec<SinkState>,
    redactor: Redactor,
}

/// What one request came to.
enum Sent {
    Delivered(u16),
    Failed {
        code: Option<u16>,
        reason: String,
        retryable: bool,
    },
    Misconfigured(String),
}

impl Webhooks {
    /// The deliverer of `cast` to the active sinks of `eventing`, each where the delivery
    /// record says it is.
    pub fn load(
        log: &(impl DeliveryLog + ?Sized),
        cast: &CastId,
        eventing: &Eventing,
        redactor: Redactor,
    ) -> Result<Self, LogError> {
        let rows = log.deliveries(cast)?;
        let sinks = eventing
            .active_sinks()
            .map(|sink| {
                let through = settled_through(&rows, &sink.id);
                let (_, head_attempt) = attempts_of(&rows, &sink.id, through + 1);
                let client = reqwest::blocking::Client::builder()
                    .timeout(Duration::from_millis(sink.timeout_ms))
                    .redirect(reqwest::redirect::Policy::none())
                    .build()
                    .map_err(|e| e.to_string());
                SinkState {
                    sink: sink.clone(),
                    client,
                    through,
                    head_attempt,
                    failed_in_a_row: 0,
                    retry_at: None,
                }
            })
            .collect();
        Ok(Webhooks {
            cast: cast.clone(),
            sinks,
            redactor,
        })
    }

    /// Whether there is any sink to deliver to.
    pub fn is_empty(&self) -> bool {
        self.sinks.is_empty()
    }

    /// The lowest sequence every sink is past (events up to it are no longer needed).
    pub fn through(&self) -> u64 {
        self.sinks.iter().map(|s| s.through).min().unwrap_or(0)
    }

    /// The sinks, each with the sequence it is past.
    pub fn positions(&self) -> Vec<(&Sink, u64)> {
        self.sinks.iter().map(|s| (&s.sink, s.through)).collect()
    }

    /// The most events a sink holds in memory at a time (the smallest `maxQueueSize`).
    pub fn batch(&self) -> usize {
        self.sinks
            .iter()
            .map(|s| s.sink.max_queue_size as usize)
            .min()
            .unwrap_or(1)
            .max(1)
    }

    /// Delivers `events` (consecutive, in sequence order) to every sink not past them,
    /// recording each outcome. A pass with a `deadline` (the end of a drive, `deliver`) tries
    /// every sink once more; no attempt starts after the deadline, and none waits past it. A
    /// pass without one (a live wake) leaves alone a sink that failed until its backoff is
    /// over, and one that failed `discardingAfter` times in a row.
    pub fn deliver(
        &mut self,
        log: &(impl DeliveryLog + ?Sized),
        events: &[BusEvent],
        clock: &dyn Clock,
        deadline: Option<Instant>,
    ) -> Result<Vec<SinkPass>, LogError> {
        let mut passes = Vec::with_capacity(self.sinks.len());
        for state in &mut self.sinks {
            let mut pass = SinkPass {
                sink: state.sink.id.clone(),
                through: state.through,
                outcomes: Vec::new(),
            };
            let resting = state.failed_in_a_row >= state.sink.discarding_after
                || state.retry_at.is_some_and(|at| Instant::now() < at);
            if deadline.is_none() && resting {
                passes.push(pass);
                continue;
            }
            for event in events {
                if event.sequence <= state.through {
                    continue;
                }
                if event.sequence != state.through + 1 {
                    // An event before this one is not in `events`: the next pass brings it.
                    break;
                }
                let sent = deliver_one(
                    &self.cast,
                    state,
                    event,
                    log,
                    clock,
                    deadline,
                    &self.redactor,
                    &mut pass.outcomes,
                )?;
                if !sent {
                    if pass.outcomes.last().is_some_and(|o| !o.status.settles()) {
                        state.failed_in_a_row += 1;
                        let wait = state.sink.backoff_ms(state.failed_in_a_row);
                        state.retry_at = Some(Instant::now() + Duration::from_millis(wait));
                    }
                    break;
                }
                state.failed_in_a_row = 0;
                state.retry_at = None;
            }
            pass.through = state.through;
            passes.push(pass);
        }
        Ok(passes)
    }

    /// Sends a heartbeat to every sink whose filter takes it, once, recording nothing (a
    /// heartbeat says the cast is alive now; it is not in the outbox).
    pub fn beat(&self, heartbeat: &BusEvent) {
        for state in &self.sinks {
            if state.sink.filter.accepts(&heartbeat.kind) {
                let _ = send(state, heartbeat);
            }
        }
    }
}

/// Delivers one event to one sink, with its retries; true when the sink is past it.
#[allow(clippy::too_many_arguments)]
fn deliver_one(
    cast: &CastId,
    state: &mut SinkState,
    event: &BusEvent,
    log: &(impl DeliveryLog + ?Sized),
    clock: &dyn Clock,
    deadline: Option<Instant>,
    redactor: &Redactor,
    outcomes: &mut Vec<Delivery>,
) -> Result<bool, LogError> {
    let mut record = |state: &mut SinkState,
                      status: DeliveryStatus,
                      attempt: u32,
                      code: Option<u16>,
                      reason: Option<String>|
     -> Result<(), LogError> {
        let reason = reason.map(|r| state.sink.scrub(&redactor.scrub(&r)));
        let row = Delivery {
            cast: cast.clone(),
            sink: state.sink.id.clone(),
            sequence: event.sequence,
            event_id: event.event_id.clone(),
            event_type: event.kind.clone(),
            status,
            attempt,
            status_code: code,
            reason,
            at_ms: clock.now_ms(),
        };
        log.record_delivery(&row)?;
        outcomes.push(row);
        if status.settles() {
            state.through = event.sequence;
            state.head_attempt = 0;
        }
        Ok(())
    };
    if !state.sink.filter.accepts(&event.kind) {
        record(
            state,
            DeliveryStatus::Skipped,
            0,
            None,
            Some("filtered_out".into()),
        )?;
        return Ok(true);
    }
    let mut retry = 0;
    loop {
        if deadline.is_some_and(|d| Instant::now() >= d) {
            return Ok(false);
        }
        let attempt = state.head_attempt + 1;
        state.head_attempt = attempt;
        match send(state, event) {
            Sent::Delivered(code) => {
                record(state, DeliveryStatus::Delivered, attempt, Some(code), None)?;
                return Ok(true);
            }
            Sent::Misconfigured(reason) => {
                record(
                    state,
                    DeliveryStatus::Misconfigured,
                    attempt,
                    None,
                    Some(reason),
                )?;
                return Ok(false);
            }
            Sent::Failed {
                code,
                reason,
                retryable,
            } => {
                record(state, DeliveryStatus::Failed, attempt, code, Some(reason))?;
                retry += 1;
                if !retryable || retry > state.sink.max_retries {
                    return Ok(false);
                }
                let wait = Duration::from_millis(state.sink.backoff_ms(retry));
                if deadline.is_some_and(|d| Instant::now() + wait >= d) {
                    return Ok(false);
                }
                std::thread::sleep(wait);
            }
        }
    }
}

/// One request of `event` to the sink.
fn send(state: &SinkState, event: &BusEvent) -> Sent {
    let sink = &state.sink;
    let client = match &state.client {
        Ok(client) => client,
        Err(e) => return Sent::Misconfigured(format!("cannot make an HTTP client: {e}")),
    };
    let Ok(method) = reqwest::Method::from_bytes(sink.method.as_bytes()) else {
        return Sent::Misconfigured(format!("method {:?} is not an HTTP method", sink.method));
    };
    let mut request = client
        .request(method.clone(), &sink.url)
        .header("Idempotency-Key", event.event_id.as_str());
    let has_content_type = sink
        .headers
        .iter()
        .any(|(name, _)| name.eq_ignore_ascii_case("content-type"));
    if !has_content_type {
        request = request.header(reqwest::header::CONTENT_TYPE, "application/json");
    }
    for (name, value) in &sink.headers {
        request = request.header(name.as_str(), value.as_str());
    }
    if method != reqwest::Method::GET {
        request = request.body(sink.body(event).to_string());
    }
    let shown = sink.shown_url();
    match request.send() {
        Ok(response) => {
            let code = response.status().as_u16();
            // Read the answer so the connection can be used again.
            let _ = response.bytes();
            if (200..300).contains(&code) {
                Sent::Delivered(code)
            } else {
                Sent::Failed {
                    code: Some(code),
                    reason: format!("http_error: {shown} answered HTTP {code}"),
                    retryable: code >= 500 || code == 408 || code == 429,
                }
            }
        }
        Err(err) if err.is_builder() => {
            Sent::Misconfigured(format!("the request cannot be made: {}", root_cause(&err)))
        }
        Err(err) if err.is_timeout() => Sent::Failed {
            code: None,
            reason: format!(
                "timeout: {shown} did not answer within {} ms",
                sink.timeout_ms
            ),
            retryable: true,
        },
        Err(err) => Sent::Failed {
            code: None,
            reason: format!("network_error: {shown}: {}", root_cause(&err)),
            retryable: true,
        },
    }
}

/// The innermost cause of an error (the URL-free part of a client error).
fn root_cause(err: &(dyn std::error::Error + 'static)) -> String {
    let mut cause = err;
    while let Some(next) = cause.source() {
        cause = next;
    }
    cause.to_string()
}
