//! Which config a cast runs: one file named as CONFIG, or pi-materia's layers (the bundled
//! default, the user's, the project's and `--config FILE`); and `castlog config show`.
//!
//! The user layer is `materia.json` in the profile directory: `$PI_MATERIA_PROFILE_DIR` when
//! set (what pi-materia reads, and how a test points it elsewhere), else
//! `$XDG_CONFIG_HOME/pi/pi-materia`, else `~/.config/pi/pi-materia` (pi-materia's default). The
//! project layer is `.pi/pi-materia.json` in the cast's working directory (`--workdir`, else
//! the current directory).

use std::path::{Path, PathBuf};

use castlog_core::loadout::load::layers::BUNDLED_DEFAULT;
use castlog_core::loadout::{Config, Layer, LayerKind, Layered, Loadout, load_config, load_layers};
use serde_json::{Value, json};

use crate::args::ConfigShowArgs;
use crate::error::CliError;
use crate::output;

/// The environment variable naming the user's profile directory (pi-materia's).
pub const PROFILE_DIR_VAR: &str = "PI_MATERIA_PROFILE_DIR";

/// The user layer's file name in the profile directory.
const USER_FILE: &str = "materia.json";

/// The project layer's path under the project directory.
const PROJECT_FILE: &str = ".pi/pi-materia.json";

/// Where a cast's config comes from.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Source<'a> {
    /// One file, the whole config (CONFIG on the command line): no layer is read.
    File(&'a Path),
    /// The layers, with `--config FILE` as the explicit one, the project's in `project`.
    Layers {
        /// `--config FILE`.
        explicit: Option<&'a Path>,
        /// The directory whose `.pi/pi-materia.json` is the project layer.
        project: &'a Path,
    },
}

impl<'a> Source<'a> {
    /// CONFIG if given, else the layers.
    pub(crate) fn of(
        positional: Option<&'a Path>,
        explicit: Option<&'a Path>,
        project: &'a Path,
    ) -> Self {
        match positional {
            Some(file) => Source::File(file),
            None => Source::Layers { explicit, project },
        }
    }
}

/// A loaded config and what to call it.
#[derive(Debug)]
pub(crate) struct Loaded {
    /// The validated config.
    pub config: Config,
    /// What `cast_started` records as the config's source.
    pub recorded: String,
    /// How errors about it name it.
    named: String,
}

impl Loaded {
    /// The loadout `name` (default: the active one).
    pub(crate) fn resolve(&self, name: Option<&str>) -> Result<Loadout, CliError> {
        self.config
            .resolve(name)
            .map_err(|e| CliError::from(e).context(&self.named))
    }

    /// The config's placement policy, else `recommended`.
    pub(crate) fn policy(&self) -> String {
        self.config
            .placement_policy
            .clone()
            .unwrap_or_else(|| "recommended".into())
    }
}

/// Loads the config `source` names; a layered config says on stderr which higher-layer
/// loadouts it ignored.
pub(crate) fn load(source: Source<'_>) -> Result<Loaded, CliError> {
    match source {
        Source::File(path) => {
            let text = std::fs::read_to_string(path).map_err(|e| {
                CliError::user(format!("cannot read config {}: {e}", path.display()))
            })?;
            let config =
                load_config(&text).map_err(|e| CliError::from(e).context(path.display()))?;
            Ok(Loaded {
                config,
                recorded: path.display().to_string(),
                named: path.display().to_string(),
            })
        }
        Source::Layers { explicit, project } => {
            let found = read_layers(explicit, project)?;
            let layers: Vec<Layer> = found.iter().filter_map(|f| f.layer.clone()).collect();
            let layered = merge(&layers)?;
            for ignored in &layered.ignored {
                output::to_stderr(format_args!(
                    "note: loadout {} of {} is ignored: a bundled loadout has that name, and bundled names are protected; rename it",
                    ignored.name,
                    describe(&layers[ignored.layer]),
                ));
            }
            let recorded = layers
                .iter()
                .map(|l| match &l.file {
                    Some(file) => format!("{}:{file}", l.kind.as_str()),
                    None => l.kind.as_str().to_owned(),
                })
                .collect::<Vec<_>>()
                .join(" + ");
            Ok(Loaded {
                config: layered.config,
                recorded,
                named: "the layered config".into(),
            })
        }
    }
}

