//! Engage casts in the log: a database written before the engagement context had its own crate
//! opens, verifies, shows and exports byte for byte, and `verify` re-decides engage casts, so a
//! decision rewritten with a consistent chain is caught.

use castlog_core::id::{CastId, Digest, Seq};
use castlog_events::Recorded;
use serde_json::Value;

use crate::common::{Sandbox, fixture, fixture_lines};

/// The sandbox's database replaced by the checked-in engage database (a dry run, a post, and
/// the destination's claims ledger).
fn old_database() -> Sandbox {
    let sandbox = Sandbox::new();
    std::fs::copy(fixture("casts/engage.db"), sandbox.db()).unwrap();
    sandbox
}

#[test]
fn an_engage_database_written_by_an_older_build_verifies_shows_and_exports_the_same() {
    let sandbox = old_database();
    let verify = sandbox.run(&["verify", "--json"]);
    assert_eq!(verify.code, 0, "{}", verify.stdout);
    assert_eq!(verify.json()["casts"], 3);
    assert_eq!(verify.json()["problems"], serde_json::json!([]));
    let shown = sandbox.run(&["show", "engage-post"]);
    assert_eq!(shown.code, 0, "{}", shown.stderr);
    let pinned = std::fs::read_to_string(fixture("casts/engage-post.show.txt")).unwrap();
    assert_eq!(shown.stdout, pinned);
    let shown = sandbox.run(&["show", "engage-post", "--json"]);
    let pinned = std::fs::read_to_string(fixture("casts/engage-post.show.json")).unwrap();
    assert_eq!(shown.stdout, pinned);
    for cast in ["engage-dry", "engage-post"] {
        let out = sandbox.path(&format!("{cast}.jsonl"));
        let export = sandbox.run(&["export", cast, "-o", out.to_str().unwrap()]);
        assert_eq!(export.code, 0, "{}", export.stderr);
        let pinned = std::fs::read(fixture(&format!("casts/{cast}.jsonl"))).unwrap();
        assert_eq!(std::fs::read(&out).unwrap(), pinned, "{cast}");
        let replay = sandbox.run(&["replay", cast, "--json"]);
        assert_eq!(replay.code, 0, "{}", replay.stderr);
        assert_eq!(
            replay.json()["events"],
            if cast == "engage-dry" { 17 } else { 18 }
        );
    }
    // The claims ledger still reads the runs' claims.
    let claims = sandbox.run(&["claims", "--json"]);
    let statuses: Vec<Value> = claims.json()["claims"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["status"].clone())
        .collect();
    assert_eq!(statuses, ["dry_run", "staged"]);
}

#[test]
fn an_exported_engage_cast_imports_into_a_new_database_and_re_decides() {
    let sandbox = Sandbox::new();
    let import = sandbox.run(&["import", &fixture("casts/engage-dry.jsonl")]);
    assert_eq!(import.code, 0, "{}", import.stderr);
    let verify = sandbox.run(&["verify", "engage-dry", "--json"]);
    assert_eq!(verify.code, 0, "{}", verify.stdout);
    assert_eq!(verify.json()["events"], 17);
}

