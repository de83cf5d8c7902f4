//! Request bodies of a webhook sink (`bodyTemplate`, `bodyMapping`, `typeMap`,
//! `severityMap`).
//!
//! `mapped` writes the fields of [`MAPPED_FIELDS`], each read from the enriched event's
//! field of that name unless `bodyMapping` names another (`"runtimeRunId": "castId"` is
//! the default of that one), then the `static` fields of `bodyMapping` over them. The type
//! goes through `typeMap` and the severity through `severityMap` (a value not in the map is
//! kept). `passthrough` sends the enriched event, `envelope` wraps it as `data` under the
//! event's id, type, time, cast and sequence, `none` sends `{}`.

use serde_json::{Map, Value, json};

use super::{BodyTemplate, BusEvent, Sink};

/// The output fields of the `mapped` body, each with the enriched event's field it is read
/// from by default.
pub const MAPPED_FIELDS: [(&str, &str); 8] = [
    ("eventId", "eventId"),
    ("eventType", "type"),
    ("occurredAt", "occurredAt"),
    ("severity", "severity"),
    ("message", "message"),
    ("payload", "payload"),
    ("runtimeRunId", "castId"),
    ("sequence", "sequence"),
];

/// `bodyMapping`: where each output field is read from, and fixed fields.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct BodyMapping {
    /// Output field → the enriched event's field to read (only those the config names).
    pub fields: Vec<(String, String)>,
    /// `static`: fields written as they are, last.
    pub statics: Map<String, Value>,
}

impl BodyMapping {
    fn source<'a>(&'a self, field: &str, default: &'a str) -> &'a str {
        self.fields
            .iter()
            .find(|(out, _)| out == field)
            .map_or(default, |(_, from)| from.as_str())
    }
}

/// The body `sink` sends for `event`.
pub fn render(sink: &Sink, event: &BusEvent) -> Value {
    let enriched = serde_json::to_value(event).unwrap_or(Value::Null);
    match sink.body_template {
        BodyTemplate::Passthrough => enriched,
        BodyTemplate::None => json!({}),
        BodyTemplate::Envelope => json!({
            "eventId": event.event_id,
            "type": mapped(&sink.type_map, &event.kind),
            "occurredAt": event.occurred_at,
            "castId": event.cast_id,
            "sequence": event.sequence,
            "data": enriched,
        }),
        BodyTemplate::Mapped => {
            let mut body = Map::new();
            for (field, default) in MAPPED_FIELDS {
                let source = sink.body_mapping.source(field, default);
                let Some(value) = enriched.get(source) else {
                    continue;
                };
                let value = match (source, value) {
                    ("type", Value::String(s)) => Value::String(mapped(&sink.type_map, s)),
                    ("severity", Value::String(s)) => Value::String(mapped(&sink.severity_map, s)),
                    _ => value.clone(),
                };
                body.insert(field.to_owned(), value);
            }
            for (key, value) in &sink.body_mapping.statics {
                body.insert(key.clone(), value.clone());
            }
            Value::Object(body)
        }
    }
}

fn mapped(map: &std::collections::BTreeMap<String, String>, value: &str) -> String {
    map.get(value).cloned().unwrap_or_else(|| value.to_owned())
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::eventing::{EventFilter, REDACTED};
    use crate::id::{BusEventId, CastId, SinkId};

    fn event() -> BusEvent {
        BusEvent {
            event_id: BusEventId::new("e-1"),
            kind: "lifecycle.cast.failed".into(),
            occurred_at: "2026-01-01T00:00:00.000Z".into(),
            sequence: 7,
            cast_id: CastId::new("c"),
            socket_id: "lifecycle".into(),
            materia: "pi-materia".into(),
            materia_label: None,
            visit: None,
            item_key: None,
            item_label: None,
            severity: "error".into(),
            message: Some("cast c failed".into()),
            payload: json!({"reason": "boom"}),
            source: None,
        }
    }

    fn sink(template: BodyTemplate) -> Sink {
        Sink {
            id: SinkId::new("ops"),
            enabled: true,
            url: "http://127.0.0.1:9/hook".into(),
            method: "POST".into(),
            headers: vec![("X-Token".into(), REDACTED.into())],
            body_template: template,
            body_mapping: BodyMapping::default(),
            type_map: BTreeMap::from([("lifecycle.cast.failed".into(), "run.failed".into())]),
            severity_map: BTreeMap::from([("error".into(), "critical".into())]),
            filter: EventFilter::default(),
            timeout_ms: 1,
            max_retries: 0,
            retry_backoff_ms: 0,
            max_backoff_ms: 0,
            discarding_after: 1,
            max_queue_size: 1,
        }
    }

    #[test]
    fn mapped_maps_type_and_severity_and_adds_statics_last() {
        let mut sink = sink(BodyTemplate::Mapped);
        sink.body_mapping.fields = vec![("message".into(), "socketId".into())];
        sink.body_mapping
            .statics
            .insert("sequence".into(), json!("fixed"));
        sink.body_mapping
            .statics
            .insert("team".into(), json!("ops"));
        assert_eq!(
            render(&sink, &event()),
            json!({
                "eventId": "e-1",
                "eventType": "run.failed",
                "occurredAt": "2026-01-01T00:00:00.000Z",
                "severity": "critical",
                "message": "lifecycle",
                "payload": {"reason": "boom"},
                "runtimeRunId": "c",
                "sequence": "fixed",
                "team": "ops",
            })
        );
    }

    #[test]
    fn passthrough_envelope_and_none() {
        let enriched = serde_json::to_value(event()).unwrap();
        assert_eq!(render(&sink(BodyTemplate::Passthrough), &event()), enriched);
        let envelope = render(&sink(BodyTemplate::Envelope), &event());
        assert_eq!(envelope["type"], "run.failed");
        assert_eq!(envelope["sequence"], 7);
        assert_eq!(envelope["data"], enriched);
        assert_eq!(render(&sink(BodyTemplate::None), &event()), json!({}));
    }
}
