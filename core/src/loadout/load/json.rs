//! An order-preserving JSON tree, JSON paths and typed accessors that fail with a [`LoadError`].
//!
//! `serde_json::Value` sorts object keys (the `preserve_order` feature is off), but loadout
//! names, assignments and loops must keep the order of the file, so the config is read into
//! [`Json`], whose objects are `(key, value)` lists in document order.

use std::fmt;

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::ser::{Serialize, SerializeMap, SerializeSeq, Serializer};
use serde_json::{Number, Value};

use super::LoadError;

/// A JSON value whose objects keep their keys in document order.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Json {
    Null,
    Bool(bool),
    Number(Number),
    String(String),
    Array(Vec<Json>),
    Object(Vec<(String, Json)>),
}

/// An object's entries in document order.
pub(super) type Obj = [(String, Json)];

impl<'de> Deserialize<'de> for Json {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(JsonVisitor)
    }
}

struct JsonVisitor;

impl<'de> Visitor<'de> for JsonVisitor {
    type Value = Json;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Json, E> {
        Ok(Json::Bool(v))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Json, E> {
        Ok(Json::Number(Number::from(v)))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Json, E> {
        Ok(Json::Number(Number::from(v)))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Json, E> {
        Number::from_f64(v)
            .map(Json::Number)
            .ok_or_else(|| E::custom("number out of range"))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Json, E> {
        Ok(Json::String(v.to_owned()))
    }

    fn visit_string<E: de::Error>(self, v: String) -> Result<Json, E> {
        Ok(Json::String(v))
    }

    fn visit_unit<E: de::Error>(self) -> Result<Json, E> {
        Ok(Json::Null)
    }

    fn visit_none<E: de::Error>(self) -> Result<Json, E> {
        Ok(Json::Null)
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Json, D::Error> {
        Json::deserialize(deserializer)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Json, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element::<Json>()? {
            items.push(item);
        }
        Ok(Json::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Json, A::Error> {
        let mut entries = Vec::new();
        while let Some(key) = map.next_key::<String>()? {
            let value = map.next_value::<Json>()?;
            entries.push((key, value));
        }
        Ok(Json::Object(entries))
    }
}

impl Serialize for Json {
    /// Writes the value with its object keys in document order.
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Json::Null => serializer.serialize_unit(),
            Json::Bool(b) => serializer.serialize_bool(*b),
            Json::Number(n) => n.serialize(serializer),
            Json::String(s) => serializer.serialize_str(s),
            Json::Array(items) => {
                let mut seq = serializer.serialize_seq(Some(items.len()))?;
                for item in items {
                    seq.serialize_element(item)?;
                }
                seq.end()
            }
            Json::Object(entries) => {
                let mut map = serializer.serialize_map(Some(entries.len()))?;
                for (key, value) in entries {
                    map.serialize_entry(key, value)?;
                }
                map.end()
            }
        }
    }
}

impl Json {
    /// Parses `text`; a syntax error names its line and column.
    pub(super) fn parse(text: &str) -> Result<Json, LoadError> {
        serde_json::from_str::<Json>(text).map_err(|e| LoadError {
            path: "$".into(),
            reason: format!(
                "invalid JSON at {}: {}; fix the syntax",
                crate::syntax::place(&e, text),
                crate::syntax::json_error(&e)
            ),
        })
    }

    /// A short name of the value's type, for error messages.
    pub(super) fn kind(&self) -> &'static str {
        match self {
            Json::Null => "null",
            Json::Bool(_) => "a boolean",
            Json::Number(_) => "a number",
            Json::String(_) => "a string",
            Json::Array(_) => "an array",
            Json::Object(_) => "an object",
        }
    }

    /// The equivalent `serde_json::Value` (object key order is not kept).
    pub(super) fn to_value(&self) -> Value {
        match self {
            Json::Null => Value::Null,
            Json::Bool(b) => Value::Bool(*b),
            Json::Number(n) => Value::Number(n.clone()),
            Json::String(s) => Value::String(s.clone()),
            Json::Array(items) => Value::Array(items.iter().map(Json::to_value).collect()),
            Json::Object(entries) => Value::Object(
                entries
                    .iter()
                    .map(|(k, v)| (k.clone(), v.to_value()))
                    .collect(),
            ),
        }
    }
}

/// Rejects duplicate object keys anywhere in the tree (JSON allows them, but the later one
/// silently winning is always a mistake in a hand-edited config).
pub(super) fn reject_duplicate_keys(value: &Json, path: &str) -> Result<(), LoadError> {
    match value {
        Json::Object(entries) => {
            for (i, (key, child)) in entries.iter().enumerate() {
                if entries.iter().take(i).any(|(k, _)| k == key) {
                    return Err(err(
                        &join(path, key),
                        format!("duplicate key {key:?}; keep only one of them"),
                    ));
                }
                reject_duplicate_keys(child, &join(path, key))?;
            }
            Ok(())
        }
        Json::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                reject_duplicate_keys(item, &index(path, i))?;
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

/// Builds an error.
pub(super) fn err(path: &str, reason: impl Into<String>) -> LoadError {
    LoadError {
        path: if path.is_empty() {
            "$".into()
        } else {
            path.to_owned()
        },
        reason: reason.into(),
    }
}

/// `path.key` (or `key` at the root).
pub(super) fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_owned()
    } else {
        format!("{path}.{key}")
    }
}

/// `path[i]`.
pub(super) fn index(path: &str, i: usize) -> String {
    format!("{path}[{i}]")
}

/// The value under `key`, if present.
pub(super) fn get<'a>(obj: &'a Obj, key: &str) -> Option<&'a Json> {
    obj.iter().find(|(k, _)| k == key).map(|(_, v)| v)
}

/// Whether `key` is present (even as `null`).
pub(super) fn has(obj: &Obj, key: &str) -> bool {
    obj.iter().any(|(k, _)| k == key)
}

/// `value` as an object, or an error naming what was found.
pub(super) fn as_object<'a>(value: &'a Json, path: &str, what: &str) -> Result<&'a Obj, LoadError> {
    match value {
        Json::Object(entries) => Ok(entries),
        other => Err(err(
            path,
            format!("{what} must be a JSON object, found {}", other.kind()),
        )),
    }
}

