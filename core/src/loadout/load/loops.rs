//! Loop regions and their load-time derivations (§1.5 of the reference): `consumes.from` from
//! topology, the iterator, and the legacy `exit` materialized into parse / advance / exit route.

use super::LoadError;
use super::draft::{Draft, normalize_condition, req_target, req_when, when_str};
use super::json::{
    Json, Obj, as_object, err, get, index, join, opt_array, opt_nonempty_str, opt_object, opt_str,
    req_nonempty_str, req_str,
};
use super::materia::{WORK_ITEMS, positive_u32};
use crate::event::When;
use crate::id::SocketId;
use crate::loadout::{Advance, EdgeTarget, ExitRoute, ItemSource, LoopRegion, Parse};

/// The derived iterator's items path.
const DEFAULT_ITEMS: &str = "state.workItems";
/// The derived iterator's item name.
const DEFAULT_AS: &str = "workItem";
/// The derived iterator's cursor.
const DEFAULT_CURSOR: &str = "workItemIndex";

/// A loop's legacy `exit {from, when, to}`.
#[derive(Debug)]
struct LegacyExit {
    from: usize,
    when: When,
    to: EdgeTarget,
}

/// Reads `loops`, applying the derivations to `drafts`. Without `strict_feed`, a loop whose
/// feeding generator cannot be derived gets no `consumes_from` instead of an error.
pub(super) fn read_loops(
    loadout: &Obj,
    path: &str,
    drafts: &mut [Draft<'_>],
    strict_feed: bool,
) -> Result<Vec<LoopRegion>, LoadError> {
    let Some(loops) = opt_object(loadout, "loops", path, "`loops`")? else {
        return Ok(Vec::new());
    };
    let loops_path = join(path, "loops");
    let mut out = Vec::with_capacity(loops.len());
    for (id, value) in loops {
        out.push(read_loop(
            id,
            value,
            &join(&loops_path, id),
            drafts,
            strict_feed,
        )?);
    }
    Ok(out)
}

fn read_loop(
    id: &str,
    value: &Json,
    path: &str,
    drafts: &mut [Draft<'_>],
    strict_feed: bool,
) -> Result<LoopRegion, LoadError> {
    let obj = as_object(value, path, &format!("loop {id:?}"))?;
    let ids: Vec<&str> = drafts.iter().map(|d| d.id.as_str()).collect();
    let members = read_members(obj, path, &ids)?;
    let is_member = |i: usize| members.contains(&i);

    // `consumes`: `from` is re-derived from the graph; the rest is checked.
    let consumes = opt_object(obj, "consumes", path, "`consumes`")?;
    let consumes_path = join(path, "consumes");
    let (consumes_as, consumes_cursor) = match consumes {
        None => (None, None),
        Some(c) => {
            opt_str(c, "from", &consumes_path)?;
            if let Some(output) = opt_str(c, "output", &consumes_path)?
                && output != WORK_ITEMS
            {
                return Err(err(
                    &join(&consumes_path, "output"),
                    format!(
                        "a loop consumes a generator's \"workItems\", not {output:?}; set \
                         `output` to \"workItems\" or remove it"
                    ),
                ));
            }
            opt_str(c, "done", &consumes_path)?;
            (
                opt_nonempty_str(c, "as", &consumes_path)?,
                opt_nonempty_str(c, "cursor", &consumes_path)?,
            )
        }
    };
    let feeders: Vec<usize> = drafts
        .iter()
        .enumerate()
        .filter(|(i, d)| {
            !is_member(*i)
                && d.materia.generator
                && d.edges.iter().any(|e| match &e.to {
                    EdgeTarget::Socket(to) => {
                        members.iter().any(|&m| ids.get(m) == Some(&to.as_str()))
                    }
                    EdgeTarget::End => false,
                })
        })
        .map(|(i, _)| i)
        .collect();
    let consumes_from = match (feeders.as_slice(), consumes.is_some()) {
        ([one], _) => drafts.get(*one).map(|d| d.id.clone()),
        ([], false) => None,
        _ if !strict_feed => None,
        ([], true) => {
            return Err(err(
                &join(&consumes_path, "from"),
                "no generator socket outside the loop has an edge into it; add an edge from the \
                 generator that plans the work items to the first loop socket",
            ));
        }
        (many, _) => {
            let names: Vec<&str> = many.iter().filter_map(|&i| ids.get(i).copied()).collect();
            return Err(err(
                &consumes_path,
                format!(
                    "several generator sockets feed this loop ({}); keep a single generator edge \
                     into the loop",
                    names.join(", ")
                ),
            ));
        }
    };

    // A loop with neither `consumes` nor `iterator`, and no generator feeding it, walks no
    // items: its sockets run without an item and its own cursor (`<loop id>Index`) advances
    // over an empty list, so each advance leaves by the loop's exit route.
    let itemless = consumes.is_none() && get(obj, "iterator").is_none() && consumes_from.is_none();
    let iterator = if itemless {
        ItemSource {
            items: String::new(),
            as_name: DEFAULT_AS.to_owned(),
            cursor: format!("{id}Index"),
        }
    } else {
        read_iterator(obj, path, consumes_as, consumes_cursor)?
    };
    let mut exits = read_exits(obj, path, &members, &ids)?;

    if let Some(exit) = read_legacy_exit(obj, path, &members, &ids)? {
        let exit_path = join(path, "exit");
        materialize_exit(&exit, &exit_path, id, &iterator, drafts)?;
        let from = drafts.get(exit.from).map(|d| d.id.clone());
        if let (EdgeTarget::Socket(_), Some(from)) = (&exit.to, from)
            && !exits
                .iter()
                .any(|r| r.from == from && r.condition == exit.when)
        {
            let route_id = format!("exit:{from}:{}", when_str(exit.when));
            if exits.iter().any(|r| r.id == route_id) {
                return Err(err(
                    &exit_path,
                    format!(
                        "the route id {route_id:?} this exit derives is already used in \
                             `exits`; rename that route"
                    ),
                ));
            }
            exits.push(ExitRoute {
                id: route_id,
                from,
                condition: exit.when,
                target: exit.to.clone(),
            });
        }
        if consumes.is_some() {
            check_continuation(&exit, &exit_path, &members, drafts)?;
        }
    }

    check_cycle(&members, drafts, &join(path, "sockets"))?;
    let max_concurrency = match opt_object(obj, "parallel", path, "`parallel`")? {
        Some(parallel) => positive_u32(parallel, "maxConcurrency", &join(path, "parallel"))?,
        None => None,
    };

    Ok(LoopRegion {
        id: id.to_owned(),
        sockets: members
            .iter()
            .filter_map(|&i| drafts.get(i).map(|d| d.id.clone()))
            .collect(),
        consumes_from,
        iterator,
        exits,
        itemless,
        max_concurrency,
    })
}

/// `sockets`: indices of the member drafts, in the order listed.
fn read_members(obj: &Obj, path: &str, ids: &[&str]) -> Result<Vec<usize>, LoadError> {
    let at = join(path, "sockets");
    let items = opt_array(obj, "sockets", path)?
        .ok_or_else(|| err(&at, "`sockets` is missing; list the loop's member sockets"))?;
    if items.is_empty() {
        return Err(err(
            &at,
            "`sockets` is empty; list the loop's member sockets",
        ));
    }
    let mut members = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let item_path = index(&at, i);
        let Json::String(name) = item else {
            return Err(err(
                &item_path,
                format!("loop members must be socket ids, found {}", item.kind()),
            ));
        };
        let Some(pos) = ids.iter().position(|id| id == name) else {
            return Err(err(
                &item_path,
                format!("unknown socket {name:?}; list sockets of this loadout"),
            ));
        };
        if members.contains(&pos) {
            return Err(err(
                &item_path,
                format!("socket {name} is listed twice; list it once"),
            ));
        }
        members.push(pos);
    }
    Ok(members)
}

/// The loop's iterator: authored, or derived from the generator contract.
fn read_iterator(
    obj: &Obj,
    path: &str,
    consumes_as: Option<&str>,
    consumes_cursor: Option<&str>,
) -> Result<ItemSource, LoadError> {
    let Some(it) = opt_object(obj, "iterator", path, "`iterator`")? else {
        return Ok(ItemSource {
            items: DEFAULT_ITEMS.to_owned(),
            as_name: consumes_as.unwrap_or(DEFAULT_AS).to_owned(),
            cursor: consumes_cursor.unwrap_or(DEFAULT_CURSOR).to_owned(),
        });
    };
    let at = join(path, "iterator");
    let items = req_nonempty_str(
        it,
        "items",
        &at,
        "give the items path (e.g. \"state.workItems\")",
    )?;
    let as_name = opt_nonempty_str(it, "as", &at)?
        .or(consumes_as)
        .unwrap_or("item");
    let cursor = opt_nonempty_str(it, "cursor", &at)?
        .or(consumes_cursor)
        .unwrap_or(DEFAULT_CURSOR);
    opt_str(it, "done", &at)?;
    Ok(ItemSource {
        items: items.to_owned(),
        as_name: as_name.to_owned(),
        cursor: cursor.to_owned(),
    })
}

/// `exits`: canonical post-exhaustion routes.
fn read_exits(
    obj: &Obj,
    path: &str,
    members: &[usize],
    ids: &[&str],
) -> Result<Vec<ExitRoute>, LoadError> {
    let Some(items) = opt_array(obj, "exits", path)? else {
        return Ok(Vec::new());
    };
    let exits_path = join(path, "exits");
    let mut routes: Vec<ExitRoute> = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let at = index(&exits_path, i);
        let route = as_object(item, &at, "an exit route")?;
        let id = req_nonempty_str(
            route,
            "id",
            &at,
            "give the route a unique id (e.g. \"exit:Socket-6:always\")",
        )?;
        if routes.iter().any(|r| r.id == id) {
            return Err(err(
                &join(&at, "id"),
                format!("route id {id:?} is used twice; give each route its own id"),
            ));
        }
        let from = read_member(route, "from", &at, members, ids)?;
        let condition = req_when(route, "condition", &at)?;
        if routes
            .iter()
            .any(|r| r.from.as_str() == from && r.condition == condition)
        {
            return Err(err(
                &at,
                format!(
                    "a route from {from} on {:?} already exists; keep one route per source \
                     and condition",
                    when_str(condition)
                ),
            ));
        }
        let target = req_target(route, "targetSocketId", &at, ids)?;
        routes.push(ExitRoute {
            id: id.to_owned(),
            from: SocketId::new(from),
            condition,
            target,
        });
    }
    Ok(routes)
}

