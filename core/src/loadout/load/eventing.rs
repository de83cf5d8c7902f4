//! The top-level `eventing` key (pi-materia §3.4): `enabled`, `heartbeatIntervalMs` and the
//! webhook `sinks`, each checked here so a mistake is refused at load with the field named.
//! A key castlog does not know is refused too (a misspelt `maxRetries` would otherwise be a
//! silent default).

use std::collections::BTreeMap;

use super::LoadError;
use super::json::{self, Json, as_object, err, get, join, opt_array, opt_bool, opt_int, opt_str};
use crate::eventing::body::{BodyMapping, MAPPED_FIELDS};
use crate::eventing::{
    BodyTemplate, DEFAULT_DISCARDING_AFTER, DEFAULT_HEARTBEAT_INTERVAL_MS, DEFAULT_MAX_BACKOFF_MS,
    DEFAULT_MAX_QUEUE_SIZE, DEFAULT_MAX_RETRIES, DEFAULT_RETRY_BACKOFF_MS, DEFAULT_TIMEOUT_MS,
    EventFilter, Eventing, Sink,
};
use crate::id::SinkId;

const EVENTING_KEYS: [&str; 4] = ["enabled", "sinks", "heartbeatIntervalMs", "presets"];
const SINK_KEYS: [&str; 16] = [
    "type",
    "enabled",
    "url",
    "method",
    "headers",
    "bodyTemplate",
    "bodyMapping",
    "typeMap",
    "severityMap",
    "eventFilter",
    "timeoutMs",
    "maxRetries",
    "retryBackoffMs",
    "maxBackoffMs",
    "discardingAfter",
    "maxQueueSize",
];
const METHODS: [&str; 4] = ["POST", "PUT", "PATCH", "GET"];

/// Reads `eventing` (absent: off, no sinks).
pub(super) fn read_eventing(top: &json::Obj) -> Result<Eventing, LoadError> {
    let Some(value) = get(top, "eventing") else {
        return Ok(Eventing::default());
    };
    let obj = as_object(value, "eventing", "`eventing`")?;
    known_keys(obj, "eventing", &EVENTING_KEYS)?;
    let enabled = opt_bool(obj, "enabled", "eventing")?.unwrap_or(false);
    let heartbeat_interval_ms = opt_int(obj, "heartbeatIntervalMs", "eventing", 0, u64::MAX)?
        .unwrap_or(DEFAULT_HEARTBEAT_INTERVAL_MS);
    if let Some(presets) = opt_array(obj, "presets", "eventing")?
        && !presets.is_empty()
    {
        return Err(err(
            "eventing.presets",
            "castlog has no eventing presets; define each webhook under `eventing.sinks`",
        ));
    }
    let mut sinks = Vec::new();
    if let Some(value) = get(obj, "sinks") {
        let entries = as_object(value, "eventing.sinks", "`eventing.sinks`")?;
        for (id, sink) in entries {
            sinks.push(read_sink(id, sink, &join("eventing.sinks", id))?);
        }
    }
    Ok(Eventing {
        enabled,
        heartbeat_interval_ms,
        sinks,
    })
}

fn known_keys(obj: &json::Obj, path: &str, keys: &[&str]) -> Result<(), LoadError> {
    for (key, _) in obj {
        if !keys.contains(&key.as_str()) {
            return Err(err(
                &join(path, key),
                format!("unknown key `{key}`; use one of: {}", keys.join(", ")),
            ));
        }
    }
    Ok(())
}

fn u32_field(
    obj: &json::Obj,
    key: &str,
    path: &str,
    min: u64,
    default: u32,
) -> Result<u32, LoadError> {
    Ok(opt_int(obj, key, path, min, u64::from(u32::MAX))?
        .and_then(|v| u32::try_from(v).ok())
        .unwrap_or(default))
}