/// An optional object field.
pub(super) fn opt_object<'a>(
    obj: &'a Obj,
    key: &str,
    path: &str,
    what: &str,
) -> Result<Option<&'a Obj>, LoadError> {
    get(obj, key)
        .map(|v| as_object(v, &join(path, key), what))
        .transpose()
}

/// An optional string field.
pub(super) fn opt_str<'a>(
    obj: &'a Obj,
    key: &str,
    path: &str,
) -> Result<Option<&'a str>, LoadError> {
    match get(obj, key) {
        None => Ok(None),
        Some(Json::String(s)) => Ok(Some(s)),
        Some(other) => Err(err(
            &join(path, key),
            format!("`{key}` must be a string, found {}", other.kind()),
        )),
    }
}

/// A required string field.
pub(super) fn req_str<'a>(
    obj: &'a Obj,
    key: &str,
    path: &str,
    hint: &str,
) -> Result<&'a str, LoadError> {
    opt_str(obj, key, path)?
        .ok_or_else(|| err(&join(path, key), format!("`{key}` is missing; {hint}")))
}

/// An optional non-empty string field (blank is an error).
pub(super) fn opt_nonempty_str<'a>(
    obj: &'a Obj,
    key: &str,
    path: &str,
) -> Result<Option<&'a str>, LoadError> {
    match opt_str(obj, key, path)? {
        Some(s) if s.trim().is_empty() => Err(err(
            &join(path, key),
            format!("`{key}` must not be empty; give it a value or remove it"),
        )),
        other => Ok(other),
    }
}

