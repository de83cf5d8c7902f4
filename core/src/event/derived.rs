//! How `data_assigned` and `rework_routed` are stored when their text comes from the completion
//! just recorded.
//!
//! An assignment from the output (`$`, `$.context`, ...) writes a piece of the completion's
//! output, and a rework reason quotes the output's `context`: both repeat text the log holds
//! already, in the `socket_completed` a few seqs before (itself naming the reply it is, see
//! `completion.rs`). Version 2 of each names that completion instead:
//!
//! - `data_assigned`: `"value_of":N,"source":"$.…"` in place of `value`, when the event's
//!   [`DataAssigned::from`] says so: the value is what the source path gives on the completion
//!   at seq `N` of the same cast (its `parsed`, or its `output` as a JSON string for a text
//!   socket), read as the machine reads an assignment's `$` path.
//! - `rework_routed`: `"reason_of":N` in place of `reason`, when the event's
//!   [`ReworkRouted::reason_of`] says so: the reason is that completion's `context`, its
//!   whitespace collapsed and cut at [`REASON_CHARS`] characters with `…`, as the machine
//!   quotes it. The cut is part of this layout: a machine that quotes otherwise writes
//!   `reason` in full.
//!
//! Reading either needs the completion: [`Event::decode_with`](super::Event::decode_with) is
//! given it by seq and checks it is a completion of the event's socket (`socket`, and
//! `source` for a rework); without it the event does not decode
//! ([`DecodeError::Unresolved`](super::DecodeError::Unresolved)). Version 1 (always `value`,
//! always `reason`) reads as before and is written again for a re-decision of an older cast.
//!
//! Fields, in order: `data_assigned` `socket`, `path`, then `value` or `value_of` and
//! `source`; `rework_routed` `source`, `materia_label`, `target`, `item` (absent outside
//! loops), then `reason` or `reason_of`.

use serde::ser::SerializeStruct;
use serde::{Deserialize, Serialize, Serializer};
use serde_json::Value;

use super::named::{Text, earlier_at, inline_or_named, invalid, undecodable};
use super::{DataAssigned, DecodeError, Earlier, ReworkRouted, ValueFrom};
use crate::id::{ItemKey, Seq, SocketId};

/// How many characters of a completion's `context` a version 2 `rework_routed` quotes.
pub const REASON_CHARS: usize = 900;

/// The reason a version 2 `rework_routed` derives from a completion's `context`.
pub fn quoted_reason(context: &str) -> String {
    crate::machine::bounded(context, REASON_CHARS)
}

/// The value a version 2 `data_assigned` derives from a completion's output (`whole`: its
/// `parsed`, or its `output` as a string) by a `$` source; `None` when the output has none.
fn assigned_value(whole: &Value, source: &str) -> Option<Value> {
    let scope = crate::path::Scope {
        output: Some(whole),
        data: &Value::Null,
        last_json: None,
        last_output: None,
    };
    is_output_source(source)
        .then(|| crate::path::resolve_ref(&scope, source).cloned())
        .flatten()
}

/// Whether an assignment's source reads the output alone (`$` or `$.…`).
pub(crate) fn is_output_source(source: &str) -> bool {
    let source = source.trim();
    source == "$" || source.starts_with("$.")
}

/// The completion at `seq`, which must be one of `socket`'s.
fn completion(
    kind: &str,
    seq: Seq,
    socket: &SocketId,
    earlier: &mut dyn FnMut(Seq) -> Option<Earlier>,
) -> Result<Value, DecodeError> {
    match earlier_at(kind, seq, earlier)? {
        Earlier::Completion { socket: s, whole } if s == *socket => Ok(whole),
        Earlier::Completion { socket: s, .. } => Err(invalid(
            kind,
            format!("names seq {seq}, a completion of {s}, not of {socket}"),
        )),
        Earlier::Reply(_) => Err(invalid(
            kind,
            format!("names seq {seq}, a reply, not a completion"),
        )),
    }
}

/// The stored form of `data_assigned` in either version.
#[derive(Deserialize)]
struct StoredAssignment {
    socket: SocketId,
    path: String,
    /// Present, even as `null`, in version 1 and when version 2 holds the value.
    #[serde(default, deserialize_with = "present")]
    value: Option<Value>,
    #[serde(default)]
    value_of: Option<Seq>,
    #[serde(default)]
    source: Option<String>,
}

/// A field that is present, whatever its JSON (`null` included), as `Some`.
fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(d).map(Some)
}

