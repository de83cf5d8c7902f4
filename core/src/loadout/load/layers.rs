//! Config layers: the bundled default, the user's, the project's and an explicit file, merged
//! by pi-materia's rules into one config.
//!
//! The caller reads the files (the core touches none) and hands in each present layer's text,
//! lowest first, with the directory its relative `command` paths resolve against. The merge:
//! - top-level scalars are replaced by the higher layer (`null` removes the key);
//! - `budget`, `limits`, `compaction`, `parallelism` and `prices` are shallow-merged objects;
//! - `materia` merges per materia id, shallow per field; `null` deletes a materia or a field;
//! - `loadouts` merge per loadout name: a loadout that gives `sockets` replaces them wholesale
//!   and brings its own `loops` (or none); other fields are replaced one by one; `null` deletes
//!   a loadout;
//! - a loadout name the bundled default defines is protected: a higher layer's loadout of that
//!   name is ignored. The reference ignores it silently; castlog reports it ([`Layered::ignored`])
//!   so that the CLI can say so;
//! - `eventing.sinks` merge by sink id, `eventing.presets` are additive, the rest of `eventing`
//!   is shallow-merged.
//!
//! A relative `command` path (`./x.sh` or `../x.sh`, as argv\[0\], or as argv\[1\] after a
//! runtime such as `node`) is resolved against the directory of the layer that set that
//! `command`, before merging, so a later layer that changes another field of the materia keeps
//! the path where its author meant it.

use super::json::{Json, err, join, reject_duplicate_keys};
use super::{Config, LoadError, load_config};

/// pi-materia's bundled `config/default.json`, castlog's lowest layer.
pub const BUNDLED_DEFAULT: &str = include_str!("../../../../fixtures/pi-materia-default.json");

/// Which layer a config file is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum LayerKind {
    /// The bundled default ([`BUNDLED_DEFAULT`]).
    Default,
    /// The user's `materia.json` in the profile directory.
    User,
    /// The project's `.pi/pi-materia.json`.
    Project,
    /// A file named on the command line (`--config`).
    Explicit,
}

impl LayerKind {
    /// The layer's name as printed (`default`, `user`, `project`, `explicit`).
    pub fn as_str(self) -> &'static str {
        match self {
            LayerKind::Default => "default",
            LayerKind::User => "user",
            LayerKind::Project => "project",
            LayerKind::Explicit => "explicit",
        }
    }
}

/// One layer's text, as the caller read it.
#[derive(Debug, Clone)]
pub struct Layer {
    /// Which layer it is.
    pub kind: LayerKind,
    /// The file it was read from, as shown to a person (`None` for the bundled default).
    pub file: Option<String>,
    /// The directory relative `command` paths resolve against (the file's directory).
    pub dir: Option<String>,
    /// The file's text.
    pub text: String,
}

/// Where one loadout of the merged config came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadoutOrigin {
    /// The loadout's name.
    pub name: String,
    /// The layers that defined or changed it, lowest first (indexes into the layers given).
    pub layers: Vec<usize>,
}

/// A higher layer's loadout that was not merged: its name is a bundled loadout's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IgnoredLoadout {
    /// The loadout's name.
    pub name: String,
    /// The layer that defined it (an index into the layers given).
    pub layer: usize,
}

/// The merged config of some layers.
#[derive(Debug, Clone)]
pub struct Layered {
    /// The merged config, validated.
    pub config: Config,
    /// The merged config's JSON text (keys in merge order).
    pub merged: String,
    /// Each loadout of the merged config, in its order, with the layers it came from.
    pub origins: Vec<LoadoutOrigin>,
    /// Loadouts of higher layers ignored because a bundled loadout has their name.
    pub ignored: Vec<IgnoredLoadout>,
    /// Which layer set `activeLoadout` (an index into the layers given), if any did.
    pub active_from: Option<usize>,
}

/// A layer that does not merge, or a merged config that does not load.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{source_name}: {error}")]
pub struct LayerError {
    /// The file at fault (`the bundled default`, a path, or `the merged config`).
    pub source_name: String,
    /// What is wrong there.
    pub error: LoadError,
}

/// The top-level objects merged key by key.
const SHALLOW: [&str; 5] = ["budget", "limits", "compaction", "parallelism", "prices"];

