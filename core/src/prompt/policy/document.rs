//! A policy's JSON document: read with every error naming its field, written back in the
//! same shape (the form a cast records for a policy from a file).
//!
//! ```json
//! {
//!   "name": "mine",
//!   "description": "optional",
//!   "fold": { "layers": ["L0"], "roles": ["system"] },
//!   "mandates": [{ "sourceType": "recoveryTicket", "rank": 0, "header": "## Recovery" }],
//!   "consolidation": "strongest" | "joined",
//!   "appended": { "sourceType": "remainingDelta", "header": "## Remaining work" } | null,
//!   "reRoles": [{ "sourceType": "recoveryTicket", "layer": "L2"?, "role": "user"? }],
//!   "producerRoles": [ same shape ],
//!   "reminder": { "sourceType": "steeringNote", "prefix": "Reminder from the operator:\n" } | null
//! }
//! ```

use serde_json::{Value, json};

use super::{Appended, Consolidation, Fold, Mandate, Override, Policy, Reminder};
use crate::prompt::fields::{DocumentError, Object, layer_name, parse_json};

/// Why a policy document cannot be used (the field is named).
pub type PolicyError = DocumentError;

const TOP: [&str; 9] = [
    "name",
    "description",
    "fold",
    "mandates",
    "consolidation",
    "appended",
    "reRoles",
    "producerRoles",
    "reminder",
];

impl Policy {
    /// Reads a policy document.
    pub fn parse(text: &str) -> Result<Policy, PolicyError> {
        Self::from_json(&parse_json("the policy", text)?)
    }

    /// Reads a policy from its JSON value.
    pub fn from_json(value: &Value) -> Result<Policy, PolicyError> {
        let top = Object::new(value, "", &TOP)?;
        let name = top.name("name")?;
        if !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
        {
            return Err(DocumentError::field(
                "name",
                format!("{name:?} may use only letters, digits, '-', '_' and '.'"),
            ));
        }
        let description = top.opt_str("description")?.unwrap_or("").to_owned();
        let fold = match top.get("fold") {
            None => return Err(DocumentError::field("fold", "missing")),
            Some(v) => {
                let f = Object::new(v, "fold", &["layers", "roles"])?;
                let mut layers = Vec::new();
                for (path, item) in f.array("layers", true)? {
                    let o = json!({ "layer": item });
                    let layer = Object::new(&o, "", &["layer"])?
                        .opt_layer("layer")
                        .map_err(|e| rename(e, &path))?
                        .ok_or_else(|| DocumentError::field(&path, "expected a layer"))?;
                    layers.push(layer);
                }
                let mut roles = Vec::new();
                for (path, item) in f.array("roles", true)? {
                    let o = json!({ "role": item });
                    let role = Object::new(&o, "", &["role"])?
                        .opt_role("role")
                        .map_err(|e| rename(e, &path))?
                        .ok_or_else(|| DocumentError::field(&path, "expected a role"))?;
                    roles.push(role);
                }
                Fold { layers, roles }
            }
        };
        let consolidation = match top.str("consolidation")? {
            "strongest" => Consolidation::Strongest,
            "joined" => Consolidation::Joined,
            other => {
                return Err(DocumentError::field(
                    "consolidation",
                    format!("expected \"strongest\" or \"joined\", found {other:?}"),
                ));
            }
        };
        let mut mandates: Vec<Mandate> = Vec::new();
        for (path, item) in top.array("mandates", false)? {
            let m = Object::new(item, &path, &["sourceType", "rank", "header"])?;
            let source_type = m.name("sourceType")?.to_owned();
            if mandates.iter().any(|o| o.source_type == source_type) {
                return Err(DocumentError::field(
                    m.path("sourceType"),
                    format!("{source_type:?} is listed twice"),
                ));
            }
            let rank = m
                .opt_uint("rank", u64::from(u8::MAX))?
                .ok_or_else(|| DocumentError::field(m.path("rank"), "missing"))?;
            let header = m.opt_str("header")?.unwrap_or("").to_owned();
            if consolidation == Consolidation::Strongest && !header.starts_with("## ") {
                return Err(DocumentError::field(
                    m.path("header"),
                    "a consolidated block needs a `## ` header (consolidation \"strongest\")",
                ));
            }
            mandates.push(Mandate {
                source_type,
                rank: u8::try_from(rank).unwrap_or(u8::MAX),
                header,
            });
        }
        let appended = match top.get("appended") {
            None => None,
            Some(v) => {
                let a = Object::new(v, "appended", &["sourceType", "header"])?;
                let source_type = a.name("sourceType")?.to_owned();
                if mandates.iter().any(|m| m.source_type == source_type) {
                    return Err(DocumentError::field(
                        "appended.sourceType",
                        format!(
                            "{source_type:?} is also a mandate; the appended signal is not a competing mandate"
                        ),
                    ));
                }
                let header = a.opt_str("header")?.unwrap_or("").to_owned();
                if consolidation == Consolidation::Strongest && !header.starts_with("## ") {
                    return Err(DocumentError::field(
                        "appended.header",
                        "the block the signal opens alone needs a `## ` header",
                    ));
                }
                Some(Appended {
                    source_type,
                    header,
                })
            }
        };
        let re_roles = overrides(&top, "reRoles")?;
        let producer_roles = overrides(&top, "producerRoles")?;
        let reminder = match top.get("reminder") {
            None => None,
            Some(v) => {
                let r = Object::new(v, "reminder", &["sourceType", "prefix"])?;
                Some(Reminder {
                    source_type: r.name("sourceType")?.to_owned(),
                    prefix: r.str("prefix")?.to_owned(),
                })
            }
        };
        Ok(Policy {
            name: name.to_owned(),
            description,
            fold,
            mandates,
            consolidation,
            appended,
            re_roles,
            producer_roles,
            reminder,
        })
    }

