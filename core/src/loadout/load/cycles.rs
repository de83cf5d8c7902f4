//! Refusing cycles no cast can leave (castlog's own check; the reference has none).
//!
//! A socket is *forced* when its only edge is an `always` edge to a socket (itself included),
//! without `maxTraversals`, and it neither advances a cursor nor belongs to a loop region or
//! iterates a `foreach` (an empty or used-up list is left through the loop's exit, and the guard
//! counts each item's cycles). A cycle of forced sockets routes the same way whatever any of them
//! outputs and nothing in it counts towards any limit but the no-advance guard, so it can only
//! end by failing: such a loadout is refused at load, naming the cycle. Every other cycle has a
//! way out (a `satisfied` or `not_satisfied` edge, which also falls through to `end` when nothing
//! matches, an allowance, an advance, a loop exit) and is bounded at run time by the no-advance
//! guard.

use super::LoadError;
use super::draft::Draft;
use super::json::{err, index, join};
use crate::event::When;
use crate::loadout::{EdgeTarget, LoopRegion};

/// Fails on the first cycle of forced sockets, in file order.
pub(super) fn refuse_closed_cycles(
    drafts: &[Draft<'_>],
    loops: &[LoopRegion],
) -> Result<(), LoadError> {
    let next: Vec<Option<usize>> = drafts.iter().map(|d| forced(d, drafts, loops)).collect();
    // Each socket has at most one forced successor, so a walk from any socket either stops, or
    // reaches a socket an earlier walk finished, or comes back to itself: a cycle.
    let mut finished = vec![false; drafts.len()];
    for start in 0..drafts.len() {
        let mut walk: Vec<usize> = Vec::new();
        let mut at = Some(start);
        while let Some(i) = at {
            if finished.get(i).copied().unwrap_or(true) {
                break;
            }
            if let Some(from) = walk.iter().position(|&w| w == i) {
                return Err(refusal(drafts, walk.get(from..).unwrap_or_default()));
            }
            walk.push(i);
            at = next.get(i).copied().flatten();
        }
        for w in walk {
            if let Some(done) = finished.get_mut(w) {
                *done = true;
            }
        }
    }
    Ok(())
}

/// The one socket a forced socket always goes on to.
fn forced(draft: &Draft<'_>, drafts: &[Draft<'_>], loops: &[LoopRegion]) -> Option<usize> {
    let [edge] = draft.edges.as_slice() else {
        return None;
    };
    let in_loop = loops.iter().any(|l| l.sockets.contains(&draft.id));
    if edge.when != When::Always
        || edge.max_traversals.is_some()
        || draft.advance.is_some()
        || draft.foreach.is_some()
        || in_loop
    {
        return None;
    }
    match &edge.to {
        EdgeTarget::Socket(to) => drafts.iter().position(|d| &d.id == to),
        EdgeTarget::End => None,
    }
}

fn refusal(drafts: &[Draft<'_>], cycle: &[usize]) -> LoadError {
    let names: Vec<&str> = cycle
        .iter()
        .chain(cycle.first())
        .filter_map(|&i| drafts.get(i).map(|d| d.id.as_str()))
        .collect();
    let at = cycle
        .first()
        .and_then(|&i| drafts.get(i))
        .map_or_else(String::new, |d| index(&join(&d.path, "edges"), 0));
    err(
        &at,
        format!(
            "the cycle {} never ends: each of its sockets goes on only by an `always` edge, \
             none has `maxTraversals` and none advances a cursor; give one of them a \
             `satisfied` or `not_satisfied` edge out of the cycle, a `maxTraversals`, or an \
             `advance`",
            names.join(" -> ")
        ),
    )
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use crate::loadout::load_config;

    fn config(sockets: &Value, loops: Option<Value>) -> String {
        let mut loadout = json!({ "entry": "Socket-1", "sockets": sockets });
        if let Some(loops) = loops {
            loadout["loops"] = loops;
        }
        json!({
            "activeLoadout": "Spin",
            "loadouts": { "Spin": loadout },
            "materia": {
                "Tick": { "type": "utility", "command": ["echo", "tick"] },
                "Plan": { "type": "agent", "tools": "none", "generator": true, "prompt": "Plan." },
                "Work": { "type": "agent", "tools": "none", "prompt": "Work." }
            }
        })
        .to_string()
    }

    fn always(to: &str) -> Value {
        json!([{ "when": "always", "to": to }])
    }

    #[test]
    fn two_utilities_joined_by_always_edges_are_refused_naming_the_cycle() {
        let text = config(
            &json!({
                "Socket-1": { "materia": "Tick", "edges": always("Socket-2") },
                "Socket-2": { "materia": "Tick", "edges": always("Socket-3") },
                "Socket-3": { "materia": "Tick", "edges": always("Socket-2") }
            }),
            None,
        );
        let e = load_config(&text).unwrap_err();
        assert_eq!(e.path, "loadouts.Spin.sockets.Socket-2.edges[0]", "{e}");
        assert!(
            e.reason
                .starts_with("the cycle Socket-2 -> Socket-3 -> Socket-2 never ends"),
            "{e}"
        );
    }

    #[test]
    fn a_socket_going_back_to_itself_is_refused() {
        let text = config(
            &json!({ "Socket-1": { "materia": "Work", "edges": always("Socket-1") } }),
            None,
        );
        let e = load_config(&text).unwrap_err();
        assert!(e.reason.contains("Socket-1 -> Socket-1 never ends"), "{e}");
    }

    #[test]
    fn cycles_with_a_way_out_load() {
        let ways_out = [
            // A conditional edge (and the fall-through to `end` when nothing matches).
            json!([{ "when": "satisfied", "to": "end" }, { "when": "always", "to": "Socket-1" }]),
            json!([{ "when": "not_satisfied", "to": "Socket-1" }]),
            // An allowance.
            json!([{ "when": "always", "to": "Socket-1", "maxTraversals": 2 }]),
        ];
        for edges in ways_out {
            let text = config(
                &json!({
                    "Socket-1": { "materia": "Tick", "edges": always("Socket-2") },
                    "Socket-2": { "materia": "Work", "parse": "json", "edges": edges }
                }),
                None,
            );
            assert!(load_config(&text).is_ok(), "{text}");
        }
        // An advance.
        let text = config(
            &json!({
                "Socket-1": { "materia": "Tick", "edges": always("Socket-2") },
                "Socket-2": { "materia": "Work", "edges": always("Socket-1"),
                              "advance": { "cursor": "c", "items": "state.list" } }
            }),
            None,
        );
        assert!(load_config(&text).is_ok(), "{text}");
    }

    #[test]
    fn a_loop_region_of_always_edges_loads_and_is_left_to_the_guard_per_item() {
        let text = config(
            &json!({
                "Socket-1": { "materia": "Plan", "edges": always("Socket-2") },
                "Socket-2": { "materia": "Work", "edges": always("Socket-3") },
                "Socket-3": { "materia": "Work", "edges": always("Socket-2") }
            }),
            Some(json!({ "items": { "sockets": ["Socket-2", "Socket-3"],
                                    "consumes": { "from": "Socket-1" } } })),
        );
        assert!(load_config(&text).is_ok());
    }
}