/// `lines` (an export) with `edit` applied to the payload of the event at `seq`, every hash
/// from there on recomputed and the head moved: a chain that verifies link by link.
fn rewritten(lines: &[String], seq: u64, edit: (&str, &str)) -> String {
    let header: Value = serde_json::from_str(&lines[0]).unwrap();
    let cast = CastId::new(header["cast"].as_str().unwrap());
    let mut prev = Digest::ZERO;
    let mut out = Vec::new();
    for line in &lines[1..] {
        let event: Value = serde_json::from_str(line).unwrap();
        let Some(at) = event.get("seq").and_then(Value::as_u64) else {
            out.push(line.clone());
            continue;
        };
        // The stored bytes are the raw JSON from `"payload":` to the line's closing brace.
        let (fields, raw) = line.split_once("\"payload\":").unwrap();
        let mut payload = raw[..raw.len() - 1].to_owned();
        if at == seq {
            assert!(payload.contains(edit.0), "{payload}");
            payload = payload.replace(edit.0, edit.1);
        }
        let record = Recorded {
            cast: cast.clone(),
            seq: Seq(at),
            at_ms: event["at_ms"].as_u64().unwrap(),
            kind: event["kind"].as_str().unwrap().to_owned(),
            v: 1,
            payload: payload.clone().into_bytes(),
            prev,
            hash: Digest::ZERO,
        };
        let hash = record.computed_hash();
        let fields = fields
            .replace(event["prev"].as_str().unwrap(), &prev.to_hex())
            .replace(event["hash"].as_str().unwrap(), &hash.to_hex());
        out.push(format!("{fields}\"payload\":{payload}}}"));
        prev = hash;
    }
    let mut text = lines[0].replace(header["head_hash"].as_str().unwrap(), &prev.to_hex());
    for line in out {
        text.push('\n');
        text.push_str(&line);
    }
    text.push('\n');
    text
}

/// The first problem `verify` reports for the engage dry run rewritten by `edit` at `seq`.
fn verify_rewritten(seq: u64, edit: (&str, &str)) -> Value {
    let sandbox = Sandbox::new();
    let lines = fixture_lines("casts/engage-dry.jsonl");
    let path = sandbox.write("rewritten.jsonl", &rewritten(&lines, seq, edit));
    let import = sandbox.run(&["import", &path]);
    assert_eq!(
        import.code, 0,
        "the rewritten chain is consistent: {}",
        import.stderr
    );
    let verify = sandbox.run(&["verify", "--json"]);
    assert_eq!(verify.code, 3, "{}", verify.stdout);
    let problems = verify.json()["problems"].as_array().unwrap().clone();
    assert_eq!(problems.len(), 1, "{problems:?}");
    problems[0].clone()
}

/// The rewriting itself changes nothing the chain or the machine would notice.
#[test]
fn an_engage_cast_rewritten_without_a_change_re_decides_ok() {
    let sandbox = Sandbox::new();
    let lines = fixture_lines("casts/engage-dry.jsonl");
    let same = rewritten(&lines, 17, ("\"timed\"", "\"timed\""));
    assert_eq!(same, lines.join("\n") + "\n");
    let path = sandbox.write("same.jsonl", &same);
    assert_eq!(sandbox.run(&["import", &path]).code, 0);
    let verify = sandbox.run(&["verify", "--json"]);
    assert_eq!(verify.code, 0, "{}", verify.stdout);
}

/// A run's end is worked out by the engage machine: a recorded outcome it would not decide is
/// a divergence at that seq, though every hash links.
#[test]
fn verify_re_decides_an_engage_cast_and_names_a_rewritten_outcome() {
    let problem = verify_rewritten(17, ("\"outcome\":\"timed\"", "\"outcome\":\"personal\""));
    assert_eq!(problem["cast"], "engage-dry");
    assert_eq!(problem["seq"], 17);
    assert_eq!(problem["kind"], "divergence");
    let message = problem["message"].as_str().unwrap();
    assert!(
        message.contains(r#"produces engagement_finished {"outcome":"timed","refused":"dry_run"}"#),
        "{message}"
    );
}

/// A draft is accepted only after a faithful verdict: a verdict rewritten to unfaithful makes
/// the recorded acceptance after it a step the machine refuses.
#[test]
fn verify_refuses_an_acceptance_without_a_faithful_verdict() {
    let problem = verify_rewritten(13, ("\"faithful\":true", "\"faithful\":false"));
    assert_eq!(problem["seq"], 14);
    assert_eq!(problem["kind"], "divergence");
    let message = problem["message"].as_str().unwrap();
    assert!(message.contains("was not judged faithful"), "{message}");
}

/// The ranking is scored again from the candidates' records: a rewritten score diverges.
#[test]
fn verify_scores_the_ranking_again() {
    let problem = verify_rewritten(11, ("\"score\":0.4", "\"score\":0.5"));
    assert_eq!(problem["seq"], 11);
    assert_eq!(problem["kind"], "divergence");
}