    /// The policy as its JSON document.
    pub fn to_json(&self) -> Value {
        let overrides = |list: &[Override]| -> Vec<Value> {
            list.iter()
                .map(|o| {
                    let mut v = json!({ "sourceType": o.source_type });
                    if let Some(layer) = o.layer {
                        v["layer"] = json!(layer_name(layer));
                    }
                    if let Some(role) = o.role {
                        v["role"] = json!(role.as_str());
                    }
                    v
                })
                .collect()
        };
        json!({
            "name": self.name,
            "description": self.description,
            "fold": {
                "layers": self.fold.layers.iter().map(|l| layer_name(*l)).collect::<Vec<_>>(),
                "roles": self.fold.roles.iter().map(|r| r.as_str()).collect::<Vec<_>>(),
            },
            "mandates": self.mandates.iter().map(|m| json!({
                "sourceType": m.source_type,
                "rank": m.rank,
                "header": m.header,
            })).collect::<Vec<_>>(),
            "consolidation": self.consolidation.as_str(),
            "appended": self.appended.as_ref().map(|a| json!({
                "sourceType": a.source_type,
                "header": a.header,
            })),
            "reRoles": overrides(&self.re_roles),
            "producerRoles": overrides(&self.producer_roles),
            "reminder": self.reminder.as_ref().map(|r| json!({
                "sourceType": r.source_type,
                "prefix": r.prefix,
            })),
        })
    }
}

/// `e` told at `path` instead of the field it was read under.
fn rename(e: DocumentError, path: &str) -> DocumentError {
    match e {
        DocumentError::Field { reason, .. } => DocumentError::field(path, reason),
        other => other,
    }
}

fn overrides(top: &Object<'_>, key: &str) -> Result<Vec<Override>, PolicyError> {
    let mut out: Vec<Override> = Vec::new();
    for (path, item) in top.array(key, true)? {
        let o = Object::new(item, &path, &["sourceType", "layer", "role"])?;
        let source_type = o.name("sourceType")?.to_owned();
        if out.iter().any(|x| x.source_type == source_type) {
            return Err(DocumentError::field(
                o.path("sourceType"),
                format!("{source_type:?} is listed twice"),
            ));
        }
        let layer = o.opt_layer("layer")?;
        let role = o.opt_role("role")?;
        if layer.is_none() && role.is_none() {
            return Err(DocumentError::field(
                &path,
                "a re-roling sets a layer, a role or both",
            ));
        }
        out.push(Override {
            source_type,
            layer,
            role,
        });
    }
    Ok(out)
}

impl serde::Serialize for Policy {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.to_json().serialize(s)
    }
}

impl<'de> serde::Deserialize<'de> for Policy {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let value = Value::deserialize(d)?;
        Policy::from_json(&value).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    fn recommended() -> Value {
        serde_json::from_str(Policy::document_of("recommended").unwrap()).unwrap()
    }

    #[rstest]
    #[case::missing_name(&["name"], Value::Null, "name: missing")]
    #[case::bad_rank(&["mandates", "1", "rank"], json!(-1), "mandates[1].rank: expected an integer from 0 to 255, found -1")]
    #[case::bad_layer(&["reRoles", "0", "layer"], json!("L7"), "reRoles[0].layer: expected one of")]
    #[case::bad_role(&["reRoles", "2", "role"], json!("boss"), "reRoles[2].role: expected one of")]
    #[case::bad_consolidation(&["consolidation"], json!("all"), "consolidation: expected \"strongest\" or \"joined\"")]
    #[case::headerless(&["mandates", "0", "header"], json!(""), "mandates[0].header: a consolidated block needs")]
    #[case::appended_is_a_mandate(&["appended", "sourceType"], json!("retryFeedback"), "appended.sourceType: \"retryFeedback\" is also a mandate")]
    #[case::unknown(&["fold", "depth"], json!(3), "fold.depth: unknown field")]
    #[case::fold_layer(&["fold", "layers", "0"], json!(9), "fold.layers[0]: expected one of")]
    #[case::mandates_not_a_list(&["mandates"], json!({}), "mandates: expected an array, found an object")]
    fn a_bad_field_is_named(#[case] at: &[&str], #[case] value: Value, #[case] expected: &str) {
        let mut doc = recommended();
        let mut slot = &mut doc;
        for key in &at[..at.len() - 1] {
            slot = match key.parse::<usize>() {
                Ok(i) => &mut slot[i],
                Err(_) => &mut slot[*key],
            };
        }
        let last = at[at.len() - 1];
        match last.parse::<usize>() {
            Ok(i) => slot[i] = value,
            Err(_) => slot[last] = value,
        }
        let err = Policy::from_json(&doc).unwrap_err().to_string();
        assert!(err.starts_with(expected), "{err}");
    }

    #[test]
    fn not_json_says_where() {
        let err = Policy::parse("{\"name\": ").unwrap_err().to_string();
        assert!(err.starts_with("the policy is not JSON"), "{err}");
        assert!(err.contains("line 1"), "{err}");
    }
}