fn read_sink(id: &str, value: &Json, path: &str) -> Result<Sink, LoadError> {
    let obj = as_object(value, path, "a sink")?;
    known_keys(obj, path, &SINK_KEYS)?;
    if let Some(kind) = opt_str(obj, "type", path)?
        && kind != "webhook"
    {
        return Err(err(
            &join(path, "type"),
            format!("unknown sink type {kind:?}; castlog delivers to \"webhook\" sinks"),
        ));
    }
    let url = opt_str(obj, "url", path)?.ok_or_else(|| {
        err(
            &join(path, "url"),
            "`url` is missing; give the webhook's absolute http(s) URL",
        )
    })?;
    let rest = url
        .strip_prefix("http://")
        .or_else(|| url.strip_prefix("https://"));
    if rest.is_none_or(|host| host.is_empty() || host.starts_with('/')) {
        return Err(err(
            &join(path, "url"),
            format!(
                "`url` must be an absolute http:// or https:// URL, found {:?}",
                crate::eventing::shown_url(url)
            ),
        ));
    }
    let method = match opt_str(obj, "method", path)? {
        None => "POST".to_owned(),
        Some(m) if METHODS.contains(&m.to_ascii_uppercase().as_str()) => m.to_ascii_uppercase(),
        Some(m) => {
            return Err(err(
                &join(path, "method"),
                format!("unknown method {m:?}; use one of: {}", METHODS.join(", ")),
            ));
        }
    };
    let headers = match get(obj, "headers") {
        None => Vec::new(),
        Some(v) => header_map(v, &join(path, "headers"))?,
    };
    let body_template = match opt_str(obj, "bodyTemplate", path)? {
        None => BodyTemplate::Mapped,
        Some(name) => BodyTemplate::parse(name).ok_or_else(|| {
            err(
                &join(path, "bodyTemplate"),
                format!(
                    "unknown body template {name:?}; use one of: {}",
                    BodyTemplate::NAMES.join(", ")
                ),
            )
        })?,
    };
    let body_mapping = match get(obj, "bodyMapping") {
        None => BodyMapping::default(),
        Some(v) => body_mapping(v, &join(path, "bodyMapping"))?,
    };
    let value_map = |key: &str| -> Result<BTreeMap<String, String>, LoadError> {
        match get(obj, key) {
            None => Ok(BTreeMap::new()),
            Some(v) => plain_map(v, &join(path, key), &format!("`{key}`")),
        }
    };
    let type_map = value_map("typeMap")?;
    let severity_map = value_map("severityMap")?;
    let filter = match get(obj, "eventFilter") {
        None => EventFilter::default(),
        Some(v) => event_filter(v, &join(path, "eventFilter"))?,
    };
    let timeout_ms = opt_int(obj, "timeoutMs", path, 1, u64::MAX)?.unwrap_or(DEFAULT_TIMEOUT_MS);
    let max_retries = opt_int(obj, "maxRetries", path, 0, 100)?
        .and_then(|v| u32::try_from(v).ok())
        .unwrap_or(DEFAULT_MAX_RETRIES);
    let retry_backoff_ms =
        opt_int(obj, "retryBackoffMs", path, 0, u64::MAX)?.unwrap_or(DEFAULT_RETRY_BACKOFF_MS);
    let max_backoff_ms =
        opt_int(obj, "maxBackoffMs", path, 0, u64::MAX)?.unwrap_or(DEFAULT_MAX_BACKOFF_MS);
    if max_backoff_ms < retry_backoff_ms {
        return Err(err(
            &join(path, "maxBackoffMs"),
            format!(
                "`maxBackoffMs` ({max_backoff_ms}) is below `retryBackoffMs` ({retry_backoff_ms}); raise it or lower the other"
            ),
        ));
    }
    Ok(Sink {
        id: SinkId::new(id),
        enabled: opt_bool(obj, "enabled", path)?.unwrap_or(true),
        url: url.to_owned(),
        method,
        headers,
        body_template,
        body_mapping,
        type_map,
        severity_map,
        filter,
        timeout_ms,
        max_retries,
        retry_backoff_ms,
        max_backoff_ms,
        discarding_after: u32_field(obj, "discardingAfter", path, 1, DEFAULT_DISCARDING_AFTER)?,
        max_queue_size: u32_field(obj, "maxQueueSize", path, 1, DEFAULT_MAX_QUEUE_SIZE)?,
    })
}

