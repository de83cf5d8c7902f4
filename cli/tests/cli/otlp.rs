//! OpenTelemetry traces of a cast: `export --format otlp-json` and `--otlp-endpoint`.
//! `fixtures/exports/stream.otlp.json` is the trace of the `stream` fixture cast; it comes
//! only from the log, so it is the same bytes on every machine and every export.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::mpsc;

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use prost::Message as _;
use serde_json::Value;

use crate::common::{Sandbox, fixture, scripted};

fn imported() -> Sandbox {
    let sandbox = Sandbox::new();
    let run = sandbox.run(&["import", &fixture("exports/stream.jsonl")]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    sandbox
}

/// The OTLP/JSON trace of `cast`, with `extra` global flags.
fn export(sandbox: &Sandbox, cast: &str, extra: &[&str]) -> String {
    let mut args = extra.to_vec();
    args.extend(["export", cast, "--format", "otlp-json", "-o", "-"]);
    let run = sandbox.run(&args);
    assert_eq!(run.code, 0, "{}", run.stderr);
    run.stdout
}

fn spans(trace: &Value) -> &Vec<Value> {
    trace["resourceSpans"][0]["scopeSpans"][0]["spans"]
        .as_array()
        .unwrap()
}

fn attribute<'a>(span: &'a Value, key: &str) -> Option<&'a Value> {
    span["attributes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["key"] == key)
        .map(|a| &a["value"])
}

