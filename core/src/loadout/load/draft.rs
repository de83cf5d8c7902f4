//! A socket as it is read, before the graph is checked ([`Draft`]), and the reading of edge
//! conditions and targets that sockets and loops share. `sockets` reads drafts and assembles
//! the loadout; `loops` and `cycles` work on the drafts.

use super::LoadError;
use super::json::{Obj, err, join, req_str};
use super::materia::MateriaDef;
use crate::event::When;
use crate::id::SocketId;
use crate::loadout::{Advance, Edge, EdgeTarget, ItemSource, Parse};

/// The terminal edge target.
const END: &str = "end";

/// A socket being resolved: its settings before loop derivations are applied.
#[derive(Debug)]
pub(super) struct Draft<'m> {
    /// Key of the socket in `loadouts.<name>.sockets`.
    pub id: SocketId,
    /// `loadouts.<name>.sockets.<id>`.
    pub path: String,
    /// Materia definition the socket places, from the catalog.
    pub materia: &'m MateriaDef,
    /// Effective parse mode.
    pub parse: Parse,
    /// The path of an explicit `parse: "text"` that applies to this socket.
    pub text_at: Option<String>,
    /// The path of a `parse` written on a utility socket: obsolete (a utility's parse mode is
    /// its materia's), allowed only where the reference derives it, on a generator or on a
    /// loop's JSON exit source (see `sockets::refuse_utility_parse`).
    pub utility_parse_at: Option<String>,
    /// Effective assignments.
    pub assign: Vec<(String, String)>,
    /// Routes out of the socket, in config order (the first that matches is taken).
    pub edges: Vec<Edge>,
    /// Cursor advance (authored, or materialized from a loop exit).
    pub advance: Option<Advance>,
    /// Legacy per-socket iteration.
    pub foreach: Option<ItemSource>,
}

/// Parses an edge condition.
pub(super) fn parse_when(text: &str) -> Option<When> {
    match text {
        "always" => Some(When::Always),
        "satisfied" => Some(When::Satisfied),
        "not_satisfied" => Some(When::NotSatisfied),
        _ => None,
    }
}

/// The config spelling of a condition.
pub(super) fn when_str(when: When) -> &'static str {
    match when {
        When::Always => "always",
        When::Satisfied => "satisfied",
        When::NotSatisfied => "not_satisfied",
    }
}

/// A required condition field (`when`, `condition`).
pub(super) fn req_when(obj: &Obj, key: &str, path: &str) -> Result<When, LoadError> {
    let hint = "use \"always\", \"satisfied\" or \"not_satisfied\"";
    let text = req_str(obj, key, path, hint)?;
    parse_when(text).ok_or_else(|| {
        err(
            &join(path, key),
            format!("unknown condition {text:?}; {hint}"),
        )
    })
}

/// A required edge target field: a socket of this loadout or `end`.
pub(super) fn req_target(
    obj: &Obj,
    key: &str,
    path: &str,
    ids: &[&str],
) -> Result<EdgeTarget, LoadError> {
    let text = req_str(obj, key, path, "name a socket of this loadout or \"end\"")?;
    if text == END {
        Ok(EdgeTarget::End)
    } else if ids.contains(&text) {
        Ok(EdgeTarget::Socket(SocketId::new(text)))
    } else {
        Err(err(
            &join(path, key),
            format!(
                "unknown socket {text:?}; use \"end\" or one of: {}",
                ids.join(", ")
            ),
        ))
    }
}

/// Normalizes an advance condition: `always` (or none) is `None`.
pub(super) fn normalize_condition(when: Option<&str>) -> Option<String> {
    match when.map(str::trim) {
        None | Some("always") => None,
        Some(w) => Some(w.to_owned()),
    }
}
