//! The `materia` catalog: agent and utility materia with their effective settings.

use serde_json::Value;

use super::LoadError;
use super::json::{
    Json, Obj, as_object, err, get, has, index, join, opt_bool, opt_int, opt_nonempty_str,
    opt_number, opt_object, opt_str, reject_keys, req_nonempty_str, string_map,
};
use crate::calendar::{DEFAULT_ZONE, Zone};
use crate::loadout::{AgentSpec, Exec, Parse, PostSpec};

/// Default utility timeout.
const DEFAULT_TIMEOUT_MS: u64 = 30_000;
/// The generator output and its implicit assignment.
pub(super) const WORK_ITEMS: &str = "workItems";
/// The source of the implicit generator assignment.
pub(super) const WORK_ITEMS_SOURCE: &str = "$.workItems";
/// The thinking levels the reference accepts.
const THINKING_LEVELS: [&str; 7] = ["off", "minimal", "low", "medium", "high", "xhigh", "max"];
/// The named tool scopes.
const TOOL_SCOPES: [&str; 3] = ["none", "readOnly", "coding"];
/// Fields that make a materia a utility.
const UTILITY_FIELDS: [&str; 3] = ["utility", "command", "script"];

/// One materia of the catalog.
#[derive(Debug)]
pub(super) struct MateriaDef {
    /// Its id (the key in `materia`).
    pub id: String,
    /// `materia.<id>`.
    pub path: String,
    /// `label`, or the id.
    pub label: String,
    /// `generator: true`.
    pub generator: bool,
    /// `parallel: true`: a generator whose items run in lanes.
    pub parallel: bool,
    /// `parallelSafe: true`: a socket placing it may be copied into parallel lanes.
    pub parallel_safe: bool,
    /// Agent or utility settings.
    pub body: Body,
}

/// What runs a materia.
#[derive(Debug)]
pub(super) enum Body {
    /// A model, with the materia's settings.
    Agent(AgentSpec),
    /// A utility materia: what it runs and its settings.
    Utility(UtilityDef),
    /// An outward post through the claims ledger.
    Post(PostSpec),
}

/// What a utility materia runs: a program castlog can start, or a pi-materia shipped utility
/// castlog does not provide (which fails only the loadouts that place it).
#[derive(Debug)]
pub(super) enum Program {
    /// An argv, a fixed output or a built-in castlog runs.
    Runs(Exec),
    /// The name of a shipped utility castlog does not provide.
    NotProvided(String),
}

/// A utility materia's effective settings.
#[derive(Debug)]
pub(super) struct UtilityDef {
    /// The program castlog runs, or the shipped utility it does not provide.
    pub exec: Program,
    /// `params` (an empty object when absent).
    pub params: Value,
    /// `timeoutMs`.
    pub timeout_ms: u64,
    /// Effective parse (json for generators).
    pub parse: Parse,
    /// The path of an explicit `parse: "text"`, which a loop exit cannot override.
    pub text_at: Option<String>,
    /// Effective assignments (a generator's implicit `workItems` last unless authored).
    pub assign: Vec<(String, String)>,
}

/// Reads and validates every materia, in file order.
pub(super) fn read_all(catalog: &Obj) -> Result<Vec<MateriaDef>, LoadError> {
    catalog
        .iter()
        .map(|(id, value)| read_one(id, value))
        .collect()
}

