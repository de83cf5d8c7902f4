//! The path syntax of assignments, iterators and advance conditions.
//!
//! Sources: `$` (the current parsed output), `$.a.b.0` (a path into it), `state` / `state.a`
//! (the workflow's `state.data`), `item` / `item.a` (`state.data.item`), `lastJson` /
//! `lastJson.a` (the last committed JSON), `lastOutput` (the last raw output); anything else is a
//! path into `state.data`. Segments are separated by dots; numeric segments index arrays. There
//! are no brackets, wildcards or filters. A missing path resolves to `None`.

use serde_json::{Map, Value};

/// What a path can read from.
#[derive(Debug, Clone, Copy)]
pub struct Scope<'a> {
    /// The current parsed output (`$`), if any.
    pub output: Option<&'a Value>,
    /// `state.data`.
    pub data: &'a Value,
    /// The last committed JSON.
    pub last_json: Option<&'a Value>,
    /// Raw text of the last completed output (`lastOutput`).
    pub last_output: Option<&'a str>,
}

/// Follows dot-separated `segments` into `value`.
pub fn get<'v>(value: &'v Value, segments: &str) -> Option<&'v Value> {
    if segments.is_empty() {
        return Some(value);
    }
    let mut current = value;
    for segment in segments.split('.') {
        current = match current {
            Value::Object(map) => map.get(segment)?,
            Value::Array(items) => items.get(segment.parse::<usize>().ok()?)?,
            _ => return None,
        };
    }
    Some(current)
}

/// Resolves a source path against `scope`.
pub fn resolve(scope: &Scope<'_>, source: &str) -> Option<Value> {
    if source.trim() == "lastOutput" {
        return scope.last_output.map(|t| Value::String(t.to_owned()));
    }
    resolve_ref(scope, source).cloned()
}

/// Resolves a source path against `scope` without copying, for every source that names stored
/// JSON (`$…`, `lastJson…`, `state…`, `item…`, data paths); `lastOutput` gives `None`.
pub fn resolve_ref<'s>(scope: &Scope<'s>, source: &str) -> Option<&'s Value> {
    let source = source.trim();
    let sub = |prefix: &str| -> Option<&str> {
        if source == prefix {
            Some("")
        } else {
            source
                .strip_prefix(prefix)
                .and_then(|rest| rest.strip_prefix('.'))
        }
    };
    if let Some(rest) = sub("$") {
        return scope.output.and_then(|o| get(o, rest));
    }
    if source == "lastOutput" {
        return None;
    }
    if let Some(rest) = sub("lastJson") {
        return scope.last_json.and_then(|j| get(j, rest));
    }
    if let Some(rest) = sub("state") {
        return get(scope.data, rest);
    }
    if let Some(rest) = sub("item") {
        return scope.data.get("item").and_then(|item| get(item, rest));
    }
    get(scope.data, source)
}

/// Writes `value` at the dot path `target` inside `data` (an object), replacing intermediate
/// non-objects with `{}`. A `None` value removes the key (an assignment of a missing source).
pub fn assign(data: &mut Value, target: &str, value: Option<Value>) {
    if !data.is_object() {
        *data = Value::Object(Map::new());
    }
    let segments: Vec<&str> = target.split('.').filter(|s| !s.is_empty()).collect();
    let Some((last, parents)) = segments.split_last() else {
        return;
    };
    let mut current = data;
    for segment in parents {
        let Value::Object(map) = current else { return };
        let entry = map
            .entry((*segment).to_owned())
            .or_insert_with(|| Value::Object(Map::new()));
        if !entry.is_object() {
            *entry = Value::Object(Map::new());
        }
        current = entry;
    }
    if let Value::Object(map) = current {
        match value {
            Some(value) => {
                map.insert((*last).to_owned(), value);
            }
            None => {
                map.remove(*last);
            }
        }
    }
}