#[test]
fn the_otlp_json_export_of_the_fixture_cast_is_pinned_and_reproducible() {
    let sandbox = imported();
    let first = export(&sandbox, "fixture-stream", &[]);
    let pinned = std::fs::read_to_string(fixture("exports/stream.otlp.json")).unwrap();
    assert_eq!(first, pinned);
    // Another database holding the same cast gives the same bytes: nothing comes from the
    // clock or from chance.
    let other = imported();
    assert_eq!(export(&other, "fixture-stream", &[]), first);
    let file = sandbox.path("trace.json");
    let run = sandbox.run(&[
        "export",
        "fixture-stream",
        "--format",
        "otlp-json",
        "-o",
        file.to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(std::fs::read_to_string(&file).unwrap(), first);
    assert_eq!(run.json()["spans"], 23);
    assert_eq!(run.json()["format"], "otlp-json");
}

#[test]
fn model_calls_and_visits_carry_the_gen_ai_attributes() {
    let sandbox = imported();
    let trace: Value = serde_json::from_str(&export(&sandbox, "fixture-stream", &[])).unwrap();
    let spans = spans(&trace);
    let root = &spans[0];
    assert_eq!(root["parentSpanId"], "");
    let trace_id = root["traceId"].as_str().unwrap();
    assert!(spans.iter().all(|s| s["traceId"] == trace_id));

    let calls: Vec<&Value> = spans.iter().filter(|s| s["name"] == "chat").collect();
    assert_eq!(calls.len(), 11, "one span per prompt_dispatched");
    let mut input = 0;
    for call in &calls {
        assert_eq!(
            attribute(call, "gen_ai.operation.name").unwrap()["stringValue"],
            "chat"
        );
        assert_eq!(call["kind"], 3, "a model call is a client span");
        let finish = &attribute(call, "gen_ai.response.finish_reasons").unwrap()["arrayValue"];
        assert_eq!(finish["values"][0]["stringValue"], "stop");
        let tokens = attribute(call, "gen_ai.usage.input_tokens").unwrap()["intValue"]
            .as_str()
            .unwrap();
        input += tokens.parse::<u64>().unwrap();
        assert!(attribute(call, "gen_ai.usage.output_tokens").is_some());
        // Each call is a child of its visit, which is a child of the cast.
        let parent = spans
            .iter()
            .find(|s| s["spanId"] == call["parentSpanId"])
            .unwrap();
        assert_eq!(
            attribute(parent, "gen_ai.operation.name").unwrap()["stringValue"],
            "invoke_agent"
        );
        assert_eq!(parent["parentSpanId"], root["spanId"]);
    }
    assert_eq!(
        attribute(root, "gen_ai.usage.input_tokens").unwrap()["intValue"],
        input.to_string(),
        "the cast's usage is the sum of its calls'"
    );

    let utility = spans
        .iter()
        .find(|s| s["name"] == "utility Detect-VCS")
        .unwrap();
    assert_eq!(
        attribute(utility, "castlog.utility.exit_code").unwrap()["intValue"],
        "0"
    );
    // The repair and the rework are events on their visit's span.
    let events: Vec<&str> = spans
        .iter()
        .flat_map(|s| s["events"].as_array().unwrap())
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    assert!(events.contains(&"output_rejected"), "{events:?}");
    assert!(events.contains(&"rework_routed"), "{events:?}");
}

#[test]
fn texts_are_in_the_trace_only_with_otel_content() {
    let sandbox = imported();
    let without = export(&sandbox, "fixture-stream", &[]);
    for key in [
        "gen_ai.input.messages",
        "gen_ai.output.messages",
        "castlog.rework.reason",
    ] {
        assert!(!without.contains(key), "{key} without --otel-content");
    }
    assert!(!without.contains("Added greet()"), "a reply's text leaked");

    let with: Value =
        serde_json::from_str(&export(&sandbox, "fixture-stream", &["--otel-content"])).unwrap();
    let call = spans(&with).iter().find(|s| s["name"] == "chat").unwrap();
    let messages = |key: &str| -> Value {
        let json = attribute(call, key).unwrap()["stringValue"]
            .as_str()
            .unwrap();
        serde_json::from_str(json).unwrap()
    };
    let input = messages("gen_ai.input.messages");
    assert_eq!(input[0]["role"], "system");
    assert_eq!(input[0]["parts"][0]["type"], "text");
    let output = messages("gen_ai.output.messages");
    assert_eq!(output[0]["role"], "assistant");
    assert!(
        output[0]["parts"][0]["content"]
            .as_str()
            .unwrap()
            .contains("workItems")
    );
}

/// A one-connection-at-a-time HTTP receiver that answers 200 and hands on each body.
fn receiver() -> (String, mpsc::Receiver<(String, Vec<u8>)>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut head = Vec::new();
            let mut length = 0;
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                    break;
                }
                let lower = line.to_ascii_lowercase();
                if let Some(value) = lower.strip_prefix("content-length:") {
                    length = value.trim().parse().unwrap_or(0);
                }
                head.push(line);
            }
            let mut body = vec![0; length];
            if reader.read_exact(&mut body).is_err() {
                return;
            }
            // Handed on before the answer, so it is here once castlog has its answer.
            if tx.send((head.concat(), body)).is_err() {
                return;
            }
            let _ = stream
                .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n");
        }
    });
    (url, rx)
}

#[test]
fn run_with_otlp_endpoint_posts_the_casts_trace_as_protobuf() {
    let sandbox = Sandbox::new();
    let (url, bodies) = receiver();
    let mut run = sandbox.build_loop("otlp-1", &scripted("build-loop.jsonl"));
    run.args(["--otlp-endpoint", &url]);
    let run = sandbox.finish(&mut run);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.json()["status"], "completed");
    assert!(!run.stderr.contains("warning"), "{}", run.stderr);

    let mut spans = Vec::new();
    for (head, body) in bodies.try_iter() {
        assert!(head.starts_with("POST /v1/traces "), "{head}");
        assert!(
            head.to_ascii_lowercase()
                .contains("content-type: application/x-protobuf")
        );
        let sent = ExportTraceServiceRequest::decode(body.as_slice()).unwrap();
        spans.extend(sent.resource_spans[0].scope_spans[0].spans.clone());
    }
    // What was sent, over every request, is what `export --format otlp-json` writes for the
    // cast, each span once.
    let exported: ExportTraceServiceRequest =
        serde_json::from_str(&export(&sandbox, "otlp-1", &[])).unwrap();
    let mut all = exported.resource_spans[0].scope_spans[0].spans.clone();
    spans.sort_by_key(|s| s.span_id.clone());
    all.sort_by_key(|s| s.span_id.clone());
    assert_eq!(spans, all);
    assert!(spans.iter().any(|s| s.name == "chat"));
    assert!(spans.iter().any(|s| s.name.starts_with("invoke_agent ")));
}

