//! Config layers (pi-materia's): the bundled default, the user's `materia.json` in
//! `$PI_MATERIA_PROFILE_DIR`, the project's `.pi/pi-materia.json` and `--config FILE`, merged by
//! the reference's rules when `run` or `submit` is given no CONFIG; `castlog config show`. The
//! layers are files in pi-materia's format (`fixtures/layers/`).

use std::path::Path;

use crate::common::{Run, Sandbox, fixture, scripted};

/// A sandbox whose user layer is `fixtures/layers/profile` and whose current directory holds
/// the project layer of `fixtures/layers/project`.
fn layered() -> Sandbox {
    let sb = Sandbox::new();
    let layers = Path::new(&fixture("layers")).to_path_buf();
    std::os::unix::fs::symlink(layers.join("profile"), sb.path("profile")).unwrap();
    std::fs::create_dir(sb.path(".pi")).unwrap();
    std::fs::copy(
        layers.join("project/.pi/pi-materia.json"),
        sb.path(".pi/pi-materia.json"),
    )
    .unwrap();
    sb
}

fn show(sb: &Sandbox, extra: &[&str]) -> serde_json::Value {
    let mut args = vec!["config", "show", "--json"];
    args.extend_from_slice(extra);
    let run = sb.run(&args);
    assert_eq!(run.code, 0, "{}", run.stderr);
    run.json()
}

