//! The event bus of pi-materia (`eventing`, its §3.4): what a cast tells webhook sinks.
//!
//! The bus events are a projection of the cast's log (`castlog_projections::outbox`): the
//! lifecycle of the cast and its sockets, and the events materia report themselves
//! (`materia_event`), each enriched with an id, a time and a per-cast sequence taken from
//! the log, so a delivery after a crash repeats the same id. This module holds the pure
//! rules: the config ([`Eventing`], read at load by `loadout::load`), the enriched event
//! ([`BusEvent`]), the sinks' filters ([`glob`]), bodies ([`body`]) and backoff.

pub mod body;
pub mod glob;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::id::{BusEventId, CastId, SinkId};

/// Default `eventing.heartbeatIntervalMs`.
pub const DEFAULT_HEARTBEAT_INTERVAL_MS: u64 = 30_000;
/// Default `timeoutMs` of a webhook sink.
pub const DEFAULT_TIMEOUT_MS: u64 = 10_000;
/// Default `maxRetries`.
pub const DEFAULT_MAX_RETRIES: u32 = 3;
/// Default `retryBackoffMs`.
pub const DEFAULT_RETRY_BACKOFF_MS: u64 = 1_000;
/// Default `maxBackoffMs`.
pub const DEFAULT_MAX_BACKOFF_MS: u64 = 30_000;
/// Default `discardingAfter`.
pub const DEFAULT_DISCARDING_AFTER: u32 = 10;
/// Default `maxQueueSize`.
pub const DEFAULT_MAX_QUEUE_SIZE: u32 = 256;

/// What a recorded header value is replaced by.
pub const REDACTED: &str = "[redacted]";

/// The `eventing` key of the config.
#[derive(Debug, Clone, PartialEq)]
pub struct Eventing {
    /// `enabled` (default false: nothing is delivered).
    pub enabled: bool,
    /// `heartbeatIntervalMs` (0: no heartbeat).
    pub heartbeat_interval_ms: u64,
    /// `sinks`, in file order.
    pub sinks: Vec<Sink>,
}

impl Default for Eventing {
    fn default() -> Self {
        Eventing {
            enabled: false,
            heartbeat_interval_ms: DEFAULT_HEARTBEAT_INTERVAL_MS,
            sinks: Vec::new(),
        }
    }
}

impl Eventing {
    /// The sinks events go to: none unless eventing is enabled; a sink with `enabled: false`
    /// is left out.
    pub fn active_sinks(&self) -> impl Iterator<Item = &Sink> {
        self.sinks.iter().filter(move |s| self.enabled && s.enabled)
    }
}

/// How a webhook's request body is made from an event (`bodyTemplate`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BodyTemplate {
    /// The fields `bodyMapping` names (the default).
    Mapped,
    /// The enriched event as it is.
    Passthrough,
    /// `{eventId, type, occurredAt, castId, sequence, data}` with the enriched event as `data`.
    Envelope,
    /// An empty object: the request itself is the signal.
    None,
}

impl BodyTemplate {
    /// The accepted names, for messages.
    pub const NAMES: [&'static str; 4] = ["mapped", "passthrough", "envelope", "none"];

    /// The template called `name`.
    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "mapped" => Some(Self::Mapped),
            "passthrough" => Some(Self::Passthrough),
            "envelope" => Some(Self::Envelope),
            "none" => Some(Self::None),
            _ => None,
        }
    }

    /// The config name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Mapped => "mapped",
            Self::Passthrough => "passthrough",
            Self::Envelope => "envelope",
            Self::None => "none",
        }
    }
}

/// `eventFilter`: which event types a sink takes (glob patterns, [`glob::matches`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EventFilter {
    /// `include`: when given, a type must match one.
    pub include: Vec<String>,
    /// `exclude`: a type that matches one is left out (exclude wins).
    pub exclude: Vec<String>,
}

impl EventFilter {
    /// Whether an event of type `kind` passes.
    pub fn accepts(&self, kind: &str) -> bool {
        if self.exclude.iter().any(|p| glob::matches(p, kind)) {
            return false;
        }
        self.include.is_empty() || self.include.iter().any(|p| glob::matches(p, kind))
    }
}

