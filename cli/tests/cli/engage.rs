//! `castlog engage` end to end: the fixture's dry run, two runs racing for one day, and bad
//! input (malformed INPUT.json, a hanging or babbling fetcher, a failing sender).

use std::process::Stdio;

use serde_json::{Value, json};

use crate::common::{Run, Sandbox, fixture};

pub fn engage_fixture() -> Value {
    serde_json::from_str(&std::fs::read_to_string(fixture("engage/input.json")).unwrap()).unwrap()
}

pub fn roles() -> Vec<String> {
    vec![
        "--qualifier".into(),
        format!("scripted:{}", fixture("engage/qualifier.jsonl")),
        "--drafter".into(),
        format!("scripted:{}", fixture("engage/drafter.jsonl")),
        "--judge".into(),
        format!("scripted:{}", fixture("engage/judge.jsonl")),
        "--fetcher".into(),
        format!("file:{}", fixture("engage/sources")),
    ]
}

/// Runs `engage --json` with the fixture's roles; see [`engage_args`].
pub fn engage(sandbox: &Sandbox, input: &str, extra: &[&str]) -> Run {
    let mut args = engage_args(input, extra);
    args.push("--json".into());
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    sandbox.run(&refs)
}

/// The arguments of `engage` with the fixture's roles: a role flag in `extra` (`--drafter
/// SPEC`) replaces the fixture's, every other flag is passed on.
fn engage_args(input: &str, extra: &[&str]) -> Vec<String> {
    let mut roles = roles();
    let mut rest: Vec<String> = Vec::new();
    let mut flags = extra.iter();
    while let Some(flag) = flags.next() {
        let role = roles.iter().step_by(2).position(|r| r == flag);
        match (role, flags.clone().next()) {
            (Some(at), Some(spec)) => {
                roles[2 * at + 1] = (*spec).to_owned();
                flags.next();
            }
            _ => rest.push((*flag).to_owned()),
        }
    }
    let mut args: Vec<String> = vec!["engage".into(), input.into()];
    args.extend(roles);
    args.extend(rest);
    args
}

fn group(report: &Value, stage: &str, reason: &str) -> u64 {
    report["rejections"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["stage"] == stage && g["reason"] == reason)
        .map_or(0, |g| g["count"].as_u64().unwrap())
}

