//! A loadout's sockets, and the assembly of the resolved [`Loadout`].

use std::collections::BTreeMap;

use super::LoadError;
use super::draft::{Draft, normalize_condition, req_target, req_when};
use super::json::{
    Json, Obj, as_object, err, get, index, join, opt_array, opt_nonempty_str, opt_object, opt_str,
    reject_keys, req_nonempty_str, req_str, string_map,
};
use super::materia::{Body, MateriaDef, Program, add_work_items_assign, positive_u32};
use super::{cycles, lanes, loops};
use crate::event::When;
use crate::id::{MateriaName, SocketId};
use crate::loadout::{
    Advance, Budget, Edge, ItemSource, Limits, Loadout, Parse, Socket, SocketKind, UtilitySpec,
};

/// The config's top-level settings every loadout takes.
#[derive(Debug, Clone, Copy)]
pub(super) struct TopLevel {
    /// `limits`.
    pub limits: Limits,
    /// `budget`.
    pub budget: Budget,
    /// `limits.maxCyclesOutsideLoops`.
    pub cycles_outside_loops: u32,
    /// `parallelism.maxConcurrency`.
    pub top_concurrency: Option<u32>,
}

/// Reads one loadout. The outer error fails the whole config; the inner one only fails
/// resolving this loadout (shipped utilities castlog lacks).
pub(super) fn build_loadout(
    name: &str,
    value: &Json,
    path: &str,
    materia: &[MateriaDef],
    top: &TopLevel,
) -> Result<Result<Loadout, LoadError>, LoadError> {
    let TopLevel {
        limits,
        budget,
        cycles_outside_loops,
        top_concurrency,
    } = *top;
    let obj = as_object(value, path, &format!("loadout {name:?}"))?;
    reject_keys(
        obj,
        path,
        &["prompt", "systemPrompt"],
        "loadout-level prompts are obsolete; put prompts on the materia",
    )?;

    let sockets_path = join(path, "sockets");
    let sockets_obj = match get(obj, "sockets") {
        Some(v) => as_object(v, &sockets_path, "`sockets`")?,
        None => {
            return Err(err(
                &sockets_path,
                "`sockets` is missing; add an object mapping socket ids (Socket-1, ...) to sockets",
            ));
        }
    };
    if sockets_obj.is_empty() {
        return Err(err(
            &sockets_path,
            "`sockets` is empty; add at least one socket",
        ));
    }
    for (id, _) in sockets_obj {
        if !is_socket_id(id) {
            return Err(err(
                &join(&sockets_path, id),
                format!(
                    "invalid socket id {id:?}; socket ids are Socket-1, Socket-2, ... \
                     (`Socket-` and a number without leading zeros)"
                ),
            ));
        }
    }
    let ids: Vec<&str> = sockets_obj.iter().map(|(id, _)| id.as_str()).collect();

    let entry = req_str(obj, "entry", path, "name the socket the cast starts at")?;
    if !ids.contains(&entry) {
        return Err(err(
            &join(path, "entry"),
            format!(
                "entry socket {entry:?} does not exist; use one of: {}",
                ids.join(", ")
            ),
        ));
    }

    let mut drafts = Vec::with_capacity(sockets_obj.len());
    for (id, value) in sockets_obj {
        drafts.push(read_socket(
            id,
            value,
            &join(&sockets_path, id),
            &ids,
            materia,
        )?);
    }

    // Parallel loadouts feed their loop through per-lane prelude sockets, so the single
    // generator edge into the loop is only required of loadouts without lanes.
    let parallel: Vec<usize> = drafts
        .iter()
        .enumerate()
        .filter(|(_, d)| d.materia.parallel)
        .map(|(i, _)| i)
        .collect();
    let mut loops = loops::read_loops(obj, path, &mut drafts, parallel.is_empty())?;
    refuse_utility_parse(&drafts)?;
    cycles::refuse_closed_cycles(&drafts, &loops)?;
    let lanes = match parallel.as_slice() {
        [] => None,
        [one] => Some(lanes::derive(*one, &drafts, &mut loops, top_concurrency)?),
        [_, second, ..] => {
            let d = drafts.get(*second).map_or(path, |d| d.path.as_str());
            return Err(err(
                &join(d, "materia"),
                format!(
                    "loadout {name:?} places more than one parallel generator; keep one, and make \
                     the others plain generators"
                ),
            ));
        }
    };

    let mut sockets = BTreeMap::new();
    for d in drafts {
        let kind = match &d.materia.body {
            Body::Agent(spec) => SocketKind::Agent(spec.clone()),
            Body::Post(spec) => SocketKind::Post(spec.clone()),
            Body::Utility(u) => match &u.exec {
                Program::Runs(exec) => SocketKind::Utility(UtilitySpec {
                    exec: exec.clone(),
                    params: u.params.clone(),
                    timeout_ms: u.timeout_ms,
                }),
                Program::NotProvided(shipped) => {
                    return Ok(Err(err(
                        &d.path,
                        format!(
                            "castlog does not provide the shipped utility '{shipped}' (materia \
                             '{}'); give the materia a `command` instead",
                            d.materia.id
                        ),
                    )));
                }
            },
        };
        sockets.insert(
            d.id,
            Socket {
                materia: MateriaName::new(d.materia.id.as_str()),
                label: d.materia.label.clone(),
                kind,
                generator: d.materia.generator,
                parallel: d.materia.parallel,
                parse: d.parse,
                assign: d.assign,
                edges: d.edges,
                advance: d.advance,
                foreach: d.foreach,
            },
        );
    }

    Ok(Ok(Loadout {
        name: name.to_owned(),
        entry: SocketId::new(entry),
        sockets,
        loops,
        limits,
        budget,
        max_cycles_outside_loops: Some(cycles_outside_loops),
        max_tool_calls: None,
        prices: Default::default(),
        lanes,
        loop_break_after: None,
    }))
}

