use std::collections::VecDeque;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use castlog_core::env::FixedClock;
use castlog_core::event::{Event, FailureClass};
use castlog_core::id::{CastId, Seq};
use castlog_core::machine::Status;
use castlog_core::prompt::Message;
use castlog_events::{EventLog, InMemoryLog};
use castlog_replay::agent::{Agent, ScriptedAgent};
use castlog_replay::driver::{Driver, Stop, TRANSIENT_LIMIT};
use castlog_replay::openai::OpenAiAgent;
use rstest::rstest;
use serde_json::{Value, json};

use crate::drive::fixture;

/// Starts `config`'s loadout as `cast` on `log` under a fixed, stepping clock and drives it with
/// `agent`.
pub fn drive_with(
    log: &InMemoryLog,
    config: &str,
    loadout: Option<&str>,
    cast: &str,
    agent: &mut dyn Agent,
) -> Stop {
    let started = crate::drive::started(fixture(config), loadout, cast);
    let clock = FixedClock::stepping(1_800_000_000_000, 7);
    let dir = tempfile::tempdir().unwrap();
    let mut driver = Driver::start(log, &clock, started, dir.path()).unwrap();
    driver.drive(agent).unwrap()
}

/// The events of a cast, decoded.
pub fn events(log: &InMemoryLog, cast: &str) -> Vec<Event> {
    let records = log.read(&CastId::new(cast), Seq::FIRST, None).unwrap();
    castlog_events::Decoder::all(&records).unwrap()
}

/// One canned HTTP answer.
#[derive(Debug, Clone)]
pub struct Canned {
    status: u16,
    body: String,
    delay: Duration,
    headers: Vec<String>,
}

impl Canned {
    /// A chat-completions reply.
    pub fn reply(text: &str, usage: Option<(u64, u64)>) -> Self {
        let mut body = json!({
            "id": "chatcmpl-test",
            "object": "chat.completion",
            "choices": [{
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "finish_reason": "stop"
            }]
        });
        if let Some((input, output)) = usage {
            body["usage"] = json!({
                "prompt_tokens": input,
                "completion_tokens": output,
                "total_tokens": input + output
            });
        }
        Self::status(200, &body.to_string())
    }

    /// Any status and body.
    pub fn status(status: u16, body: &str) -> Self {
        Self {
            status,
            body: body.to_owned(),
            delay: Duration::ZERO,
            headers: Vec::new(),
        }
    }

    /// Sends `header` (`name: value`) too.
    pub fn with_header(mut self, header: &str) -> Self {
        self.headers.push(header.to_owned());
        self
    }

    /// Answers only after `delay`.
    pub fn after(mut self, delay: Duration) -> Self {
        self.delay = delay;
        self
    }
}

/// The replies of a fixture script, as canned answers.
pub fn script_replies(script: &str) -> Vec<Canned> {
    std::fs::read_to_string(fixture(script))
        .unwrap()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let line: Value = serde_json::from_str(l).unwrap();
            let text = line["reply"].as_str().expect("a reply-only script");
            let usage = line.get("usage").map(|u| {
                (
                    u["input"].as_u64().unwrap_or(0),
                    u["output"].as_u64().unwrap_or(0),
                )
            });
            Canned::reply(text, usage)
        })
        .collect()
}

/// One request the server received.
#[derive(Debug, Clone)]
pub struct Seen {
    /// The request line and the headers.
    pub head: String,
    /// Request body as received (JSON text).
    pub body: String,
}

impl Seen {
    /// A header's value (name matched case-insensitively).
    pub fn header(&self, name: &str) -> Option<String> {
        self.head.lines().skip(1).find_map(|line| {
            let (n, v) = line.split_once(':')?;
            n.trim()
                .eq_ignore_ascii_case(name)
                .then(|| v.trim().to_owned())
        })
    }

    /// The body as JSON.
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap()
    }
}