fn read_one(id: &str, value: &Json) -> Result<MateriaDef, LoadError> {
    let path = join("materia", id);
    let obj = as_object(value, &path, &format!("materia {id:?}"))?;
    reject_keys(
        obj,
        &path,
        &["systemPrompt"],
        "system prompts are obsolete; put the instructions in `prompt`",
    )?;
    reject_keys(
        obj,
        &path,
        &["generates"],
        "`generates` is obsolete; use `generator: true` and emit a top-level `workItems` array",
    )?;

    let is_utility = match opt_str(obj, "type", &path)? {
        None => UTILITY_FIELDS.iter().any(|k| has(obj, k)),
        Some("utility") => true,
        Some("post") => {
            return Ok(MateriaDef {
                id: id.to_owned(),
                label: match opt_str(obj, "label", &path)? {
                    Some(l) if !l.trim().is_empty() => l.to_owned(),
                    _ => id.to_owned(),
                },
                body: Body::Post(read_post(obj, &path)?),
                path,
                generator: false,
                parallel: false,
                parallel_safe: false,
            });
        }
        Some("agent") => {
            if let Some(k) = UTILITY_FIELDS.iter().find(|k| has(obj, k)) {
                return Err(err(
                    &join(&path, k),
                    format!(
                        "an agent materia cannot set `{k}`; remove it or make the materia \
                         `type: \"utility\"`"
                    ),
                ));
            }
            false
        }
        Some(other) => {
            return Err(err(
                &join(&path, "type"),
                format!("unknown materia type {other:?}; use \"agent\", \"utility\" or \"post\""),
            ));
        }
    };

    let label = match opt_str(obj, "label", &path)? {
        Some(l) if !l.trim().is_empty() => l.to_owned(),
        _ => id.to_owned(),
    };
    let generator = opt_bool(obj, "generator", &path)?.unwrap_or(false);
    let parallel = opt_bool(obj, "parallel", &path)?.unwrap_or(false);
    if parallel && !generator {
        return Err(err(
            &join(&path, "parallel"),
            "`parallel: true` requires `generator: true`; remove `parallel`",
        ));
    }

    let parallel_safe = opt_bool(obj, "parallelSafe", &path)?.unwrap_or(false);
    let body = if is_utility {
        Body::Utility(read_utility(obj, &path, generator)?)
    } else {
        Body::Agent(read_agent(obj, &path)?)
    };
    Ok(MateriaDef {
        id: id.to_owned(),
        path,
        label,
        generator,
        parallel,
        parallel_safe,
        body,
    })
}

/// A post materia: `{"type": "post", "destination", "body", "zone"?}`.
fn read_post(obj: &Obj, path: &str) -> Result<PostSpec, LoadError> {
    reject_keys(
        obj,
        path,
        &[
            "prompt",
            "command",
            "utility",
            "script",
            "params",
            "generator",
            "multiTurn",
        ],
        "a post materia sends a body to a destination; it has no prompt or program",
    )?;
    reject_keys(
        obj,
        path,
        &["post", "dryRun", "enabled", "allowPost", "force"],
        "posting is switched on only by `--post` on the command line, never by config",
    )?;
    let destination = req_nonempty_str(
        obj,
        "destination",
        path,
        "name where the post goes (e.g. \"staging-channel\")",
    )?;
    let body = req_nonempty_str(
        obj,
        "body",
        path,
        "give the body as a path (\"$.message\") or a template (\"Hello {{state.name}}\")",
    )?;
    let zone = match opt_nonempty_str(obj, "zone", path)? {
        None => DEFAULT_ZONE.to_owned(),
        Some(name) => Zone::parse(name)
            .map_err(|e| err(&join(path, "zone"), e.to_string()))?
            .name(),
    };
    Ok(PostSpec {
        destination: destination.trim().to_owned(),
        body: body.to_owned(),
        zone,
    })
}