/// A field naming a loop member.
fn read_member<'a>(
    obj: &'a Obj,
    key: &str,
    path: &str,
    members: &[usize],
    ids: &[&str],
) -> Result<&'a str, LoadError> {
    let name = req_str(obj, key, path, "name a socket of the loop")?;
    let is_member = members.iter().any(|&m| ids.get(m) == Some(&name));
    if is_member {
        Ok(name)
    } else {
        let listed: Vec<&str> = members
            .iter()
            .filter_map(|&m| ids.get(m).copied())
            .collect();
        Err(err(
            &join(path, key),
            format!(
                "{name:?} is not a member of this loop; use one of: {}",
                listed.join(", ")
            ),
        ))
    }
}

/// The legacy `exit {from, when, to}`.
fn read_legacy_exit(
    obj: &Obj,
    path: &str,
    members: &[usize],
    ids: &[&str],
) -> Result<Option<LegacyExit>, LoadError> {
    let Some(exit) = opt_object(obj, "exit", path, "`exit`")? else {
        return Ok(None);
    };
    let at = join(path, "exit");
    let from_name = read_member(exit, "from", &at, members, ids)?;
    let from = ids
        .iter()
        .position(|id| *id == from_name)
        .ok_or_else(|| err(&join(&at, "from"), "unknown socket"))?;
    let when = req_when(exit, "when", &at)?;
    let to = req_target(exit, "to", &at, ids)?;
    Ok(Some(LegacyExit { from, when, to }))
}