/// A tiny HTTP/1.1 server on 127.0.0.1 answering from a queue (a 400 when it runs dry), one
/// connection per request, recording every request. It stops when dropped (or after 30 s).
pub struct Server {
    /// `http://127.0.0.1:PORT/v1`.
    pub base: String,
    seen: Arc<Mutex<Vec<Seen>>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Server {
    pub fn start(answers: Vec<Canned>) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let base = format!("http://{}/v1", listener.local_addr().unwrap());
        let seen = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let seen = Arc::clone(&seen);
            let stop = Arc::clone(&stop);
            let mut queue: VecDeque<Canned> = answers.into();
            std::thread::spawn(move || {
                let deadline = Instant::now() + Duration::from_secs(30);
                let mut writers = Vec::new();
                while !stop.load(Ordering::SeqCst) && Instant::now() < deadline {
                    match listener.accept() {
                        Ok((mut stream, _)) => {
                            let Some(request) = read_request(&mut stream) else {
                                continue;
                            };
                            seen.lock().unwrap().push(request);
                            let answer = queue.pop_front().unwrap_or_else(|| {
                                Canned::status(400, "{\"error\":\"no canned answer left\"}")
                            });
                            writers.push(std::thread::spawn(move || answer_with(stream, &answer)));
                        }
                        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                            std::thread::sleep(Duration::from_millis(2));
                        }
                        Err(_) => break,
                    }
                }
                for w in writers {
                    let _ = w.join();
                }
            })
        };
        Self {
            base,
            seen,
            stop,
            thread: Some(thread),
        }
    }

    /// The requests received so far.
    pub fn requests(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn read_request(stream: &mut TcpStream) -> Option<Seen> {
    stream.set_nonblocking(false).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let head_end = loop {
        if let Some(at) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break at;
        }
        let n = stream.read(&mut chunk).ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let length = head
        .lines()
        .find_map(|l| {
            let (n, v) = l.split_once(':')?;
            n.trim()
                .eq_ignore_ascii_case("content-length")
                .then(|| v.trim().parse::<usize>().ok())?
        })
        .unwrap_or(0);
    let mut body = buf[head_end + 4..].to_vec();
    while body.len() < length {
        let n = stream.read(&mut chunk).ok()?;
        if n == 0 {
            break;
        }
        body.extend_from_slice(&chunk[..n]);
    }
    Some(Seen {
        head,
        body: String::from_utf8_lossy(&body).into_owned(),
    })
}

fn answer_with(mut stream: TcpStream, answer: &Canned) {
    if !answer.delay.is_zero() {
        std::thread::sleep(answer.delay);
    }
    let reason = if answer.status == 200 { "OK" } else { "Canned" };
    let headers: String = answer.headers.iter().map(|h| format!("{h}\r\n")).collect();
    let text = format!(
        "HTTP/1.1 {} {reason}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n{headers}\r\n{}",
        answer.status,
        answer.body.len(),
        answer.body
    );
    let _ = stream.write_all(text.as_bytes());
    let _ = stream.flush();
}

/// An agent for `server` with no backoff.
fn agent_for(base: &str, key: Option<&str>, timeout: Duration) -> OpenAiAgent {
    OpenAiAgent::new(base, "test-model", key.map(str::to_owned), timeout)
        .unwrap()
        .with_backoff(Duration::ZERO)
}

const BUILD_LOOP: &str = "loadouts/build-loop.json";
const BUILD_LOOP_SCRIPT: &str = "scripts/build-loop.jsonl";

/// The agent failures of a cast.
fn failures(log: &InMemoryLog, cast: &str) -> Vec<(FailureClass, String, u32)> {
    events(log, cast)
        .into_iter()
        .filter_map(|e| match e {
            Event::AgentFailed(f) => Some((f.class, f.message, f.attempt)),
            _ => None,
        })
        .collect()
}

#[test]
fn a_fixture_cast_completes_against_a_chat_completions_server() {
    let server = Server::start(script_replies(BUILD_LOOP_SCRIPT));
    let log = InMemoryLog::new();
    let mut agent = agent_for(&server.base, None, Duration::from_secs(10));
    let stop = drive_with(&log, BUILD_LOOP, None, "http", &mut agent);
    assert_eq!(stop.status, Status::Completed, "{stop:?}");

    // The same cast driven by the script records the very same events: replies and usage came
    // through the server unchanged.
    let scripted = InMemoryLog::new();
    let mut script = ScriptedAgent::open(&fixture(BUILD_LOOP_SCRIPT), 0).unwrap();
    drive_with(&scripted, BUILD_LOOP, None, "http", &mut script);
    let cast = CastId::new("http");
    assert_eq!(
        log.read(&cast, Seq::FIRST, None).unwrap(),
        scripted.read(&cast, Seq::FIRST, None).unwrap()
    );

    // Each request carried the model and exactly the recorded prompt's messages.
    let prompts: Vec<Vec<Message>> = events(&log, "http")
        .into_iter()
        .filter_map(|e| match e {
            Event::PromptDispatched(d) => Some(d),
            _ => None,
        })
        .map(|d| {
            castlog_projections::prompt::messages(
                &log,
                &castlog_core::prompt::policy::RECOMMENDED,
                &d.prompt_hash,
                &d.placements,
            )
            .unwrap()
        })
        .collect();
    let requests = server.requests();
    assert_eq!(requests.len(), prompts.len());
    assert_eq!(requests.len(), 11);
    for (request, prompt) in requests.iter().zip(&prompts) {
        assert!(
            request
                .head
                .starts_with("POST /v1/chat/completions HTTP/1.1"),
            "{}",
            request.head
        );
        assert_eq!(request.header("authorization"), None);
        let body = request.json();
        assert_eq!(body["model"], "test-model");
        assert_eq!(body["messages"], serde_json::to_value(prompt).unwrap());
    }
}

#[test]
fn a_429_then_200_is_retried_with_backoff_and_both_attempts_are_events() {
    let mut answers = vec![Canned::status(429, "{\"error\":\"slow down\"}")];
    answers.extend(script_replies(BUILD_LOOP_SCRIPT));
    let server = Server::start(answers);
    let log = InMemoryLog::new();
    let mut agent = agent_for(&server.base, None, Duration::from_secs(10))
        .with_backoff(Duration::from_millis(60));
    let started = Instant::now();
    let stop = drive_with(&log, BUILD_LOOP, None, "retry", &mut agent);
    assert_eq!(stop.status, Status::Completed, "{stop:?}");
    assert!(started.elapsed() >= Duration::from_millis(60));
    assert_eq!(server.requests().len(), 12);
    let all = events(&log, "retry");
    let failed = all
        .iter()
        .position(|e| matches!(e, Event::AgentFailed(_)))
        .unwrap();
    let (Event::AgentFailed(f), Event::AgentReplied(r)) = (&all[failed], &all[failed + 1]) else {
        panic!(
            "expected agent_failed then agent_replied: {:?}",
            &all[failed..=failed + 1]
        );
    };
    assert_eq!(f.class, FailureClass::Transient);
    assert_eq!(f.attempt, 1);
    assert!(
        f.message.contains("429") && f.message.contains("slow down"),
        "{}",
        f.message
    );
    assert_eq!((&f.socket, f.visit, f.turn), (&r.socket, r.visit, r.turn));
    assert_eq!(failures(&log, "retry").len(), 1);
}

/// A `Retry-After` date is read against the clock the agent is given, not the machine's: the
/// wait recorded is the date less that clock's now.
#[test]
fn a_retry_after_date_is_measured_on_the_agents_clock() {
    let mut answers =
        vec![Canned::status(503, "{}").with_header("Retry-After: Wed, 21 Oct 2015 07:28:01 GMT")];
    answers.extend(script_replies(BUILD_LOOP_SCRIPT));
    let server = Server::start(answers);
    let log = InMemoryLog::new();
    // 2015-10-21T07:28:00.000Z: one second before the date.
    let mut agent = agent_for(&server.base, None, Duration::from_secs(10))
        .with_clock(Box::new(FixedClock::at(1_445_412_480_000)));
    let stop = drive_with(&log, BUILD_LOOP, None, "dated", &mut agent);
    assert_eq!(stop.status, Status::Completed, "{stop:?}");
    let failed = failures(&log, "dated");
    assert_eq!(failed.len(), 1);
    assert!(
        failed[0]
            .1
            .ends_with("waiting 1s (Retry-After) before attempt 2 of 3"),
        "{}",
        failed[0].1
    );
}

/// A request in progress ends when the cancel flag is set (Ctrl-C): the turn is an
/// interruption saying so, not the reply that comes later.
#[test]
fn a_cancelled_request_is_an_interruption() {
    let server = Server::start(vec![
        Canned::reply("late", None).after(Duration::from_secs(3)),
    ]);
    let mut agent = agent_for(&server.base, None, Duration::from_secs(60));
    let flag = Arc::new(AtomicBool::new(false));
    agent.cancel_on(Arc::clone(&flag));
    let setter = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(200));
        flag.store(true, Ordering::SeqCst);
    });
    let messages = [Message {
        role: castlog_core::prompt::Role::User,
        content: "hello".into(),
        tool_call: None,
    }];
    let turn = agent.turn(&castlog_replay::agent::TurnRequest {
        messages: &messages,
        refinement: false,
        model: None,
        thinking: None,
        tools: &[],
        cwd: None,
        schema: None,
    });
    setter.join().unwrap();
    assert_eq!(
        turn,
        castlog_replay::agent::AgentTurn::Failed {
            class: FailureClass::Interruption,
            message: castlog_replay::agent::CANCELLED.into(),
        }
    );
}