fn read_agent(obj: &Obj, path: &str) -> Result<AgentSpec, LoadError> {
    let prompt = match get(obj, "prompt") {
        Some(Json::String(p)) => p.clone(),
        Some(other) => {
            return Err(err(
                &join(path, "prompt"),
                format!("`prompt` must be a string, found {}", other.kind()),
            ));
        }
        None => {
            return Err(err(
                &join(path, "prompt"),
                "an agent materia needs a `prompt`; add the prompt template (or make it a \
                 utility with `command`)",
            ));
        }
    };
    let tools = read_tools(obj, path)?;
    let model = opt_str(obj, "model", path)?
        .map(str::trim)
        .filter(|m| !m.is_empty())
        .map(str::to_owned);
    let thinking = match opt_str(obj, "thinking", path)?.map(str::trim) {
        None | Some("") => None,
        Some(t) if THINKING_LEVELS.contains(&t) => Some(t.to_owned()),
        Some(t) => {
            return Err(err(
                &join(path, "thinking"),
                format!(
                    "unknown thinking level {t:?}; use one of: {}",
                    THINKING_LEVELS.join(", ")
                ),
            ));
        }
    };
    let multi_turn = opt_bool(obj, "multiTurn", path)?.unwrap_or(false);
    Ok(AgentSpec {
        prompt,
        multi_turn,
        model,
        thinking,
        tools,
    })
}

/// Checks `tools` (required) and returns it as the frozen loadout keeps it (`none`: absent).
fn read_tools(obj: &Obj, path: &str) -> Result<Option<serde_json::Value>, LoadError> {
    let tools_path = join(path, "tools");
    let hint =
        "use \"none\", \"readOnly\", \"coding\" or {\"type\": \"custom\", \"tools\": [names]}";
    match get(obj, "tools") {
        None => Err(err(
            &tools_path,
            format!("an agent materia needs `tools`; {hint}"),
        )),
        Some(Json::String(s)) if s == "none" => Ok(None),
        Some(Json::String(s)) if TOOL_SCOPES.contains(&s.as_str()) => {
            Ok(Some(serde_json::Value::String(s.clone())))
        }
        Some(Json::Object(custom)) => {
            match opt_str(custom, "type", &tools_path)? {
                Some("custom") => {}
                _ => {
                    return Err(err(
                        &join(&tools_path, "type"),
                        format!("a tool scope object must have `type: \"custom\"`; {hint}"),
                    ));
                }
            }
            match get(custom, "tools") {
                Some(Json::Array(names)) => {
                    for (i, name) in names.iter().enumerate() {
                        if !matches!(name, Json::String(_)) {
                            return Err(err(
                                &index(&join(&tools_path, "tools"), i),
                                format!("tool names must be strings, found {}", name.kind()),
                            ));
                        }
                    }
                    let names: Vec<serde_json::Value> = names
                        .iter()
                        .filter_map(|n| match n {
                            Json::String(s) => Some(serde_json::Value::String(s.clone())),
                            _ => None,
                        })
                        .collect();
                    Ok(Some(serde_json::json!({"type": "custom", "tools": names})))
                }
                _ => Err(err(
                    &join(&tools_path, "tools"),
                    format!("a custom tool scope needs a `tools` array of names; {hint}"),
                )),
            }
        }
        Some(other) => Err(err(
            &tools_path,
            format!("invalid tool scope ({}); {hint}", describe(other)),
        )),
    }
}

fn describe(value: &Json) -> String {
    match value {
        Json::String(s) => format!("{s:?}"),
        other => other.kind().to_owned(),
    }
}