/// Evaluates an advance condition: `always`, `satisfied`, `not_satisfied`, `exists(path)`,
/// `!exists(path)`, `path == literal`, `path != literal` (literals: true, false, null, numbers,
/// quoted strings, or another path). An unknown form is false.
pub fn condition(scope: &Scope<'_>, satisfied: Option<bool>, expr: &str) -> bool {
    let expr = expr.trim();
    match expr {
        "" | "always" => return true,
        "satisfied" => return satisfied == Some(true),
        "not_satisfied" => return satisfied == Some(false),
        _ => {}
    }
    if let Some(inner) = expr
        .strip_prefix("!exists(")
        .and_then(|r| r.strip_suffix(')'))
    {
        return resolve(scope, inner).is_none_or(|v| v.is_null());
    }
    if let Some(inner) = expr
        .strip_prefix("exists(")
        .and_then(|r| r.strip_suffix(')'))
    {
        return resolve(scope, inner).is_some_and(|v| !v.is_null());
    }
    for (op, equal) in [("!=", false), ("==", true)] {
        if let Some((left, right)) = expr.split_once(op) {
            let left = resolve(scope, left).unwrap_or(Value::Null);
            let right = literal(scope, right.trim());
            return (left == right) == equal;
        }
    }
    false
}

fn literal(scope: &Scope<'_>, text: &str) -> Value {
    match text {
        "true" => return Value::Bool(true),
        "false" => return Value::Bool(false),
        "null" => return Value::Null,
        _ => {}
    }
    for quote in ['\'', '"'] {
        if let Some(inner) = text.strip_prefix(quote).and_then(|r| r.strip_suffix(quote)) {
            return Value::String(inner.to_owned());
        }
    }
    if let Ok(number) = serde_json::from_str::<serde_json::Number>(text) {
        return Value::Number(number);
    }
    resolve(scope, text).unwrap_or(Value::Null)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn scope<'a>(output: &'a Value, data: &'a Value) -> Scope<'a> {
        Scope {
            output: Some(output),
            data,
            last_json: Some(output),
            last_output: Some("raw"),
        }
    }

    #[test]
    fn sources_resolve_as_documented() {
        let output = json!({"list": [{"label": "a"}, {"label": "b"}], "context": "why"});
        let data = json!({"x": 1, "item": {"title": "t"}, "deep": {"y": [5]}});
        let s = scope(&output, &data);
        assert_eq!(resolve(&s, "$"), Some(output.clone()));
        assert_eq!(resolve(&s, "$.list.1.label"), Some(json!("b")));
        assert_eq!(resolve(&s, "state.x"), Some(json!(1)));
        assert_eq!(resolve(&s, "state"), Some(data.clone()));
        assert_eq!(resolve(&s, "item.title"), Some(json!("t")));
        assert_eq!(resolve(&s, "lastJson.context"), Some(json!("why")));
        assert_eq!(resolve(&s, "lastOutput"), Some(json!("raw")));
        assert_eq!(resolve(&s, "deep.y.0"), Some(json!(5)));
        assert_eq!(resolve(&s, "$.missing"), None);
        assert_eq!(resolve(&s, "$.list.9"), None);
    }

    #[test]
    fn assign_creates_and_replaces_intermediates() {
        let mut data = json!({"a": 5});
        assign(&mut data, "a.b.c", Some(json!(true)));
        assign(&mut data, "state.x", Some(json!("y")));
        assert_eq!(data, json!({"a": {"b": {"c": true}}, "state": {"x": "y"}}));
        assign(&mut data, "state.x", None);
        assert_eq!(data, json!({"a": {"b": {"c": true}}, "state": {}}));
    }

    #[test]
    fn conditions_cover_every_form() {
        let output = json!({"ok": true, "n": 2, "s": "go"});
        let data = json!({"mode": "fast"});
        let s = scope(&output, &data);
        assert!(condition(&s, Some(true), "satisfied"));
        assert!(!condition(&s, None, "satisfied"));
        assert!(condition(&s, Some(false), "not_satisfied"));
        assert!(condition(&s, None, "always"));
        assert!(condition(&s, None, "exists($.ok)"));
        assert!(condition(&s, None, "!exists($.nope)"));
        assert!(condition(&s, None, "$.n == 2"));
        assert!(condition(&s, None, "$.s == 'go'"));
        assert!(condition(&s, None, "state.mode != \"slow\""));
        assert!(condition(&s, None, "$.ok == true"));
        assert!(!condition(&s, None, "$.ok == false"));
        assert!(!condition(&s, None, "gibberish"));
    }
}