#[rstest]
#[case::not_json(200, "<html>oops</html>", "not JSON")]
#[case::no_choices(200, "{\"object\":\"chat.completion\"}", "no \"choices\"")]
#[case::empty_choices(200, "{\"choices\":[]}", "\"choices\" is empty")]
#[case::no_content(
    200,
    "{\"choices\":[{\"message\":{\"role\":\"assistant\"}}]}",
    "content is missing"
)]
#[case::not_found(404, "{\"error\":\"model not found\"}", "404")]
fn a_bad_answer_is_an_interruption_naming_the_problem(
    #[case] status: u16,
    #[case] body: &str,
    #[case] named: &str,
) {
    let server = Server::start(vec![Canned::status(status, body)]);
    let log = InMemoryLog::new();
    let mut agent = agent_for(&server.base, None, Duration::from_secs(10));
    let stop = drive_with(&log, BUILD_LOOP, None, "bad", &mut agent);
    assert_eq!(stop.status, Status::AwaitingAgent);
    assert!(stop.message.unwrap().contains("castlog resume"));
    let failed = failures(&log, "bad");
    assert_eq!(failed.len(), 1);
    let (class, message, _) = &failed[0];
    assert_eq!(*class, FailureClass::Interruption);
    assert!(message.contains(named), "{message}");
    assert!(message.contains(&status.to_string()), "{message}");
    // The body excerpt is quoted.
    let quoted = body.chars().take(10).collect::<String>();
    assert!(message.contains(&quoted), "{message}");
    assert_eq!(server.requests().len(), 1);
}