/// A required non-empty string field.
pub(super) fn req_nonempty_str<'a>(
    obj: &'a Obj,
    key: &str,
    path: &str,
    hint: &str,
) -> Result<&'a str, LoadError> {
    opt_nonempty_str(obj, key, path)?
        .ok_or_else(|| err(&join(path, key), format!("`{key}` is missing; {hint}")))
}

/// An optional boolean field.
pub(super) fn opt_bool(obj: &Obj, key: &str, path: &str) -> Result<Option<bool>, LoadError> {
    match get(obj, key) {
        None => Ok(None),
        Some(Json::Bool(b)) => Ok(Some(*b)),
        Some(other) => Err(err(
            &join(path, key),
            format!("`{key}` must be true or false, found {}", other.kind()),
        )),
    }
}

/// The largest integer a JavaScript number represents exactly (2^53 - 1).
const MAX_SAFE_INTEGER: f64 = 9_007_199_254_740_991.0;

/// A non-negative integer, accepting integral floats such as `3.0` like JavaScript does.
fn as_whole(n: &Number) -> Option<u64> {
    if let Some(u) = n.as_u64() {
        return Some(u);
    }
    let f = n.as_f64()?;
    if f.is_finite() && f >= 0.0 && f.fract() == 0.0 && f <= MAX_SAFE_INTEGER {
        // Exact: f is integral and below 2^53.
        Some(f as u64)
    } else {
        None
    }
}

/// An optional integer field with `min..=max`.
pub(super) fn opt_int(
    obj: &Obj,
    key: &str,
    path: &str,
    min: u64,
    max: u64,
) -> Result<Option<u64>, LoadError> {
    let Some(value) = get(obj, key) else {
        return Ok(None);
    };
    let range = if max == u64::MAX {
        format!("an integer of at least {min}")
    } else {
        format!("an integer from {min} to {max}")
    };
    let Json::Number(n) = value else {
        return Err(err(
            &join(path, key),
            format!("`{key}` must be {range}, found {}", value.kind()),
        ));
    };
    match as_whole(n) {
        Some(v) if v >= min && v <= max => Ok(Some(v)),
        _ => Err(err(
            &join(path, key),
            format!("`{key}` must be {range}, found {n}"),
        )),
    }
}

/// An optional finite number field.
pub(super) fn opt_number(obj: &Obj, key: &str, path: &str) -> Result<Option<f64>, LoadError> {
    match get(obj, key) {
        None => Ok(None),
        Some(Json::Number(n)) => n
            .as_f64()
            .map(Some)
            .ok_or_else(|| err(&join(path, key), format!("`{key}` must be a finite number"))),
        Some(other) => Err(err(
            &join(path, key),
            format!("`{key}` must be a number, found {}", other.kind()),
        )),
    }
}

/// An optional array field.
pub(super) fn opt_array<'a>(
    obj: &'a Obj,
    key: &str,
    path: &str,
) -> Result<Option<&'a [Json]>, LoadError> {
    match get(obj, key) {
        None => Ok(None),
        Some(Json::Array(items)) => Ok(Some(items)),
        Some(other) => Err(err(
            &join(path, key),
            format!("`{key}` must be an array, found {}", other.kind()),
        )),
    }
}

/// Rejects the listed keys if present.
pub(super) fn reject_keys(
    obj: &Obj,
    path: &str,
    keys: &[&str],
    why: &str,
) -> Result<(), LoadError> {
    for key in keys {
        if has(obj, key) {
            return Err(err(
                &join(path, key),
                format!("`{key}` is not allowed here: {why}"),
            ));
        }
    }
    Ok(())
}

/// An object of string → string, in document order.
pub(super) fn string_map(
    value: &Json,
    path: &str,
    what: &str,
) -> Result<Vec<(String, String)>, LoadError> {
    let obj = as_object(value, path, what)?;
    obj.iter()
        .map(|(k, v)| match v {
            Json::String(s) => Ok((k.clone(), s.clone())),
            other => Err(err(
                &join(path, k),
                format!(
                    "{what} values must be strings (source paths such as \"$.context\"), found {}",
                    other.kind()
                ),
            )),
        })
        .collect()
}
