//! Posting at most once: dry run by default, claim before send, a crash between claim and
//! send, `claims` and `claims resolve`, recasts that inherit claims, racing runs.

use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::{Run, Sandbox, fixture};

/// Kills the whole process group if the test panics first.
struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn config() -> String {
    fixture("loadouts/post.json")
}

fn script() -> String {
    format!("scripted:{}", fixture("scripts/post.jsonl"))
}

/// The arguments that run the post loadout as `cast` answered by `agent`, then `extra`.
fn post_args(cast: &str, agent: &str, extra: &[&str]) -> Vec<String> {
    let mut args: Vec<String> = vec![
        "run".into(),
        config(),
        "--task".into(),
        "release 1.2".into(),
        "--cast".into(),
        cast.into(),
        "--agent".into(),
        agent.into(),
        "--json".into(),
    ];
    args.extend(extra.iter().map(|a| (*a).to_owned()));
    args
}

fn run_post(sandbox: &Sandbox, cast: &str, extra: &[&str]) -> Run {
    let args = post_args(cast, &script(), extra);
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    sandbox.run(&refs)
}

/// Runs the post loadout as `cast` with `--post --sender SENDER` and returns its claim's id.
fn post_and_claim(sandbox: &Sandbox, cast: &str, sender: &str) -> String {
    let run = run_post(sandbox, cast, &["--post", "--sender", sender]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    claims(sandbox, false)
        .iter()
        .find(|c| c["cast"] == cast)
        .and_then(|c| c["claim"].as_str())
        .unwrap()
        .to_owned()
}

fn claims(sandbox: &Sandbox, pending: bool) -> Vec<Value> {
    let mut args = vec!["claims", "--json"];
    if pending {
        args.push("--pending");
    }
    let run = sandbox.run(&args);
    assert_eq!(run.code, 0, "{}", run.stderr);
    run.json()["claims"].as_array().unwrap().clone()
}

fn kinds(sandbox: &Sandbox, cast: &str) -> Vec<String> {
    sandbox.run(&["show", cast, "--json"]).json()["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["kind"].as_str().unwrap().to_owned())
        .collect()
}

/// The bodies a `file:outbox` sender wrote (each has its envelope beside it as `<claim>.json`).
fn outbox_bodies(sandbox: &Sandbox) -> Vec<std::path::PathBuf> {
    std::fs::read_dir(sandbox.path("outbox")).map_or_else(
        |_| Vec::new(),
        |d| {
            d.map(|e| e.unwrap().path())
                .filter(|p| p.extension().is_none())
                .collect()
        },
    )
}

fn outbox_files(sandbox: &Sandbox) -> usize {
    let bodies = outbox_bodies(sandbox);
    for body in &bodies {
        assert!(
            body.with_extension("json").exists(),
            "{body:?} has no envelope"
        );
    }
    bodies.len()
}

#[test]
fn without_post_nothing_reaches_a_sender() {
    let sandbox = Sandbox::new();
    // A --sender without --post is a dry run all the same.
    let run = run_post(&sandbox, "dry", &["--sender", "file:outbox"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.json()["status"], "completed");
    assert_eq!(outbox_files(&sandbox), 0);
    let all = claims(&sandbox, false);
    assert_eq!(all.len(), 1);
    assert_eq!(all[0]["status"], "dry_run");
    assert_eq!(all[0]["dry_run"], true);
    assert!(claims(&sandbox, true).is_empty());
    // A dry run holds no day: a real post the same day goes out.
    let run = run_post(&sandbox, "real", &["--post", "--sender", "file:outbox"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(outbox_files(&sandbox), 1);
    let body = outbox_bodies(&sandbox)
        .iter()
        .map(|p| std::fs::read_to_string(p).unwrap())
        .collect::<String>();
    assert_eq!(body, "Announcement: Release 1.2 is out: faster builds.");
    // Beside it, the envelope every sender receives; a post socket's carries no reply fields.
    let envelope: Value = serde_json::from_str(
        &std::fs::read_to_string(outbox_bodies(&sandbox)[0].with_extension("json")).unwrap(),
    )
    .unwrap();
    assert_eq!(envelope["destination"], "staging");
    assert_eq!(envelope["cast"], "real");
    assert_eq!(envelope["body"], body);
    assert!(envelope.get("reply_to_message_id").is_none(), "{envelope}");
    assert_eq!(sandbox.run(&["verify", "--json"]).json()["ok"], true);
}

#[test]
fn post_needs_a_sender_and_a_bad_sender_is_named() {
    let sandbox = Sandbox::new();
    let run = run_post(&sandbox, "x", &["--post"]);
    assert_eq!(run.code, 1);
    assert!(
        run.stderr.contains("--post needs --sender"),
        "{}",
        run.stderr
    );
    let run = run_post(&sandbox, "y", &["--post", "--sender", "smtp:x"]);
    assert_eq!(run.code, 1);
    assert!(run.stderr.contains("unknown sender spec"), "{}", run.stderr);
    // Nothing was recorded for either.
    let casts = sandbox.run(&["casts", "--json"]);
    if casts.code == 0 {
        assert!(casts.json()["casts"].as_array().unwrap().is_empty());
    }
}

/// Claim before send: when a post socket's sender runs, its claim is already committed to
/// the database as pending (another process reading the same file sees it).
#[test]
fn a_post_socket_claim_is_durable_and_pending_when_the_sender_runs() {
    let sandbox = Sandbox::new();
    let (witness, sender) = sandbox.witnessing_sender();
    let run = run_post(&sandbox, "seen", &["--post", "--sender", &sender]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.json()["status"], "completed");
    let claim = witness.assert_claimed_before_sent();
    let state = sandbox.run(&["state", "seen", "--json"]).json();
    assert_eq!(state["data"]["posted_as"], format!("msg-{claim}"));
}

#[test]
fn a_second_post_the_same_day_is_refused_by_name() {
    let sandbox = Sandbox::new();
    let first = run_post(&sandbox, "first", &["--post", "--sender", "file:outbox"]);
    assert_eq!(first.code, 0, "{}", first.stderr);
    let second = run_post(&sandbox, "second", &["--post", "--sender", "file:outbox"]);
    assert_eq!(second.code, 0, "{}", second.stderr);
    assert_eq!(outbox_files(&sandbox), 1);
    let all = claims(&sandbox, false);
    let refused: Vec<&Value> = all.iter().filter(|c| c["status"] == "refused").collect();
    assert_eq!(refused.len(), 1);
    assert!(
        refused[0]["reason"]
            .as_str()
            .unwrap()
            .starts_with("day_already_claimed"),
        "{all:?}"
    );
}

/// Several runs of the post loadout race for the same destination and day with a slow
/// sender: exactly one sends, every other claim is refused with `day_already_claimed`.
#[test]
fn runs_racing_to_post_the_same_day_send_once() {
    const RUNS: usize = 4;
    let sandbox = Sandbox::new();
    let (calls, sender) = sandbox.counting_sender("sleep 1\necho \"msg-$CASTLOG_CLAIM\"");
    // The agent holds every run at its first answer until all are there, so that they reach
    // the post socket together.
    let gate = sandbox.gate();
    let agent = sandbox.write(
        "gated-agent.sh",
        &format!(
            r#"case "$(cat)" in
  *"one-line announcement"*)
{}
    echo "Release 1.2 is out: faster builds." ;;
  *) echo '{{"satisfied": true}}' ;;
esac
"#,
            gate.wait()
        ),
    );
    let agent = format!("cmd:sh {agent}");
    let children: Vec<std::process::Child> = (0..RUNS)
        .map(|i| {
            sandbox
                .command_on(&sandbox.db())
                .args(post_args(
                    &format!("racer-{i}"),
                    &agent,
                    &["--post", "--sender", &sender],
                ))
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    gate.open_when(&sandbox, RUNS);
    for child in children {
        let out = child.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    assert_eq!(std::fs::read_to_string(&calls).unwrap().lines().count(), 1);
    let all = claims(&sandbox, false);
    assert_eq!(all.len(), RUNS, "{all:?}");
    let staged = all.iter().filter(|c| c["status"] == "staged").count();
    assert_eq!(staged, 1, "{all:?}");
    for refused in all.iter().filter(|c| c["status"] != "staged") {
        assert_eq!(refused["status"], "refused", "{all:?}");
        assert!(
            refused["reason"]
                .as_str()
                .unwrap()
                .starts_with("day_already_claimed"),
            "{all:?}"
        );
    }
    assert_eq!(sandbox.run(&["verify", "--json"]).json()["ok"], true);
}

#[test]
fn a_failed_sender_leaves_the_claim_pending_until_a_person_resolves_it() {
    let sandbox = Sandbox::new();
    let run = run_post(&sandbox, "fails", &["--post", "--sender", "cmd:false"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let out = run.json();
    assert_eq!(out["status"], "awaiting_agent");
    let message = out["message"].as_str().unwrap();
    assert!(message.contains("castlog claims resolve"), "{message}");
    let pending = claims(&sandbox, true);
    assert_eq!(pending.len(), 1);
    assert!(
        pending[0]["reason"]
            .as_str()
            .unwrap()
            .contains("exited with code 1")
    );
    let claim = pending[0]["claim"].as_str().unwrap().to_owned();

    // A staged claim cannot be abandoned; a pending one can be, and that releases the day.
    let resolved = sandbox.run(&["claims", "resolve", &claim, "--abandoned", "--json"]);
    assert_eq!(resolved.code, 0, "{}", resolved.stderr);
    assert_eq!(resolved.json()["status"], "abandoned");
    let again = sandbox.run(&["claims", "resolve", &claim, "--abandoned"]);
    assert_eq!(again.code, 1);
    assert!(again.stderr.contains("is abandoned"), "{}", again.stderr);
    assert!(claims(&sandbox, true).is_empty());
    assert_eq!(
        sandbox.run(&["state", "fails", "--json"]).json()["status"],
        "completed"
    );
    let next = run_post(&sandbox, "next", &["--post", "--sender", "file:outbox"]);
    assert_eq!(next.code, 0, "{}", next.stderr);
    assert_eq!(outbox_files(&sandbox), 1);
    assert_eq!(sandbox.run(&["verify", "--json"]).json()["ok"], true);
}

/// A person's decline (of a staged post) or abandon (of a pending one) frees the claim's day:
/// another cast posts to the same destination the same day.
#[test]
fn a_declined_or_abandoned_post_frees_its_day() {
    for (sender, resolution) in [("file:outbox", "declined"), ("cmd:false", "abandoned")] {
        let sandbox = Sandbox::new();
        let claim = post_and_claim(&sandbox, "first", sender);
        let flag = format!("--{resolution}");
        let resolved = sandbox.run(&["claims", "resolve", &claim, &flag, "--json"]);
        assert_eq!(resolved.code, 0, "{}", resolved.stderr);
        assert_eq!(resolved.json()["status"], resolution);
        let next = post_and_claim(&sandbox, "next", "file:outbox");
        let all = claims(&sandbox, false);
        let row = all.iter().find(|c| c["claim"] == next.as_str()).unwrap();
        assert_eq!(row["status"], "staged", "{resolution}: {all:?}");
        assert_eq!(row["destination"], "staging");
    }
}

/// A run killed after `post_claimed` and before its sender returns: the claim stays pending,
/// `resume` does not call the sender again, `claims --pending` shows it, `claims resolve`
/// closes it and the cast goes on.
#[test]
fn a_crash_between_claim_and_send_is_resolved_by_a_person() {
    use std::os::unix::process::CommandExt;

    let sandbox = Sandbox::new();
    let (calls, spec) = sandbox.counting_sender("sleep 120\necho m-late");
    let config = config();
    let script = script();
    let child = sandbox
        .command_on(&sandbox.db())
        .args([
            "run",
            &config,
            "--task",
            "release 1.2",
            "--cast",
            "crashy",
            "--agent",
            &script,
            "--post",
            "--sender",
            &spec,
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()
        .unwrap();
    let mut child = KillOnDrop(child);
    let deadline = Instant::now() + Duration::from_secs(60);
    while !calls.exists() {
        assert!(Instant::now() < deadline, "the sender was never called");
        std::thread::sleep(Duration::from_millis(20));
    }
    // Kill castlog and the sleeping sender with no chance to clean up.
    let group = format!("-{}", child.0.id());
    std::process::Command::new("kill")
        .args(["-9", "--", &group])
        .status()
        .unwrap();
    let _ = child.0.wait();

    let events = kinds(&sandbox, "crashy");
    assert_eq!(events.last().map(String::as_str), Some("post_claimed"));
    let state = sandbox.run(&["state", "crashy", "--json"]).json();
    assert_eq!(state["status"], "awaiting_agent");
    let pending = claims(&sandbox, true);
    assert_eq!(pending.len(), 1, "{pending:?}");
    let claim = pending[0]["claim"].as_str().unwrap().to_owned();

    // Resume, even with --post and a sender, never sends a pending claim again.
    let resumed = sandbox.run(&[
        "resume", "crashy", "--agent", &script, "--post", "--sender", &spec, "--json",
    ]);
    assert_eq!(resumed.code, 0, "{}", resumed.stderr);
    let out = resumed.json();
    assert_eq!(out["status"], "awaiting_agent");
    assert!(out["message"].as_str().unwrap().contains(&claim), "{out}");
    assert_eq!(std::fs::read_to_string(&calls).unwrap().lines().count(), 1);
    assert!(!kinds(&sandbox, "crashy").iter().any(|k| k == "post_staged"));

    // A person checks the destination and records what happened.
    let resolved = sandbox.run(&["claims", "resolve", &claim[..10], "--staged", "m-42"]);
    assert_eq!(resolved.code, 0, "{}", resolved.stderr);
    assert!(
        resolved.stdout.contains("pending -> staged"),
        "{}",
        resolved.stdout
    );
    assert!(claims(&sandbox, true).is_empty());
    let done = sandbox.run(&["resume", "crashy", "--agent", &script, "--json"]);
    assert_eq!(done.code, 0, "{}", done.stderr);
    assert_eq!(done.json()["status"], "completed");
    let state = sandbox.run(&["state", "crashy", "--json"]).json();
    assert_eq!(state["data"]["posted_as"], "m-42");
    assert_eq!(std::fs::read_to_string(&calls).unwrap().lines().count(), 1);
    assert_eq!(sandbox.run(&["verify", "--json"]).json()["ok"], true);
}

/// A recast of `parent` from before its post socket, posting to `file:outbox`.
fn recast_early(sandbox: &Sandbox, cast: &str, extra: &[&str]) -> Run {
    let script = script();
    let mut args = vec![
        "recast",
        "parent",
        "--at",
        "Socket-1:1",
        "--cast",
        cast,
        "--agent",
        &script,
        "--post",
        "--sender",
        "file:outbox",
        "--json",
    ];
    args.extend_from_slice(extra);
    sandbox.run(&args)
}

#[test]
fn a_recast_of_a_staged_post_never_posts_again() {
    let sandbox = Sandbox::new();
    let run = run_post(&sandbox, "parent", &["--post", "--sender", "file:outbox"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(outbox_files(&sandbox), 1);
    // The child answers Confirm "not satisfied", which leads back to the post socket.
    let again = sandbox.write(
        "again.jsonl",
        "{\"reply\": \"{\\\"satisfied\\\": false, \\\"context\\\": \\\"post it again\\\"}\"}\n{\"reply\": \"{\\\"satisfied\\\": true}\"}\n",
    );
    let recast = sandbox.run(&[
        "recast",
        "parent",
        "--at",
        "Socket-3:1",
        "--cast",
        "child",
        "--agent",
        &format!("scripted:{again}"),
        "--json",
    ]);
    assert_eq!(recast.code, 0, "{}", recast.stderr);
    assert_eq!(recast.json()["status"], "completed");
    let events = kinds(&sandbox, "child");
    assert!(!events.iter().any(|k| k.starts_with("post_")), "{events:?}");
    assert_eq!(outbox_files(&sandbox), 1);
    let shown = sandbox.run(&["show", "child", "--json"]).json();
    let inherited = shown["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == "socket_completed" && e["payload"]["socket"] == "Socket-2")
        .any(|e| e["payload"]["parsed"]["inherited"] == true);
    assert!(inherited, "{shown}");
    assert_eq!(claims(&sandbox, false).len(), 1);
    assert_eq!(sandbox.run(&["verify", "--json"]).json()["ok"], true);

    // A recast from before the claim meets the parent's claim in the ledger: refused by name.
    let early = recast_early(&sandbox, "early", &[]);
    assert_eq!(early.code, 0, "{}", early.stderr);
    assert_eq!(early.json()["status"], "completed");
    assert_eq!(outbox_files(&sandbox), 1);
    let refused: Vec<Value> = claims(&sandbox, false)
        .into_iter()
        .filter(|c| c["cast"] == "early")
        .collect();
    assert_eq!(refused.len(), 1);
    assert_eq!(refused[0]["status"], "refused");
    assert!(
        refused[0]["reason"]
            .as_str()
            .unwrap()
            .starts_with("sent_by_an_earlier_run"),
        "{refused:?}"
    );

    // Not the day rule: with the post socket's zone moved ahead (most hours another calendar day,
    // a day nobody holds), the step that went out in the parent is still not sent again.
    let mut moved: Value =
        serde_json::from_str(&std::fs::read_to_string(config()).unwrap()).unwrap();
    moved["materia"]["Announce"]["zone"] = "+14:00".into();
    let moved = sandbox.write("moved.json", &moved.to_string());
    let later = recast_early(&sandbox, "later", &["--config", &moved]);
    assert_eq!(later.code, 0, "{}", later.stderr);
    assert_eq!(outbox_files(&sandbox), 1, "the step was sent again");
    let refused: Vec<Value> = claims(&sandbox, false)
        .into_iter()
        .filter(|c| c["cast"] == "later")
        .collect();
    assert_eq!(refused.len(), 1, "{refused:?}");
    let reason = refused[0]["reason"].as_str().unwrap();
    assert!(reason.starts_with("sent_by_an_earlier_run"), "{reason}");
    assert!(reason.contains("clm-"), "{reason}");
    assert_eq!(sandbox.run(&["verify", "--json"]).json()["ok"], true);
}

#[test]
fn resolving_names_unknown_and_ambiguous_claims() {
    let sandbox = Sandbox::new();
    let run = run_post(&sandbox, "one", &["--post", "--sender", "file:outbox"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let unknown = sandbox.run(&["claims", "resolve", "clm-nope", "--abandoned"]);
    assert_eq!(unknown.code, 1);
    assert!(unknown.stderr.contains("no claim"), "{}", unknown.stderr);
    let claim = claims(&sandbox, false)[0]["claim"]
        .as_str()
        .unwrap()
        .to_owned();
    let illegal = sandbox.run(&["claims", "resolve", &claim, "--abandoned"]);
    assert_eq!(illegal.code, 1);
    assert!(illegal.stderr.contains("is staged"), "{}", illegal.stderr);
    for step in ["--approved", "--posted"] {
        let ok = sandbox.run(&["claims", "resolve", &claim, step]);
        assert_eq!(ok.code, 0, "{}", ok.stderr);
    }
    assert_eq!(claims(&sandbox, false)[0]["status"], "posted");
    let none = sandbox.run(&["claims", "resolve", &claim]);
    assert_eq!(none.code, 1, "a usage error is the user's: {}", none.stderr);
    assert!(none.stderr.contains("--staged"), "{}", none.stderr);
}

/// On a machine cast the response goes through the machine (re-decided by `verify`); a
/// pending claim cannot take one.
#[test]
fn a_response_on_a_post_socket_claim_is_recorded_through_the_machine() {
    let sandbox = Sandbox::new();
    let claim = post_and_claim(&sandbox, "sent", "file:outbox");
    let ignored = sandbox.run(&["claims", "resolve", &claim, "--ignored"]);
    assert_eq!(ignored.code, 0, "{}", ignored.stderr);
    assert!(
        ignored.stdout.contains("staged, ignored"),
        "{}",
        ignored.stdout
    );
    assert!(kinds(&sandbox, "sent").contains(&"post_response_recorded".to_owned()));
    assert_eq!(claims(&sandbox, false)[0]["response"], "ignored");
    assert_eq!(sandbox.run(&["verify", "--json"]).json()["ok"], true);

    // A fresh database: the day of `sent` is taken in the first.
    let other = Sandbox::new();
    let pending = post_and_claim(&other, "fails", "cmd:false");
    let refused = other.run(&["claims", "resolve", &pending, "--answered"]);
    assert_eq!(refused.code, 1);
    assert!(refused.stderr.contains("is pending"), "{}", refused.stderr);
}

/// A recast that inherits a pending claim waits on it; the person resolves it once (on the
/// cast that made it), and the recast, resumed, takes the resolution on and completes without
/// its sender ever running.
#[test]
fn a_recast_waiting_on_an_inherited_pending_claim_goes_on_once_it_is_resolved() {
    let sandbox = Sandbox::new();
    let claim = post_and_claim(&sandbox, "flaky", "cmd:false");
    let (calls, spec) = sandbox.counting_sender("echo m-new");
    let head = sandbox.run(&["show", "flaky", "--json"]).json()["events"]
        .as_array()
        .unwrap()
        .len()
        .to_string();
    let script = script();
    // Both drives of the child may post, through a sender that counts its calls.
    let drive = |args: &[&str]| {
        let mut all = args.to_vec();
        all.extend(["--agent", &script, "--post", "--sender", &spec, "--json"]);
        sandbox.run(&all)
    };
    let recast = drive(&["recast", "flaky", "--at", &head, "--cast", "child"]);
    assert_eq!(recast.code, 0, "{}", recast.stderr);
    let out = recast.json();
    assert_eq!(out["status"], "awaiting_agent");
    let message = out["message"].as_str().unwrap();
    assert!(
        message.contains("inherited from cast flaky") && message.contains(&claim),
        "{message}"
    );

    let resolved = sandbox.run(&["claims", "resolve", &claim, "--staged", "m-7"]);
    assert_eq!(resolved.code, 0, "{}", resolved.stderr);
    assert!(
        resolved.stdout.contains("cast child inherited the claim"),
        "{}",
        resolved.stdout
    );
    let resolved_json = sandbox.run(&["claims", "--json"]).json();
    assert_eq!(resolved_json["claims"].as_array().unwrap().len(), 1);
    assert!(resolved_json["problems"].as_array().unwrap().is_empty());

    let done = drive(&["resume", "child"]);
    assert_eq!(done.code, 0, "{}", done.stderr);
    assert_eq!(done.json()["status"], "completed");
    let state = sandbox.run(&["state", "child", "--json"]).json();
    assert_eq!(state["data"]["posted_as"], "m-7");
    assert!(kinds(&sandbox, "child").contains(&"post_resolution_inherited".to_owned()));
    assert!(!calls.exists(), "the recast's sender ran");
    assert_eq!(claims(&sandbox, false)[0]["status"], "staged");
    assert_eq!(sandbox.run(&["verify", "--json"]).json()["ok"], true);
}

/// `casts` once listed the destinations' claim ledgers (`claims:staging`) among the casts:
/// they are listed only with `--all`, each row saying its kind.
#[test]
fn casts_lists_casts_and_the_claim_ledgers_only_with_all() {
    let sandbox = Sandbox::new();
    let run = sandbox.run(&[
        "run",
        &fixture("loadouts/post.json"),
        "--task",
        "release 1.2",
        "--cast",
        "sent",
        "--agent",
        &format!("scripted:{}", fixture("scripts/post.jsonl")),
        "--post",
        "--sender",
        "file:outbox",
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let listed = |args: &[&str]| -> Vec<(String, String)> {
        sandbox.run(args).json()["casts"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| {
                (
                    c["cast"].as_str().unwrap().to_owned(),
                    c["kind"].as_str().unwrap().to_owned(),
                )
            })
            .collect()
    };
    assert_eq!(
        listed(&["casts", "--json"]),
        [("sent".into(), "cast".into())]
    );
    assert_eq!(
        listed(&["casts", "--all", "--json"]),
        [
            ("sent".into(), "cast".into()),
            ("claims:staging".into(), "claims_ledger".into())
        ]
    );
    let text = sandbox.run(&["casts"]);
    assert!(!text.stdout.contains("claims:staging"), "{}", text.stdout);
}