/// Runtimes whose first argument is the script they run, for relative path resolution.
const RUNTIMES: [&str; 8] = [
    "node", "bun", "deno", "python", "python3", "sh", "bash", "ruby",
];

/// Merges `layers` (lowest first) and validates the result.
pub fn load_layers(layers: &[Layer]) -> Result<Layered, LayerError> {
    let mut merged: Vec<(String, Json)> = Vec::new();
    let mut origins: Vec<LoadoutOrigin> = Vec::new();
    let mut ignored = Vec::new();
    let mut active_from = None;
    let mut protected: Vec<String> = Vec::new();
    for (at, layer) in layers.iter().enumerate() {
        let named = |error: LoadError| LayerError {
            source_name: source_name(layer),
            error,
        };
        let root = Json::parse(&layer.text).map_err(named)?;
        reject_duplicate_keys(&root, "").map_err(named)?;
        let Json::Object(mut top) = root else {
            return Err(named(err(
                "$",
                format!(
                    "a config layer must be a JSON object, found {}",
                    root.kind()
                ),
            )));
        };
        if let Some(dir) = &layer.dir {
            resolve_commands(&mut top, dir);
        }
        for (key, value) in top {
            match key.as_str() {
                "loadouts" => {
                    let Json::Object(loadouts) = value else {
                        return Err(named(err(
                            "loadouts",
                            format!("`loadouts` must be an object, found {}", value.kind()),
                        )));
                    };
                    let target = object_entry(&mut merged, "loadouts");
                    for (name, loadout) in loadouts {
                        if layer.kind != LayerKind::Default && protected.contains(&name) {
                            ignored.push(IgnoredLoadout { name, layer: at });
                            continue;
                        }
                        if layer.kind == LayerKind::Default {
                            protected.push(name.clone());
                        }
                        merge_loadout(target, &mut origins, name, loadout, at).map_err(named)?;
                    }
                }
                "materia" => {
                    let Json::Object(materia) = value else {
                        return Err(named(err(
                            "materia",
                            format!("`materia` must be an object, found {}", value.kind()),
                        )));
                    };
                    let target = object_entry(&mut merged, "materia");
                    for (id, one) in materia {
                        merge_fields(target, id, one);
                    }
                }
                "eventing" => merge_eventing(&mut merged, value).map_err(named)?,
                shallow if SHALLOW.contains(&shallow) => {
                    let Json::Object(fields) = value else {
                        if matches!(value, Json::Null) {
                            remove(&mut merged, &key);
                            continue;
                        }
                        return Err(named(err(
                            &key,
                            format!("`{key}` must be an object, found {}", value.kind()),
                        )));
                    };
                    let target = object_entry(&mut merged, &key);
                    for (field, v) in fields {
                        set_or_remove(target, field, v);
                    }
                }
                _ => {
                    if key == "activeLoadout" {
                        active_from = Some(at);
                    }
                    set_or_remove(&mut merged, key, value);
                }
            }
        }
    }
    let merged = Json::Object(merged);
    let text = serde_json::to_string(&merged).unwrap_or_default();
    let config = load_config(&text).map_err(|error| LayerError {
        source_name: "the merged config".into(),
        error,
    })?;
    origins.retain(|o| config.names.contains(&o.name));
    Ok(Layered {
        config,
        merged: text,
        origins,
        ignored,
        active_from,
    })
}

fn source_name(layer: &Layer) -> String {
    match &layer.file {
        Some(file) => format!("{} config {file}", layer.kind.as_str()),
        None => "the bundled default config".into(),
    }
}

/// The object under `key` in `entries`, created empty if absent (or not an object).
fn object_entry<'a>(
    entries: &'a mut Vec<(String, Json)>,
    key: &str,
) -> &'a mut Vec<(String, Json)> {
    let at = match entries.iter().position(|(k, _)| k == key) {
        Some(at) => at,
        None => {
            entries.push((key.to_owned(), Json::Object(Vec::new())));
            entries.len() - 1
        }
    };
    if !matches!(entries[at].1, Json::Object(_)) {
        entries[at].1 = Json::Object(Vec::new());
    }
    match &mut entries[at].1 {
        Json::Object(inner) => inner,
        _ => unreachable!("just made an object"),
    }
}