/// A utility socket's own `parse`, as pi-materia refuses it: obsolete unless the socket's
/// materia is a generator or a loop's conditional exit reads the socket's JSON (the loop
/// clears [`Draft::utility_parse_at`] for its exit source).
fn refuse_utility_parse(drafts: &[Draft<'_>]) -> Result<(), LoadError> {
    for d in drafts {
        if let Some(at) = &d.utility_parse_at
            && !d.materia.generator
        {
            return Err(err(
                at,
                format!(
                    "`parse` on utility socket {} is obsolete: a utility's parse mode is its \
                     materia's ({}); remove it (a socket may carry it only when its materia is \
                     a generator or a loop exits from it on satisfied/not_satisfied)",
                    d.id, d.materia.path
                ),
            ));
        }
    }
    Ok(())
}

/// `^Socket-[1-9][0-9]*$`.
fn is_socket_id(id: &str) -> bool {
    let Some(number) = id.strip_prefix("Socket-") else {
        return false;
    };
    let mut digits = number.bytes();
    matches!(digits.next(), Some(b'1'..=b'9')) && digits.all(|b| b.is_ascii_digit())
}

fn read_socket<'m>(
    id: &str,
    value: &Json,
    path: &str,
    ids: &[&str],
    catalog: &'m [MateriaDef],
) -> Result<Draft<'m>, LoadError> {
    let obj = as_object(value, path, &format!("socket {id:?}"))?;
    reject_keys(
        obj,
        path,
        &["type", "role", "prompt", "systemPrompt", "multiTurn"],
        "obsolete socket field; these settings belong to the materia the socket places",
    )?;

    let materia_name = req_str(obj, "materia", path, "name the materia this socket places")?;
    let materia = catalog
        .iter()
        .find(|m| m.id == materia_name)
        .ok_or_else(|| {
            err(
                &join(path, "materia"),
                format!(
                    "unknown materia {materia_name:?}; define it under `materia` or fix the name"
                ),
            )
        })?;

    let explicit_parse = match opt_str(obj, "parse", path)? {
        None => None,
        Some("text") => Some(Parse::Text),
        Some("json") => Some(Parse::Json),
        Some(other) => {
            return Err(err(
                &join(path, "parse"),
                format!("unknown parse mode {other:?}; use \"text\" or \"json\""),
            ));
        }
    };

    let (parse, text_at, assign) = match &materia.body {
        Body::Utility(u) => {
            reject_keys(
                obj,
                path,
                &["utility", "command", "script", "params", "timeoutMs"],
                &format!(
                    "a utility socket's program is set on its materia; move it to {}",
                    materia.path
                ),
            )?;
            if explicit_parse == Some(Parse::Text) {
                return Err(err(
                    &join(path, "parse"),
                    format!(
                        "a utility socket takes its parse mode from the materia; remove `parse` \
                         here and set it on {}",
                        materia.path
                    ),
                ));
            }
            if get(obj, "assign").is_some() {
                return Err(err(
                    &join(path, "assign"),
                    format!(
                        "a utility socket takes its assignments from the materia; move `assign` \
                         to {}",
                        materia.path
                    ),
                ));
            }
            // A socket-level `parse: "json"` is tolerated (the reference derives it).
            if explicit_parse == Some(Parse::Json) {
                (Parse::Json, None, u.assign.clone())
            } else {
                (u.parse, u.text_at.clone(), u.assign.clone())
            }
        }
        Body::Post(_) => {
            let assign = match get(obj, "assign") {
                Some(v) => string_map(v, &join(path, "assign"), "`assign`")?,
                None => Vec::new(),
            };
            if explicit_parse == Some(Parse::Text) {
                return Err(err(
                    &join(path, "parse"),
                    "a post socket reports its outcome as JSON; remove `parse`",
                ));
            }
            (Parse::Json, None, assign)
        }
        Body::Agent(_) => {
            let assign_path = join(path, "assign");
            let mut assign = match get(obj, "assign") {
                Some(v) => string_map(v, &assign_path, "`assign`")?,
                None => Vec::new(),
            };
            let text_at = (explicit_parse == Some(Parse::Text)).then(|| join(path, "parse"));
            let mut parse = explicit_parse.unwrap_or_default();
            if materia.generator {
                if let Some(at) = &text_at {
                    return Err(err(
                        at,
                        format!(
                            "materia {:?} is a generator and emits JSON `workItems`; set `parse` \
                             to \"json\" or remove it",
                            materia.id
                        ),
                    ));
                }
                parse = Parse::Json;
                add_work_items_assign(&mut assign, &assign_path)?;
            }
            (parse, text_at, assign)
        }
    };

    let utility_parse_at = (matches!(materia.body, Body::Utility(_)) && explicit_parse.is_some())
        .then(|| join(path, "parse"));
    Ok(Draft {
        id: SocketId::new(id),
        path: path.to_owned(),
        materia,
        parse,
        text_at,
        utility_parse_at,
        assign,
        edges: read_edges(obj, path, ids)?,
        advance: read_advance(obj, path)?,
        foreach: read_foreach(obj, path, id)?,
    })
}

