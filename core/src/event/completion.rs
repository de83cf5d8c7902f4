//! How a `socket_completed` payload is stored, in its two versions.
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
//! The fields, in order: `socket`, `visit`, `item` (absent outside loops), `output`, then
//! `parsed` or `parsed_from_output` (neither for a text socket), `satisfied` (absent when the
//! output had none), `finalized` (absent when false).

use serde::ser::SerializeStruct;
use serde::{Deserialize, Serialize, Serializer};
use serde_json::Value;

use super::{SocketCompleted, is_false};
use crate::id::{ItemKey, SocketId, Visit};

/// The stored form either version reads as.
#[derive(Deserialize)]
pub(super) struct Stored {
    socket: SocketId,
    visit: Visit,
    #[serde(default)]
    item: Option<ItemKey>,
    output: String,
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

    fn try_from(stored: Stored) -> Result<Self, String> {
        let parsed = match (stored.parsed, stored.parsed_from_output) {
            (Some(_), true) => {
                return Err("`parsed` and `parsed_from_output` are both given".into());
            }
            (parsed, false) => parsed,
            (None, true) => Some(serde_json::from_str(&stored.output).map_err(|err| {
                format!("`parsed_from_output` is set and `output` is not JSON ({err})")
            })?),
        };
        Ok(Self {
            socket: stored.socket,
            visit: stored.visit,
            item: stored.item,
            output: stored.output,
            parsed,
            satisfied: stored.satisfied,
            finalized: stored.finalized,
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

    /// Writes the payload of `version` (1 or 2).
    fn write<S: Serializer>(&self, serializer: S, version: u16) -> Result<S::Ok, S::Error> {
        let from_output = version >= 2 && self.parsed_is_output();
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
        out.serialize_field("output", &self.output)?;
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
        self.write(serializer, 2)
    }
}

/// A `socket_completed` written as version 1 wrote it (`parsed` always in full).
pub(super) struct FirstVersion<'a>(pub(super) &'a SocketCompleted);

impl Serialize for FirstVersion<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.0.write(serializer, 1)
    }
}
