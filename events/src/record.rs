//! The `Recorded` envelope: one stored event with its place in the chain.

use castlog_core::event::{DecodeError, Event};
use castlog_core::id::{CastId, Digest, Seq};
use serde::{Deserialize, Serialize};

use crate::chain::Link;

/// One event as stored: header, exact payload bytes, and chain links.
///
/// `payload` is kept as the bytes that were hashed; it is decoded on demand and never
/// re-serialized for storage or verification.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Recorded {
    /// Stream the event belongs to.
    pub cast: CastId,
    /// 1-based position in the cast's chain.
    pub seq: Seq,
    /// When it was recorded (from the injected clock).
    pub at_ms: u64,
    /// Event kind as stored (`cast_started`, ...).
    pub kind: String,
    /// The kind's schema version.
    pub v: u16,
    /// Payload exactly as stored and hashed; decoded on demand.
    pub payload: Vec<u8>,
    /// The previous event's hash (or the fork parent's, or zero).
    pub prev: Digest,
    /// This event's chain hash.
    pub hash: Digest,
}

impl Recorded {
    /// The hash this record should have, recomputed from its stored fields.
    pub fn computed_hash(&self) -> Digest {
        self.link().hash()
    }

    /// The fields the chain hash covers.
    pub fn link(&self) -> Link<'_> {
        Link {
            prev: &self.prev,
            cast: &self.cast,
            seq: self.seq,
            at_ms: self.at_ms,
            kind: &self.kind,
            v: self.v,
            payload: &self.payload,
        }
    }

    /// Decodes the payload into a typed event (upcasting old versions). A `socket_completed`
    /// that names an earlier reply as its output does not decode alone
    /// ([`DecodeError::Unresolved`]): a reader of a cast's events uses a
    /// [`Decoder`](crate::Decoder).
    pub fn event(&self) -> Result<Event, DecodeError> {
        Event::decode(&self.kind, self.v, &self.payload)
    }
}

/// An event about to be appended: the log assigns seq, prev and hash.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pending {
    /// When it happened (from the injected clock).
    pub at_ms: u64,
    /// Event kind to store (`cast_started`, ...).
    pub kind: &'static str,
    /// Schema version of the payload's kind.
    pub v: u16,
    /// The payload bytes to store and hash.
    pub payload: Vec<u8>,
}

impl Pending {
    /// Encodes a typed event for appending.
    pub fn new(at_ms: u64, event: &Event) -> Self {
        Self {
            at_ms,
            kind: event.kind(),
            v: event.version(),
            payload: event.encode(),
        }
    }

    /// Encodes a typed event as version `v` of its kind wrote it (what a re-decision compares
    /// with a record of that version); in the current version when `v` is one this castlog
    /// cannot write.
    pub fn at_version(at_ms: u64, event: &Event, v: u16) -> Self {
        match event.encode_at(v) {
            Some(payload) => Self {
                at_ms,
                kind: event.kind(),
                v,
                payload,
            },
            None => Self::new(at_ms, event),
        }
    }

    /// Seals this pending event into a record at `seq` after `prev`.
    pub fn seal(&self, cast: &CastId, seq: Seq, prev: Digest) -> Recorded {
        self.clone().into_sealed(cast, seq, prev)
    }

    /// [`Pending::seal`], moving the payload into the record instead of copying it.
    pub fn into_sealed(self, cast: &CastId, seq: Seq, prev: Digest) -> Recorded {
        let hash = Link {
            prev: &prev,
            cast,
            seq,
            at_ms: self.at_ms,
            kind: self.kind,
            v: self.v,
            payload: &self.payload,
        }
        .hash();
        Recorded {
            cast: cast.clone(),
            seq,
            at_ms: self.at_ms,
            kind: self.kind.to_owned(),
            v: self.v,
            payload: self.payload,
            prev,
            hash,
        }
    }
}

/// Seals a batch of pending events after `(head, prev)`; the chain a log appends.
pub fn seal_batch(cast: &CastId, head: Seq, prev: Digest, events: &[Pending]) -> Vec<Recorded> {
    let mut out = Vec::with_capacity(events.len());
    let mut seq = head;
    let mut prev = prev;
    for pending in events {
        seq = seq.next();
        let record = pending.seal(cast, seq, prev);
        prev = record.hash;
        out.push(record);
    }
    out
}

/// [`seal_batch`] of events the caller gives up: their payloads move into the records.
pub fn seal_owned(cast: &CastId, head: Seq, prev: Digest, events: Vec<Pending>) -> Vec<Recorded> {
    let mut out = Vec::with_capacity(events.len());
    let (mut seq, mut prev) = (head, prev);
    for pending in events {
        seq = seq.next();
        let record = pending.into_sealed(cast, seq, prev);
        prev = record.hash;
        out.push(record);
    }
    out
}
