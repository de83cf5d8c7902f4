//! `castlog placement`: the placement engine on entries given as data, policies as files, the
//! audit's inventory table generated, the cached-prefix view, and `run --policy FILE`.

use rstest::rstest;
use serde_json::{Value, json};

use crate::common::{Sandbox, fixture};

/// The entry of the shipped inventory with `source_type` (and `locked`).
fn inventory_entry(source_type: &str, locked: bool) -> Value {
    let doc: Value = serde_json::from_str(
        &std::fs::read_to_string(fixture("placement/inventory.json")).unwrap(),
    )
    .unwrap();
    doc["entries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| {
            e["sourceType"] == source_type && e["locked"].as_bool().unwrap_or(false) == locked
        })
        .unwrap_or_else(|| panic!("the inventory has no {source_type} (locked {locked})"))
        .clone()
}

/// Where an entry lands under one policy of a `--compare` row: the destination, `+reminder`
/// when it is also re-emitted as a reminder.
fn lands(row: &Value, policy: &str) -> String {
    let under = &row["policies"][policy];
    let mut out = under["destination"].as_str().unwrap().to_owned();
    if under["reminder"] == true {
        out.push_str("+reminder");
    }
    out
}

/// The seed audit's inventory, every row: the producer's layer and role as the shipped
/// fixture gives them, the "renders as" column (legacy) and the "recommended" column, each
/// entry placed on its own, through the CLI.
#[rstest]
#[case("retryFeedback", false, "trailing", "trailing", "user")]
#[case("recoveryTicket", false, "system_fold", "trailing", "user")]
#[case("remainingDelta", false, "system_fold", "trailing", "user")]
#[case("groundingFeedback", false, "system_fold", "trailing", "user")]
#[case("rejectionFeedback", false, "system_fold", "trailing", "user")]
#[case(
    "steeringNote",
    true,
    "system_fold+reminder",
    "system_fold+reminder",
    "system"
)]
#[case("steeringNote", false, "inline", "inline", "user")]
#[case("artifactRepair", false, "inline", "inline", "user")]
#[case("criticFeedback", false, "inline", "inline", "user")]
#[case("neededArtifact", false, "inline", "inline", "user")]
#[case("unconfirmedFix", false, "inline", "inline", "user")]
#[case("toolResult", false, "inline", "inline", "tool")]
#[case("assistantToolCall", false, "inline", "inline", "assistant")]
#[case("initialIntent", false, "inline", "inline", "user")]
#[case("clarificationAnswer", false, "system_fold", "system_fold", "system")]
#[case("schemaInstruction", false, "system_fold", "system_fold", "system")]
#[case("systemPrompt", false, "system_fold", "system_fold", "system")]
#[case("operatingGuidance", false, "system_fold", "system_fold", "system")]
#[case("projectProfile", false, "system_fold", "system_fold", "system")]
#[case("agentInstructions", false, "system_fold", "system_fold", "system")]
#[case("operatorProfile", false, "system_fold", "system_fold", "system")]
#[case("claimedTask", false, "system_fold", "system_fold", "system")]
#[case("promotedConcept", false, "system_fold", "system_fold", "system")]
#[case("verifiedBaseline", false, "system_fold", "system_fold", "system")]
#[case("successfulPlanShape", false, "system_fold", "system_fold", "system")]
#[case("agentPrompt", false, "inline", "inline", "user")]
#[case("repoMap", false, "inline", "inline", "user")]
#[case("docsCatalog", false, "inline", "inline", "user")]
#[case("relevantFiles", false, "inline", "inline", "user")]
#[case("decisionJournal", false, "inline", "inline", "user")]
fn every_inventory_row_renders_as_the_audit_says(
    #[case] source_type: &str,
    #[case] locked: bool,
    #[case] legacy: &str,
    #[case] recommended: &str,
    #[case] recommended_role: &str,
) {
    let sandbox = Sandbox::new();
    let entry = inventory_entry(source_type, locked);
    let file = sandbox.write("one.json", &json!({ "entries": [entry] }).to_string());
    let run = sandbox.run(&[
        "placement",
        &file,
        "--compare",
        "legacy",
        "recommended",
        "--json",
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let doc = run.json();
    let row = &doc["entries"][0];
    assert_eq!(row["source_type"], source_type);
    assert_eq!(
        lands(row, "legacy"),
        legacy,
        "{source_type} under legacy: {row}"
    );
    assert_eq!(
        lands(row, "recommended"),
        recommended,
        "{source_type} under recommended: {row}"
    );
    // legacy takes the producer's layer and role as given; recommended re-roles escalations.
    assert_eq!(row["policies"]["legacy"]["role"], entry["role"]);
    assert_eq!(row["policies"]["recommended"]["role"], recommended_role);
    assert!(row["policies"]["legacy"]["why"].as_str().unwrap().len() > 10);
}

/// The whole inventory as one prompt: the table has a row per entry, and the lint of
/// legacy names the folded escalations the audit calls defects; recommended folds none.
#[test]
fn the_inventory_compares_with_each_policys_findings() {
    let sandbox = Sandbox::new();
    let run = sandbox.run(&[
        "placement",
        &fixture("placement/inventory.json"),
        "--compare",
        "legacy",
        "recommended",
        "--json",
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let doc = run.json();
    assert_eq!(doc["entries"].as_array().unwrap().len(), 30);
    let folded = |policy: &str| -> Vec<String> {
        doc["findings"][policy]
            .as_array()
            .unwrap()
            .iter()
            .filter(|f| f["rule"] == "escalation-in-system-fold")
            .map(|f| f["entry"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(
        folded("legacy"),
        [
            "recoveryTicket",
            "remainingDelta",
            "groundingFeedback",
            "rejectionFeedback"
        ]
    );
    assert!(folded("recommended").is_empty());
    let rules = |policy: &str| -> Vec<String> {
        doc["findings"][policy]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| {
                format!(
                    "{} {}",
                    f["rule"].as_str().unwrap(),
                    f["entry"].as_str().unwrap()
                )
            })
            .collect()
    };
    // The audit's "keep, flag cache" and text a person wrote folded into the prefix.
    for policy in ["legacy", "recommended"] {
        let rules = rules(policy);
        assert!(rules.contains(&"mutable-in-cached-prefix clarificationAnswer".to_owned()));
        assert!(rules.contains(&"untrusted-in-system-fold clarificationAnswer".to_owned()));
    }
    assert!(rules("legacy").contains(&"mutable-in-cached-prefix remainingDelta".to_owned()));
    assert!(rules("legacy").contains(&"untrusted-in-system-fold rejectionFeedback".to_owned()));
    // The human table names both policies on every entry.
    let text = sandbox.run(&[
        "placement",
        &fixture("placement/inventory.json"),
        "--compare",
        "legacy",
        "recommended",
    ]);
    assert_eq!(text.code, 0, "{}", text.stderr);
    assert!(
        text.stdout
            .contains("recoveryTicket (recoveryTicket, L1/system)")
    );
    assert!(
        text.stdout
            .contains("leads the trailing block under `## Recovery`")
    );
}

fn rendered(sandbox: &Sandbox, policy: &str) -> Value {
    let run = sandbox.run(&[
        "placement",
        &fixture("placement/five-mandates.json"),
        "--policy",
        policy,
        "--lint",
        "--json",
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    run.json()
}

fn findings(doc: &Value, rule: &str) -> Vec<Value> {
    doc["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["rule"] == rule)
        .cloned()
        .collect()
}

fn last_message(doc: &Value) -> String {
    let messages = doc["messages"].as_array().unwrap();
    messages.last().unwrap()["content"]
        .as_str()
        .unwrap()
        .to_owned()
}

/// Five escalations in one prompt (a recovery stage on a retry with an unmet delta).
#[test]
fn five_stacked_mandates_are_joined_by_legacy_and_one_block_under_recommended() {
    let sandbox = Sandbox::new();
    let text = |source: &str| -> String {
        let doc: Value = serde_json::from_str(
            &std::fs::read_to_string(fixture("placement/five-mandates.json")).unwrap(),
        )
        .unwrap();
        doc["entries"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["sourceType"] == source)
            .unwrap()["text"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    let [recovery, retry, grounding, rejection, delta] = [
        "recoveryTicket",
        "retryFeedback",
        "groundingFeedback",
        "rejectionFeedback",
        "remainingDelta",
    ]
    .map(text);

    // legacy, as audited: four joined into the system prefix, retryFeedback trailing.
    let legacy = rendered(&sandbox, "legacy");
    let system = legacy["messages"][0]["content"].as_str().unwrap();
    assert!(
        system.ends_with(&format!(
            "{recovery}\n\n{grounding}\n\n{delta}\n\n{rejection}"
        )),
        "{system}"
    );
    assert_eq!(last_message(&legacy), retry);
    assert_eq!(findings(&legacy, "escalation-in-system-fold").len(), 4);

    // The audit's recommendation 1 without 2 (every escalation a mandate, matches joined):
    // five stacked mandates, and the lint says so.
    let joined = rendered(&sandbox, &fixture("placement/policies/five-joined.json"));
    assert_eq!(
        last_message(&joined),
        [recovery.as_str(), &retry, &grounding, &rejection, &delta].join("\n\n")
    );
    let stacked = findings(&joined, "stacked-mandates");
    assert_eq!(stacked.len(), 1, "{joined}");
    assert!(
        stacked[0]["message"]
            .as_str()
            .unwrap()
            .starts_with("5 mandates stacked")
    );

    // recommended: one block, led by recoveryTicket, remainingDelta appended.
    let recommended = rendered(&sandbox, "recommended");
    let block = last_message(&recommended);
    assert_eq!(block, format!("## Recovery\n{recovery}\n\n{delta}"));
    assert_eq!(block.matches("## ").count(), 1);
    assert!(findings(&recommended, "stacked-mandates").is_empty());
    assert!(findings(&recommended, "escalation-in-system-fold").is_empty());
    let lower: Vec<&str> = recommended["placements"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["rule"] == "inline:lower-mandate")
        .map(|p| p["source_type"].as_str().unwrap())
        .collect();
    assert_eq!(
        lower,
        ["retryFeedback", "groundingFeedback", "rejectionFeedback"]
    );
}

/// `remainingDelta` changes every turn: legacy breaks the cached prefix each turn after the
/// first, naming the entry; recommended never does.
#[test]
fn a_delta_that_changes_every_turn_breaks_only_the_legacy_prefix() {
    let sandbox = Sandbox::new();
    let turns = fixture("placement/turns.json");
    for (policy, breaks) in [("legacy", 3), ("recommended", 0)] {
        let run = sandbox.run(&["placement", &turns, "--policy", policy, "--lint", "--json"]);
        assert_eq!(run.code, 0, "{}", run.stderr);
        let doc = run.json();
        assert_eq!(doc["breaks"], breaks, "{policy}");
        let turns = doc["turns"].as_array().unwrap();
        assert_eq!(turns.len(), 4);
        assert_eq!(turns[0]["prefix"], "first");
        for turn in &turns[1..] {
            let hashes_equal = turn["system_hash"] == turns[0]["system_hash"];
            if policy == "legacy" {
                assert_eq!(turn["prefix"], "broken");
                assert_eq!(turn["changed"], json!(["remainingDelta"]));
                assert!(!hashes_equal);
                assert!(
                    turn["findings"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .any(|f| f["rule"] == "mutable-in-cached-prefix"
                            && f["entry"] == "remainingDelta")
                );
            } else {
                assert_eq!(turn["prefix"], "kept");
                assert!(hashes_equal);
            }
        }
    }
    let compared = sandbox.run(&[
        "placement",
        &turns,
        "--compare",
        "legacy",
        "recommended",
        "--json",
    ]);
    assert_eq!(compared.code, 0, "{}", compared.stderr);
    assert_eq!(
        compared.json()["breaks"],
        json!({"legacy": 3, "recommended": 0})
    );
}

#[rstest]
#[case::layer(
    r#"{"entries": [{"sourceType": "a", "layer": "L1", "role": "user", "ordinal": 1, "text": ""}, {"sourceType": "b", "layer": "L1", "role": "user", "ordinal": 2, "text": ""}, {"sourceType": "c", "layer": "L5", "role": "user", "ordinal": 3, "text": ""}]}"#,
    "entries[2].layer"
)]
#[case::role(
    r#"{"entries": [{"sourceType": "a", "layer": "L1", "role": "operator", "ordinal": 1, "text": ""}]}"#,
    "entries[0].role"
)]
#[case::missing_text(
    r#"{"turns": [{"entries": [{"sourceType": "a", "layer": "L1", "role": "user", "ordinal": 1}]}]}"#,
    "turns[0].entries[0].text: missing"
)]
#[case::not_json(r#"{"entries": ["#, "the entries is not JSON")]
fn a_malformed_entries_file_names_the_entry_and_field(#[case] text: &str, #[case] named: &str) {
    let sandbox = Sandbox::new();
    let file = sandbox.write("bad.json", text);
    let run = sandbox.run(&["placement", &file]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(run.stderr.contains(named), "{}", run.stderr);
    let json = sandbox.run(&["placement", &file, "--json"]);
    assert_eq!(json.code, 1);
    json.assert_failure_stdout();
}

#[rstest]
#[case::rank("mandates", json!([{"sourceType": "a", "rank": 0, "header": "## A"}, {"sourceType": "b", "rank": 300, "header": "## B"}]), "mandates[1].rank")]
#[case::role("reRoles", json!([{"sourceType": "a", "role": "boss"}]), "reRoles[0].role")]
#[case::consolidation("consolidation", json!("some"), "consolidation")]
#[case::unknown("folds", json!({}), "folds: unknown field")]
fn a_malformed_policy_file_names_the_field(
    #[case] field: &str,
    #[case] value: Value,
    #[case] named: &str,
) {
    let sandbox = Sandbox::new();
    let mut policy: Value = serde_json::from_str(
        &std::fs::read_to_string(fixture("../core/policies/recommended.json")).unwrap(),
    )
    .unwrap();
    policy["name"] = json!("mine");
    policy[field] = value;
    let file = sandbox.write("policy.json", &policy.to_string());
    for args in [
        vec![
            "placement",
            &fixture("placement/inventory.json"),
            "--policy",
            &file,
        ],
        vec!["placement", "--show-policy", &file],
        vec![
            "run",
            &fixture("loadouts/build-loop.json"),
            "--task",
            "greet",
            "--agent",
            "scripted:none.jsonl",
            "--policy",
            &file,
        ],
    ] {
        let run = sandbox.run(&args);
        assert_eq!(run.code, 1, "{args:?}: {}", run.stderr);
        assert!(run.stderr.contains(named), "{}", run.stderr);
    }
    assert!(
        !sandbox.db().exists(),
        "a bad policy is refused before a database is made"
    );
}

#[test]
fn the_built_in_policies_print_as_shipped() {
    let sandbox = Sandbox::new();
    for name in ["legacy", "recommended"] {
        let run = sandbox.run(&["placement", "--show-policy", name]);
        assert_eq!(run.code, 0, "{}", run.stderr);
        let shipped =
            std::fs::read_to_string(fixture(&format!("../core/policies/{name}.json"))).unwrap();
        assert_eq!(run.stdout.trim_end(), shipped.trim_end());
        // A printed policy is a policy file.
        let file = sandbox.write(&format!("{name}.json"), &run.stdout);
        let again = sandbox.run(&[
            "placement",
            &fixture("placement/five-mandates.json"),
            "--policy",
            &file,
            "--json",
        ]);
        let by_name = sandbox.run(&[
            "placement",
            &fixture("placement/five-mandates.json"),
            "--policy",
            name,
            "--json",
        ]);
        assert_eq!(again.json()["hash"], by_name.json()["hash"]);
    }
}

/// A cast run with a policy file records the document: it re-renders, verifies and prints
/// its prompts with the file gone. A file restating a built-in policy is recorded by name; one
/// taking a built-in name for other rules is refused.
#[test]
fn run_with_a_policy_file_keeps_the_policy_in_the_log() {
    let sandbox = Sandbox::new();
    let mut policy: Value = serde_json::from_str(
        &std::fs::read_to_string(fixture("../core/policies/recommended.json")).unwrap(),
    )
    .unwrap();
    policy["name"] = json!("wide-fold");
    policy["fold"]["layers"] = json!(["L0", "L1"]);
    let file = sandbox.write("wide.json", &policy.to_string());
    let mut cmd = sandbox.build_loop("wide", &crate::common::scripted("build-loop.jsonl"));
    cmd.args(["--policy", &file]);
    let run = sandbox.finish(&mut cmd);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.json()["status"], "completed", "{}", run.stdout);
    std::fs::remove_file(&file).unwrap();

    let verify = sandbox.run(&["verify", "wide", "--json"]);
    assert_eq!(verify.code, 0, "{}", verify.stdout);
    let audit = sandbox.run(&["audit", "wide", "--json"]);
    assert_eq!(audit.code, 0, "{}", audit.stderr);
    let placements = audit.json()["prompts"][0]["placements"].clone();
    let intent = placements
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["source_type"] == "initialIntent")
        .unwrap()
        .clone();
    assert_eq!(intent["destination"], "system_fold");
    assert_eq!(intent["rule"], "fold:l0-l1-or-system");
    let socket = audit.json()["prompts"][0]["socket"]
        .as_str()
        .unwrap()
        .to_owned();
    let prompt = sandbox.run(&["prompt", "wide", &socket, "--json"]);
    assert_eq!(prompt.code, 0, "{}", prompt.stderr);
    assert!(
        prompt.json()["messages"][0]["content"]
            .as_str()
            .unwrap()
            .contains("Cast request:")
    );
    let exported = sandbox.path("wide.jsonl");
    let export = sandbox.run(&["export", "wide", "-o", exported.to_str().unwrap()]);
    assert_eq!(export.code, 0, "{}", export.stderr);
    let first = std::fs::read_to_string(&exported).unwrap();
    assert!(first.contains("\"policy\":\"wide-fold\""), "{first}");
    assert!(first.contains("\"policy_document\""), "{first}");

    // The shipped legacy document, as a file: recorded by name, with no document.
    let legacy = sandbox.write(
        "legacy-copy.json",
        &std::fs::read_to_string(fixture("../core/policies/legacy.json")).unwrap(),
    );
    let mut cmd = sandbox.build_loop("plain", &crate::common::scripted("build-loop.jsonl"));
    cmd.args(["--policy", &legacy]);
    assert_eq!(sandbox.finish(&mut cmd).code, 0);
    let exported = sandbox.path("plain.jsonl");
    sandbox.run(&["export", "plain", "-o", exported.to_str().unwrap()]);
    let first = std::fs::read_to_string(&exported).unwrap();
    assert!(first.contains("\"policy\":\"legacy\""));
    assert!(!first.contains("policy_document"));

    // A header the fence does not know: fine for `placement`, refused for a cast.
    let mut unfenced = policy.clone();
    unfenced["name"] = json!("loud");
    unfenced["mandates"][0]["header"] = json!("## URGENT");
    let loud = sandbox.write("loud.json", &unfenced.to_string());
    let shown = sandbox.run(&[
        "placement",
        &fixture("placement/five-mandates.json"),
        "--policy",
        &loud,
    ]);
    assert_eq!(shown.code, 0, "{}", shown.stderr);
    assert!(shown.stdout.contains("## URGENT"));
    let mut cmd = sandbox.build_loop("loud", &crate::common::scripted("build-loop.jsonl"));
    cmd.args(["--policy", &loud]);
    let refused = sandbox.finish(&mut cmd);
    assert_eq!(refused.code, 1, "{}", refused.stderr);
    assert!(
        refused.stderr.contains("mandates[0].header"),
        "{}",
        refused.stderr
    );

    // legacy's name over other rules.
    policy["name"] = json!("legacy");
    let posing = sandbox.write("posing.json", &policy.to_string());
    let mut cmd = sandbox.build_loop("posing", &crate::common::scripted("build-loop.jsonl"));
    cmd.args(["--policy", &posing]);
    let refused = sandbox.finish(&mut cmd);
    assert_eq!(refused.code, 1, "{}", refused.stderr);
    assert!(refused.stderr.contains("name"), "{}", refused.stderr);
}