pub fn claims(sandbox: &Sandbox) -> Vec<Value> {
    let run = sandbox.run(&["claims", "--json"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    run.json()["claims"].as_array().unwrap().clone()
}

#[test]
fn the_fixture_dry_run_reports_a_question_and_sends_nothing() {
    let sandbox = Sandbox::new();
    let run = engage(
        &sandbox,
        &fixture("engage/input.json"),
        &["--sender", "file:outbox"],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    let report = run.json();
    assert_eq!(report["outcome"], "timed");
    assert_eq!(report["refused"], "dry_run");
    assert_eq!(
        report["question"],
        "How has the ss31 been treating your sleep so far?"
    );
    assert_eq!(
        report["quote"],
        "Adding ss31 (5mg) for 4 weeks, will report back on sleep."
    );
    assert_eq!(report["considered"], 6);
    assert_eq!(report["live_verified"], true);
    assert_eq!(report["send"], "dry_run");
    assert_eq!(group(&report, "collect", "not_authored_by_actor"), 1);
    assert_eq!(group(&report, "collect", "channel_not_sourceable"), 1);
    assert_eq!(group(&report, "collect", "duplicate_source_message_id"), 1);
    assert_eq!(group(&report, "verify", "no_attested_source"), 1);
    let example = &report["rejections"][0]["examples"][0];
    assert!(example["candidate"].is_string(), "{report}");
    assert!(
        !sandbox.path("outbox").exists(),
        "a dry run reached the sender"
    );
    let all = claims(&sandbox);
    assert_eq!(all.len(), 1);
    assert_eq!(all[0]["status"], "dry_run");
    // The text report says what happened.
    let mut args: Vec<String> = vec!["engage".into(), fixture("engage/input.json")];
    args.extend(roles());
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let text = sandbox.run(&refs);
    assert_eq!(text.code, 0, "{}", text.stderr);
    assert!(text.stdout.contains("DRY RUN (no messages sent)"));
    assert!(text.stdout.contains("[collect] channel_not_sourceable: 1"));
    assert_eq!(sandbox.run(&["verify", "--json"]).json()["ok"], true);
}

/// The question drafted for the second member of [`two_members`].
const SECOND_QUESTION: &str = "Did the glycinate switch settle the cramps?";

/// The fixture's input split in two, one member each (t1, then t2): two runs that share only
/// the destination and the day.
fn two_members(sandbox: &Sandbox) -> (String, String) {
    let [a, b] = [0, 1].map(|i| {
        let mut input = engage_fixture();
        input["results"] = json!([input["results"][i].clone()]);
        sandbox.write(&format!("member-{i}.json"), &input.to_string())
    });
    (a, b)
}

/// Two runs for different members race for the same destination and day with a slow sender:
/// exactly one is staged, the other is refused by the day claim, and the sender runs once.
#[test]
fn two_runs_racing_for_one_day_get_one_winner() {
    let sandbox = Sandbox::new();
    let (a, b) = two_members(&sandbox);
    // Each drafter waits at a gate until both runs are there, so that they reach the poster
    // together.
    let gate = sandbox.gate();
    let drafter = |name: &str, question: &str| {
        let script = sandbox.write(
            name,
            &format!(
                "cat > /dev/null\n{}echo '{}'\n",
                gate.wait(),
                json!({ "question": question })
            ),
        );
        format!("cmd:sh {script}")
    };
    let (calls, sender) = sandbox.counting_sender("sleep 1\necho \"msg-$CASTLOG_CLAIM\"");
    let spawn = |input: &str, drafter: &str| {
        let mut roles = roles();
        roles[3] = drafter.to_owned();
        sandbox
            .command_on(&sandbox.db())
            .arg("engage")
            .arg(input)
            .args(&roles)
            .args(["--post", "--sender", &sender, "--json"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let one = spawn(
        &a,
        &drafter(
            "drafter-a.sh",
            "How has the ss31 been treating your sleep so far?",
        ),
    );
    let two = spawn(&b, &drafter("drafter-b.sh", SECOND_QUESTION));
    gate.open_when(&sandbox, 2);
    let one = one.wait_with_output().unwrap();
    let two = two.wait_with_output().unwrap();
    assert!(
        one.status.success(),
        "{}",
        String::from_utf8_lossy(&one.stderr)
    );
    assert!(
        two.status.success(),
        "{}",
        String::from_utf8_lossy(&two.stderr)
    );
    let all = claims(&sandbox);
    let real: Vec<&Value> = all.iter().filter(|c| c["dry_run"] == false).collect();
    let staged: Vec<&&Value> = real.iter().filter(|c| c["status"] == "staged").collect();
    let refused: Vec<&&Value> = real.iter().filter(|c| c["status"] == "refused").collect();
    assert_eq!(staged.len(), 1, "{all:?}");
    assert_eq!(refused.len(), 1, "{all:?}");
    assert!(
        refused[0]["reason"]
            .as_str()
            .unwrap()
            .starts_with("day_already_claimed"),
        "{all:?}"
    );
    assert_eq!(std::fs::read_to_string(&calls).unwrap().lines().count(), 1);
    let reports: Vec<Value> = [one, two]
        .iter()
        .map(|o| serde_json::from_slice(&o.stdout).unwrap())
        .collect();
    assert_eq!(reports.iter().filter(|r| r["send"] == "staged").count(), 1);
    assert_eq!(sandbox.run(&["verify", "--json"]).json()["ok"], true);
}

#[test]
fn malformed_input_and_missing_roles_are_named() {
    let sandbox = Sandbox::new();
    let broken = sandbox.write("broken.json", "{\"results\": [\n  {\"text\": }\n]}");
    let run = engage(&sandbox, &broken, &[]);
    assert_eq!(run.code, 1);
    assert!(
        run.stderr
            .contains("broken.json: $: not valid JSON (line 2"),
        "{}",
        run.stderr
    );
    let granting = sandbox.write(
        "granting.json",
        r#"{"results": [], "allowlist": {}, "posting_enabled": true}"#,
    );
    let run = engage(&sandbox, &granting, &[]);
    assert_eq!(run.code, 1);
    assert!(run.stderr.contains("posting_enabled"), "{}", run.stderr);
    let run = sandbox.run(&["engage", &fixture("engage/input.json")]);
    assert_eq!(run.code, 1);
    assert!(run.stderr.contains("--qualifier"), "{}", run.stderr);
    let run = engage(&sandbox, "missing.json", &[]);
    assert_eq!(run.code, 1);
    assert!(
        run.stderr.contains("cannot read missing.json"),
        "{}",
        run.stderr
    );
    let run = engage(&sandbox, &fixture("engage/input.json"), &["--post"]);
    assert_eq!(run.code, 1);
    assert!(
        run.stderr.contains("--post needs --sender"),
        "{}",
        run.stderr
    );
}

#[test]
fn a_hanging_or_babbling_fetcher_is_a_named_live_source_rejection() {
    let sandbox = Sandbox::new();
    let mut input = engage_fixture();
    input["settings"]["fetch_timeout_ms"] = json!(300);
    let path = sandbox.write("input.json", &input.to_string());
    // A script's `sleep` outlives the killed shell and holds its stdout: it is stopped too.
    sandbox.write("hang.sh", "#!/bin/sh\nsleep 30\n");
    for (fetcher, reason) in [
        ("cmd:sleep 30", "source_unreachable"),
        ("cmd:sh hang.sh", "source_unreachable"),
        ("cmd:echo garbage", "source_response_unreadable"),
    ] {
        let started = std::time::Instant::now();
        let run = engage(&sandbox, &path, &["--fetcher", fetcher]);
        let took = started.elapsed();
        assert!(
            took < std::time::Duration::from_secs(20),
            "{fetcher} took {took:?}"
        );
        assert_eq!(run.code, 0, "{}", run.stderr);
        let report = run.json();
        assert!(
            group(&report, "live_source", reason) >= 1,
            "{fetcher}: {report}"
        );
        assert_eq!(report["live_verified"], false);
        assert_eq!(report["send"], "none");
    }
    assert_eq!(sandbox.run(&["verify", "--json"]).json()["ok"], true);
}

#[test]
fn a_failing_sender_keeps_the_report_and_a_pending_claim() {
    let sandbox = Sandbox::new();
    let run = engage(
        &sandbox,
        &fixture("engage/input.json"),
        &["--post", "--sender", "cmd:false"],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    let report = run.json();
    assert_eq!(report["refused"], "send_outcome_unknown");
    assert_eq!(report["send"], "unknown");
    assert_eq!(report["sent"], true);
    assert_eq!(
        report["question"],
        "How has the ss31 been treating your sleep so far?"
    );
    let pending: Vec<Value> = claims(&sandbox)
        .into_iter()
        .filter(|c| c["status"] == "pending")
        .collect();
    assert_eq!(pending.len(), 1);
    let claim = pending[0]["claim"].as_str().unwrap();
    // The engage cast is not a machine cast: the resolution is appended to its log directly.
    let resolved = sandbox.run(&["claims", "resolve", claim, "--abandoned", "--json"]);
    assert_eq!(resolved.code, 0, "{}", resolved.stderr);
    assert_eq!(resolved.json()["status"], "abandoned");
    assert!(claims(&sandbox).iter().all(|c| c["status"] != "pending"));
    let again = sandbox.run(&["claims", "resolve", claim, "--staged", "m-1"]);
    assert_eq!(again.code, 1);
    assert!(again.stderr.contains("is abandoned"), "{}", again.stderr);
    assert_eq!(sandbox.run(&["verify", "--json"]).json()["ok"], true);
}

/// Claim before send: when the sender runs, its claim is already committed to the database
/// as pending (another process reading the same file sees it).
#[test]
fn the_claim_is_durable_and_pending_when_the_sender_runs() {
    let sandbox = Sandbox::new();
    let (witness, sender) = sandbox.witnessing_sender();
    let run = engage(
        &sandbox,
        &fixture("engage/input.json"),
        &["--post", "--sender", &sender],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    let claim = witness.assert_claimed_before_sent();
    let report = run.json();
    assert_eq!(report["send"], "staged");
    assert_eq!(report["claim"]["message_id"], format!("msg-{claim}"));
}

/// A person's decline (of a staged post) or abandon (of a pending one) frees the claim's day:
/// another member's run the same day posts to the same destination.
#[test]
fn a_declined_or_abandoned_claim_frees_its_day() {
    for (sender, resolution) in [("file:outbox", "declined"), ("cmd:false", "abandoned")] {
        let sandbox = Sandbox::new();
        let (a, b) = two_members(&sandbox);
        let first = engage(&sandbox, &a, &["--post", "--sender", sender]);
        assert_eq!(first.code, 0, "{}", first.stderr);
        let claim = first.json()["claim"]["claim"].as_str().unwrap().to_owned();
        let flag = format!("--{resolution}");
        let resolved = sandbox.run(&["claims", "resolve", &claim, &flag, "--json"]);
        assert_eq!(resolved.code, 0, "{}", resolved.stderr);
        assert_eq!(resolved.json()["status"], resolution);

        let drafter = sandbox.write(
            "drafter-b.jsonl",
            &format!(
                "{}\n",
                json!({"reply": json!({"question": SECOND_QUESTION}).to_string()})
            ),
        );
        let second = engage(
            &sandbox,
            &b,
            &[
                "--drafter",
                &format!("scripted:{drafter}"),
                "--post",
                "--sender",
                "file:outbox",
            ],
        );
        assert_eq!(second.code, 0, "{}", second.stderr);
        let report = second.json();
        assert_eq!(report["send"], "staged", "{resolution}: {report}");
        assert_eq!(
            report["claim"]["destination"],
            first.json()["claim"]["destination"]
        );
    }
}

/// An allowlist that names no single post channel (none, or several and not the source's)
/// leaves the poster no destination: the run is refused `no_destination` and, even with
/// `--post`, no sender runs and no claim holds a day.
#[test]
fn without_a_single_post_channel_the_run_is_refused_no_destination() {
    for channels in [json!([]), json!(["998", "999"])] {
        let sandbox = Sandbox::new();
        let mut input = engage_fixture();
        input["allowlist"]["post_channel_ids"] = channels.clone();
        let path = sandbox.write("input.json", &input.to_string());
        let (calls, sender) = sandbox.counting_sender("echo m-1");
        let run = engage(&sandbox, &path, &["--post", "--sender", &sender]);
        assert_eq!(run.code, 0, "{}", run.stderr);
        let report = run.json();
        assert!(
            report["refused"]
                .as_str()
                .unwrap()
                .starts_with("no_destination"),
            "{channels}: {report}"
        );
        assert!(!report["question"].as_str().unwrap().is_empty(), "{report}");
        assert_eq!(report["sent"], false);
        assert!(!calls.exists(), "{channels}: the sender ran");
        for claim in claims(&sandbox) {
            assert_eq!(claim["status"], "refused", "{claim}");
        }
    }
}

fn rejection_examples(report: &Value, stage: &str, reason: &str) -> Vec<Value> {
    report["rejections"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["stage"] == stage && g["reason"] == reason)
        .map_or_else(Vec::new, |g| g["examples"].as_array().unwrap().clone())
}

/// A person records that the member ignored a sent follow-up: `claims` shows it, and the next
/// run names the reused thread `thread_previously_ignored` (answered: `thread_already_used`).
#[test]
fn an_ignored_post_makes_its_thread_previously_ignored() {
    for (flag, response, reason) in [
        ("--ignored", "ignored", "thread_previously_ignored"),
        ("--answered", "answered", "thread_already_used"),
    ] {
        let sandbox = Sandbox::new();
        let input = fixture("engage/input.json");
        let dry = engage(&sandbox, &input, &[]);
        assert_eq!(dry.code, 0, "{}", dry.stderr);
        let dry_claim = claims(&sandbox)[0]["claim"].as_str().unwrap().to_owned();
        // A dry run sent nothing: nobody can have answered or ignored it.
        let refused = sandbox.run(&["claims", "resolve", &dry_claim, flag]);
        assert_eq!(refused.code, 1);
        assert!(
            refused.stderr.contains("is dry_run") && refused.stderr.contains("went out"),
            "{}",
            refused.stderr
        );

        let sent = engage(&sandbox, &input, &["--post", "--sender", "file:outbox"]);
        assert_eq!(sent.code, 0, "{}", sent.stderr);
        assert_eq!(sent.json()["send"], "staged");
        let staged = claims(&sandbox)
            .into_iter()
            .find(|c| c["status"] == "staged")
            .unwrap();
        let claim = staged["claim"].as_str().unwrap();
        assert!(staged["response"].is_null());
        let recorded = sandbox.run(&["claims", "resolve", claim, flag, "--json"]);
        assert_eq!(recorded.code, 0, "{}", recorded.stderr);
        let out = recorded.json();
        assert_eq!(out["status"], "staged", "the status does not move");
        assert_eq!(out["response"], response);
        let listed = claims(&sandbox);
        let row = listed.iter().find(|c| c["claim"] == claim).unwrap();
        assert_eq!(
            (&row["status"], &row["response"]),
            (&json!("staged"), &json!(response))
        );
        let text = sandbox.run(&["claims"]);
        assert!(
            text.stdout.contains(&format!("({response})")),
            "{}",
            text.stdout
        );

        let again = engage(&sandbox, &input, &[]);
        assert_eq!(again.code, 0, "{}", again.stderr);
        let examples = rejection_examples(&again.json(), "history", reason);
        assert_eq!(examples.len(), 1, "{flag}: {}", again.stdout);
        assert_eq!(examples[0]["candidate"], "t1");
        assert_eq!(examples[0]["detail"], "posted 2026-06-10");
        assert_eq!(sandbox.run(&["verify", "--json"]).json()["ok"], true);
    }
}

/// Item 23: every send carries the reply reference, the guild and the member to mention. In
/// the rehearsal channel the reply cannot go in place; once posts may go to the source
/// channel it goes there, in place. The fields reach a `file:` sender (the envelope beside the
/// body) and a `webhook:` sender (the request body) alike.
#[test]
fn item_23_sends_carry_the_reply_reference_guild_and_mention() {
    let sandbox = Sandbox::new();
    let sent = engage(
        &sandbox,
        &fixture("engage/input.json"),
        &["--post", "--sender", "file:outbox"],
    );
    assert_eq!(sent.code, 0, "{}", sent.stderr);
    let claim = sent.json()["claim"]["claim"].as_str().unwrap().to_owned();
    let envelope: Value = serde_json::from_str(
        &std::fs::read_to_string(sandbox.path("outbox").join(format!("{claim}.json"))).unwrap(),
    )
    .unwrap();
    let question = "How has the ss31 been treating your sleep so far?";
    assert_eq!(
        envelope,
        json!({
            "claim": claim,
            "cast": envelope["cast"],
            "destination": "999",
            "body": question,
            "question": question,
            "reply_to_message_id": "1513195831296000001",
            "reply_to_channel_id": "111",
            "reply_to_guild_id": "1524917037191925871",
            "mention_actor_id": "actor:discord:42",
            "can_reply_in_place": false,
        })
    );

    // Posts may go to the source channel now, and the guild is configured.
    let mut input = engage_fixture();
    input["allowlist"]["post_channel_ids"] = json!(["999", "111"]);
    input["settings"]["guild_id"] = json!("777");
    let path = sandbox.write("in-place.json", &input.to_string());
    let other = Sandbox::new();
    let (url, request) = crate::common::webhook_once("w-1");
    let run = engage(
        &other,
        &path,
        &["--post", "--sender", &format!("webhook:{url}")],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    let report = run.json();
    assert_eq!(report["send"], "staged");
    assert_eq!(report["claim"]["message_id"], "w-1");
    let body = request.join().unwrap();
    assert_eq!(body["destination"], "111");
    assert_eq!(body["reply_to_channel_id"], "111");
    assert_eq!(body["can_reply_in_place"], true);
    assert_eq!(body["reply_to_guild_id"], "777");
    assert_eq!(body["reply_to_message_id"], "1513195831296000001");
    assert_eq!(body["mention_actor_id"], "actor:discord:42");

    let blank = sandbox.write(
        "blank-guild.json",
        &json!({"results": [], "allowlist": {}, "settings": {"guild_id": " "}}).to_string(),
    );
    let refused = engage(&sandbox, &blank, &[]);
    assert_eq!(refused.code, 1);
    assert!(
        refused.stderr.contains("settings.guild_id"),
        "{}",
        refused.stderr
    );
}

/// The judge is asked about the text that would be sent: a drafter's rendered body (which may
/// claim more than the question), not only the bare question.
#[test]
fn the_judge_sees_the_rendered_body_that_would_be_sent() {
    let sandbox = Sandbox::new();
    let body = "<@42> Great that ss31 cured your insomnia! How is the ss31 going?";
    let drafter = sandbox.write(
        "drafter.jsonl",
        &format!(
            "{}\n",
            json!({"reply": json!({"question": "How is the ss31 going?", "delivery_body": body}).to_string()})
        ),
    );
    let seen = sandbox.path("judge-in.txt");
    let judge = sandbox.write(
        "judge.sh",
        &format!(
            "cat >> '{}'\necho '{{\"asserts\": false, \"presupposes\": false, \"reason\": \"\"}}'\n",
            seen.display()
        ),
    );
    let run = engage(
        &sandbox,
        &fixture("engage/input.json"),
        &[
            "--drafter",
            &format!("scripted:{drafter}"),
            "--judge",
            &format!("cmd:sh {judge}"),
        ],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    let prompts = std::fs::read_to_string(&seen).unwrap();
    assert!(prompts.contains("cured your insomnia"), "{prompts}");
}

/// A result whose text is blank quotes nothing: the live check cannot confirm it (every
/// message contains the empty string), so nothing is drafted from it.
#[test]
fn a_blank_quote_is_never_confirmed_live() {
    let sandbox = Sandbox::new();
    let mut input = engage_fixture();
    let first = input["results"][0].clone();
    input["results"] = json!([first]);
    input["results"][0]["text"] = json!("  ");
    let path = sandbox.write("input.json", &input.to_string());
    let run = engage(&sandbox, &path, &[]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let report = run.json();
    assert_eq!(report["send"], "none", "{report}");
    assert_eq!(report["live_verified"], false, "{report}");
}

/// When sources were confirmed live but every draft was rejected, the report says so instead
/// of claiming no source was confirmed.
#[test]
fn a_skip_after_live_sources_says_they_were_confirmed() {
    let sandbox = Sandbox::new();
    let judge = sandbox.write(
        "strict.sh",
        "cat >/dev/null\necho '{\"asserts\": true, \"presupposes\": false, \"reason\": \"invented\"}'\n",
    );
    let args = engage_args(
        &fixture("engage/input.json"),
        &["--judge", &format!("cmd:sh {judge}")],
    );
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let run = sandbox.run(&refs);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stdout.contains("NO QUESTION WAS CHOSEN") && run.stdout.contains("confirmed live"),
        "{}",
        run.stdout
    );
    assert!(
        !run.stdout.contains("NO SOURCE WAS CONFIRMED LIVE"),
        "{}",
        run.stdout
    );
}

/// The fixture's input for one member (`t1` or `t2`) posting to one channel, with `settings`.
fn one_channel(sandbox: &Sandbox, member: usize, channel: &str, settings: &Value) -> String {
    let mut input = engage_fixture();
    input["results"] = json!([input["results"][member].clone()]);
    input["allowlist"]["post_channel_ids"] = json!([channel]);
    for (key, value) in settings.as_object().unwrap() {
        input["settings"][key] = value.clone();
    }
    sandbox.write(&format!("one-{member}-{channel}.json"), &input.to_string())
}

/// As in the reference, one engagement post per New York day for the whole deployment: a
/// second post to another allowed channel is refused `day_already_claimed`, unless
/// `settings.day_scope` is `"destination"`.
#[test]
fn the_engagement_day_is_one_for_the_whole_deployment() {
    let sandbox = Sandbox::new();
    let first = one_channel(&sandbox, 0, "999", &json!({}));
    let second = one_channel(&sandbox, 1, "888", &json!({}));
    let script = format!(
        "cat > /dev/null\necho '{}'\n",
        json!({ "question": SECOND_QUESTION })
    );
    let drafter = format!("cmd:sh {}", sandbox.write("second.sh", &script));
    let post = ["--post", "--sender", "file:outbox"];
    let other = ["--post", "--sender", "file:outbox", "--drafter", &drafter];
    let one = engage(&sandbox, &first, &post);
    assert_eq!(one.code, 0, "{}", one.stderr);
    assert_eq!(one.json()["send"], "staged", "{}", one.stdout);
    let two = engage(&sandbox, &second, &other);
    assert_eq!(two.code, 0, "{}", two.stderr);
    let all = claims(&sandbox);
    let refused: Vec<&Value> = all.iter().filter(|c| c["status"] == "refused").collect();
    assert_eq!(refused.len(), 1, "{all:?}");
    assert_eq!(refused[0]["destination"], "888", "{all:?}");
    assert!(
        refused[0]["reason"]
            .as_str()
            .unwrap()
            .starts_with("day_already_claimed"),
        "{all:?}"
    );
    assert_eq!(sandbox.run(&["verify", "--json"]).json()["ok"], true);

    let scoped = Sandbox::new();
    let per = json!({"day_scope": "destination"});
    let first = one_channel(&scoped, 0, "999", &per);
    let second = one_channel(&scoped, 1, "888", &per);
    let drafter = format!("cmd:sh {}", scoped.write("second.sh", &script));
    let other = ["--post", "--sender", "file:outbox", "--drafter", &drafter];
    for (input, flags) in [(first, &post[..]), (second, &other[..])] {
        let run = engage(&scoped, &input, flags);
        assert_eq!(run.code, 0, "{}", run.stderr);
        assert_eq!(run.json()["send"], "staged", "{}", run.stdout);
    }
    let bad = one_channel(&scoped, 0, "999", &json!({"day_scope": "galaxy"}));
    assert_eq!(engage(&scoped, &bad, &[]).code, 1);
}