/// One webhook sink (`eventing.sinks.<id>`).
#[derive(Debug, Clone, PartialEq)]
pub struct Sink {
    /// The key under `sinks`.
    pub id: SinkId,
    /// `enabled` (default true).
    pub enabled: bool,
    /// `url`: an absolute http(s) URL.
    pub url: String,
    /// `method` (default `POST`).
    pub method: String,
    /// `headers`, in file order. Their values are never recorded or printed
    /// ([`Sink::redacted_headers`]).
    pub headers: Vec<(String, String)>,
    /// `bodyTemplate` (default `mapped`).
    pub body_template: BodyTemplate,
    /// `bodyMapping`.
    pub body_mapping: body::BodyMapping,
    /// `typeMap`: an event type to the type the receiver is told.
    pub type_map: BTreeMap<String, String>,
    /// `severityMap`: a severity to the one the receiver is told.
    pub severity_map: BTreeMap<String, String>,
    /// `eventFilter`.
    pub filter: EventFilter,
    /// `timeoutMs` of one request.
    pub timeout_ms: u64,
    /// `maxRetries`: attempts after the first, for a 5xx answer, a timeout or a network error.
    pub max_retries: u32,
    /// `retryBackoffMs`: the wait before the first retry; it doubles for each next one.
    pub retry_backoff_ms: u64,
    /// `maxBackoffMs`: the longest wait between retries.
    pub max_backoff_ms: u64,
    /// `discardingAfter`: the failed deliveries in a row (each after its retries) after which
    /// a drive leaves the sink alone; what it has not taken waits in the outbox.
    pub discarding_after: u32,
    /// `maxQueueSize`: the events held in memory for this sink at a time; the rest wait in
    /// the log.
    pub max_queue_size: u32,
}

impl Sink {
    /// The wait before retry `retry` (1 for the first retry): `retryBackoffMs * 2^(retry-1)`,
    /// at most `maxBackoffMs`.
    pub fn backoff_ms(&self, retry: u32) -> u64 {
        let doubling = retry.saturating_sub(1).min(63);
        self.retry_backoff_ms
            .saturating_mul(1u64 << doubling)
            .min(self.max_backoff_ms)
    }

    /// The headers with every value replaced by [`REDACTED`], for what is printed or recorded.
    pub fn redacted_headers(&self) -> BTreeMap<String, String> {
        self.headers
            .iter()
            .map(|(name, _)| (name.clone(), REDACTED.to_owned()))
            .collect()
    }

    /// `text` with every header value in it replaced by [`REDACTED`] (an error message may
    /// quote a request).
    pub fn scrub(&self, text: &str) -> String {
        let mut out = text.to_owned();
        for (_, value) in &self.headers {
            if !value.is_empty() {
                out = out.replace(value.as_str(), REDACTED);
            }
        }
        out
    }

    /// The URL as it may be shown: without user information, query or fragment.
    pub fn shown_url(&self) -> String {
        shown_url(&self.url)
    }

    /// The body of the request for `event` (see [`BodyTemplate`]).
    pub fn body(&self, event: &BusEvent) -> Value {
        body::render(self, event)
    }
}

/// `url` without user information, query or fragment (a token may sit in any of them).
pub fn shown_url(url: &str) -> String {
    let cut = url.find(['?', '#']).map_or(url, |at| &url[..at]);
    match cut.split_once("://") {
        Some((scheme, rest)) => {
            let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
            let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
            format!("{scheme}://{host}{path}")
        }
        None => cut.to_owned(),
    }
}

/// `at_ms` (milliseconds since the epoch) as ISO 8601 in UTC with milliseconds.
pub fn iso_time(at_ms: u64) -> String {
    let secs = at_ms / 1000;
    let days = i64::try_from(secs / 86_400).unwrap_or(i64::MAX);
    let rem = secs % 86_400;
    let (y, m, d) = crate::calendar::civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3600,
        (rem / 60) % 60,
        rem % 60,
        at_ms % 1000
    )
}