fn from_of(doc: &serde_json::Value, name: &str) -> Vec<String> {
    let loadout = doc["loadouts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["name"] == name)
        .unwrap_or_else(|| panic!("no loadout {name} in {doc}"));
    loadout["from"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["layer"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn config_show_names_every_layer_and_where_each_loadout_came_from() {
    let sb = layered();
    let explicit = fixture("layers/explicit.json");
    let doc = show(&sb, &["--config", &explicit]);
    let layers: Vec<(&str, bool)> = doc["layers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| {
            (
                l["layer"].as_str().unwrap(),
                l["present"].as_bool().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        layers,
        vec![
            ("default", true),
            ("user", true),
            ("project", true),
            ("explicit", true)
        ]
    );
    assert_eq!(doc["activeLoadout"], "Greet-Twice");
    assert_eq!(doc["activeLoadoutFrom"], "explicit");
    assert_eq!(from_of(&doc, "Full-Auto"), ["default"]);
    assert_eq!(from_of(&doc, "Greet"), ["user"]);
    assert_eq!(from_of(&doc, "Greet-Twice"), ["explicit"]);
    // The bundled name is protected: the project's Full-Auto is reported, not merged.
    assert_eq!(doc["ignored"][0]["name"], "Full-Auto");
    assert_eq!(doc["ignored"][0]["layer"], "project");
    let config = &doc["config"];
    assert_eq!(config["loadouts"]["Full-Auto"]["entry"], "Socket-1");
    // Scalars are replaced, budget is merged key by key, materia field by field.
    assert_eq!(config["budget"]["maxTokens"], 50000);
    assert_eq!(config["budget"]["warnAtPercent"], 75);
    assert_eq!(config["materia"]["Hello"]["timeoutMs"], 5000);
    assert_eq!(config["materia"]["Hello"]["parse"], "json");
    // The user layer's relative command resolves in the user layer's directory.
    let command = config["materia"]["Hello"]["command"][0].as_str().unwrap();
    assert!(
        command.ends_with("fixtures/layers/profile/hello.sh") && command.starts_with('/'),
        "{command}"
    );
    let text = sb.run(&["config", "show", "--config", &explicit]);
    assert_eq!(text.code, 0, "{}", text.stderr);
    assert!(
        text.stdout
            .contains("active loadout: Greet-Twice (from explicit)"),
        "{}",
        text.stdout
    );
    assert!(
        text.stdout
            .contains("ignored: loadout Full-Auto of the project layer"),
        "{}",
        text.stdout
    );
}

#[test]
fn run_without_a_config_casts_the_layered_active_loadout_and_runs_its_utility_from_the_user_layer()
{
    let sb = layered();
    let agent = scripted("build-loop.jsonl");
    let run = sb.run(&[
        "run", "--task", "greet", "--cast", "l", "--agent", &agent, "--json",
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.json()["status"], "completed", "{}", run.stdout);
    assert!(
        run.stderr
            .contains("note: loadout Full-Auto of the project config")
            && run.stderr.contains("is ignored"),
        "{}",
        run.stderr
    );
    let state = sb.run(&["state", "l", "--json"]);
    assert_eq!(state.code, 0, "{}", state.stderr);
    assert!(
        state.stdout.contains("hello from the user layer"),
        "{}",
        state.stdout
    );
    assert_eq!(state.json()["loadout"], "Greet", "{}", state.stdout);
    let shown = sb.run(&["show", "l", "--json"]);
    let started = &shown.json()["events"][0]["payload"];
    assert_eq!(
        started["loadout"]["budget"]["max_tokens"], 50000,
        "{started}"
    );
    assert_eq!(
        started["loadout"]["sockets"]["Socket-1"]["timeout_ms"], 5000,
        "{started}"
    );
    let source = started["config_source"].as_str().unwrap();
    assert!(
        source.starts_with("default + user:") && source.contains(" + project:"),
        "{source}"
    );
    // --config adds the explicit layer, whose active loadout wins.
    let explicit = fixture("layers/explicit.json");
    let twice = sb.run(&[
        "run", "--config", &explicit, "--task", "greet", "--cast", "t", "--agent", &agent, "--json",
    ]);
    assert_eq!(twice.code, 0, "{}", twice.stderr);
    assert_eq!(twice.json()["status"], "completed", "{}", twice.stdout);
    let shown = sb.run(&["show", "t"]);
    assert!(
        shown.stdout.contains("loadout Greet-Twice"),
        "{}",
        shown.stdout
    );
    assert_eq!(
        shown.stdout.matches("utility_finished").count(),
        2,
        "{}",
        shown.stdout
    );
}

#[test]
fn a_config_given_as_config_is_the_whole_config_and_no_layer_is_read() {
    let sb = Sandbox::new();
    // A broken project layer and user layer: CONFIG reads neither.
    std::fs::create_dir(sb.path(".pi")).unwrap();
    sb.write(".pi/pi-materia.json", "{ not json");
    std::fs::create_dir(sb.path("profile")).unwrap();
    sb.write("profile/materia.json", "[]");
    let loadout = fixture("loadouts/build-loop.json");
    let agent = scripted("build-loop.jsonl");
    let run = sb.run(&[
        "run", &loadout, "--task", "greet", "--cast", "c", "--agent", &agent,
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run.stdout.contains("cast c: completed"), "{}", run.stdout);
    // Without CONFIG the broken layer is named.
    let layered = sb.run(&["run", "--task", "greet", "--agent", &agent]);
    assert_eq!(layered.code, 1, "{}", layered.stderr);
    assert!(
        layered.stderr.contains("user config") && layered.stderr.contains("profile/materia.json"),
        "{}",
        layered.stderr
    );
    let both = sb.run(&[
        "run", &loadout, "--config", &loadout, "--task", "greet", "--agent", &agent,
    ]);
    assert_ne!(both.code, 0, "{}", both.stderr);
    assert!(
        both.stderr.contains("cannot be used with"),
        "{}",
        both.stderr
    );
}

#[test]
fn submit_without_a_config_queues_the_layered_active_loadout() {
    let sb = layered();
    let agent = scripted("build-loop.jsonl");
    let run: Run = sb.run(&[
        "submit", "--task", "greet", "--cast", "q", "--agent", &agent,
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let state = sb.run(&["state", "q", "--json"]);
    assert_eq!(state.json()["loadout"], "Greet", "{}", state.stdout);
}

#[test]
fn a_missing_explicit_layer_is_an_error_and_no_user_layer_is_fine() {
    let sb = Sandbox::new();
    let doc = show(&sb, &[]);
    assert_eq!(doc["activeLoadout"], "Full-Auto");
    assert_eq!(doc["layers"][1]["present"], false);
    assert_eq!(doc["loadouts"].as_array().unwrap().len(), 5);
    let missing = sb.run(&["config", "show", "--config", "nowhere.json"]);
    assert_eq!(missing.code, 1, "{}", missing.stderr);
    assert!(
        missing.stderr.contains("nowhere.json"),
        "{}",
        missing.stderr
    );
}

#[test]
fn config_show_says_what_a_loadout_lacks_on_this_machine() {
    let sb = Sandbox::new();
    let empty = sb.path("no-programs");
    std::fs::create_dir(&empty).unwrap();
    let path = empty.to_str().unwrap();
    let missing = |doc: &serde_json::Value, name: &str| {
        doc["loadouts"]
            .as_array()
            .unwrap()
            .iter()
            .find(|l| l["name"] == name)
            .unwrap()["missing"]
            .clone()
    };
    // The bundled parallel loadouts without jj.
    let run = sb.finish(
        sb.command_on(&sb.db())
            .args(["config", "show", "--json"])
            .env("PATH", path),
    );
    let doc = run.json();
    assert_eq!(
        missing(&doc, "Parallel-Experimental"),
        "blackbelt-bootstrap.mjs needs `jj` on PATH"
    );
    assert_eq!(missing(&doc, "Full-Auto"), serde_json::Value::Null);
    let text = sb.finish(
        sb.command_on(&sb.db())
            .args(["config", "show"])
            .env("PATH", path),
    );
    assert!(
        text.stdout.contains(
            "Parallel-Interactive     default  (not on this machine: blackbelt-bootstrap.mjs needs `jj` on PATH)"
        ),
        "{}",
        text.stdout
    );
    // A shipped script without an install, then with one.
    let config = fixture("loadouts/shipped.json");
    let doc = show(&sb, &["--config", &config]);
    assert_eq!(
        missing(&doc, "Scan"),
        "shipped script 'scan-repo.mjs' needs --pi-materia DIR or PI_MATERIA_HOME"
    );
    let run = sb.finish(
        sb.command_on(&sb.db())
            .args(["config", "show", "--json", "--config", &config])
            .env("PI_MATERIA_HOME", fixture("pi-materia-install")),
    );
    assert_eq!(missing(&run.json(), "Scan"), serde_json::Value::Null);
}