#[test]
fn a_500_storm_past_the_retry_budget_leaves_the_cast_awaiting_the_agent() {
    let server = Server::start(vec![Canned::status(500, "{\"error\":\"boom\"}"); 6]);
    let log = InMemoryLog::new();
    let mut agent = agent_for(&server.base, None, Duration::from_secs(10));
    let stop = drive_with(&log, BUILD_LOOP, None, "storm", &mut agent);
    assert_eq!(stop.status, Status::AwaitingAgent);
    assert!(stop.message.unwrap().contains("transient"));
    let failed = failures(&log, "storm");
    assert_eq!(failed.len(), TRANSIENT_LIMIT as usize);
    for (i, (class, message, attempt)) in failed.iter().enumerate() {
        assert_eq!(*class, FailureClass::Transient);
        assert_eq!(*attempt, i as u32 + 1);
        assert!(
            message.contains("500") && message.contains("boom"),
            "{message}"
        );
    }
    assert_eq!(server.requests().len(), TRANSIENT_LIMIT as usize);
}

#[test]
fn a_timeout_is_a_transient_failure_and_the_retry_goes_on() {
    let first = script_replies(BUILD_LOOP_SCRIPT).remove(0);
    let mut answers = vec![first.after(Duration::from_millis(900))];
    answers.extend(script_replies(BUILD_LOOP_SCRIPT));
    let server = Server::start(answers);
    let log = InMemoryLog::new();
    let mut agent = agent_for(&server.base, None, Duration::from_millis(250));
    let stop = drive_with(&log, BUILD_LOOP, None, "slow", &mut agent);
    assert_eq!(stop.status, Status::Completed, "{stop:?}");
    let failed = failures(&log, "slow");
    assert_eq!(failed.len(), 1);
    assert_eq!(failed[0].0, FailureClass::Transient);
    assert!(failed[0].1.contains("timed out"), "{}", failed[0].1);
}