/// An event of the bus, enriched as the reference does (its field names on the wire).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BusEvent {
    /// Derived from the cast and the log position of the event it comes from.
    pub event_id: BusEventId,
    /// `lifecycle.cast.started`, ..., or the type a materia gave its event.
    #[serde(rename = "type")]
    pub kind: String,
    /// The time its source event was recorded, ISO 8601 in UTC.
    pub occurred_at: String,
    /// Per cast, from 1, over every bus event of the cast.
    pub sequence: u64,
    /// The cast.
    pub cast_id: CastId,
    /// The socket it concerns (`lifecycle` for the cast's own).
    pub socket_id: String,
    /// The materia of that socket (`pi-materia` for the cast's own).
    pub materia: String,
    /// The materia's label, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub materia_label: Option<String>,
    /// The socket's visit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub visit: Option<u32>,
    /// The work item of the visit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub item_key: Option<String>,
    /// The work item's label.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub item_label: Option<String>,
    /// `info` unless the event says otherwise.
    pub severity: String,
    /// A sentence about it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Details (`{}` when there are none).
    pub payload: Value,
    /// Who reported a materia event, when it said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sink() -> Sink {
        Sink {
            id: SinkId::new("ops"),
            enabled: true,
            url: "https://user:secret@example.test/hook?token=abc".into(),
            method: "POST".into(),
            headers: vec![("Authorization".into(), "Bearer s3cr3t".into())],
            body_template: BodyTemplate::Mapped,
            body_mapping: body::BodyMapping::default(),
            type_map: BTreeMap::new(),
            severity_map: BTreeMap::new(),
            filter: EventFilter::default(),
            timeout_ms: DEFAULT_TIMEOUT_MS,
            max_retries: DEFAULT_MAX_RETRIES,
            retry_backoff_ms: DEFAULT_RETRY_BACKOFF_MS,
            max_backoff_ms: DEFAULT_MAX_BACKOFF_MS,
            discarding_after: DEFAULT_DISCARDING_AFTER,
            max_queue_size: DEFAULT_MAX_QUEUE_SIZE,
        }
    }

    #[test]
    fn times_are_iso_in_utc() {
        assert_eq!(iso_time(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(iso_time(1_767_225_600_123), "2026-01-01T00:00:00.123Z");
    }

    #[test]
    fn backoff_doubles_up_to_the_cap() {
        let sink = sink();
        let waits: Vec<u64> = (1..=7).map(|r| sink.backoff_ms(r)).collect();
        assert_eq!(waits, [1000, 2000, 4000, 8000, 16000, 30000, 30000]);
        assert_eq!(sink.backoff_ms(500), 30000);
    }

    #[test]
    fn header_values_are_never_shown() {
        let sink = sink();
        assert_eq!(sink.redacted_headers()["Authorization"], REDACTED);
        assert_eq!(
            sink.scrub("sent Authorization: Bearer s3cr3t to it"),
            "sent Authorization: [redacted] to it"
        );
        assert_eq!(sink.shown_url(), "https://example.test/hook");
        assert_eq!(shown_url("http://127.0.0.1:9"), "http://127.0.0.1:9");
    }

    #[test]
    fn exclude_wins_over_include() {
        let filter = EventFilter {
            include: vec!["lifecycle.**".into(), "review.*".into()],
            exclude: vec!["lifecycle.heartbeat".into()],
        };
        assert!(filter.accepts("lifecycle.cast.started"));
        assert!(filter.accepts("review.done"));
        assert!(!filter.accepts("lifecycle.heartbeat"));
        assert!(!filter.accepts("build.note"));
        assert!(EventFilter::default().accepts("anything"));
    }

    #[test]
    fn disabled_eventing_has_no_sinks() {
        let mut eventing = Eventing {
            enabled: false,
            sinks: vec![sink()],
            ..Eventing::default()
        };
        assert_eq!(eventing.active_sinks().count(), 0);
        eventing.enabled = true;
        assert_eq!(eventing.active_sinks().count(), 1);
        eventing.sinks[0].enabled = false;
        assert_eq!(eventing.active_sinks().count(), 0);
    }
}