fn remove(entries: &mut Vec<(String, Json)>, key: &str) {
    entries.retain(|(k, _)| k != key);
}

/// Replaces `key` (keeping its place), adds it at the end, or removes it for `null`.
fn set_or_remove(entries: &mut Vec<(String, Json)>, key: String, value: Json) {
    if matches!(value, Json::Null) {
        remove(entries, &key);
    } else if let Some(slot) = entries.iter_mut().find(|(k, _)| *k == key) {
        slot.1 = value;
    } else {
        entries.push((key, value));
    }
}

/// Merges one materia shallow per field; `null` deletes it, a non-object replaces it.
fn merge_fields(target: &mut Vec<(String, Json)>, id: String, value: Json) {
    match value {
        Json::Object(fields) => {
            let existing = target.iter_mut().find(|(k, _)| *k == id);
            match existing {
                Some((_, Json::Object(current))) => {
                    for (field, v) in fields {
                        set_or_remove(current, field, v);
                    }
                }
                Some(slot) => slot.1 = Json::Object(fields),
                None => target.push((id, Json::Object(fields))),
            }
        }
        other => set_or_remove(target, id, other),
    }
}

fn merge_loadout(
    target: &mut Vec<(String, Json)>,
    origins: &mut Vec<LoadoutOrigin>,
    name: String,
    value: Json,
    layer: usize,
) -> Result<(), LoadError> {
    let path = join("loadouts", &name);
    match value {
        Json::Null => {
            remove(target, &name);
            origins.retain(|o| o.name != name);
        }
        Json::Object(fields) => {
            match target.iter_mut().find(|(k, _)| *k == name) {
                Some((_, Json::Object(current))) => {
                    if fields.iter().any(|(k, _)| k == "sockets") {
                        remove(current, "loops");
                    }
                    for (field, v) in fields {
                        set_or_remove(current, field, v);
                    }
                }
                Some(slot) => slot.1 = Json::Object(fields),
                None => target.push((name.clone(), Json::Object(fields))),
            }
            match origins.iter_mut().find(|o| o.name == name) {
                Some(origin) => origin.layers.push(layer),
                None => origins.push(LoadoutOrigin {
                    name,
                    layers: vec![layer],
                }),
            }
        }
        other => {
            return Err(err(
                &path,
                format!(
                    "a loadout must be an object (or null to delete it), found {}",
                    other.kind()
                ),
            ));
        }
    }
    Ok(())
}

fn merge_eventing(merged: &mut Vec<(String, Json)>, value: Json) -> Result<(), LoadError> {
    let fields = match value {
        Json::Null => {
            remove(merged, "eventing");
            return Ok(());
        }
        Json::Object(fields) => fields,
        other => {
            return Err(err(
                "eventing",
                format!("`eventing` must be an object, found {}", other.kind()),
            ));
        }
    };
    let target = object_entry(merged, "eventing");
    for (field, v) in fields {
        match (field.as_str(), v) {
            ("sinks", Json::Object(sinks)) => {
                let into = object_entry(target, "sinks");
                for (id, sink) in sinks {
                    set_or_remove(into, id, sink);
                }
            }
            ("presets", Json::Array(presets)) => {
                let into = match target.iter_mut().find(|(k, _)| k == "presets") {
                    Some((_, Json::Array(into))) => into,
                    _ => {
                        set_or_remove(target, "presets".into(), Json::Array(Vec::new()));
                        match target.iter_mut().find(|(k, _)| k == "presets") {
                            Some((_, Json::Array(into))) => into,
                            _ => unreachable!("just set"),
                        }
                    }
                };
                for preset in presets {
                    if !into.contains(&preset) {
                        into.push(preset);
                    }
                }
            }
            (_, v) => set_or_remove(target, field, v),
        }
    }
    Ok(())
}