fn read_utility(obj: &Obj, path: &str, generator: bool) -> Result<UtilityDef, LoadError> {
    reject_keys(
        obj,
        path,
        &["prompt"],
        "a utility materia runs a program, not a prompt; remove `prompt` or make the materia \
         an agent",
    )?;

    let command = read_command(obj, path)?;
    let params = match opt_object(obj, "params", path, "`params`")? {
        Some(p) => p,
        None => &[],
    };
    let output = get(params, "output");
    let alias = opt_nonempty_str(obj, "utility", path)?;
    let script = read_script(obj, path)?;

    let exec = if let Some(argv) = command {
        Program::Runs(Exec::Command { argv })
    } else if let Some(output) = output {
        Program::Runs(Exec::Output {
            output: output.to_value(),
        })
    } else if let Some(alias) = alias {
        match builtin_alias(alias) {
            Some(name) => Program::Runs(Exec::Builtin { name: name.into() }),
            None => Program::NotProvided(alias.to_owned()),
        }
    } else if let Some((name, runtime)) = script {
        match name {
            "ensure-ignored.mjs" => Program::Runs(Exec::Builtin {
                name: "ensure-ignored".into(),
            }),
            "detect-vcs.mjs" => Program::Runs(Exec::Builtin {
                name: "detect-vcs".into(),
            }),
            "commit-sigil.mjs"
            | "mime-bootstrap.mjs"
            | "mime-maintain.mjs"
            | "blackbelt-bootstrap.mjs"
            | "blackbelt-maintain.mjs" => Program::Runs(Exec::Builtin {
                name: name.trim_end_matches(".mjs").into(),
            }),
            // The pull-request utilities act outside (a push, an API call): castlog runs no
            // outward effect outside its claim ledger, so they are not run from an install.
            pr if pr.ends_with("-pr.mjs") => Program::NotProvided(pr.to_owned()),
            other => Program::Runs(Exec::Shipped {
                name: other.to_owned(),
                runtime: runtime.to_owned(),
                hash: None,
            }),
        }
    } else {
        return Err(err(
            path,
            "a utility materia needs something to run; add `command` (an argv array) or \
             `params.output` (a fixed output)",
        ));
    };

    let timeout_ms = match opt_number(obj, "timeoutMs", path)? {
        None => DEFAULT_TIMEOUT_MS,
        Some(t) if t > 0.0 => {
            // Saturating float-to-int conversion; fractional milliseconds round up.
            t.ceil() as u64
        }
        Some(t) => {
            return Err(err(
                &join(path, "timeoutMs"),
                format!("`timeoutMs` must be a positive number of milliseconds, found {t}"),
            ));
        }
    };

    let (mut parse, text_at) = match opt_str(obj, "parse", path)? {
        None => (Parse::Text, None),
        Some("text") => (Parse::Text, Some(join(path, "parse"))),
        Some("json") => (Parse::Json, None),
        Some(other) => {
            return Err(err(
                &join(path, "parse"),
                format!("unknown parse mode {other:?}; use \"text\" or \"json\""),
            ));
        }
    };
    let mut assign = match get(obj, "assign") {
        Some(value) => string_map(value, &join(path, "assign"), "`assign`")?,
        None => Vec::new(),
    };
    if generator {
        if let Some(at) = &text_at {
            return Err(err(
                at,
                "a generator emits JSON `workItems`; set `parse` to \"json\" or remove it",
            ));
        }
        parse = Parse::Json;
        add_work_items_assign(&mut assign, &join(path, "assign"))?;
    }

    Ok(UtilityDef {
        exec,
        params: Json::Object(params.to_vec()).to_value(),
        timeout_ms,
        parse,
        text_at,
        assign,
    })
}

/// `command`: a non-empty array of strings.
/// The built-in utility a pi-materia `utility` alias names: `echo` (prints its `params`),
/// `noop` (prints `{}`), `project.ensureIgnored` and `vcs.detect` (the shipped
/// `ensure-ignored` and `detect-vcs` scripts' equivalents), the git worktree scopes
/// `vcs.spawnGitWorktree` and `vcs.integrateGitWorktrees`, and pi-materia's jj workspace
/// scopes `vcs.spawnJjWorkspace`, `vcs.integrateJjWorkspaces` and `vcs.finalizeJjWorkspace`
/// (which need `jj`: the runner refuses the loadout before a cast starts without it).
fn builtin_alias(alias: &str) -> Option<&'static str> {
    match alias {
        "echo" => Some("echo"),
        "noop" => Some("noop"),
        "project.ensureIgnored" => Some("ensure-ignored"),
        "vcs.detect" => Some("detect-vcs"),
        "vcs.spawnGitWorktree" => Some("spawn-git-worktree"),
        "vcs.integrateGitWorktrees" => Some("integrate-git-worktrees"),
        "vcs.spawnJjWorkspace" => Some("spawn-jj-workspace"),
        "vcs.integrateJjWorkspaces" => Some("integrate-jj-workspaces"),
        "vcs.finalizeJjWorkspace" => Some("finalize-jj-workspace"),
        _ => None,
    }
}

