//! Whether two casts ran the same loadout, and where two loadouts differ.

use castlog_core::event::Event;
use castlog_core::id::Digest;
use castlog_events::Recorded;
use serde::Serialize;
use serde_json::Value;

/// A loadout by name and the hash of its frozen JSON.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LoadoutRef {
    /// The loadout's name.
    pub name: String,
    /// The blake3 hash of its frozen JSON, as recorded in the cast.
    pub hash: Digest,
}

/// Two casts that ran different loadouts: both, the sockets whose definition differs (or that
/// only one has) and the other top-level settings that differ, each list sorted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LoadoutChange {
    /// Cast A's loadout.
    pub a: LoadoutRef,
    /// Cast B's loadout.
    pub b: LoadoutRef,
    /// Sockets defined differently, or by one side only.
    pub sockets_changed: Vec<String>,
    /// Other top-level keys (not `sockets`, not `name`) whose values differ.
    pub settings_changed: Vec<String>,
}

/// The loadout a history runs under at its end: its start's, or the one a recast's `--config`
/// put in its place (name, hash, frozen JSON).
pub(super) fn loadout_of(
    history: &mut dyn Iterator<Item = Recorded>,
) -> Option<(String, Digest, Value)> {
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

/// Nothing when both casts ran the same loadout (or one is unknown).
pub(super) fn loadout_change(
    a: Option<(String, Digest, Value)>,
    b: Option<(String, Digest, Value)>,
) -> Option<LoadoutChange> {
    let ((name_a, hash_a, la), (name_b, hash_b, lb)) = (a?, b?);
    if hash_a == hash_b {
        return None;
    }
    let empty = serde_json::Map::new();
    let sockets = |l: &Value| l["sockets"].as_object().cloned().unwrap_or_default();
    let (sa, sb) = (sockets(&la), sockets(&lb));
    let mut sockets_changed: Vec<String> = sa
        .iter()
        .filter(|(id, def)| sb.get(*id) != Some(*def))
        .map(|(id, _)| id)
        .chain(sb.keys().filter(|id| !sa.contains_key(*id)))
        .cloned()
        .collect();
    sockets_changed.sort();
    let (ta, tb) = (
        la.as_object().unwrap_or(&empty),
        lb.as_object().unwrap_or(&empty),
    );
    let mut settings_changed: Vec<String> = ta
        .keys()
        .chain(tb.keys().filter(|k| !ta.contains_key(*k)))
        .filter(|k| *k != "sockets" && *k != "name" && ta.get(*k) != tb.get(*k))
        .cloned()
        .collect();
    settings_changed.sort();
    Some(LoadoutChange {
        a: LoadoutRef {
            name: name_a,
            hash: hash_a,
        },
        b: LoadoutRef {
            name: name_b,
            hash: hash_b,
        },
        sockets_changed,
        settings_changed,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_changed_socket_and_setting_are_named_and_the_same_hash_is_no_change() {
        let la = json!({"name": "L", "sockets": {"S1": {"m": 1}, "S2": {"m": 2}}, "maxCycles": 3});
        let lb = json!({"name": "L", "sockets": {"S1": {"m": 1}, "S3": {"m": 2}}, "maxCycles": 4});
        let side = |h: u8, l: &Value| Some(("L".to_owned(), Digest([h; 32]), l.clone()));
        let change = loadout_change(side(1, &la), side(2, &lb)).expect("a change");
        assert_eq!(change.sockets_changed, ["S2", "S3"]);
        assert_eq!(change.settings_changed, ["maxCycles"]);
        assert_eq!(loadout_change(side(1, &la), side(1, &lb)), None);
    }
}
