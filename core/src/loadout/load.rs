//! Reading pi-materia's config format into resolved loadouts.
//!
//! The caller passes the config text (castlog reads pi-materia's `config/default.json` format
//! unchanged); [`load_config`] validates the whole file and every loadout in it, applying the
//! load-time derivations of the reference (generator ⇒ json + `workItems` assign, loop
//! `consumes.from` from topology, legacy loop `exit` materialization, iterator derivation).
//! Errors name the JSON path of the offending value (`loadouts.Full-Auto.sockets.Socket-5.
//! edges[1].when`) and say what to do.
//!
//! One kind of problem only fails [`Config::resolve`] for the loadout concerned, so that the
//! bundled config loads unchanged: shipped utilities castlog does not provide (pi-materia's
//! Node scripts other than `ensure-ignored.mjs`, `detect-vcs.mjs`, `commit-sigil.mjs`,
//! `mime-bootstrap.mjs` and `mime-maintain.mjs`, and `vcs.*` aliases without a built-in). A
//! parallel generator's lanes are checked like the rest of the graph (`lanes`).
//!
//! [`layers`] merges pi-materia's config layers (bundled default, user, project, explicit)
//! into one config text before it is loaded here.

mod cycles;
mod draft;
mod eventing;
mod json;
mod lanes;
pub mod layers;
mod loops;
mod materia;
mod sockets;

#[cfg(test)]
mod properties;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;

use super::{Budget, Limits, Loadout, Price};
use json::{Json, as_object, err, get, join, opt_int, opt_number, opt_object, opt_str};

/// A config error: the JSON path of the offending value and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("config error at {path}: {reason}")]
pub struct LoadError {
    /// JSON path, e.g. `loadouts.Full-Auto.sockets.Socket-5.edges[1].when`.
    pub path: String,
    /// What is wrong and what to do.
    pub reason: String,
}

/// A validated config: every loadout in it resolves.
#[derive(Debug, Clone)]
pub struct Config {
    /// `activeLoadout`.
    pub active: String,
    /// Every loadout name, in file order.
    pub names: Vec<String>,
    /// Top-level `placementPolicy`, if present.
    pub placement_policy: Option<String>,
    /// Top-level `eventing` (off when absent).
    pub eventing: crate::eventing::Eventing,
    loadouts: Vec<Result<Loadout, LoadError>>,
}

/// Default `limits.maxNoAdvanceCycles`.
const DEFAULT_MAX_NO_ADVANCE_CYCLES: u32 = 3;
/// Default `limits.maxCyclesOutsideLoops`: outside loops one round is a rework of the whole
/// request, so more rounds are allowed than per work item, but never unbounded.
const DEFAULT_MAX_CYCLES_OUTSIDE_LOOPS: u32 = 10;
/// Default `budget.maxTokens`.
const DEFAULT_MAX_TOKENS: u64 = 10_000_000;
/// Default `budget.warnAtPercent`.
const DEFAULT_WARN_AT_PERCENT: f64 = 75.0;
/// The accepted `placementPolicy` values.
const PLACEMENT_POLICIES: [&str; 2] = ["legacy", "recommended"];