fn read_command(obj: &Obj, path: &str) -> Result<Option<Vec<String>>, LoadError> {
    let Some(value) = get(obj, "command") else {
        return Ok(None);
    };
    let at = join(path, "command");
    let hint = "give the program and its arguments, e.g. [\"node\", \"./scan.mjs\"]";
    let Json::Array(items) = value else {
        return Err(err(
            &at,
            format!(
                "`command` must be an array of strings, found {}; {hint}",
                value.kind()
            ),
        ));
    };
    if items.is_empty() {
        return Err(err(&at, format!("`command` is empty; {hint}")));
    }
    let mut argv = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        match item {
            // An empty argument is almost always a slip (a variable that expanded to nothing
            // when the config was generated); pi-materia refuses it too.
            Json::String(s) if s.is_empty() && i > 0 => {
                return Err(err(
                    &index(&at, i),
                    format!("`command` argument {i} is an empty string; remove it or fill it in"),
                ));
            }
            Json::String(s) => argv.push(s.clone()),
            other => {
                return Err(err(
                    &index(&at, i),
                    format!("`command` entries must be strings, found {}", other.kind()),
                ));
            }
        }
    }
    if argv.first().is_some_and(|p| p.trim().is_empty()) {
        return Err(err(
            &index(&at, 0),
            format!("the program name is empty; {hint}"),
        ));
    }
    Ok(Some(argv))
}

/// `script: {kind: "shippedUtility", name, runtime?}`, returning the name.
fn read_script<'a>(obj: &'a Obj, path: &str) -> Result<Option<(&'a str, &'a str)>, LoadError> {
    let Some(script) = opt_object(obj, "script", path, "`script`")? else {
        return Ok(None);
    };
    let at = join(path, "script");
    match opt_str(script, "kind", &at)? {
        Some("shippedUtility") => {}
        _ => {
            return Err(err(
                &join(&at, "kind"),
                "`script.kind` must be \"shippedUtility\"; for your own program use `command`",
            ));
        }
    }
    let runtime = opt_nonempty_str(script, "runtime", &at)?.unwrap_or("node");
    let name = opt_nonempty_str(script, "name", &at)?.ok_or_else(|| {
        err(
            &join(&at, "name"),
            "`script.name` is missing; name the shipped utility (e.g. \"detect-vcs.mjs\")",
        )
    })?;
    if name.contains(['/', '\\']) || name.starts_with('.') {
        return Err(err(
            &join(&at, "name"),
            format!(
                "`script.name` {name:?} must be the file name of a shipped utility (e.g. \"detect-vcs.mjs\"), not a path; for your own program use `command`"
            ),
        ));
    }
    Ok(Some((name, runtime)))
}

/// Adds (or checks) a generator's implicit `workItems ← $.workItems` assignment.
pub(super) fn add_work_items_assign(
    assign: &mut Vec<(String, String)>,
    assign_path: &str,
) -> Result<(), LoadError> {
    match assign.iter().find(|(target, _)| target == WORK_ITEMS) {
        Some((_, source)) if source == WORK_ITEMS_SOURCE => Ok(()),
        Some((_, source)) => Err(err(
            &join(assign_path, WORK_ITEMS),
            format!(
                "a generator always assigns workItems from \"$.workItems\", not {source:?}; \
                 remove this assignment"
            ),
        )),
        None => {
            assign.push((WORK_ITEMS.to_owned(), WORK_ITEMS_SOURCE.to_owned()));
            Ok(())
        }
    }
}

/// Positive-int helper re-exported for socket and loop fields.
pub(super) fn positive_u32(obj: &Obj, key: &str, path: &str) -> Result<Option<u32>, LoadError> {
    Ok(opt_int(obj, key, path, 1, u64::from(u32::MAX))?.and_then(|v| u32::try_from(v).ok()))
}
