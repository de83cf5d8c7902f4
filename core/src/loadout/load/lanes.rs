//! The parallel region of a loadout (§2.15 of the reference): a parallel generator, the
//! prelude sockets between it and its loop (run once per lane), and the loop each lane walks.
//! Every socket copied into a lane must be `parallelSafe` and single-turn, and no edge of a
//! lane socket may lead out of the lanes (a lane leaves only by its loop's exit, where the
//! parent takes over).

use super::LoadError;
use super::draft::Draft;
use super::json::{err, join};
use crate::event::When;
use crate::id::SocketId;
use crate::loadout::{EdgeTarget, Lanes, LoopRegion};

/// Lanes run at once when neither the loop nor the config says (`parallelism.maxConcurrency`
/// in the reference's bundled config).
pub const DEFAULT_MAX_CONCURRENCY: u32 = 2;

/// Derives the lanes of the parallel generator `generator` (an index into `drafts`) and marks
/// the loop it feeds as consuming it.
pub(super) fn derive(
    generator: usize,
    drafts: &[Draft<'_>],
    loops: &mut [LoopRegion],
    top_concurrency: Option<u32>,
) -> Result<Lanes, LoadError> {
    let Some(g) = drafts.get(generator) else {
        return Err(err("loadouts", "unknown parallel generator"));
    };
    let by_id = |id: &SocketId| drafts.iter().find(|d| &d.id == id);
    let one_always = |d: &Draft<'_>| match d.edges.as_slice() {
        [edge] if edge.when == When::Always => match &edge.to {
            EdgeTarget::Socket(to) => Some(to.clone()),
            EdgeTarget::End => None,
        },
        _ => None,
    };
    let Some(mut at) = one_always(g) else {
        return Err(err(
            &join(&g.path, "edges"),
            format!(
                "the parallel generator {} hands its work items to lanes: give it exactly one \
                 `always` edge to the first lane socket",
                g.id
            ),
        ));
    };
    let mut prelude: Vec<SocketId> = Vec::new();
    let lane_loop = loop {
        if let Some(l) = loops.iter().position(|l| l.sockets.contains(&at)) {
            break l;
        }
        let Some(d) = by_id(&at) else {
            return Err(err(&g.path, format!("unknown socket {at}")));
        };
        if prelude.contains(&at) || at == g.id || prelude.len() > drafts.len() {
            return Err(err(
                &join(&d.path, "edges"),
                format!(
                    "the sockets after the parallel generator {} go round without reaching a \
                     loop; lead them into the loop the lanes walk",
                    g.id
                ),
            ));
        }
        prelude.push(at.clone());
        match one_always(d) {
            Some(next) => at = next,
            None => {
                return Err(err(
                    &join(&d.path, "edges"),
                    format!(
                        "{} runs once in every lane before the loop (after the parallel \
                         generator {}); give it exactly one `always` edge toward the loop",
                        d.id, g.id
                    ),
                ));
            }
        }
    };
    let Some(region) = loops.get_mut(lane_loop) else {
        return Err(err(&g.path, "unknown loop"));
    };
    region.consumes_from = Some(g.id.clone());
    let members = region.sockets.clone();
    let in_lanes = |id: &SocketId| prelude.contains(id) || members.contains(id);
    for id in prelude.iter().chain(&members) {
        let Some(d) = by_id(id) else { continue };
        if !d.materia.parallel_safe {
            return Err(err(
                &join(&d.path, "materia"),
                format!(
                    "{} runs inside the parallel lanes of {}, so its materia {:?} must be \
                     marked `parallelSafe: true` ({}); mark it, or move the socket out of the \
                     lanes",
                    d.id, g.id, d.materia.id, d.materia.path
                ),
            ));
        }
        if let super::materia::Body::Agent(a) = &d.materia.body
            && a.multi_turn
        {
            return Err(err(
                &join(&d.path, "materia"),
                format!(
                    "{} runs inside the parallel lanes of {}, where nobody refines a draft; \
                     its materia {:?} is multi-turn: use a single-turn materia there",
                    d.id, g.id, d.materia.id
                ),
            ));
        }
        for (i, edge) in d.edges.iter().enumerate() {
            if let EdgeTarget::Socket(to) = &edge.to
                && !in_lanes(to)
            {
                return Err(err(
                    &super::json::index(&join(&d.path, "edges"), i),
                    format!(
                        "{} runs inside the parallel lanes of {}, and this edge leads out of \
                         them to {to}; a lane leaves only through its loop's exit, so route it \
                         inside the lanes or to end",
                        d.id, g.id
                    ),
                ));
            }
        }
    }
    let max_concurrency = region
        .max_concurrency
        .or(top_concurrency)
        .unwrap_or(DEFAULT_MAX_CONCURRENCY);
    let entry = prelude.first().cloned().unwrap_or_else(|| at.clone());
    Ok(Lanes {
        generator: g.id.clone(),
        entry,
        prelude,
        loop_id: region.id.clone(),
        max_concurrency,
    })
}

#[cfg(test)]
mod tests {
    use rstest::rstest;
    use serde_json::{Value, json};

    use crate::id::SocketId;
    use crate::loadout::load_config;

    /// pi-materia's bundled `config/default.json` (MIT), byte for byte.
    const DEFAULT: &str = include_str!("../../../../fixtures/pi-materia-default.json");

