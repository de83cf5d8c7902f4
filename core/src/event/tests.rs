//! Encoding rules of the event vocabulary.

use super::*;

#[test]
fn kinds_are_unique_snake_case() {
    let mut seen = std::collections::BTreeSet::new();
    for (kind, v) in Event::KINDS {
        assert!(seen.insert(*kind), "duplicate kind {kind}");
        assert!(kind.chars().all(|c| c.is_ascii_lowercase() || c == '_'));
        assert!(*v >= 1);
    }
    assert_eq!(seen.len(), Event::KINDS.len());
}

#[test]
fn encode_then_decode_round_trips() {
    let event = Event::from(EdgeTaken {
        from: SocketId::new("Socket-5"),
        to: Target::Socket(SocketId::new("Socket-4")),
        when: When::NotSatisfied,
        item: Some(ItemKey::new("WI-1")),
        traversal: 2,
    });
    let bytes = event.encode();
    assert_eq!(
        String::from_utf8(bytes.clone()).unwrap(),
        r#"{"from":"Socket-5","to":{"socket":"Socket-4"},"when":"not_satisfied","item":"WI-1","traversal":2}"#
    );
    assert_eq!(
        Event::decode(event.kind(), event.version(), &bytes),
        Ok(event)
    );
}

#[test]
fn decode_names_what_is_wrong() {
    assert!(matches!(
        Event::decode("nope", 1, b"{}"),
        Err(DecodeError::UnknownKind { .. })
    ));
    assert!(matches!(
        Event::decode("cast_completed", 9, b"{}"),
        Err(DecodeError::FutureVersion { v: 9, max: 1, .. })
    ));
    assert!(matches!(
        Event::decode("edge_taken", 1, b"{\"from\":1}"),
        Err(DecodeError::Payload { .. })
    ));
}

#[test]
fn an_undecodable_payload_is_told_in_words() {
    let err = Event::decode("cast_aborted", 1, b"5").unwrap_err();
    assert_eq!(
        err.to_string(),
        "payload of \"cast_aborted\" does not decode: invalid type: integer `5`, expected an object, at column 1"
    );
}

#[test]
fn flattened_allowance_round_trips() {
    let event = Event::from(AllowanceExhausted {
        allowance: Allowance::Edge {
            from: SocketId::new("a"),
            to: Target::End,
            item: None,
        },
        count: 3,
        limit: 3,
    });
    let bytes = event.encode();
    assert_eq!(Event::decode(event.kind(), 1, &bytes), Ok(event));
}

#[test]
fn tool_events_round_trip_and_leave_defaults_out() {
    use crate::event::{ToolCalled, ToolFinished, ToolInterrupted};
    use crate::id::{Digest, SocketId, Turn, Visit};
    let called = Event::from(ToolCalled {
        call: "call-1".into(),
        tool: "write".into(),
        arguments: serde_json::json!({"path": "a.txt", "content": "x"}),
        socket: SocketId::new("Build"),
        visit: Visit(1),
        turn: Turn(1),
    });
    let finished = Event::from(ToolFinished {
        call: "call-1".into(),
        result: Digest::ZERO,
        output: String::new(),
        exit: None,
        error: false,
        truncated: false,
        duration_ms: 3,
    });
    let interrupted = Event::from(ToolInterrupted {
        call: "call-2".into(),
        tool: "bash".into(),
    });
    for event in [&called, &finished, &interrupted] {
        let bytes = event.encode();
        assert_eq!(&Event::decode(event.kind(), 1, &bytes).unwrap(), event);
    }
    let text = String::from_utf8(finished.encode()).unwrap();
    assert!(!text.contains("error") && !text.contains("truncated") && !text.contains("exit"));
    assert_eq!(finished.blob_refs(), vec![Digest::ZERO]);
    assert_eq!(called.kind(), "tool_called");
}

#[test]
fn scope_activated_round_trips_with_its_payload_pinned() {
    let activated = Event::from(ScopeActivated {
        socket: SocketId::new("Socket-1"),
        visit: Visit(1),
        item: None,
        previous: None,
        scope: Some(ExecutionScope {
            id: "lane-a".into(),
            cwd: "scope-demo/lane".into(),
            state: None,
            exports: Some(serde_json::json!({"branch": "castlog/c1"})),
        }),
    });
    let bytes = activated.encode();
    assert_eq!(
        String::from_utf8(bytes.clone()).unwrap(),
        r#"{"socket":"Socket-1","visit":1,"scope":{"id":"lane-a","cwd":"scope-demo/lane","exports":{"branch":"castlog/c1"}}}"#
    );
    assert_eq!(Event::decode("scope_activated", 1, &bytes), Ok(activated));
    let base = Event::from(ScopeActivated {
        socket: SocketId::new("Socket-4"),
        visit: Visit(1),
        item: None,
        previous: Some("lane-a".into()),
        scope: None,
    });
    assert_eq!(
        String::from_utf8(base.encode()).unwrap(),
        r#"{"socket":"Socket-4","visit":1,"previous":"lane-a"}"#
    );
}