#[test]
fn an_unreachable_otlp_endpoint_is_a_warning_not_a_failed_cast() {
    let sandbox = Sandbox::new();
    // A port that was free a moment ago: nothing listens there.
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut run = sandbox.build_loop("otlp-down", &scripted("build-loop.jsonl"));
    run.args(["--otlp-endpoint", &format!("http://127.0.0.1:{port}")]);
    let run = sandbox.finish(&mut run);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.json()["status"], "completed");
    assert!(
        run.stderr.contains("warning: --otlp-endpoint") && run.stderr.contains("otlp-down"),
        "{}",
        run.stderr
    );
}

/// `--otlp-endpoint` sends a driven cast's spans as it proceeds: the receiver decodes a
/// socket visit's span while the cast's agent still holds a later turn.
#[test]
fn spans_reach_the_collector_while_the_cast_is_still_running() {
    let sandbox = Sandbox::new();
    let (url, bodies) = receiver();
    let go = sandbox.path("go");
    let calls = sandbox.path("calls");
    let lines = fixture("scripts/build-loop.jsonl");
    // The fourth call waits (at most 60 s, so a build that sends only at the end fails below
    // instead of hanging) until the test has seen a visit's span.
    let agent = sandbox.write(
        "agent.py",
        &format!(
            r#"import json, os, sys, time
sys.stdin.read()
try:
    n = int(open({calls:?}).read()) + 1
except FileNotFoundError:
    n = 1
open({calls:?}, "w").write(str(n))
for _ in range(1200):
    if n != 4 or os.path.exists({go:?}):
        break
    time.sleep(0.05)
sys.stdout.write(json.loads(open({lines:?}).read().splitlines()[n - 1])["reply"])
"#
        ),
    );
    let mut child = sandbox
        .build_loop("live", &format!("cmd:python3 {agent}"))
        .args(["--otlp-endpoint", &url])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut seen = Vec::new();
    loop {
        let (_, body) = bodies
            .recv_timeout(std::time::Duration::from_secs(120))
            .expect("no span came while the cast ran");
        let sent = ExportTraceServiceRequest::decode(body.as_slice()).unwrap();
        seen.extend(sent.resource_spans[0].scope_spans[0].spans.clone());
        if seen.iter().any(|s| s.name.starts_with("invoke_agent ")) {
            break;
        }
    }
    assert!(
        child.try_wait().unwrap().is_none() && !go.exists(),
        "the spans came only after the cast was driven"
    );
    assert!(
        !seen.iter().any(|s| s.name.starts_with("cast ")),
        "the root span is sent last"
    );
    std::fs::write(&go, "").unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    seen.extend(bodies.try_iter().flat_map(|(_, body)| {
        ExportTraceServiceRequest::decode(body.as_slice())
            .unwrap()
            .resource_spans[0]
            .scope_spans[0]
            .spans
            .clone()
    }));
    let exported: ExportTraceServiceRequest =
        serde_json::from_str(&export(&sandbox, "live", &[])).unwrap();
    let mut all = exported.resource_spans[0].scope_spans[0].spans.clone();
    seen.sort_by_key(|s| s.span_id.clone());
    all.sort_by_key(|s| s.span_id.clone());
    assert_eq!(seen, all, "every span once, as the export has it");
}