/// An object of strings; `what` names it in messages. The values are not quoted in any
/// message (a header value may be a secret).
fn plain_map(value: &Json, path: &str, what: &str) -> Result<BTreeMap<String, String>, LoadError> {
    let obj = as_object(value, path, what)?;
    obj.iter()
        .map(|(k, v)| match v {
            Json::String(s) => Ok((k.clone(), s.clone())),
            other => Err(err(
                &join(path, k),
                format!("{what} values must be strings, found {}", other.kind()),
            )),
        })
        .collect()
}

fn header_map(value: &Json, path: &str) -> Result<Vec<(String, String)>, LoadError> {
    let obj = as_object(value, path, "`headers`")?;
    let mut headers = Vec::with_capacity(obj.len());
    for (name, v) in obj {
        let valid_name = !name.is_empty()
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b));
        if !valid_name {
            return Err(err(
                &join(path, name),
                "a header name must be a token (letters, digits and -_.!#$%&'*+^`|~)",
            ));
        }
        match v {
            Json::String(s) if !s.contains(['\r', '\n']) => headers.push((name.clone(), s.clone())),
            Json::String(_) => {
                return Err(err(
                    &join(path, name),
                    "a header value must be one line (its value is not shown)",
                ));
            }
            other => {
                return Err(err(
                    &join(path, name),
                    format!("header values must be strings, found {}", other.kind()),
                ));
            }
        }
    }
    Ok(headers)
}

fn body_mapping(value: &Json, path: &str) -> Result<BodyMapping, LoadError> {
    let obj = as_object(value, path, "`bodyMapping`")?;
    let mut mapping = BodyMapping::default();
    for (key, v) in obj {
        if key == "static" {
            let statics = as_object(v, &join(path, key), "`static`")?;
            for (field, value) in statics {
                mapping.statics.insert(field.clone(), value.to_value());
            }
            continue;
        }
        if !MAPPED_FIELDS.iter().any(|(field, _)| field == key) {
            let names: Vec<&str> = MAPPED_FIELDS.iter().map(|(f, _)| *f).collect();
            return Err(err(
                &join(path, key),
                format!(
                    "unknown body field `{key}`; map one of: {}, or add it under `static`",
                    names.join(", ")
                ),
            ));
        }
        match v {
            Json::String(from) if !from.trim().is_empty() => {
                mapping.fields.push((key.clone(), from.clone()));
            }
            other => {
                return Err(err(
                    &join(path, key),
                    format!(
                        "a body field is mapped from the name of an event field (\"castId\", \"type\", ...), found {}",
                        other.kind()
                    ),
                ));
            }
        }
    }
    Ok(mapping)
}

fn event_filter(value: &Json, path: &str) -> Result<EventFilter, LoadError> {
    let obj = as_object(value, path, "`eventFilter`")?;
    known_keys(obj, path, &["include", "exclude"])?;
    let patterns = |key: &str| -> Result<Vec<String>, LoadError> {
        let Some(items) = opt_array(obj, key, path)? else {
            return Ok(Vec::new());
        };
        items
            .iter()
            .enumerate()
            .map(|(i, item)| match item {
                Json::String(s) if !s.trim().is_empty() => Ok(s.clone()),
                other => Err(err(
                    &json::index(&join(path, key), i),
                    format!(
                        "a pattern must be a non-empty string such as \"lifecycle.**\", found {}",
                        other.kind()
                    ),
                )),
            })
            .collect()
    };
    Ok(EventFilter {
        include: patterns("include")?,
        exclude: patterns("exclude")?,
    })
}

#[cfg(test)]
mod tests {
    use super::super::load_config;