/// Parses and validates a config.
pub fn load_config(text: &str) -> Result<Config, LoadError> {
    let root = Json::parse(text)?;
    json::reject_duplicate_keys(&root, "")?;
    let top = match &root {
        Json::Object(entries) => entries.as_slice(),
        other => {
            return Err(err(
                "$",
                format!(
                    "the config must be a JSON object with `activeLoadout`, `loadouts` and \
                     `materia`, found {}",
                    other.kind()
                ),
            ));
        }
    };

    let loadouts_obj = match get(top, "loadouts") {
        None => {
            return Err(err(
                "loadouts",
                "`loadouts` is missing; add an object mapping loadout names to loadouts",
            ));
        }
        Some(v) => as_object(v, "loadouts", "`loadouts`")?,
    };
    if loadouts_obj.is_empty() {
        return Err(err(
            "loadouts",
            "`loadouts` is empty; define at least one loadout",
        ));
    }
    let names: Vec<String> = loadouts_obj.iter().map(|(k, _)| k.clone()).collect();

    let materia_obj = match get(top, "materia") {
        None => {
            return Err(err(
                "materia",
                "`materia` is missing; add an object mapping materia ids to materia",
            ));
        }
        Some(v) => as_object(v, "materia", "`materia`")?,
    };

    let active = opt_str(top, "activeLoadout", "")?.ok_or_else(|| {
        err(
            "activeLoadout",
            format!(
                "`activeLoadout` is missing; name one of the loadouts: {}",
                names.join(", ")
            ),
        )
    })?;
    if !names.iter().any(|n| n == active) {
        return Err(err(
            "activeLoadout",
            format!(
                "no loadout named {active:?}; use one of: {}",
                names.join(", ")
            ),
        ));
    }

    let placement_policy = match opt_str(top, "placementPolicy", "")? {
        None => None,
        Some(p) if PLACEMENT_POLICIES.contains(&p) => Some(p.to_owned()),
        Some(p) => {
            return Err(err(
                "placementPolicy",
                format!("unknown placement policy {p:?}; use \"legacy\" or \"recommended\""),
            ));
        }
    };

    let (limits, cycles_outside_loops) = read_limits(top)?;
    let max_tool_calls = read_tool_limit(top, "maxToolCalls")?;
    let loop_break_after = read_tool_limit(top, "loopBreakAfter")?;
    let prices = read_prices(top)?;
    let mut budget = read_budget(top)?;
    if prices.is_empty() {
        budget.max_cost_usd = None;
    }
    let eventing = eventing::read_eventing(top)?;
    let top_concurrency = read_parallelism(top)?;
    let materia = materia::read_all(materia_obj)?;

    let top_level = sockets::TopLevel {
        limits,
        budget,
        cycles_outside_loops,
        top_concurrency,
    };
    let mut loadouts = Vec::with_capacity(loadouts_obj.len());
    for (name, value) in loadouts_obj {
        let path = join("loadouts", name);
        let built = sockets::build_loadout(name, value, &path, &materia, &top_level)?;
        loadouts.push(built.map(|mut loadout| {
            loadout.max_tool_calls = max_tool_calls;
            loadout.prices = prices.clone();
            loadout.loop_break_after = loop_break_after;
            loadout
        }));
    }

    Ok(Config {
        active: active.to_owned(),
        names,
        placement_policy,
        eventing,
        loadouts,
    })
}

/// Top-level `limits`, and `maxCyclesOutsideLoops` (which the resolved loadout keeps beside
/// them).
fn read_limits(top: &json::Obj) -> Result<(Limits, u32), LoadError> {
    let Some(limits) = opt_object(top, "limits", "", "`limits`")? else {
        return Ok((
            Limits {
                max_no_advance_cycles: DEFAULT_MAX_NO_ADVANCE_CYCLES,
            },
            DEFAULT_MAX_CYCLES_OUTSIDE_LOOPS,
        ));
    };
    // `maxSocketVisits` / `maxEdgeTraversals` are legacy and ignored, as in the reference.
    let positive = |key: &str, default: u32| -> Result<u32, LoadError> {
        Ok(opt_int(limits, key, "limits", 1, u64::from(u32::MAX))?
            .and_then(|v| u32::try_from(v).ok())
            .unwrap_or(default))
    };
    let cycles = positive("maxNoAdvanceCycles", DEFAULT_MAX_NO_ADVANCE_CYCLES)?;
    let outside_loops = positive("maxCyclesOutsideLoops", DEFAULT_MAX_CYCLES_OUTSIDE_LOOPS)?;
    Ok((
        Limits {
            max_no_advance_cycles: cycles,
        },
        outside_loops,
    ))
}

/// A tool limit of `limits`, when configured (castlog's own, a positive integer):
/// `maxToolCalls` (the tool calls of one socket visit) or `loopBreakAfter` (identical failing
/// calls before the loop-break ticket).
fn read_tool_limit(top: &json::Obj, key: &str) -> Result<Option<u32>, LoadError> {
    let Some(limits) = opt_object(top, "limits", "", "`limits`")? else {
        return Ok(None);
    };
    Ok(opt_int(limits, key, "limits", 1, u64::from(u32::MAX))?.and_then(|v| u32::try_from(v).ok()))
}