    #[rstest]
    #[case("Parallel-Experimental")]
    #[case("Parallel-Interactive")]
    fn the_bundled_parallel_loadouts_load_and_resolve_their_lanes(#[case] name: &str) {
        // As shipped, unchanged: every utility they place has a built-in.
        let loadout = load_config(DEFAULT).unwrap().resolve(Some(name)).unwrap();
        for (socket, builtin) in [
            ("Socket-3", "blackbelt-bootstrap"),
            ("Socket-5", "spawn-jj-workspace"),
            ("Socket-8", "blackbelt-maintain"),
            ("Socket-9", "integrate-jj-workspaces"),
            ("Socket-11", "finalize-jj-workspace"),
        ] {
            let kind = &loadout.socket(&SocketId::new(socket)).unwrap().kind;
            assert!(
                matches!(kind, crate::loadout::SocketKind::Utility(u)
                    if u.exec == crate::loadout::Exec::Builtin { name: builtin.into() }),
                "{socket}: {kind:?}"
            );
        }
        let lanes = loadout.lanes.clone().expect("a parallel region");
        assert_eq!(lanes.generator, SocketId::new("Socket-4"));
        assert_eq!(lanes.prelude, [SocketId::new("Socket-5")]);
        assert_eq!(lanes.entry, SocketId::new("Socket-5"));
        assert_eq!(lanes.loop_id, "parallelWork");
        // The bundled `parallelism.maxConcurrency`.
        assert_eq!(lanes.max_concurrency, 2);
        assert!(loadout.socket(&SocketId::new("Socket-4")).unwrap().parallel);
        let lp = loadout.loops.first().unwrap();
        assert_eq!(lp.consumes_from, Some(SocketId::new("Socket-4")));
        assert!(lanes.contains(&loadout, &SocketId::new("Socket-7")));
        assert!(!lanes.contains(&loadout, &SocketId::new("Socket-9")));
        // The frozen form reads back.
        let back = crate::loadout::Loadout::from_json(&loadout.to_json()).unwrap();
        assert_eq!(back.lanes, loadout.lanes);
    }

    fn refusal(edit: impl Fn(&mut Value)) -> crate::loadout::LoadError {
        let mut config: Value = serde_json::from_str(DEFAULT).unwrap();
        edit(&mut config);
        let text = config.to_string();
        match load_config(&text) {
            Err(e) => e,
            Ok(c) => c.resolve(Some("Parallel-Experimental")).unwrap_err(),
        }
    }

    #[test]
    fn a_lane_socket_whose_materia_is_not_parallel_safe_is_refused_by_socket_and_rule() {
        let e = refusal(|c| {
            c["materia"]["Auto-Eval"]
                .as_object_mut()
                .unwrap()
                .remove("parallelSafe");
        });
        assert_eq!(
            e.path,
            "loadouts.Parallel-Experimental.sockets.Socket-7.materia"
        );
        assert!(e.reason.contains("parallelSafe"), "{e}");
        assert!(e.reason.contains("Auto-Eval"), "{e}");
    }

    #[test]
    fn a_multi_turn_socket_inside_the_lanes_is_refused() {
        let e = refusal(|c| {
            c["materia"]["Build"]["multiTurn"] = json!(true);
        });
        assert_eq!(
            e.path,
            "loadouts.Parallel-Experimental.sockets.Socket-6.materia"
        );
        assert!(e.reason.contains("multi-turn"), "{e}");
    }

    #[test]
    fn an_edge_out_of_the_lanes_is_refused() {
        let e = refusal(|c| {
            c["loadouts"]["Parallel-Experimental"]["sockets"]["Socket-7"]["edges"][1]["to"] =
                json!("Socket-10");
        });
        assert_eq!(
            e.path,
            "loadouts.Parallel-Experimental.sockets.Socket-7.edges[1]"
        );
        assert!(e.reason.contains("leads out of"), "{e}");
    }

    #[test]
    fn a_prelude_socket_must_lead_on_with_one_always_edge() {
        let e = refusal(|c| {
            c["loadouts"]["Parallel-Experimental"]["sockets"]["Socket-5"]["edges"] =
                json!([{"when": "satisfied", "to": "Socket-6"}]);
        });
        assert_eq!(
            e.path,
            "loadouts.Parallel-Experimental.sockets.Socket-5.edges"
        );
        assert!(e.reason.contains("once in every lane"), "{e}");
    }

    #[test]
    fn the_loops_own_max_concurrency_overrides_the_app_wide_one() {
        let mut config: Value = serde_json::from_str(DEFAULT).unwrap();
        config["parallelism"]["maxConcurrency"] = json!(3);
        let text = config.to_string();
        let l = load_config(&text)
            .unwrap()
            .resolve(Some("Parallel-Experimental"))
            .unwrap();
        assert_eq!(l.lanes.unwrap().max_concurrency, 3);
        config["loadouts"]["Parallel-Experimental"]["loops"]["parallelWork"]["parallel"] =
            json!({"maxConcurrency": 4});
        let text = config.to_string();
        let l = load_config(&text)
            .unwrap()
            .resolve(Some("Parallel-Experimental"))
            .unwrap();
        assert_eq!(l.lanes.unwrap().max_concurrency, 4);
        config["parallelism"]["maxConcurrency"] = json!(0);
        let e = load_config(&config.to_string()).unwrap_err();
        assert_eq!(e.path, "parallelism.maxConcurrency");
    }
}