    fn config(eventing: &str) -> String {
        format!(
            r#"{{"activeLoadout": "L", "eventing": {eventing},
                "materia": {{"A": {{"type": "agent", "prompt": "p", "tools": "none"}}}},
                "loadouts": {{"L": {{"entry": "Socket-1", "sockets": {{"Socket-1": {{"materia": "A"}}}}}}}}}}"#
        )
    }

    fn refused(eventing: &str) -> (String, String) {
        let e = load_config(&config(eventing)).expect_err("refused");
        (e.path, e.reason)
    }

    #[test]
    fn a_full_sink_loads_with_its_defaults() {
        let c = load_config(&config(
            r#"{"enabled": true, "heartbeatIntervalMs": 0, "sinks": {"ops": {
                "url": "https://hooks.example.test/x", "headers": {"Authorization": "Bearer t"},
                "bodyTemplate": "envelope", "eventFilter": {"include": ["lifecycle.**"]},
                "bodyMapping": {"runtimeRunId": "castId", "static": {"team": "ops"}}}}}"#,
        ))
        .unwrap();
        let sink = &c.eventing.sinks[0];
        assert!(c.eventing.enabled);
        assert_eq!(c.eventing.heartbeat_interval_ms, 0);
        assert_eq!(sink.id.as_str(), "ops");
        assert_eq!(sink.method, "POST");
        assert_eq!(sink.timeout_ms, 10_000);
        assert_eq!(sink.max_retries, 3);
        assert_eq!(sink.retry_backoff_ms, 1_000);
        assert_eq!(sink.max_backoff_ms, 30_000);
        assert_eq!(sink.discarding_after, 10);
        assert_eq!(sink.max_queue_size, 256);
        assert_eq!(sink.filter.include, ["lifecycle.**"]);
    }

    #[test]
    fn no_eventing_is_off() {
        let text = config("{}").replace(r#""eventing": {},"#, "");
        let c = load_config(&text).unwrap();
        assert!(!c.eventing.enabled);
        assert!(c.eventing.sinks.is_empty());
    }

    #[test]
    fn mistakes_are_refused_naming_the_field() {
        let cases = [
            (r#"{"sinks": {"ops": {}}}"#, "eventing.sinks.ops.url"),
            (
                r#"{"sinks": {"ops": {"url": "ftp://x"}}}"#,
                "eventing.sinks.ops.url",
            ),
            (
                r#"{"sinks": {"ops": {"url": "http://x", "maxRetry": 2}}}"#,
                "eventing.sinks.ops.maxRetry",
            ),
            (
                r#"{"sinks": {"ops": {"url": "http://x", "timeoutMs": 0}}}"#,
                "eventing.sinks.ops.timeoutMs",
            ),
            (
                r#"{"sinks": {"ops": {"url": "http://x", "bodyTemplate": "xml"}}}"#,
                "eventing.sinks.ops.bodyTemplate",
            ),
            (
                r#"{"sinks": {"ops": {"url": "http://x", "method": "BREW"}}}"#,
                "eventing.sinks.ops.method",
            ),
            (
                r#"{"sinks": {"ops": {"url": "http://x", "headers": {"X": 1}}}}"#,
                "eventing.sinks.ops.headers.X",
            ),
            (
                r#"{"sinks": {"ops": {"url": "http://x", "eventFilter": {"include": [""]}}}}"#,
                "eventing.sinks.ops.eventFilter.include[0]",
            ),
            (
                r#"{"sinks": {"ops": {"url": "http://x", "bodyMapping": {"title": "message"}}}}"#,
                "eventing.sinks.ops.bodyMapping.title",
            ),
            (
                r#"{"sinks": {"ops": {"url": "http://x", "retryBackoffMs": 50, "maxBackoffMs": 10}}}"#,
                "eventing.sinks.ops.maxBackoffMs",
            ),
            (
                r#"{"sinks": {"ops": {"url": "http://x", "discardingAfter": 0}}}"#,
                "eventing.sinks.ops.discardingAfter",
            ),
            (
                r#"{"sinks": {"ops": {"url": "http://x", "type": "kafka"}}}"#,
                "eventing.sinks.ops.type",
            ),
            (r#"{"enabled": "yes"}"#, "eventing.enabled"),
            (r#"{"presets": ["agent-controller"]}"#, "eventing.presets"),
            (r#"{"sink": {}}"#, "eventing.sink"),
        ];
        for (eventing, path) in cases {
            assert_eq!(refused(eventing).0, path, "{eventing}");
        }
    }

    #[test]
    fn a_header_value_is_never_quoted_in_an_error() {
        let (_, reason) =
            refused(r#"{"sinks": {"ops": {"url": "http://x", "headers": {"X": "se\ncret"}}}}"#);
        assert!(!reason.contains("cret"), "{reason}");
    }
}
