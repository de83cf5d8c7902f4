//! How a `socket_completed` payload is stored, in its three versions.
//!
//! A json socket's accepted reply is usually the very JSON it parses to: storing `parsed` beside
//! `output` kept the reply twice in one event. Version 2 leaves `parsed` out when it is exactly
//! what `output` parses to (`serde_json`'s own parse, compared as values) and writes
//! `"parsed_from_output":true` in its place; a `parsed` that differs (a fenced reply, a reply
//! whose `events` were taken out, a utility's rewritten stdout) is written as in version 1.
//! Version 1 always wrote `parsed` when there was one. Both read to the same event, so a log
//! holding either replays the same; [`Event::encode_at`](super::Event::encode_at) writes
//! version 1 again for a re-decision of a cast recorded before version 2, whose bytes and
//! hashes never change.
//!
//! An agent socket's output is, most of the time, its reply byte for byte, and the reply is in
//! the log already (`agent_replied`, a few seqs before). Version 3 writes `"output_of":N`, the
//! seq of that reply in the same cast, in place of `output` when the event's
//! [`SocketCompleted::output_of`] says so; an output that is not a reply of this cast (a
//! utility's stdout, a reply rewritten without its `events`, one recorded before a fork) is
//! written in full as before. Reading version 3 needs that earlier reply:
//! [`Event::decode_with`](super::Event::decode_with) is given it by seq (a reader of the cast
//! keeps the latest reply it read, see `castlog_events::Decoder`), checks that it is a reply of
//! the same socket and visit, and takes its text as `output`; without it the event does not
//! decode ([`DecodeError::Unresolved`](super::DecodeError::Unresolved)). A re-decision of a
//! cast recorded in version 1 or 2 writes that version again, so old bytes and hashes never
//! change.
//!
//! The fields, in order: `socket`, `visit`, `item` (absent outside loops), `output` or
//! `output_of`, then `parsed` or `parsed_from_output` (neither for a text socket), `satisfied`
//! (absent when the output had none), `finalized` (absent when false).

use serde::ser::SerializeStruct;
use serde::{Deserialize, Serialize, Serializer};
use serde_json::Value;

use super::named::{Text, earlier_at, inline_or_named, invalid, undecodable};
use super::{DecodeError, Earlier, SocketCompleted, is_false};
use crate::id::{ItemKey, Seq, SocketId, Visit};

/// The stored form every version reads as.
#[derive(Deserialize)]
pub(super) struct Stored {
    socket: SocketId,
    visit: Visit,
    #[serde(default)]
    item: Option<ItemKey>,
    #[serde(default)]
    output: Option<String>,
    #[serde(default)]
    output_of: Option<Seq>,
    #[serde(default)]
    parsed: Option<Value>,
    #[serde(default)]
    parsed_from_output: bool,
    #[serde(default)]
    satisfied: Option<bool>,
    #[serde(default)]
    finalized: bool,
}

impl TryFrom<Stored> for SocketCompleted {
    type Error = String;

    /// The event of a payload that holds its output (any version without `output_of`).
    fn try_from(stored: Stored) -> Result<Self, String> {
        stored.resolve(&mut |_| None).map_err(|err| match err {
            DecodeError::Unresolved { seq, .. } => format!(
                "`output_of` names the reply at seq {seq}, which is needed to read the output"
            ),
            DecodeError::Payload { source, .. } => source.to_string(),
            other => other.to_string(),
        })
    }
}

/// Decodes a version 3 payload, asking `earlier` for the reply its `output_of` names.
pub(super) fn decode(
    payload: &[u8],
    earlier: &mut dyn FnMut(Seq) -> Option<Earlier>,
) -> Result<SocketCompleted, DecodeError> {
    let stored: Stored = serde_json::from_slice(payload).map_err(|e| undecodable(KIND, e))?;
    stored.resolve(earlier)
}

const KIND: &str = "socket_completed";

