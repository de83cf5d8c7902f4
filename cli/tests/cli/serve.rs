//! `castlog serve` as a running process: the casts list, a live page's event stream, a
//! refinement posted from the page, and the token beyond loopback.

use std::io::{BufRead, BufReader};
use std::process::{Child, Stdio};
use std::time::Duration;

use crate::common::{Sandbox, fixture, fixture_lines};

/// A running `castlog serve`, stopped when dropped.
pub struct Server {
    child: Child,
    /// `http://127.0.0.1:PORT`, whatever address it is bound to.
    pub base: String,
}

impl Server {
    /// Starts `castlog serve ARGS` on the sandbox database and waits for the address it prints.
    pub fn start(sandbox: &Sandbox, args: &[&str]) -> Server {
        let mut child = sandbox
            .command_on(&sandbox.db())
            .arg("serve")
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let mut first = String::new();
        let mut out = BufReader::new(child.stdout.take().unwrap());
        out.read_line(&mut first).unwrap();
        // What it says later (each input it records) is read, so it never writes to a
        // closed pipe.
        std::thread::spawn(move || std::io::copy(&mut out, &mut std::io::sink()));
        let port = first
            .split("http://")
            .nth(1)
            .and_then(|rest| rest.split('/').next())
            .and_then(|addr| addr.rsplit(':').next())
            .unwrap_or_else(|| panic!("serve printed no address: {first:?}"))
            .to_owned();
        Server {
            child,
            base: format!("http://127.0.0.1:{port}"),
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A client that gives up on a server that stopped answering, rather than hanging the run.
fn client() -> reqwest::blocking::Client {
    reqwest::blocking::Client::builder()
        .timeout(Duration::from_secs(60))
        .build()
        .unwrap()
}

/// The consult fixture's planning socket paused after its first draft, as cast `cast`.
fn paused(sandbox: &Sandbox, cast: &str) {
    let first = sandbox.write(
        "first-draft.jsonl",
        &(fixture_lines("scripts/consult.jsonl")[0].clone() + "\n"),
    );
    let run = sandbox.run(&[
        "run",
        &fixture("loadouts/consult.json"),
        "--task",
        "talk",
        "--cast",
        cast,
        "--agent",
        &format!("scripted:{first}"),
        "--json",
    ]);
    assert_eq!(
        run.json()["status"],
        "awaiting_refinement",
        "{}",
        run.stdout
    );
}

fn kinds(sandbox: &Sandbox, cast: &str) -> Vec<serde_json::Value> {
    sandbox.run(&["show", cast, "--json"]).json()["events"]
        .as_array()
        .unwrap()
        .clone()
}

#[test]
fn the_casts_list_links_every_cast_and_filters_by_status_and_loadout() {
    let sandbox = Sandbox::new();
    sandbox.completed_build_loop("built");
    paused(&sandbox, "talk");
    let server = Server::start(&sandbox, &["--bind", "127.0.0.1:0"]);
    let http = client();
    let page = http.get(&server.base).send().unwrap().text().unwrap();
    assert!(
        page.contains("<a href=\"/casts/built\">built</a>"),
        "{page}"
    );
    assert!(page.contains("<tr data-cast=\"talk\" data-status=\"awaiting_refinement\">"));
    let waiting = http
        .get(format!("{}/?status=awaiting_refinement", server.base))
        .send()
        .unwrap()
        .text()
        .unwrap();
    assert!(waiting.contains("data-cast=\"talk\"") && !waiting.contains("data-cast=\"built\""));
    let of_loadout = http
        .get(format!("{}/?loadout=Build-Loop", server.base))
        .send()
        .unwrap()
        .text()
        .unwrap();
    assert!(
        of_loadout.contains("data-cast=\"built\"") && !of_loadout.contains("data-cast=\"talk\"")
    );
    // By the UTC day each was created: today keeps both, a range that ended yesterday none, and
    // a day that does not read is a 400 naming it.
    let days = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        / 86_400;
    let day = |days: u64| castlog_core::calendar::Date::from_days(days as i64).to_string();
    let get = |query: String| {
        http.get(format!("{}/?{query}", server.base))
            .send()
            .unwrap()
    };
    let today = get(format!("from={}&to={}", day(days), day(days)))
        .text()
        .unwrap();
    assert!(today.contains("2 casts"), "{today}");
    assert!(
        today.contains(&format!("value=\"{}\"", day(days))),
        "{today}"
    );
    let before = get(format!("to={}", day(days - 1))).text().unwrap();
    assert!(before.contains("0 casts"), "{before}");
    let bad = get("from=12/01".to_owned());
    assert_eq!(bad.status(), 400);
    assert!(bad.text().unwrap().contains("YYYY-MM-DD"));
    // A cast's page is its report; a cast the database lacks is a 404 that names it.
    let report = http
        .get(format!("{}/casts/built", server.base))
        .send()
        .unwrap();
    assert_eq!(report.status(), 200);
    assert!(
        report
            .text()
            .unwrap()
            .contains("<title>castlog report: built</title>")
    );
    let missing = http
        .get(format!("{}/casts/nope", server.base))
        .send()
        .unwrap();
    assert_eq!(missing.status(), 404);
    assert!(missing.text().unwrap().contains("no cast named \"nope\""));
}

#[test]
fn a_live_pages_event_stream_carries_an_event_appended_after_it_opened() {
    let sandbox = Sandbox::new();
    paused(&sandbox, "talk");
    let server = Server::start(&sandbox, &["--bind", "127.0.0.1:0"]);
    let page = client()
        .get(format!("{}/casts/talk", server.base))
        .send()
        .unwrap()
        .text()
        .unwrap();
    assert!(page.contains("data-live=\"/casts/talk/events\""));
    // Read-only: the page offers no form.
    assert!(!page.contains("class=\"input\""));
    let stream = client()
        .get(format!("{}/casts/talk/events", server.base))
        .send()
        .unwrap();
    assert_eq!(
        stream.headers()["content-type"].to_str().unwrap(),
        "text/event-stream"
    );
    // The stream starts at the head it was opened at: what comes is what is appended now.
    let run = sandbox.run(&["refine", "talk", "two items only"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let mut lines = BufReader::new(stream).lines();
    let data = lines
        .by_ref()
        .map(Result::unwrap)
        .find(|l| l.starts_with("data: "))
        .unwrap();
    let event: serde_json::Value = serde_json::from_str(&data["data: ".len()..]).unwrap();
    assert_eq!(event["kind"], "user_refined", "{event}");
    assert!(
        event["summary"]
            .as_str()
            .unwrap()
            .contains("two items only")
    );
}

#[test]
fn a_refinement_posted_from_the_page_is_recorded_as_user_refined() {
    let sandbox = Sandbox::new();
    paused(&sandbox, "talk");
    let server = Server::start(&sandbox, &["--bind", "127.0.0.1:0", "--allow-input"]);
    let http = client();
    let page = http
        .get(format!("{}/casts/talk", server.base))
        .send()
        .unwrap()
        .text()
        .unwrap();
    assert!(page.contains("<form class=\"input\" method=\"post\" action=\"/casts/talk/input\">"));
    let before = kinds(&sandbox, "talk").len();
    let posted = http
        .post(format!("{}/casts/talk/input", server.base))
        .form(&[("action", "refine"), ("text", "keep it to two items")])
        .send()
        .unwrap();
    // Redirected back to the cast's page once recorded.
    assert_eq!(posted.status(), 200);
    assert_eq!(posted.url().path(), "/casts/talk");
    let events = kinds(&sandbox, "talk");
    let refined: Vec<_> = events[before..]
        .iter()
        .filter(|e| e["kind"] == "user_refined")
        .collect();
    assert_eq!(refined.len(), 1, "{events:?}");
    assert_eq!(refined[0]["payload"]["text"], "keep it to two items");
    // As after `castlog refine` without an agent: the next prompt waits for one.
    let state = sandbox.run(&["state", "talk", "--json"]).json();
    assert_eq!(state["status"], "awaiting_agent");
    // Now nothing is paused: a continue is refused and records nothing.
    let count = kinds(&sandbox, "talk").len();
    let refused = http
        .post(format!("{}/casts/talk/input", server.base))
        .form(&[("action", "continue")])
        .send()
        .unwrap();
    assert_eq!(refused.status(), 409);
    assert!(
        refused
            .text()
            .unwrap()
            .contains("no multi-turn socket is paused")
    );
    assert_eq!(kinds(&sandbox, "talk").len(), count);
    // A form from another origin is refused before anything is read.
    let forged = http
        .post(format!("{}/casts/talk/input", server.base))
        .header("Origin", "https://elsewhere.example")
        .form(&[("action", "refine"), ("text", "forged")])
        .send()
        .unwrap();
    assert_eq!(forged.status(), 403);
    assert_eq!(kinds(&sandbox, "talk").len(), count);
}

#[test]
fn beyond_loopback_every_request_needs_the_token() {
    let sandbox = Sandbox::new();
    sandbox.completed_build_loop("built");
    let refused = sandbox.run(&["serve", "--bind", "0.0.0.0:0"]);
    assert_eq!(refused.code, 1);
    assert!(
        refused.stderr.contains("give --token"),
        "{}",
        refused.stderr
    );
    let server = Server::start(&sandbox, &["--bind", "0.0.0.0:0", "--token", "s3cret"]);
    let http = client();
    for path in ["/", "/casts/built", "/casts/built/events"] {
        let bare = http.get(format!("{}{path}", server.base)).send().unwrap();
        assert_eq!(bare.status(), 401, "{path}");
        let wrong = http
            .get(format!("{}{path}", server.base))
            .bearer_auth("s3creT")
            .send()
            .unwrap();
        assert_eq!(wrong.status(), 401, "{path}");
    }
    let with = http.get(&server.base).bearer_auth("s3cret").send().unwrap();
    assert_eq!(with.status(), 200);
    // A `?token=` link sets the cookie the page's own links then carry.
    let linked = http
        .get(format!("{}/?token=s3cret", server.base))
        .send()
        .unwrap();
    assert_eq!(linked.status(), 200);
    let cookie = linked.headers()["set-cookie"].to_str().unwrap().to_owned();
    assert!(cookie.starts_with("castlog_token=s3cret;") && cookie.contains("HttpOnly"));
    let by_cookie = http
        .get(format!("{}/casts/built", server.base))
        .header("Cookie", "castlog_token=s3cret")
        .send()
        .unwrap();
    assert_eq!(by_cookie.status(), 200);
}
