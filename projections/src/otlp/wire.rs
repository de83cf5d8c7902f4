//! The wire side of [`super`]: span and trace ids, OTLP attribute values, the request that
//! carries the spans and its two encodings (OTLP/JSON and protobuf).

use castlog_core::event::{Target, When};
use castlog_core::id::CastId;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{
    AnyValue, ArrayValue, InstrumentationScope, KeyValue, any_value,
};
use opentelemetry_proto::tonic::resource::v1::Resource;
use opentelemetry_proto::tonic::trace::v1::status::StatusCode;
use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans, Span, Status};
use prost::Message as _;

use super::SCOPE;

/// The blake3 derive-key context of trace ids.
pub const TRACE_CONTEXT: &str = "castlog otlp trace id v1";
/// The blake3 derive-key context of span ids.
pub const SPAN_CONTEXT: &str = "castlog otlp span id v1";

/// The trace id of `cast` (see the module documentation).
pub fn trace_id(cast: &CastId) -> [u8; 16] {
    let hash = blake3::derive_key(TRACE_CONTEXT, cast.as_str().as_bytes());
    let mut id = [0; 16];
    id.copy_from_slice(&hash[..16]);
    nonzero(&mut id);
    id
}

/// The id of the span `identity` of `cast` (see the module documentation).
pub fn span_id(cast: &CastId, identity: &str) -> [u8; 8] {
    let mut hasher = blake3::Hasher::new_derive_key(SPAN_CONTEXT);
    hasher.update(&(cast.as_str().len() as u64).to_le_bytes());
    hasher.update(cast.as_str().as_bytes());
    hasher.update(identity.as_bytes());
    let mut id = [0; 8];
    id.copy_from_slice(&hasher.finalize().as_bytes()[..8]);
    nonzero(&mut id);
    id
}

/// An all-zero id is invalid in OTLP; a hash that gives one (with odds of 2^-64) is nudged.
fn nonzero(id: &mut [u8]) {
    if id.iter().all(|b| *b == 0) {
        id[id.len() - 1] = 1;
    }
}

pub(super) fn ns(at_ms: u64) -> u64 {
    at_ms.saturating_mul(1_000_000)
}

pub(super) fn text(value: impl Into<String>) -> AnyValue {
    AnyValue {
        value: Some(any_value::Value::StringValue(value.into())),
    }
}

pub(super) fn int(value: impl TryInto<i64>) -> AnyValue {
    AnyValue {
        value: Some(any_value::Value::IntValue(
            value.try_into().unwrap_or(i64::MAX),
        )),
    }
}

pub(super) fn flag(value: bool) -> AnyValue {
    AnyValue {
        value: Some(any_value::Value::BoolValue(value)),
    }
}

pub(super) fn texts(values: impl IntoIterator<Item = String>) -> AnyValue {
    AnyValue {
        value: Some(any_value::Value::ArrayValue(ArrayValue {
            values: values.into_iter().map(text).collect(),
        })),
    }
}

pub(super) fn kv(key: &str, value: AnyValue) -> KeyValue {
    KeyValue {
        key: key.to_owned(),
        value: Some(value),
        ..Default::default()
    }
}

pub(super) fn target(to: &Target) -> String {
    match to {
        Target::Socket(s) => s.to_string(),
        Target::End => "end".to_owned(),
    }
}

pub(super) fn when(w: When) -> &'static str {
    match w {
        When::Always => "always",
        When::Satisfied => "satisfied",
        When::NotSatisfied => "not_satisfied",
    }
}

pub(super) fn error_status(message: impl Into<String>) -> Option<Status> {
    Some(Status {
        message: message.into(),
        code: StatusCode::Error as i32,
    })
}

/// GenAI message JSON (`gen_ai.input.messages` / `gen_ai.output.messages`): one text part each.
pub(super) fn messages_json<'a>(messages: impl IntoIterator<Item = (&'a str, &'a str)>) -> String {
    let list: Vec<serde_json::Value> = messages
        .into_iter()
        .map(|(role, content)| {
            serde_json::json!({"role": role, "parts": [{"type": "text", "content": content}]})
        })
        .collect();
    serde_json::Value::Array(list).to_string()
}

/// One OTLP request holding `spans` under castlog's resource and scope.
/// One request of `spans` under castlog's resource and instrumentation scope.
pub fn request(spans: Vec<Span>) -> ExportTraceServiceRequest {
    ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            resource: Some(Resource {
                attributes: vec![kv("service.name", text(SCOPE))],
                ..Default::default()
            }),
            scope_spans: vec![ScopeSpans {
                scope: Some(InstrumentationScope {
                    name: SCOPE.to_owned(),
                    ..Default::default()
                }),
                spans,
                schema_url: String::new(),
            }],
            schema_url: String::new(),
        }],
    }
}

/// The OTLP/JSON encoding (the protobuf JSON mapping OTLP/HTTP accepts), pretty-printed.
pub fn to_json(request: &ExportTraceServiceRequest) -> Vec<u8> {
    // Serializing generated messages of strings, numbers and bytes cannot fail.
    let mut bytes = serde_json::to_vec_pretty(request).unwrap_or_default();
    bytes.push(b'\n');
    bytes
}

/// The OTLP/protobuf encoding (`application/x-protobuf`).
pub fn to_protobuf(request: &ExportTraceServiceRequest) -> Vec<u8> {
    request.encode_to_vec()
}

/// `request` cut into requests of at most `max_spans` spans each, in order, so a long cast
/// reaches a collector in bodies of a bounded size.
pub fn batches(
    request: ExportTraceServiceRequest,
    max_spans: usize,
) -> Vec<ExportTraceServiceRequest> {
    let spans: Vec<Span> = request
        .resource_spans
        .into_iter()
        .flat_map(|r| r.scope_spans)
        .flat_map(|s| s.spans)
        .collect();
    spans
        .chunks(max_spans.max(1))
        .map(|chunk| self::request(chunk.to_vec()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_derived_from_the_cast_and_the_span_identity() {
        let cast = CastId::new("demo");
        assert_eq!(trace_id(&cast), trace_id(&CastId::new("demo")));
        assert_ne!(trace_id(&cast), trace_id(&CastId::new("demo2")));
        assert_ne!(span_id(&cast, "cast"), span_id(&cast, "visit@2"));
        // The cast id's length is hashed, so ("ab", "c…") and ("a", "bc…") differ.
        assert_ne!(
            span_id(&CastId::new("ab"), "cast"),
            span_id(&CastId::new("a"), "bcast")
        );
    }

    #[test]
    fn batches_keep_every_span_in_order() {
        let mut spans = vec![Span {
            name: "cast demo".to_owned(),
            ..Default::default()
        }];
        for n in 0..4 {
            spans.push(Span {
                name: format!("s{n}"),
                ..Default::default()
            });
        }
        let parts = batches(request(spans), 2);
        let names: Vec<Vec<String>> = parts
            .iter()
            .map(|r| {
                r.resource_spans[0].scope_spans[0]
                    .spans
                    .iter()
                    .map(|s| s.name.clone())
                    .collect()
            })
            .collect();
        assert_eq!(
            names,
            [
                vec!["cast demo".to_owned(), "s0".to_owned()],
                vec!["s1".to_owned(), "s2".to_owned()],
                vec!["s3".to_owned()],
            ]
        );
    }
}