/// Rewrites the relative `command` paths of a layer's materia against `dir`.
fn resolve_commands(top: &mut [(String, Json)], dir: &str) {
    let Some((_, Json::Object(materia))) = top.iter_mut().find(|(k, _)| k == "materia") else {
        return;
    };
    for (_, one) in materia.iter_mut() {
        let Json::Object(fields) = one else { continue };
        let Some((_, Json::Array(argv))) = fields.iter_mut().find(|(k, _)| k == "command") else {
            continue;
        };
        let at = match argv.first() {
            Some(Json::String(first)) if is_relative(first) => 0,
            Some(Json::String(first)) if RUNTIMES.contains(&first.as_str()) => 1,
            _ => continue,
        };
        // Anything else is left for the loader to refuse, naming the element.
        if let Some(Json::String(arg)) = argv.get_mut(at)
            && is_relative(arg)
        {
            *arg = resolve(dir, arg);
        }
    }
}

/// `./x` or `../x` (pi-materia's relative command paths; `x/y` and bare names are not).
fn is_relative(path: &str) -> bool {
    path.starts_with("./") || path.starts_with("../")
}

/// `dir` joined with `relative`, `.` and `..` folded away lexically.
pub fn resolve(dir: &str, relative: &str) -> String {
    let mut parts: Vec<&str> = dir.split('/').filter(|p| !p.is_empty()).collect();
    for part in relative.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            other => parts.push(other),
        }
    }
    let joined = parts.join("/");
    if dir.starts_with('/') {
        format!("/{joined}")
    } else {
        joined
    }
}