/// Decodes a `data_assigned` payload of `version`, asking `earlier` for the completion a
/// version 2 payload names.
pub(super) fn decode_assignment(
    version: u16,
    payload: &[u8],
    earlier: &mut dyn FnMut(Seq) -> Option<Earlier>,
) -> Result<DataAssigned, DecodeError> {
    const KIND: &str = "data_assigned";
    let stored: StoredAssignment =
        serde_json::from_slice(payload).map_err(|e| undecodable(KIND, e))?;
    let named = match (stored.value_of, stored.source) {
        (Some(seq), Some(source)) if version >= 2 => Some(ValueFrom { seq, source }),
        (None, None) => None,
        _ if version < 2 => {
            return Err(invalid(KIND, "`value_of` is not part of version 1".into()));
        }
        _ => {
            return Err(invalid(KIND, "`value_of` and `source` go together".into()));
        }
    };
    let value = match inline_or_named(KIND, ("value", stored.value), ("value_of", named.as_ref()))?
    {
        Text::Inline(value) => value,
        Text::Named(from) => {
            let whole = completion(KIND, from.seq, &stored.socket, earlier)?;
            assigned_value(&whole, &from.source).ok_or_else(|| {
                invalid(
                    KIND,
                    format!(
                        "`source` {:?} gives nothing on the completion at seq {}",
                        from.source, from.seq
                    ),
                )
            })?
        }
    };
    Ok(DataAssigned {
        socket: stored.socket,
        path: stored.path,
        value,
        from: named,
    })
}

impl DataAssigned {
    /// Writes the payload of `version` (1 or 2).
    fn write<S: Serializer>(&self, serializer: S, version: u16) -> Result<S::Ok, S::Error> {
        let from = self.from.as_ref().filter(|_| version >= 2);
        let mut out =
            serializer.serialize_struct("DataAssigned", 3 + usize::from(from.is_some()))?;
        out.serialize_field("socket", &self.socket)?;
        out.serialize_field("path", &self.path)?;
        match from {
            Some(from) => {
                out.serialize_field("value_of", &from.seq)?;
                out.serialize_field("source", &from.source)?;
            }
            None => out.serialize_field("value", &self.value)?,
        }
        out.end()
    }
}

/// The stored form of `rework_routed` in either version.
#[derive(Deserialize)]
struct StoredRework {
    source: SocketId,
    materia_label: String,
    target: SocketId,
    #[serde(default)]
    item: Option<ItemKey>,
    #[serde(default)]
    reason: Option<String>,
    #[serde(default)]
    reason_of: Option<Seq>,
}

/// Decodes a `rework_routed` payload of `version`, asking `earlier` for the completion a
/// version 2 payload names.
pub(super) fn decode_rework(
    version: u16,
    payload: &[u8],
    earlier: &mut dyn FnMut(Seq) -> Option<Earlier>,
) -> Result<ReworkRouted, DecodeError> {
    const KIND: &str = "rework_routed";
    let stored: StoredRework = serde_json::from_slice(payload).map_err(|e| undecodable(KIND, e))?;
    if stored.reason_of.is_some() && version < 2 {
        return Err(invalid(KIND, "`reason_of` is not part of version 1".into()));
    }
    let reason = match inline_or_named(
        KIND,
        ("reason", stored.reason),
        ("reason_of", stored.reason_of),
    )? {
        Text::Inline(reason) => reason,
        Text::Named(seq) => {
            let whole = completion(KIND, seq, &stored.source, earlier)?;
            match whole.get("context") {
                Some(Value::String(context)) if !context.trim().is_empty() => {
                    quoted_reason(context)
                }
                _ => {
                    return Err(invalid(
                        KIND,
                        format!("the completion at seq {seq} has no `context` to quote"),
                    ));
                }
            }
        }
    };
    Ok(ReworkRouted {
        source: stored.source,
        materia_label: stored.materia_label,
        target: stored.target,
        item: stored.item,
        reason,
        reason_of: stored.reason_of,
    })
}

impl ReworkRouted {
    /// Writes the payload of `version` (1 or 2).
    fn write<S: Serializer>(&self, serializer: S, version: u16) -> Result<S::Ok, S::Error> {
        let reason_of = self.reason_of.filter(|_| version >= 2);
        let fields = 4 + usize::from(self.item.is_some());
        let mut out = serializer.serialize_struct("ReworkRouted", fields)?;
        out.serialize_field("source", &self.source)?;
        out.serialize_field("materia_label", &self.materia_label)?;
        out.serialize_field("target", &self.target)?;
        if let Some(item) = &self.item {
            out.serialize_field("item", item)?;
        }
        match reason_of {
            Some(seq) => out.serialize_field("reason_of", &seq)?,
            None => out.serialize_field("reason", &self.reason)?,
        }
        out.end()
    }
}

/// An event of one of these kinds in the stored layout of a version (1 or 2). (The structs'
/// own `Serialize` is their whole in-memory form, texts included, as a state snapshot keeps a
/// rework entry.)
pub(super) enum Layout<'a> {
    Assignment(&'a DataAssigned, u16),
    Rework(&'a ReworkRouted, u16),
}

impl Serialize for Layout<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Layout::Assignment(a, v) => a.write(serializer, *v),
            Layout::Rework(r, v) => r.write(serializer, *v),
        }
    }
}
