//! The tool loop against a chat-completions server on 127.0.0.1 that answers with
//! `tool_calls` in the OpenAI shape: the materia's tools go out as function tools, each call
//! runs in the working directory and its result goes back as a `tool` message with its
//! `tool_call_id`, and the cast re-decides byte for byte.

use std::time::Duration;

use castlog_core::env::FixedClock;
use castlog_core::event::Event;
use castlog_core::machine::Status;
use castlog_events::InMemoryLog;
use castlog_replay::driver::Driver;
use castlog_replay::openai::OpenAiAgent;
use serde_json::{Value, json};

use crate::drive::fixture;
use crate::openai::{Canned, Server, events};

/// A reply asking for one call of `name` with `arguments` (sent, as OpenAI does, as a JSON
/// string).
fn calls(id: &str, name: &str, arguments: &Value) -> Canned {
    let body = json!({
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "choices": [{
            "index": 0,
            "message": {
                "role": "assistant",
                "content": null,
                "tool_calls": [{
                    "id": id,
                    "type": "function",
                    "function": { "name": name, "arguments": arguments.to_string() }
                }]
            },
            "finish_reason": "tool_calls"
        }]
    });
    Canned::status(200, &body.to_string())
}

#[test]
fn a_build_socket_writes_edits_reads_and_lists_through_openai_tool_calls() {
    let server = Server::start(vec![
        calls(
            "c1",
            "write",
            &json!({"path": "greet.txt", "content": "hello\n"}),
        ),
        calls(
            "c2",
            "edit",
            &json!({"path": "greet.txt", "edits": [{"oldText": "hello", "newText": "hello, world"}]}),
        ),
        calls("c3", "read", &json!({"path": "greet.txt"})),
        calls("c4", "bash", &json!({"command": "ls"})),
        Canned::reply("Wrote greet.txt.", None),
    ]);
    let work = tempfile::tempdir().unwrap();
    let mut started = crate::drive::started(fixture("loadouts/tools.json"), None, "oa");
    started.workdir = Some(work.path().display().to_string());
    let log = InMemoryLog::new();
    let clock = FixedClock::stepping(1_800_000_000_000, 7);
    let mut agent = OpenAiAgent::new(&server.base, "test-model", None, Duration::from_secs(10))
        .unwrap()
        .with_backoff(Duration::ZERO);
    let mut driver = Driver::start(&log, &clock, started, work.path()).unwrap();
    let stop = driver.drive(&mut agent).unwrap();
    assert_eq!(stop.status, Status::Completed, "{stop:?}");
    assert_eq!(
        std::fs::read_to_string(work.path().join("greet.txt")).unwrap(),
        "hello, world\n"
    );
    let events = events(&log, "oa");
    let called: Vec<&str> = events
        .iter()
        .filter_map(|e| match e {
            Event::ToolCalled(c) => Some(c.call.as_str()),
            _ => None,
        })
        .collect();
    let finished: Vec<&str> = events
        .iter()
        .filter_map(|e| match e {
            Event::ToolFinished(f) if !f.error => Some(f.call.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(called, ["c1", "c2", "c3", "c4"]);
    assert_eq!(finished, called);
    // Arguments are recorded as received: OpenAI's JSON string.
    let first = events.iter().find_map(|e| match e {
        Event::ToolCalled(c) => Some(c.arguments.clone()),
        _ => None,
    });
    assert!(matches!(first, Some(Value::String(_))), "{first:?}");
    assert_eq!(
        castlog_replay::redecide::redecide(&log, &castlog_core::id::CastId::new("oa")).unwrap(),
        None
    );

    let requests = server.requests();
    assert_eq!(requests.len(), 5);
    let offered: Vec<String> = requests[0].json()["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        offered,
        ["read", "write", "edit", "bash", "ls", "grep", "find"]
    );
    assert_eq!(requests[0].json()["tools"][1]["type"], "function");
    assert!(
        requests[0].json()["tools"][1]["function"]["parameters"]["required"]
            .as_array()
            .unwrap()
            .contains(&json!("content"))
    );
    // The last request carries each call and its result in the OpenAI shape, in order.
    let messages = requests[4].json()["messages"].as_array().unwrap().clone();
    let tools: Vec<&Value> = messages.iter().filter(|m| m["role"] == "tool").collect();
    assert_eq!(tools.len(), 4);
    assert_eq!(tools[0]["tool_call_id"], "c1");
    assert_eq!(tools[3]["tool_call_id"], "c4");
    assert!(
        tools[2]["content"]
            .as_str()
            .unwrap()
            .contains("hello, world")
    );
    let asked: Vec<&Value> = messages
        .iter()
        .filter(|m| m["role"] == "assistant" && m.get("tool_calls").is_some())
        .collect();
    assert_eq!(asked.len(), 4);
    assert_eq!(asked[1]["tool_calls"][0]["id"], "c2");
    assert_eq!(asked[1]["tool_calls"][0]["function"]["name"], "edit");
    let sent: Value = serde_json::from_str(
        asked[1]["tool_calls"][0]["function"]["arguments"]
            .as_str()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(sent["edits"][0]["newText"], "hello, world");
    let call_at = messages
        .iter()
        .position(|m| m["tool_calls"][0]["id"] == "c1");
    let result_at = messages.iter().position(|m| m["tool_call_id"] == "c1");
    assert_eq!(
        call_at.map(|i| i + 1),
        result_at,
        "a result follows its call"
    );
}