/// One layer's place, and its text when the file is there.
struct Found {
    kind: LayerKind,
    path: Option<PathBuf>,
    layer: Option<Layer>,
}

/// The profile directory holding the user layer.
pub(crate) fn profile_dir() -> Option<PathBuf> {
    let set = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
    if let Some(dir) = set(PROFILE_DIR_VAR) {
        return Some(PathBuf::from(dir));
    }
    if let Some(dir) = set("XDG_CONFIG_HOME") {
        return Some(PathBuf::from(dir).join("pi/pi-materia"));
    }
    set("HOME").map(|home| PathBuf::from(home).join(".config/pi/pi-materia"))
}

fn read_layers(explicit: Option<&Path>, project: &Path) -> Result<Vec<Found>, CliError> {
    let mut found = vec![Found {
        kind: LayerKind::Default,
        path: None,
        layer: Some(Layer {
            kind: LayerKind::Default,
            file: None,
            dir: None,
            text: BUNDLED_DEFAULT.to_owned(),
        }),
    }];
    let user = profile_dir().map(|dir| dir.join(USER_FILE));
    found.push(optional(LayerKind::User, user)?);
    found.push(optional(
        LayerKind::Project,
        Some(project.join(PROJECT_FILE)),
    )?);
    if let Some(file) = explicit {
        let layer = read(LayerKind::Explicit, file)?.ok_or_else(|| {
            CliError::user(format!(
                "cannot read config {}: no such file (--config names the explicit layer)",
                file.display()
            ))
        })?;
        found.push(Found {
            kind: LayerKind::Explicit,
            path: Some(file.to_path_buf()),
            layer: Some(layer),
        });
    } else {
        found.push(Found {
            kind: LayerKind::Explicit,
            path: None,
            layer: None,
        });
    }
    Ok(found)
}

fn optional(kind: LayerKind, path: Option<PathBuf>) -> Result<Found, CliError> {
    let layer = match &path {
        Some(path) => read(kind, path)?,
        None => None,
    };
    Ok(Found { kind, path, layer })
}

/// A layer's file; `None` when there is none at `path`.
fn read(kind: LayerKind, path: &Path) -> Result<Option<Layer>, CliError> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => {
            return Err(CliError::user(format!(
                "cannot read {} config {}: {e}",
                kind.as_str(),
                path.display()
            )));
        }
    };
    let absolute = std::fs::canonicalize(path)
        .or_else(|_| std::path::absolute(path))
        .unwrap_or_else(|_| path.to_path_buf());
    let dir = absolute
        .parent()
        .map(|d| d.display().to_string())
        .filter(|d| !d.is_empty());
    Ok(Some(Layer {
        kind,
        file: Some(absolute.display().to_string()),
        dir,
        text,
    }))
}

fn merge(layers: &[Layer]) -> Result<Layered, CliError> {
    load_layers(layers).map_err(|e| CliError::user(e.to_string()))
}

fn describe(layer: &Layer) -> String {
    match &layer.file {
        Some(file) => format!("the {} config {file}", layer.kind.as_str()),
        None => "the bundled default".into(),
    }
}

/// `castlog config show`.
/// What a loadout that loads still lacks on this machine before a cast of it can start: a
/// program its built-in utilities run (`jj`), or a shipped script's install; `None` when
/// nothing is missing (or it does not load, which is said otherwise).
fn missing_here(
    config: &castlog_core::loadout::Config,
    name: &str,
    launcher: &castlog_replay::process::Launcher,
) -> Option<String> {
    let mut loadout = config.resolve(Some(name)).ok()?;
    if let Err(e) = castlog_replay::utility::check_programs(&loadout) {
        return Some(format!("{} needs `{}` on PATH", e.utility, e.program));
    }
    castlog_replay::utility::shipped::resolve(&mut loadout, launcher)
        .err()
        .map(|e| match e {
            castlog_replay::utility::shipped::ShippedError::NoInstall { name, .. } => {
                format!("shipped script '{name}' needs --pi-materia DIR or PI_MATERIA_HOME")
            }
            other => other.to_string(),
        })
}