fn read_edges(obj: &Obj, path: &str, ids: &[&str]) -> Result<Vec<Edge>, LoadError> {
    let Some(items) = opt_array(obj, "edges", path)? else {
        return Ok(Vec::new());
    };
    let edges_path = join(path, "edges");
    let mut edges: Vec<Edge> = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let at = index(&edges_path, i);
        if edges.iter().any(|e| e.when == When::Always) {
            return Err(err(
                &at,
                "this edge is unreachable because an earlier edge is `always`; remove it or make \
                 the earlier edge conditional",
            ));
        }
        let edge = as_object(item, &at, "an edge")?;
        edges.push(Edge {
            when: req_when(edge, "when", &at)?,
            to: req_target(edge, "to", &at, ids)?,
            max_traversals: positive_u32(edge, "maxTraversals", &at)?,
        });
    }
    Ok(edges)
}

/// Whether `c` is an advance condition the runtime understands.
fn valid_condition(c: &str) -> bool {
    let c = c.trim();
    if matches!(c, "always" | "satisfied" | "not_satisfied") {
        return true;
    }
    let call = c
        .strip_prefix("!exists(")
        .or_else(|| c.strip_prefix("exists("))
        .and_then(|rest| rest.strip_suffix(')'));
    if let Some(inner) = call {
        return !inner.trim().is_empty();
    }
    c.split_once("==")
        .or_else(|| c.split_once("!="))
        .is_some_and(|(l, r)| !l.trim().is_empty() && !r.trim().is_empty())
}

fn read_advance(obj: &Obj, path: &str) -> Result<Option<Advance>, LoadError> {
    let Some(adv) = opt_object(obj, "advance", path, "`advance`")? else {
        return Ok(None);
    };
    let at = join(path, "advance");
    let cursor = req_nonempty_str(
        adv,
        "cursor",
        &at,
        "name the cursor (e.g. \"workItemIndex\")",
    )?;
    let items = req_nonempty_str(
        adv,
        "items",
        &at,
        "give the items path (e.g. \"state.workItems\")",
    )?;
    let when = opt_nonempty_str(adv, "when", &at)?;
    if let Some(w) = when
        && !valid_condition(w)
    {
        return Err(err(
            &join(&at, "when"),
            format!(
                "unknown advance condition {w:?}; use satisfied, not_satisfied, always, \
                 exists(path), !exists(path), `path == value` or `path != value`"
            ),
        ));
    }
    // `done` is accepted and ignored, as in the reference.
    opt_str(adv, "done", &at)?;
    Ok(Some(Advance {
        cursor: cursor.to_owned(),
        items: items.to_owned(),
        when: normalize_condition(when),
    }))
}

fn read_foreach(obj: &Obj, path: &str, id: &str) -> Result<Option<ItemSource>, LoadError> {
    let Some(each) = opt_object(obj, "foreach", path, "`foreach`")? else {
        return Ok(None);
    };
    let at = join(path, "foreach");
    let items = req_nonempty_str(
        each,
        "items",
        &at,
        "give the items path (e.g. \"state.workItems\")",
    )?;
    let as_name = opt_nonempty_str(each, "as", &at)?.unwrap_or("item");
    let cursor =
        opt_nonempty_str(each, "cursor", &at)?.map_or_else(|| format!("{id}Index"), str::to_owned);
    opt_str(each, "done", &at)?;
    Ok(Some(ItemSource {
        items: items.to_owned(),
        as_name: as_name.to_owned(),
        cursor,
    }))
}
