//! The delivery record of the event bus: one row per outcome of a webhook delivery (an
//! attempt that reached the sink or failed, an event a sink's filter left out),
//! kept beside the log in table `castlog_deliveries`.
//!
//! The events delivered are a projection of a cast's log (`castlog_projections::outbox`);
//! what was done with them is not a fact of the cast and is not in its chain: a cast's log
//! says what the cast did, byte for byte the same however its sinks answered, and `verify`
//! re-decides it without them. The table is created by its first write (outside the log's
//! versioned schema, so a database without it opens and reads as it did), rows are only
//! inserted (triggers refuse UPDATE and DELETE on SQLite) and hold no header value: a
//! sink's headers are in the config only.
//!
//! Where a sink is in a cast's outbox is read from the rows: past every event it
//! delivered or skipped ([`settled_through`]).

use castlog_core::id::{BusEventId, CastId, SinkId};
use serde::{Deserialize, Serialize};

use crate::log::LogError;

/// What came of one delivery attempt, or of an event a sink did not send.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DeliveryStatus {
    /// The sink answered 2xx.
    Delivered,
    /// The attempt failed (an HTTP error, a timeout, a network error).
    Failed,
    /// The sink's `eventFilter` leaves the event out.
    Skipped,
    /// The request could not be made (a URL or header the HTTP client refuses).
    Misconfigured,
}

impl DeliveryStatus {
    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Delivered => "delivered",
            Self::Failed => "failed",
            Self::Skipped => "skipped",
            Self::Misconfigured => "misconfigured",
        }
    }

    /// The status stored as `name`.
    pub fn parse(name: &str) -> Option<Self> {
        [
            Self::Delivered,
            Self::Failed,
            Self::Skipped,
            Self::Misconfigured,
        ]
        .into_iter()
        .find(|s| s.as_str() == name)
    }

    /// Whether the sink is past the event (it goes on with the next).
    pub fn settles(self) -> bool {
        matches!(self, Self::Delivered | Self::Skipped)
    }
}

/// One row of the delivery record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Delivery {
    /// The cast whose bus event it is.
    pub cast: CastId,
    /// The sink.
    pub sink: SinkId,
    /// The event's sequence in the cast's outbox.
    pub sequence: u64,
    /// The event's id (sent as the idempotency key).
    pub event_id: BusEventId,
    /// The event's type.
    pub event_type: String,
    /// What came of it.
    pub status: DeliveryStatus,
    /// The attempt, counted over every delivery of this event to this sink (0 for a row that
    /// made no request).
    pub attempt: u32,
    /// The HTTP status the sink answered, when it answered.
    pub status_code: Option<u16>,
    /// Why it failed, was skipped or given up (no header value, no URL query).
    pub reason: Option<String>,
    /// When (the deliverer's clock).
    pub at_ms: u64,
}

/// The delivery record of a log's database.
pub trait DeliveryLog {
    /// Records one outcome, durably, before the next attempt is made.
    fn record_delivery(&self, delivery: &Delivery) -> Result<(), LogError>;

    /// Every outcome recorded for `cast`, in the order they were recorded.
    fn deliveries(&self, cast: &CastId) -> Result<Vec<Delivery>, LogError>;
}

/// The highest sequence `sink` is past in `rows` (0 when none): everything up to it was
/// delivered or skipped, in order.
pub fn settled_through(rows: &[Delivery], sink: &SinkId) -> u64 {
    rows.iter()
        .filter(|r| &r.sink == sink && r.status.settles())
        .map(|r| r.sequence)
        .max()
        .unwrap_or(0)
}

/// The failed attempts recorded for event `sequence` at `sink`, and the highest attempt
/// number (attempts are counted over every delivery of the event).
pub fn attempts_of(rows: &[Delivery], sink: &SinkId, sequence: u64) -> (u32, u32) {
    rows.iter()
        .filter(|r| &r.sink == sink && r.sequence == sequence)
        .fold((0, 0), |(failed, last), r| {
            (
                failed + u32::from(r.status == DeliveryStatus::Failed),
                last.max(r.attempt),
            )
        })
}

/// The SQL of the table (SQLite and PostgreSQL alike, but for the triggers).
pub(crate) const COLUMNS: &str =
    "cast_id, sink, sequence, event_id, event_type, status, attempt, status_code, reason, at_ms";

#[cfg(test)]
mod tests {
    use super::*;

    fn row(sequence: u64, status: DeliveryStatus, attempt: u32) -> Delivery {
        Delivery {
            cast: CastId::new("c"),
            sink: SinkId::new("ops"),
            sequence,
            event_id: BusEventId::new(format!("e{sequence}")),
            event_type: "t".into(),
            status,
            attempt,
            status_code: None,
            reason: None,
            at_ms: 0,
        }
    }

    #[test]
    fn a_sink_is_past_what_it_delivered_skipped_or_gave_up() {
        let ops = SinkId::new("ops");
        let rows = [
            row(1, DeliveryStatus::Failed, 1),
            row(1, DeliveryStatus::Delivered, 2),
            row(2, DeliveryStatus::Skipped, 0),
            row(3, DeliveryStatus::Failed, 1),
        ];
        assert_eq!(settled_through(&rows, &ops), 2);
        assert_eq!(settled_through(&rows, &SinkId::new("other")), 0);
        assert_eq!(attempts_of(&rows, &ops, 3), (1, 1));
        assert_eq!(attempts_of(&rows, &ops, 1), (1, 2));
        for status in [
            DeliveryStatus::Delivered,
            DeliveryStatus::Failed,
            DeliveryStatus::Skipped,
            DeliveryStatus::Misconfigured,
        ] {
            assert_eq!(DeliveryStatus::parse(status.as_str()), Some(status));
        }
    }
}