pub fn show(
    args: &ConfigShowArgs,
    launcher: &castlog_replay::process::Launcher,
) -> Result<(), CliError> {
    let here = super::cast::cwd();
    let project = args.workdir.as_deref().unwrap_or(&here);
    let found = read_layers(args.config.as_deref(), project)?;
    let layers: Vec<Layer> = found.iter().filter_map(|f| f.layer.clone()).collect();
    let layered = merge(&layers)?;
    let name_of = |at: usize| layers[at].kind.as_str();
    let file_of = |at: usize| layers[at].file.clone();
    let loadouts: Vec<Value> = layered
        .config
        .names
        .iter()
        .map(|name| {
            let from = layered
                .origin_of(name)
                .map(|o| o.layers.clone())
                .unwrap_or_default();
            json!({
                "name": name,
                "from": from.iter().map(|&at| json!({"layer": name_of(at), "file": file_of(at)})).collect::<Vec<_>>(),
                "loads": layered.config.resolve(Some(name)).is_ok(),
                "missing": missing_here(&layered.config, name, launcher),
            })
        })
        .collect();
    let ignored: Vec<Value> = layered
        .ignored
        .iter()
        .map(|i| json!({"name": i.name, "layer": name_of(i.layer), "file": file_of(i.layer)}))
        .collect();
    let layer_rows: Vec<Value> = found
        .iter()
        .map(|f| {
            json!({
                "layer": f.kind.as_str(),
                "file": f.layer.as_ref().and_then(|l| l.file.clone()).or_else(|| f.path.as_ref().map(|p| p.display().to_string())),
                "present": f.layer.is_some(),
            })
        })
        .collect();
    let active_from = layered.active_from.map(name_of);
    if args.json {
        let merged: Value = serde_json::from_str(&layered.merged)
            .map_err(|e| CliError::internal(format!("the merged config is not JSON: {e}")))?;
        return output::json(&json!({
            "layers": layer_rows,
            "activeLoadout": layered.config.active,
            "activeLoadoutFrom": active_from,
            "loadouts": loadouts,
            "ignored": ignored,
            "config": merged,
        }));
    }
    crate::say!("layers (lowest first):");
    for f in &found {
        let file = f
            .layer
            .as_ref()
            .and_then(|l| l.file.clone())
            .or_else(|| f.path.as_ref().map(|p| p.display().to_string()));
        let state = match (&f.layer, file) {
            (Some(_), None) => "bundled".to_owned(),
            (Some(_), Some(file)) => file,
            (None, Some(file)) => format!("{file} (not present)"),
            (None, None) => "(none: --config FILE)".to_owned(),
        };
        crate::say!("  {:<9} {state}", f.kind.as_str());
    }
    crate::say!(
        "active loadout: {} (from {})",
        layered.config.active,
        active_from.unwrap_or("default")
    );
    crate::say!("loadouts:");
    for name in &layered.config.names {
        let from = layered
            .origin_of(name)
            .map(|o| {
                o.layers
                    .iter()
                    .map(|&at| name_of(at))
                    .collect::<Vec<_>>()
                    .join(" + ")
            })
            .unwrap_or_default();
        let loads = match layered.config.resolve(Some(name)) {
            Ok(_) => missing_here(&layered.config, name, launcher)
                .map(|why| format!("  (not on this machine: {why})"))
                .unwrap_or_default(),
            Err(e) => format!(
                "  (does not run: {})",
                e.reason.split(':').next().unwrap_or_default()
            ),
        };
        crate::say!("  {name:<24} {from}{loads}");
    }
    for i in &layered.ignored {
        crate::say!(
            "ignored: loadout {} of the {} layer (a bundled loadout's name is protected)",
            i.name,
            name_of(i.layer)
        );
    }
    crate::say!("the merged config itself: castlog config show --json");
    Ok(())
}