/// Gives the exit source json parsing (for conditional exits) and the matching advance.
fn materialize_exit(
    exit: &LegacyExit,
    exit_path: &str,
    loop_id: &str,
    iterator: &ItemSource,
    drafts: &mut [Draft<'_>],
) -> Result<(), LoadError> {
    let Some(draft) = drafts.get_mut(exit.from) else {
        return Err(err(exit_path, "unknown exit socket"));
    };
    let when = when_str(exit.when);
    if exit.when != When::Always {
        if let Some(at) = &draft.text_at {
            return Err(err(
                at,
                format!(
                    "loop {loop_id:?} exits from {} on `{when}`, which needs JSON output; set \
                     `parse` to \"json\"",
                    draft.id
                ),
            ));
        }
        draft.parse = Parse::Json;
        // The reference derives `parse: "json"` here, so a utility socket may carry it.
        draft.utility_parse_at = None;
    }
    let expected = Advance {
        cursor: iterator.cursor.clone(),
        items: iterator.items.clone(),
        when: normalize_condition(Some(when)),
    };
    match &draft.advance {
        None => draft.advance = Some(expected),
        Some(authored) => {
            let advance_path = join(&draft.path, "advance");
            let conflict = if authored.cursor != expected.cursor {
                Some(("cursor", expected.cursor.as_str()))
            } else if authored.items != expected.items {
                Some(("items", expected.items.as_str()))
            } else if authored.when != expected.when {
                Some(("when", when))
            } else {
                None
            };
            if let Some((field, value)) = conflict {
                return Err(err(
                    &join(&advance_path, field),
                    format!(
                        "conflicts with loop {loop_id:?}'s `exit`, which advances with {field} \
                         {value:?}; make them agree or remove this `advance`"
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// With `consumes` + `exit`: the exit source must continue the loop for the other outcome.
fn check_continuation(
    exit: &LegacyExit,
    exit_path: &str,
    members: &[usize],
    drafts: &[Draft<'_>],
) -> Result<(), LoadError> {
    let Some(source) = drafts.get(exit.from) else {
        return Ok(());
    };
    let member_ids: Vec<&SocketId> = members
        .iter()
        .filter_map(|&m| drafts.get(m).map(|d| &d.id))
        .collect();
    let continuations: Vec<When> = source
        .edges
        .iter()
        .filter(|e| matches!(&e.to, EdgeTarget::Socket(to) if member_ids.contains(&to)))
        .map(|e| e.when)
        .collect();
    if continuations.is_empty() {
        return Err(err(
            &join(exit_path, "from"),
            format!(
                "the exit socket {} has no edge back into the loop; add an edge to the first \
                 loop socket so the next item runs",
                source.id
            ),
        ));
    }
    let opposite = match exit.when {
        When::Satisfied => Some(When::NotSatisfied),
        When::NotSatisfied => Some(When::Satisfied),
        When::Always => None,
    };
    let has_always = continuations.contains(&When::Always);
    if let Some(opposite) = opposite
        && !has_always
        && !continuations.contains(&opposite)
    {
        return Err(err(
            &join(exit_path, "from"),
            format!(
                "the exit socket {} continues the loop only on `{}`; add an `always` or `{}` \
                 edge back into the loop",
                source.id,
                when_str(exit.when),
                when_str(opposite)
            ),
        ));
    }
    Ok(())
}

/// The member sockets must contain a directed cycle (Kahn's algorithm leaves one behind).
fn check_cycle(members: &[usize], drafts: &[Draft<'_>], path: &str) -> Result<(), LoadError> {
    let member_ids: Vec<&SocketId> = members
        .iter()
        .filter_map(|&m| drafts.get(m).map(|d| &d.id))
        .collect();
    let successors: Vec<Vec<usize>> = members
        .iter()
        .map(|&m| {
            drafts.get(m).map_or_else(Vec::new, |d| {
                d.edges
                    .iter()
                    .filter_map(|e| match &e.to {
                        EdgeTarget::Socket(to) => member_ids.iter().position(|id| *id == to),
                        EdgeTarget::End => None,
                    })
                    .collect()
            })
        })
        .collect();
    let mut indegree = vec![0usize; members.len()];
    for succ in &successors {
        for &s in succ {
            if let Some(d) = indegree.get_mut(s) {
                *d += 1;
            }
        }
    }
    let mut ready: Vec<usize> = (0..members.len())
        .filter(|&i| indegree.get(i) == Some(&0))
        .collect();
    let mut removed = 0;
    while let Some(node) = ready.pop() {
        removed += 1;
        for &s in successors.get(node).map_or(&[][..], Vec::as_slice) {
            if let Some(d) = indegree.get_mut(s) {
                *d = d.saturating_sub(1);
                if *d == 0 {
                    ready.push(s);
                }
            }
        }
    }
    if removed == members.len() {
        return Err(err(
            path,
            "the loop's sockets have no edge cycle; add an edge from the last member back to the \
             first",
        ));
    }
    Ok(())
}
