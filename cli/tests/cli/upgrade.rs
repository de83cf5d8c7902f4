//! A database written by an older build opens, verifies and replays byte for byte.
//! `fixtures/casts/v7/` holds one written at schema v7 (before streams kept their kind) from
//! the fixtures: `built` (the build loop), `sent` (a post, with the `claims:staging` ledger
//! it took a day on), `engaged` (an engage run) and `rebuilt` (a recast of `built`), with
//! projection checkpoints from `replay`, and what `casts --all --json` and `replay --json`
//! printed on it then.

use crate::common::{Sandbox, fixture};

/// A sandbox whose database is a copy of the v7 fixture.
fn with_v7_database() -> Sandbox {
    let sandbox = Sandbox::new();
    std::fs::copy(fixture("casts/v7/castlog.db"), sandbox.db()).unwrap();
    sandbox
}

fn listed(sandbox: &Sandbox, args: &[&str]) -> Vec<(String, String, u64, String)> {
    sandbox.run(args).json()["casts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["cast"].as_str().unwrap().to_owned(),
                c["kind"].as_str().unwrap().to_owned(),
                c["head"].as_u64().unwrap(),
                c["hash"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

#[test]
fn a_version_7_database_gets_stream_kinds_and_lists_casts_only() {
    let sandbox = with_v7_database();
    let before: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(fixture("casts/v7/casts.json")).unwrap())
            .unwrap();
    let all = listed(&sandbox, &["casts", "--all", "--json"]);
    // Heads and hashes are the ones the old build listed; the engage run is now known as one.
    let kinds: Vec<(&str, &str)> = all
        .iter()
        .map(|(c, k, _, _)| (c.as_str(), k.as_str()))
        .collect();
    assert_eq!(
        kinds,
        [
            ("built", "cast"),
            ("sent", "cast"),
            ("claims:staging", "claims_ledger"),
            ("engaged", "engagement"),
            ("rebuilt", "cast"),
        ]
    );
    for ((cast, _, head, hash), old) in all.iter().zip(before["casts"].as_array().unwrap()) {
        assert_eq!(old["cast"], cast.as_str());
        assert_eq!(old["head"], *head, "{cast}");
        assert_eq!(old["hash"], hash.as_str(), "{cast}");
    }
    let casts: Vec<String> = listed(&sandbox, &["casts", "--json"])
        .into_iter()
        .map(|(c, _, _, _)| c)
        .collect();
    assert_eq!(casts, ["built", "sent", "rebuilt"]);
    let text = sandbox.run(&["casts"]);
    assert!(!text.stdout.contains("engaged"), "{}", text.stdout);
    assert!(!text.stdout.contains("claims:staging"), "{}", text.stdout);
}

#[test]
fn a_version_7_database_verifies_and_replays_byte_for_byte() {
    let sandbox = with_v7_database();
    let verified = sandbox.run(&["verify", "--all", "--json"]);
    assert_eq!(verified.code, 0, "{}", verified.stdout);
    let report = verified.json();
    assert_eq!(report["ok"], true, "{report}");
    assert_eq!(report["casts"], 5);
    assert_eq!(report["events"], 184);
    for cast in ["built", "sent", "claims:staging", "engaged", "rebuilt"] {
        let replayed = sandbox.run(&["replay", cast, "--json"]);
        assert_eq!(replayed.code, 0, "{cast}: {}", replayed.stderr);
        let pinned = std::fs::read_to_string(fixture(&format!(
            "casts/v7/replay-{}.json",
            cast.replace(':', "-")
        )))
        .unwrap();
        assert_eq!(replayed.stdout, pinned, "{cast}");
    }
}

/// The engage run is refused as a cast by what the log records it as.
#[test]
fn the_engage_run_of_a_version_7_database_is_not_a_workflow_cast() {
    let sandbox = with_v7_database();
    let state = sandbox.run(&["state", "engaged"]);
    assert_eq!(state.code, 1, "{}", state.stderr);
    assert!(
        state.stderr.contains("engaged is not a workflow cast")
            && state.stderr.contains("records it as engagement"),
        "{}",
        state.stderr
    );
}