/// The stored form of the lane events, pinned: a change here would make recorded lanes and
/// their parents stop verifying.
#[test]
fn lane_events_encode_as_pinned() {
    let cast = CastId::new("p.lane-a");
    let planned = Event::from(LanesPlanned {
        socket: SocketId::new("Socket-1"),
        lanes: vec![LanePlan {
            name: "a".into(),
            cast: cast.clone(),
            items: vec![0, 2],
        }],
        max_concurrency: 2,
    });
    assert_eq!(
        String::from_utf8(planned.encode()).unwrap(),
        r#"{"socket":"Socket-1","lanes":[{"name":"a","cast":"p.lane-a","items":[0,2]}],"max_concurrency":2}"#
    );
    let started = Event::from(LaneStarted {
        cast: cast.clone(),
        parent: CastId::new("p"),
        parent_seq: Seq(7),
        parent_hash: Digest([0; 32]),
        name: "a".into(),
        items: vec![0, 2],
    });
    let text = String::from_utf8(started.encode()).unwrap();
    assert!(
        text.starts_with(r#"{"cast":"p.lane-a","parent":"p","parent_seq":7,"parent_hash":""#),
        "{text}"
    );
    assert!(text.ends_with(r#"","name":"a","items":[0,2]}"#), "{text}");
    let joined = Event::from(LanesJoined {
        lanes: vec![LaneOutcome {
            name: "a".into(),
            cast,
            status: LaneStatus::Completed,
            head: Seq(46),
            hash: Digest([0; 32]),
            output: None,
            satisfied: Some(true),
            reason: None,
            usage: Usage::default(),
            scope: None,
        }],
    });
    let text = String::from_utf8(joined.encode()).unwrap();
    assert!(
        text.starts_with(
            r#"{"lanes":[{"name":"a","cast":"p.lane-a","status":"completed","head":46,"hash":""#
        ),
        "{text}"
    );
    assert!(
        text.ends_with(r#"","satisfied":true,"usage":{"input":0,"output":0}}]}"#),
        "{text}"
    );
    for event in [planned, started, joined] {
        assert_eq!(
            Event::decode(event.kind(), event.version(), &event.encode()),
            Ok(event)
        );
    }
}

#[test]
fn a_refused_response_format_is_an_agent_failure_flag_left_out_when_false() {
    use crate::event::{AgentFailed, FailureClass};
    use crate::id::{SocketId, Turn, Visit};
    let failed = |structured_off| {
        Event::from(AgentFailed {
            socket: SocketId::new("Eval"),
            visit: Visit(1),
            turn: Turn(1),
            class: FailureClass::Transient,
            message: "HTTP 400".into(),
            attempt: 1,
            structured_off,
        })
    };
    let plain = String::from_utf8(failed(false).encode()).unwrap();
    assert_eq!(
        plain,
        r#"{"socket":"Eval","visit":1,"turn":1,"class":"transient","message":"HTTP 400","attempt":1}"#
    );
    let refused = failed(true);
    let bytes = refused.encode();
    assert!(
        String::from_utf8(bytes.clone())
            .unwrap()
            .ends_with(r#""structured_off":true}"#)
    );
    assert_eq!(Event::decode("agent_failed", 1, &bytes), Ok(refused));
}

/// `socket_completed` version 2 leaves out a `parsed` that is what `output` parses to; version
/// 1's bytes are still written for a re-decision of an older cast, and both read the same.
#[test]
fn socket_completed_stores_a_parse_of_its_output_once() {
    let completed = |output: &str, parsed: Option<Value>| {
        Event::from(SocketCompleted {
            socket: SocketId::new("Socket-3"),
            visit: Visit(2),
            item: Some(ItemKey::new("WI-1")),
            output: output.into(),
            output_of: None,
            parsed,
            satisfied: Some(true),
            finalized: false,
        })
    };
    let reply = r#"{"satisfied": true, "feedback": "ok"}"#;
    let event = completed(
        reply,
        Some(serde_json::json!({"satisfied": true, "feedback": "ok"})),
    );
    let v2 = r#"{"socket":"Socket-3","visit":2,"item":"WI-1","output":"{\"satisfied\": true, \"feedback\": \"ok\"}","parsed_from_output":true,"satisfied":true}"#;
    let v1 = r#"{"socket":"Socket-3","visit":2,"item":"WI-1","output":"{\"satisfied\": true, \"feedback\": \"ok\"}","parsed":{"feedback":"ok","satisfied":true},"satisfied":true}"#;
    assert_eq!(event.version(), 3);
    // An output that is no reply of the cast is written as version 2 wrote it.
    assert_eq!(String::from_utf8(event.encode()).unwrap(), v2);
    assert_eq!(event.encode_at(2), Some(event.encode()));
    assert_eq!(String::from_utf8(event.encode_at(1).unwrap()).unwrap(), v1);
    assert_eq!(event.encode_at(4), None);
    assert_eq!(
        Event::decode("socket_completed", 3, v2.as_bytes()),
        Ok(event.clone())
    );
    assert_eq!(
        Event::decode("socket_completed", 2, v2.as_bytes()),
        Ok(event.clone())
    );
    assert_eq!(
        Event::decode("socket_completed", 1, v1.as_bytes()),
        Ok(event)
    );

    // A parse that differs from the output (events taken out) is kept in full.
    let differs = completed(reply, Some(serde_json::json!({"satisfied": true})));
    let bytes = differs.encode();
    assert!(String::from_utf8_lossy(&bytes).contains(r#""parsed":{"satisfied":true}"#));
    assert_eq!(Event::decode("socket_completed", 2, &bytes), Ok(differs));
    // A text socket's output is never parsed.
    let text = completed("plain words", None);
    assert!(!String::from_utf8_lossy(&text.encode()).contains("parsed"));
    assert_eq!(text.encode_at(1), Some(text.encode()));
    // A JSON text of a text socket is not taken for a parse.
    let json_text = completed("{}", None);
    assert_eq!(
        Event::decode("socket_completed", 2, &json_text.encode()),
        Ok(json_text)
    );
}

/// `socket_completed` version 3 names the reply its output is instead of repeating it; it reads
/// back only with that reply, of the same socket and visit, and version 2's bytes are still
/// written for a re-decision of an older cast.
#[test]
fn socket_completed_names_the_reply_its_output_is() {
    let reply = r#"{"satisfied": true, "feedback": "ok"}"#;
    let event = Event::from(SocketCompleted {
        socket: SocketId::new("Socket-3"),
        visit: Visit(2),
        item: Some(ItemKey::new("WI-1")),
        output: reply.into(),
        output_of: Some(Seq(41)),
        parsed: Some(serde_json::json!({"satisfied": true, "feedback": "ok"})),
        satisfied: Some(true),
        finalized: false,
    });
    let v3 = r#"{"socket":"Socket-3","visit":2,"item":"WI-1","output_of":41,"parsed_from_output":true,"satisfied":true}"#;
    let v2 = r#"{"socket":"Socket-3","visit":2,"item":"WI-1","output":"{\"satisfied\": true, \"feedback\": \"ok\"}","parsed_from_output":true,"satisfied":true}"#;
    assert_eq!(String::from_utf8(event.encode()).unwrap(), v3);
    assert_eq!(String::from_utf8(event.encode_at(2).unwrap()).unwrap(), v2);
    let earlier = |socket: &str, visit: u32| {
        Earlier::Reply(EarlierReply {
            socket: SocketId::new(socket),
            visit: Visit(visit),
            text: reply.into(),
        })
    };
    let mut asked = Vec::new();
    let decoded = Event::decode_with("socket_completed", 3, v3.as_bytes(), &mut |seq| {
        asked.push(seq);
        Some(earlier("Socket-3", 2))
    });
    assert_eq!(decoded, Ok(event));
    assert_eq!(asked, [Seq(41)]);
    // Without the reply the payload does not decode, and says which seq it needs.
    let err = Event::decode("socket_completed", 3, v3.as_bytes()).unwrap_err();
    assert_eq!(
        err,
        DecodeError::Unresolved {
            kind: "socket_completed".into(),
            seq: Seq(41)
        }
    );
    assert!(err.to_string().contains("event at seq 41"), "{err}");
    // A reply of another visit is not this output.
    let err = Event::decode_with("socket_completed", 3, v3.as_bytes(), &mut |_| {
        Some(earlier("Socket-3", 1))
    })
    .unwrap_err();
    assert!(err.to_string().contains("not of Socket-3 visit 2"), "{err}");
    // Version 2 never names a reply: `output_of` there is an error, resolved or not.
    let err = Event::decode_with("socket_completed", 2, v3.as_bytes(), &mut |_| {
        Some(earlier("Socket-3", 2))
    })
    .unwrap_err();
    assert!(err.to_string().contains("reply at seq 41"), "{err}");
    let both = r#"{"socket":"S","visit":1,"output":"x","output_of":3}"#;
    let err = Event::decode("socket_completed", 3, both.as_bytes()).unwrap_err();
    assert!(err.to_string().contains("both given"), "{err}");
}

#[test]
fn a_socket_completed_claiming_a_parse_it_cannot_have_is_refused() {
    for (payload, says) in [
        (
            r#"{"socket":"S","visit":1,"output":"not json","parsed_from_output":true}"#,
            "`output` is not JSON",
        ),
        (
            r#"{"socket":"S","visit":1,"output":"{}","parsed":{},"parsed_from_output":true}"#,
            "both given",
        ),
    ] {
        let err = Event::decode("socket_completed", 2, payload.as_bytes()).unwrap_err();
        assert!(err.to_string().contains(says), "{err}");
    }
}

/// `data_assigned` and `rework_routed` version 2 name the completion their value or reason is
/// read from; they read back only with it, of the same socket, and version 1's bytes are still
/// written for a re-decision of an older cast.
#[test]
fn assignments_and_rework_name_the_completion_they_quote() {
    let context = format!("verdict  rejected:\n{}", "word ".repeat(300));
    let whole = serde_json::json!({"context": context, "satisfied": false});
    let completion = |socket: &str| {
        Some(Earlier::Completion {
            socket: SocketId::new(socket),
            whole: whole.clone(),
        })
    };
    let assigned = Event::from(DataAssigned {
        socket: SocketId::new("Eval"),
        path: "lastFeedback".into(),
        value: Value::String(context.clone()),
        from: Some(ValueFrom {
            seq: Seq(7),
            source: "$.context".into(),
        }),
    });
    let v2 = r#"{"socket":"Eval","path":"lastFeedback","value_of":7,"source":"$.context"}"#;
    assert_eq!(assigned.version(), 2);
    assert_eq!(String::from_utf8(assigned.encode()).unwrap(), v2);
    let v1 = assigned.encode_at(1).unwrap();
    assert!(String::from_utf8_lossy(&v1).contains(r#""value":"verdict  rejected:"#));
    let read = |kind: &str, v: u16, bytes: &[u8], socket: &str| {
        Event::decode_with(kind, v, bytes, &mut |seq| {
            assert_eq!(seq, Seq(7));
            completion(socket)
        })
    };
    assert_eq!(
        read("data_assigned", 2, v2.as_bytes(), "Eval"),
        Ok(assigned.clone())
    );
    let mut plain = assigned;
    if let Event::DataAssigned(a) = &mut plain {
        a.from = None;
    }
    assert_eq!(read("data_assigned", 1, &v1, "Eval"), Ok(plain));
    let err = read("data_assigned", 2, v2.as_bytes(), "Build").unwrap_err();
    assert!(
        err.to_string()
            .contains("a completion of Build, not of Eval"),
        "{err}"
    );
    assert!(matches!(
        Event::decode("data_assigned", 2, v2.as_bytes()),
        Err(DecodeError::Unresolved { seq: Seq(7), .. })
    ));
    // A null value is a value, not a missing one.
    let null = r#"{"socket":"Eval","path":"x","value":null}"#;
    assert!(Event::decode("data_assigned", 1, null.as_bytes()).is_ok());

    // The reason is the context collapsed and cut at 900 characters, as the machine quotes it.
    let reason = quoted_reason(&context);
    assert!(
        reason.starts_with("verdict rejected: word word"),
        "{reason}"
    );
    assert_eq!(reason.chars().count(), REASON_CHARS + 1);
    assert!(reason.ends_with('…'));
    let rework = Event::from(ReworkRouted {
        source: SocketId::new("Eval"),
        materia_label: "Auto-Eval".into(),
        target: SocketId::new("Build"),
        item: Some(ItemKey::new("WI-1")),
        reason,
        reason_of: Some(Seq(7)),
    });
    let v2 = r#"{"source":"Eval","materia_label":"Auto-Eval","target":"Build","item":"WI-1","reason_of":7}"#;
    assert_eq!(String::from_utf8(rework.encode()).unwrap(), v2);
    assert_eq!(
        read("rework_routed", 2, v2.as_bytes(), "Eval"),
        Ok(rework.clone())
    );
    let v1 = rework.encode_at(1).unwrap();
    assert!(String::from_utf8_lossy(&v1).contains(r#""reason":"verdict rejected"#));
    assert!(read("rework_routed", 2, v2.as_bytes(), "Build").is_err());
    let err = Event::decode("rework_routed", 1, v2.as_bytes()).unwrap_err();
    assert!(err.to_string().contains("not part of version 1"), "{err}");
}