#[test]
fn a_refused_connection_is_transient() {
    let port = {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let log = InMemoryLog::new();
    let mut agent = agent_for(
        &format!("http://127.0.0.1:{port}/v1"),
        None,
        Duration::from_secs(2),
    );
    let stop = drive_with(&log, BUILD_LOOP, None, "down", &mut agent);
    assert_eq!(stop.status, Status::AwaitingAgent);
    let failed = failures(&log, "down");
    assert_eq!(failed.len(), TRANSIENT_LIMIT as usize);
    assert!(
        failed
            .iter()
            .all(|(c, m, _)| *c == FailureClass::Transient && m.contains("cannot reach"))
    );
}

#[test]
fn the_api_key_is_sent_as_a_bearer_token_and_recorded_nowhere() {
    const KEY: &str = "sk-castlog-TEST-KEY-42";
    // The server echoes the key in an error body, as some providers do.
    let mut answers = vec![Canned::status(
        503,
        &format!("{{\"error\":\"overloaded for key {KEY}\"}}"),
    )];
    answers.extend(script_replies(BUILD_LOOP_SCRIPT));
    let server = Server::start(answers);
    let log = InMemoryLog::new();
    let mut agent = agent_for(&server.base, Some(KEY), Duration::from_secs(10));
    assert!(!format!("{agent:?}").contains(KEY));
    let stop = drive_with(&log, BUILD_LOOP, None, "key", &mut agent);
    assert_eq!(stop.status, Status::Completed, "{stop:?}");
    let requests = server.requests();
    assert_eq!(requests.len(), 12);
    for r in &requests {
        assert_eq!(r.header("authorization"), Some(format!("Bearer {KEY}")));
    }
    let failed = failures(&log, "key");
    assert_eq!(failed.len(), 1);
    assert!(failed[0].1.contains("[redacted]"), "{}", failed[0].1);
    let records = log.read(&CastId::new("key"), Seq::FIRST, None).unwrap();
    for record in &records {
        let payload = String::from_utf8_lossy(&record.payload);
        assert!(!payload.contains(KEY), "seq {}: {payload}", record.seq);
        assert!(
            !payload.contains("TEST-KEY"),
            "seq {}: {payload}",
            record.seq
        );
    }
}

#[test]
fn a_multi_turn_socket_waits_for_a_person() {
    let server = Server::start(script_replies("scripts/build-loop.jsonl"));
    let log = InMemoryLog::new();
    let mut agent = agent_for(&server.base, None, Duration::from_secs(10));
    let stop = drive_with(&log, "loadouts/consult.json", None, "talk", &mut agent);
    assert_eq!(stop.status, Status::AwaitingRefinement, "{stop:?}");
    assert_eq!(server.requests().len(), 1);
}

#[test]
fn the_materias_model_and_thinking_reach_the_server() {
    let text = std::fs::read_to_string(fixture(BUILD_LOOP)).unwrap();
    let mut config: Value = serde_json::from_str(&text).unwrap();
    config["materia"]["Build"]["model"] = json!("materia-model");
    config["materia"]["Build"]["thinking"] = json!("low");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("model.json");
    std::fs::write(&path, config.to_string()).unwrap();

    let server = Server::start(script_replies(BUILD_LOOP_SCRIPT));
    let log = InMemoryLog::new();
    let mut agent = agent_for(&server.base, None, Duration::from_secs(10));
    let stop = drive_with(&log, path.to_str().unwrap(), None, "models", &mut agent);
    assert_eq!(stop.status, Status::Completed, "{stop:?}");
    let bodies: Vec<Value> = server.requests().iter().map(Seen::json).collect();
    let builds: Vec<&Value> = bodies
        .iter()
        .filter(|b| b["model"] == "materia-model")
        .collect();
    // Build runs three times in the fixture; every other socket uses the spec's model.
    assert_eq!(builds.len(), 3);
    assert!(builds.iter().all(|b| b["reasoning_effort"] == "low"));
    assert!(
        bodies
            .iter()
            .filter(|b| b["model"] == "test-model")
            .all(|b| b.get("reasoning_effort").is_none())
    );
}
