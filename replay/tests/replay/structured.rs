use std::time::Duration;

use castlog_core::event::Event;
use castlog_core::id::{CastId, Seq};
use castlog_core::machine::Status;
use castlog_events::{EventLog, InMemoryLog};
use castlog_replay::openai::{OpenAiAgent, Structured};
use castlog_replay::recorded::RecordedAgent;
use castlog_replay::redecide::redecide;
use serde_json::Value;

use crate::openai::{Canned, Server, drive_with, events, script_replies};

const BUILD_LOOP: &str = "loadouts/build-loop.json";
const BUILD_LOOP_SCRIPT: &str = "scripts/build-loop.jsonl";

/// What an OpenAI server says to a request argument it does not take.
const REFUSAL: &str = r#"{"error":{"message":"Unrecognized request argument supplied: response_format","type":"invalid_request_error","param":"response_format"}}"#;

fn agent(server: &Server, structured: Structured) -> OpenAiAgent {
    OpenAiAgent::new(&server.base, "test-model", None, Duration::from_secs(10))
        .unwrap()
        .with_backoff(Duration::ZERO)
        .with_structured(structured)
}

/// The build loop driven as `cast` by an agent with `structured` against a server that gives
/// `answers`; the server is kept so the test can read its requests.
fn build_loop(
    answers: Vec<Canned>,
    cast: &str,
    structured: Structured,
) -> (Server, InMemoryLog, castlog_replay::driver::Stop) {
    let server = Server::start(answers);
    let log = InMemoryLog::new();
    let stop = drive_with(
        &log,
        BUILD_LOOP,
        None,
        cast,
        &mut agent(&server, structured),
    );
    (server, log, stop)
}

/// The `response_format` of each request (`Null` where there was none).
fn formats(server: &Server) -> Vec<Value> {
    server
        .requests()
        .iter()
        .map(|r| r.json()["response_format"].clone())
        .collect()
}

/// The parse mode of the socket each prompt of the cast was dispatched for, in order.
fn json_prompts(log: &InMemoryLog, cast: &str) -> Vec<bool> {
    let loadout = castlog_core::loadout::load_config(
        &std::fs::read_to_string(crate::drive::fixture(BUILD_LOOP)).unwrap(),
    )
    .unwrap()
    .resolve(None)
    .unwrap();
    events(log, cast)
        .into_iter()
        .filter_map(|e| match e {
            Event::PromptDispatched(d) => {
                Some(loadout.socket(&d.socket).unwrap().parse == castlog_core::loadout::Parse::Json)
            }
            _ => None,
        })
        .collect()
}

#[test]
fn on_sends_the_handoff_contract_for_json_sockets_only() {
    let (server, log, stop) = build_loop(script_replies(BUILD_LOOP_SCRIPT), "on", Structured::On);
    assert_eq!(stop.status, Status::Completed, "{stop:?}");
    let formats = formats(&server);
    let json = json_prompts(&log, "on");
    assert_eq!(formats.len(), json.len());
    assert!(json.contains(&true) && json.contains(&false));
    for (format, json) in formats.iter().zip(&json) {
        if *json {
            assert_eq!(format["type"], "json_schema", "{format}");
            assert_eq!(format["json_schema"]["name"], "handoff");
            assert_eq!(format["json_schema"]["schema"]["type"], "object");
            assert!(format["json_schema"]["schema"]["properties"]["context"].is_object());
        } else {
            assert!(format.is_null(), "a text socket got {format}");
        }
    }
    // The evaluator's schema requires `satisfied` (its edges route on it).
    let eval = formats
        .iter()
        .find(|f| f["json_schema"]["schema"]["required"] == serde_json::json!(["satisfied"]));
    assert!(eval.is_some(), "{formats:?}");
}

#[test]
fn off_never_sends_it() {
    let (server, _log, stop) =
        build_loop(script_replies(BUILD_LOOP_SCRIPT), "off", Structured::Off);
    assert_eq!(stop.status, Status::Completed, "{stop:?}");
    assert!(formats(&server).iter().all(Value::is_null));
    let default = OpenAiAgent::new(&server.base, "m", None, Duration::from_secs(1)).unwrap();
    assert!(format!("{default:?}").contains("structured: Off"));
}

#[test]
fn auto_falls_back_after_a_400_naming_the_field_and_records_it() {
    let mut answers = vec![Canned::status(400, REFUSAL)];
    answers.extend(script_replies(BUILD_LOOP_SCRIPT));
    let (server, log, stop) = build_loop(answers, "auto", Structured::Auto);
    assert_eq!(stop.status, Status::Completed, "{stop:?}");
    // The first JSON prompt went with the schema and was refused; the same prompt went again
    // without it, and so did every later one.
    let formats = formats(&server);
    assert_eq!(formats[0]["type"], "json_schema");
    assert!(formats[1..].iter().all(Value::is_null), "{formats:?}");
    assert_eq!(
        server.requests()[0].json()["messages"],
        server.requests()[1].json()["messages"]
    );
    let refused: Vec<_> = events(&log, "auto")
        .into_iter()
        .filter_map(|e| match e {
            Event::AgentFailed(f) => Some(f),
            _ => None,
        })
        .collect();
    assert_eq!(refused.len(), 1, "{refused:?}");
    assert!(refused[0].structured_off);
    assert!(
        refused[0].message.contains("HTTP 400")
            && refused[0].message.contains("off for the rest of the cast"),
        "{}",
        refused[0].message
    );
    // Re-decide reproduces the refusal and what followed it byte for byte.
    let cast = CastId::new("auto");
    assert_eq!(redecide(&log, &cast).unwrap(), None);

    // A cassette of the cast answers the refusal where it was recorded, so the re-run records
    // the same events.
    let mut recorded = RecordedAgent::from_log(&log, &cast).unwrap();
    let again = drive_with(&log, BUILD_LOOP, None, "auto-again", &mut recorded);
    assert_eq!(again.status, Status::Completed, "{again:?}");
    // (Dispatch keys name the cast, so kinds and the answers are compared, not every byte.)
    let answers = |cast: &str| -> Vec<(String, Option<Vec<u8>>)> {
        log.read(&CastId::new(cast), Seq::FIRST, None)
            .unwrap()
            .into_iter()
            .skip(1)
            .map(|r| {
                let answer = matches!(r.kind.as_str(), "agent_failed" | "agent_replied");
                (r.kind, answer.then_some(r.payload))
            })
            .collect()
    };
    let (first, second) = (answers("auto"), answers("auto-again"));
    assert_eq!(first.len(), second.len());
    assert!(first == second, "the re-run recorded other answers");
}

#[test]
fn on_leaves_a_refusal_to_the_person_and_a_400_on_another_field_stays_one() {
    let (_server, _log, stop) =
        build_loop(vec![Canned::status(400, REFUSAL)], "on-400", Structured::On);
    assert_eq!(stop.status, Status::AwaitingAgent, "{stop:?}");
    let (_server, log, stop) = build_loop(
        vec![Canned::status(400, r#"{"error":"no such model"}"#)],
        "auto-400",
        Structured::Auto,
    );
    assert_eq!(stop.status, Status::AwaitingAgent, "{stop:?}");
    assert!(events(&log, "auto-400").iter().all(|e| match e {
        Event::AgentFailed(f) => !f.structured_off,
        _ => true,
    }));
}