impl Layered {
    /// Where the loadout `name` came from.
    pub fn origin_of(&self, name: &str) -> Option<&LoadoutOrigin> {
        self.origins.iter().find(|o| o.name == name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layer(kind: LayerKind, dir: Option<&str>, text: &str) -> Layer {
        Layer {
            kind,
            file: dir.map(|d| format!("{d}/c.json")),
            dir: dir.map(str::to_owned),
            text: text.to_owned(),
        }
    }

    const MINI: &str = r#"{"activeLoadout": "Mini", "loadouts": {"Mini": {"entry": "Socket-1",
        "sockets": {"Socket-1": {"materia": "Say"}}}},
        "materia": {"Say": {"type": "utility", "command": ["./say.sh", "./arg"]}}}"#;

    #[test]
    fn a_higher_layer_adds_a_loadout_and_its_relative_command_resolves_in_its_directory() {
        let layers = [
            layer(LayerKind::Default, None, BUNDLED_DEFAULT),
            layer(LayerKind::Project, Some("/p/.pi"), MINI),
        ];
        let merged = load_layers(&layers).unwrap();
        assert_eq!(merged.config.active, "Mini");
        assert_eq!(merged.active_from, Some(1));
        assert!(merged.config.names.starts_with(&["Full-Auto".to_owned()]));
        assert_eq!(merged.config.names.last().unwrap(), "Mini");
        assert_eq!(merged.origin_of("Mini").unwrap().layers, vec![1]);
        assert_eq!(merged.origin_of("Full-Auto").unwrap().layers, vec![0]);
        assert!(merged.merged.contains(r#"["/p/.pi/say.sh","./arg"]"#));
    }

    #[test]
    fn a_bundled_loadout_name_is_protected_and_the_ignored_loadout_is_reported() {
        let layers = [
            layer(LayerKind::Default, None, BUNDLED_DEFAULT),
            layer(
                LayerKind::User,
                Some("/u"),
                r#"{"loadouts": {"Full-Auto": {"entry": "Socket-9"}}}"#,
            ),
        ];
        let merged = load_layers(&layers).unwrap();
        assert_eq!(
            merged.ignored,
            vec![IgnoredLoadout {
                name: "Full-Auto".into(),
                layer: 1
            }]
        );
        assert_eq!(merged.origin_of("Full-Auto").unwrap().layers, vec![0]);
        assert!(merged.config.resolve(Some("Full-Auto")).is_ok());
    }

    #[test]
    fn materia_merge_per_field_and_null_deletes_a_field_a_materia_or_a_loadout() {
        let layers = [
            layer(LayerKind::User, Some("/u"), MINI),
            layer(
                LayerKind::Project,
                Some("/p"),
                r#"{"materia": {"Say": {"timeoutMs": 5000, "label": "Speaker"}, "Gone": null},
                    "loadouts": {"Extra": {"entry": "Socket-1", "sockets": {"Socket-1": {"materia": "Say"}}}}}"#,
            ),
            layer(
                LayerKind::Explicit,
                Some("/e"),
                r#"{"materia": {"Say": {"label": null}}, "loadouts": {"Extra": null}, "budget": {"maxTokens": 9}}"#,
            ),
        ];
        let merged = load_layers(&layers).unwrap();
        let value: serde_json::Value = serde_json::from_str(&merged.merged).unwrap();
        assert_eq!(
            value["materia"]["Say"],
            serde_json::json!({"type": "utility", "command": ["/u/say.sh", "./arg"], "timeoutMs": 5000})
        );
        assert_eq!(merged.config.names, vec!["Mini".to_owned()]);
        assert_eq!(value["budget"], serde_json::json!({"maxTokens": 9}));
    }

    #[test]
    fn a_loadout_giving_sockets_replaces_them_and_its_loops_and_other_fields_merge() {
        let base = r#"{"activeLoadout": "L", "materia": {"A": {"type": "utility", "params": {"output": "x"}}},
            "loadouts": {"L": {"entry": "Socket-1", "id": "one",
              "sockets": {"Socket-1": {"materia": "A"}, "Socket-2": {"materia": "A"}},
              "loops": {"x": {"sockets": ["Socket-1"]}}}}}"#;
        let over = r#"{"loadouts": {"L": {"sockets": {"Socket-1": {"materia": "A"}}}}}"#;
        let merged = load_layers(&[
            layer(LayerKind::User, None, base),
            layer(LayerKind::Project, None, over),
        ])
        .unwrap();
        let value: serde_json::Value = serde_json::from_str(&merged.merged).unwrap();
        assert_eq!(
            value["loadouts"]["L"],
            serde_json::json!({"entry": "Socket-1", "id": "one", "sockets": {"Socket-1": {"materia": "A"}}})
        );
        assert_eq!(merged.origin_of("L").unwrap().layers, vec![0, 1]);
    }

    #[test]
    fn eventing_sinks_merge_by_id_and_presets_are_refused_by_name() {
        let merged = load_layers(&[
            layer(LayerKind::Default, None, BUNDLED_DEFAULT),
            layer(
                LayerKind::User,
                None,
                r#"{"eventing": {"sinks": {"a": {"url": "http://a"}}}}"#,
            ),
            layer(
                LayerKind::Project,
                None,
                r#"{"eventing": {"enabled": true, "sinks": {"b": {"url": "http://b"}}}}"#,
            ),
        ])
        .unwrap();
        let value: serde_json::Value = serde_json::from_str(&merged.merged).unwrap();
        assert_eq!(value["eventing"]["enabled"], true);
        assert_eq!(
            value["eventing"]["sinks"],
            serde_json::json!({"a": {"url": "http://a"}, "b": {"url": "http://b"}})
        );
        // pi-materia's presets name its own agent integrations; castlog has none, and says so
        // rather than dropping them.
        let e = load_layers(&[
            layer(LayerKind::Default, None, BUNDLED_DEFAULT),
            layer(
                LayerKind::User,
                None,
                r#"{"eventing": {"presets": ["agent-controller"]}}"#,
            ),
        ])
        .unwrap_err();
        assert_eq!(e.error.path, "eventing.presets", "{e:?}");
        assert!(e.error.reason.contains("eventing.sinks"), "{e:?}");
    }

    #[test]
    fn a_bad_layer_is_named() {
        let e = load_layers(&[layer(LayerKind::Project, Some("/p"), r#"{"loadouts": []}"#)])
            .unwrap_err();
        assert_eq!(e.source_name, "project config /p/c.json");
        assert_eq!(e.error.path, "loadouts");
        let e = load_layers(&[layer(LayerKind::User, Some("/u"), "[1]")]).unwrap_err();
        assert!(e.to_string().contains("must be a JSON object"), "{e}");
    }

    #[test]
    fn relative_paths_fold_dot_segments() {
        assert_eq!(resolve("/a/b", "./x.sh"), "/a/b/x.sh");
        assert_eq!(resolve("/a/b", "../x.sh"), "/a/x.sh");
        assert_eq!(resolve("/a/b/", "./s/../t/x"), "/a/b/t/x");
    }
}