impl Stored {
    /// The event, its output read from the reply `output_of` names when it names one.
    fn resolve(
        mut self,
        earlier: &mut dyn FnMut(Seq) -> Option<Earlier>,
    ) -> Result<SocketCompleted, DecodeError> {
        let named = inline_or_named(
            KIND,
            ("output", self.output.take()),
            ("output_of", self.output_of),
        )?;
        let (output, output_of) = match named {
            Text::Inline(output) => (output, None),
            Text::Named(seq) => {
                let reply = match earlier_at(KIND, seq, earlier)? {
                    Earlier::Reply(reply) => reply,
                    Earlier::Completion { .. } => {
                        return Err(invalid(
                            KIND,
                            format!("`output_of` names seq {seq}, a completion, not a reply"),
                        ));
                    }
                };
                if reply.socket != self.socket || reply.visit != self.visit {
                    return Err(invalid(
                        KIND,
                        format!(
                            "`output_of` names seq {seq}, a reply of {} visit {}, not of {} visit {}",
                            reply.socket, reply.visit, self.socket, self.visit
                        ),
                    ));
                }
                (reply.text, Some(seq))
            }
        };
        let parsed = match (self.parsed, self.parsed_from_output) {
            (Some(_), true) => {
                return Err(invalid(
                    KIND,
                    "`parsed` and `parsed_from_output` are both given".into(),
                ));
            }
            (parsed, false) => parsed,
            (None, true) => Some(serde_json::from_str(&output).map_err(|err| {
                invalid(
                    KIND,
                    format!("`parsed_from_output` is set and `output` is not JSON ({err})"),
                )
            })?),
        };
        Ok(SocketCompleted {
            socket: self.socket,
            visit: self.visit,
            item: self.item,
            output,
            output_of,
            parsed,
            satisfied: self.satisfied,
            finalized: self.finalized,
        })
    }
}

impl SocketCompleted {
    /// Whether `parsed` is exactly what `output` parses to (version 2 leaves it out then).
    pub(crate) fn parsed_is_output(&self) -> bool {
        self.parsed.as_ref().is_some_and(|parsed| {
            serde_json::from_str::<Value>(&self.output).is_ok_and(|value| value == *parsed)
        })
    }

    /// Writes the payload of `version` (1, 2 or 3).
    fn write<S: Serializer>(&self, serializer: S, version: u16) -> Result<S::Ok, S::Error> {
        let from_output = version >= 2 && self.parsed_is_output();
        let output_of = self.output_of.filter(|_| version >= 3);
        let fields = 3
            + usize::from(self.item.is_some())
            + usize::from(self.parsed.is_some())
            + usize::from(self.satisfied.is_some())
            + usize::from(self.finalized);
        let mut out = serializer.serialize_struct("SocketCompleted", fields)?;
        out.serialize_field("socket", &self.socket)?;
        out.serialize_field("visit", &self.visit)?;
        if let Some(item) = &self.item {
            out.serialize_field("item", item)?;
        }
        match output_of {
            Some(seq) => out.serialize_field("output_of", &seq)?,
            None => out.serialize_field("output", &self.output)?,
        }
        match &self.parsed {
            Some(_) if from_output => out.serialize_field("parsed_from_output", &true)?,
            Some(parsed) => out.serialize_field("parsed", parsed)?,
            None => {}
        }
        if let Some(satisfied) = &self.satisfied {
            out.serialize_field("satisfied", satisfied)?;
        }
        if !is_false(&self.finalized) {
            out.serialize_field("finalized", &self.finalized)?;
        }
        out.end()
    }
}

impl Serialize for SocketCompleted {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.write(serializer, 3)
    }
}

/// A `socket_completed` written as an earlier version wrote it: 1 (`parsed` always in full) or
/// 2 (`output` always in full).
pub(super) struct EarlierVersion<'a>(pub(super) &'a SocketCompleted, pub(super) u16);

impl Serialize for EarlierVersion<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.0.write(serializer, self.1)
    }
}