/// Top-level `prices` (castlog's own): model id to `{inputUsdPerMillion, outputUsdPerMillion}`.
fn read_prices(top: &json::Obj) -> Result<BTreeMap<String, Price>, LoadError> {
    let mut prices = BTreeMap::new();
    let Some(table) = opt_object(top, "prices", "", "`prices`")? else {
        return Ok(prices);
    };
    for (model, entry) in table {
        let path = join("prices", model);
        let entry = as_object(
            entry,
            &path,
            "a price (`{\"inputUsdPerMillion\": N, \"outputUsdPerMillion\": N}`)",
        )?;
        if let Some((key, _)) = entry
            .iter()
            .find(|(k, _)| k != "inputUsdPerMillion" && k != "outputUsdPerMillion")
        {
            return Err(err(
                &join(&path, key),
                format!(
                    "unknown price field `{key}`; a price has `inputUsdPerMillion` and \
                     `outputUsdPerMillion` (US dollars per million tokens)"
                ),
            ));
        }
        let field = |key: &str| -> Result<f64, LoadError> {
            match opt_number(entry, key, &path)? {
                Some(v) if v >= 0.0 && v.is_finite() => Ok(v),
                Some(v) => Err(err(
                    &join(&path, key),
                    format!("`{key}` must be a price of 0 dollars or more, found {v}"),
                )),
                None => Err(err(
                    &join(&path, key),
                    format!("`{key}` is missing: US dollars per million tokens"),
                )),
            }
        };
        prices.insert(
            model.clone(),
            Price {
                input_usd_per_million: field("inputUsdPerMillion")?,
                output_usd_per_million: field("outputUsdPerMillion")?,
            },
        );
    }
    Ok(prices)
}

/// `parallelism.maxConcurrency`: the app-wide bound on lanes running at once.
fn read_parallelism(top: &json::Obj) -> Result<Option<u32>, LoadError> {
    let Some(parallelism) = opt_object(top, "parallelism", "", "`parallelism`")? else {
        return Ok(None);
    };
    Ok(opt_int(
        parallelism,
        "maxConcurrency",
        "parallelism",
        1,
        u64::from(u32::MAX),
    )?
    .and_then(|v| u32::try_from(v).ok()))
}

/// Top-level `budget` (`stopAtLimit` is dropped, as in the reference; `maxCostUsd` is kept
/// when the config has a price table).
fn read_budget(top: &json::Obj) -> Result<Budget, LoadError> {
    let Some(budget) = opt_object(top, "budget", "", "`budget`")? else {
        return Ok(Budget {
            max_tokens: DEFAULT_MAX_TOKENS,
            warn_at_percent: DEFAULT_WARN_AT_PERCENT,
            max_cost_usd: None,
        });
    };
    let max_tokens =
        opt_int(budget, "maxTokens", "budget", 0, u64::MAX)?.unwrap_or(DEFAULT_MAX_TOKENS);
    let warn_at_percent = match opt_number(budget, "warnAtPercent", "budget")? {
        None => DEFAULT_WARN_AT_PERCENT,
        Some(p) if (0.0..=100.0).contains(&p) => p,
        Some(p) => {
            return Err(err(
                "budget.warnAtPercent",
                format!("`warnAtPercent` must be a percentage from 0 to 100, found {p}"),
            ));
        }
    };
    let max_cost_usd = match opt_number(budget, "maxCostUsd", "budget")? {
        None => None,
        Some(usd) if usd >= 0.0 && usd.is_finite() => Some(usd),
        Some(usd) => {
            return Err(err(
                "budget.maxCostUsd",
                format!("`maxCostUsd` must be 0 dollars or more, found {usd}"),
            ));
        }
    };
    Ok(Budget {
        max_tokens,
        warn_at_percent,
        max_cost_usd,
    })
}

impl Config {
    /// Resolves `name` (default: `activeLoadout`) for a cast.
    pub fn resolve(&self, name: Option<&str>) -> Result<Loadout, LoadError> {
        let name = name.unwrap_or(&self.active);
        self.names
            .iter()
            .position(|n| n == name)
            .and_then(|index| self.loadouts.get(index))
            .cloned()
            .unwrap_or_else(|| {
                Err(LoadError {
                    path: "loadouts".into(),
                    reason: format!(
                        "no loadout named {name:?}; use one of: {}",
                        self.names.join(", ")
                    ),
                })
            })
    }
}
