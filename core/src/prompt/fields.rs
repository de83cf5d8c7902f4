//! Reading the JSON documents of placement (policies, entries given as data) field by field,
//! so every error names the field by its path (`mandates[1].rank`, `entries[3].layer`).

use serde_json::{Map, Value};

use super::Role;

/// Why a policy or entries document cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DocumentError {
    /// The text is not JSON.
    #[error("{what} is not JSON: {reason} ({place})")]
    Syntax {
        /// `the policy`, `the entries`.
        what: &'static str,
        /// serde_json's words.
        reason: String,
        /// Line and column.
        place: String,
    },
    /// A field is missing, unknown or of the wrong kind.
    #[error("{field}: {reason}")]
    Field {
        /// The field's path (`entries[3].layer`; `(top)` for the document itself).
        field: String,
        /// What is wrong with it.
        reason: String,
    },
}

impl DocumentError {
    /// An error of the field at `field`.
    pub fn field(field: impl Into<String>, reason: impl Into<String>) -> Self {
        DocumentError::Field {
            field: field.into(),
            reason: reason.into(),
        }
    }
}

/// `text` as JSON, or the error saying where it is not.
pub(crate) fn parse_json(what: &'static str, text: &str) -> Result<Value, DocumentError> {
    serde_json::from_str(text).map_err(|e| DocumentError::Syntax {
        what,
        reason: crate::syntax::json_error(&e),
        place: crate::syntax::place(&e, text),
    })
}

/// What a JSON value is, in words.
fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// One JSON object being read, with its path.
pub(crate) struct Object<'a> {
    path: String,
    map: &'a Map<String, Value>,
}

/// The path of `key` under `path`.
fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_owned()
    } else {
        format!("{path}.{key}")
    }
}

impl<'a> Object<'a> {
    /// `value` at `path` as an object whose keys are all among `known`.
    pub(crate) fn new(value: &'a Value, path: &str, known: &[&str]) -> Result<Self, DocumentError> {
        let shown = if path.is_empty() { "(top)" } else { path };
        let map = value.as_object().ok_or_else(|| {
            DocumentError::field(shown, format!("expected an object, found {}", kind(value)))
        })?;
        if let Some(key) = map.keys().find(|k| !known.contains(&k.as_str())) {
            return Err(DocumentError::field(
                join(path, key),
                format!("unknown field; known fields: {}", known.join(", ")),
            ));
        }
        Ok(Self {
            path: path.to_owned(),
            map,
        })
    }

    /// The path of `key` in this object.
    pub(crate) fn path(&self, key: &str) -> String {
        join(&self.path, key)
    }

    fn present(&self, key: &str) -> Option<&'a Value> {
        self.map.get(key).filter(|v| !v.is_null())
    }

    fn required(&self, key: &str) -> Result<&'a Value, DocumentError> {
        self.present(key)
            .ok_or_else(|| DocumentError::field(self.path(key), "missing"))
    }

    fn wrong(&self, key: &str, expected: &str, found: &Value) -> DocumentError {
        DocumentError::field(
            self.path(key),
            format!("expected {expected}, found {}", kind(found)),
        )
    }

    /// A string field, if present.
    pub(crate) fn opt_str(&self, key: &str) -> Result<Option<&'a str>, DocumentError> {
        match self.present(key) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(v) => Err(self.wrong(key, "a string", v)),
        }
    }

    /// A required string field.
    pub(crate) fn str(&self, key: &str) -> Result<&'a str, DocumentError> {
        let v = self.required(key)?;
        v.as_str().ok_or_else(|| self.wrong(key, "a string", v))
    }

    /// A required string field that is not empty.
    pub(crate) fn name(&self, key: &str) -> Result<&'a str, DocumentError> {
        let s = self.str(key)?;
        if s.trim().is_empty() {
            return Err(DocumentError::field(self.path(key), "must not be empty"));
        }
        Ok(s)
    }

    /// A boolean field, if present.
    pub(crate) fn opt_bool(&self, key: &str) -> Result<Option<bool>, DocumentError> {
        match self.present(key) {
            None => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(v) => Err(self.wrong(key, "true or false", v)),
        }
    }

    /// A non-negative integer field of at most `max`, if present.
    pub(crate) fn opt_uint(&self, key: &str, max: u64) -> Result<Option<u64>, DocumentError> {
        match self.present(key) {
            None => Ok(None),
            Some(v) => match v.as_u64() {
                Some(n) if n <= max => Ok(Some(n)),
                _ => Err(DocumentError::field(
                    self.path(key),
                    format!("expected an integer from 0 to {max}, found {v}"),
                )),
            },
        }
    }

    /// A layer (`"L0"` to `"L3"`), if present.
    pub(crate) fn opt_layer(&self, key: &str) -> Result<Option<u8>, DocumentError> {
        let Some(v) = self.present(key) else {
            return Ok(None);
        };
        layer_of(v).map(Some).ok_or_else(|| {
            DocumentError::field(
                self.path(key),
                format!("expected one of \"L0\", \"L1\", \"L2\", \"L3\", found {v}"),
            )
        })
    }

    /// A role (`system`, `user`, `assistant`, `tool`, any case), if present.
    pub(crate) fn opt_role(&self, key: &str) -> Result<Option<Role>, DocumentError> {
        let Some(v) = self.present(key) else {
            return Ok(None);
        };
        role_of(v).map(Some).ok_or_else(|| {
            DocumentError::field(
                self.path(key),
                format!("expected one of \"system\", \"user\", \"assistant\", \"tool\", found {v}"),
            )
        })
    }

    /// An array field's items with their paths (empty when absent, if `optional`).
    pub(crate) fn array(
        &self,
        key: &str,
        optional: bool,
    ) -> Result<Vec<(String, &'a Value)>, DocumentError> {
        let v = match self.present(key) {
            None if optional => return Ok(Vec::new()),
            None => return Err(DocumentError::field(self.path(key), "missing")),
            Some(v) => v,
        };
        let items = v.as_array().ok_or_else(|| self.wrong(key, "an array", v))?;
        Ok(items
            .iter()
            .enumerate()
            .map(|(i, item)| (format!("{}[{i}]", self.path(key)), item))
            .collect())
    }

    /// A field's value, if present (null counts as absent).
    pub(crate) fn get(&self, key: &str) -> Option<&'a Value> {
        self.present(key)
    }
}

/// `"L0"`..`"L3"` (or `"l2"`) as a layer number.
fn layer_of(v: &Value) -> Option<u8> {
    let s = v.as_str()?;
    let digits = s.strip_prefix('L').or_else(|| s.strip_prefix('l'))?;
    match digits {
        "0" => Some(0),
        "1" => Some(1),
        "2" => Some(2),
        "3" => Some(3),
        _ => None,
    }
}

fn role_of(v: &Value) -> Option<Role> {
    Role::named(&v.as_str()?.to_ascii_lowercase())
}

/// The document's word for a layer.
pub(crate) fn layer_name(layer: u8) -> String {
    format!("L{layer}")
}
