//! A utility output's `scopeTransition` (pi-materia's execution scopes): `{kind: "replace",
//! scope: {id, cwd, state?, exports?}}` or `{kind: "base"}`. [`take_scope`] checks it and takes
//! it out of the output, so the handoff contract and routing see the rest.

use serde_json::Value;

use crate::event::ExecutionScope;

/// What a `scopeTransition` asks for.
#[derive(Debug, Clone, PartialEq)]
pub enum ScopeTransition {
    /// Later sockets act in this scope.
    Replace(ExecutionScope),
    /// Later sockets act in the cast's own working directory again.
    Base,
}

const AT: &str = "$.scopeTransition";

/// Takes `scopeTransition` out of a JSON output: the transition, or every issue with it (the
/// output is then left as it was). An output without one gives `None`.
pub fn take_scope(value: &mut Value) -> Result<Option<ScopeTransition>, Vec<String>> {
    let Some(map) = value.as_object_mut() else {
        return Ok(None);
    };
    let Some(transition) = map.get("scopeTransition") else {
        return Ok(None);
    };
    let transition = read(transition)?;
    map.remove("scopeTransition");
    Ok(Some(transition))
}

fn read(transition: &Value) -> Result<ScopeTransition, Vec<String>> {
    let Value::Object(fields) = transition else {
        return Err(vec![format!(
            "{AT} must be an object: {{\"kind\": \"replace\", \"scope\": {{\"id\", \"cwd\"}}}} or {{\"kind\": \"base\"}}"
        )]);
    };
    match fields.get("kind").and_then(Value::as_str) {
        Some("base") => Ok(ScopeTransition::Base),
        Some("replace") => {
            let Some(Value::Object(scope)) = fields.get("scope") else {
                return Err(vec![format!(
                    "{AT}.scope is required with kind \"replace\": an object with a string \"id\" and \"cwd\""
                )]);
            };
            let mut issues = Vec::new();
            let mut text = |key: &str| match scope.get(key).and_then(Value::as_str) {
                Some(s) if !s.trim().is_empty() => s.to_owned(),
                _ => {
                    issues.push(format!("{AT}.scope.{key} is required: a non-empty string"));
                    String::new()
                }
            };
            let id = text("id");
            let cwd = text("cwd");
            if cwd.contains('\0') {
                issues.push(format!("{AT}.scope.cwd must not contain a NUL character"));
            }
            for key in ["state", "exports"] {
                if scope
                    .get(key)
                    .is_some_and(|v| !v.is_object() && !v.is_null())
                {
                    issues.push(format!("{AT}.scope.{key} must be an object"));
                }
            }
            if !issues.is_empty() {
                return Err(issues);
            }
            let object = |key: &str| scope.get(key).filter(|v| v.is_object()).cloned();
            Ok(ScopeTransition::Replace(ExecutionScope {
                id,
                cwd,
                state: object("state"),
                exports: object("exports"),
            }))
        }
        _ => Err(vec![format!("{AT}.kind must be \"replace\" or \"base\"")]),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_replace_is_taken_out_of_the_output() {
        let mut out = json!({"state": {"a": 1}, "scopeTransition": {"kind": "replace",
            "scope": {"id": "lane-a", "cwd": "/tmp/a", "exports": {"branch": "b"}}}});
        let taken = take_scope(&mut out).unwrap().unwrap();
        assert_eq!(
            taken,
            ScopeTransition::Replace(ExecutionScope {
                id: "lane-a".into(),
                cwd: "/tmp/a".into(),
                state: None,
                exports: Some(json!({"branch": "b"})),
            })
        );
        assert_eq!(out, json!({"state": {"a": 1}}));
    }

    #[test]
    fn base_and_absent() {
        let mut out = json!({"scopeTransition": {"kind": "base"}});
        assert_eq!(take_scope(&mut out), Ok(Some(ScopeTransition::Base)));
        assert_eq!(out, json!({}));
        assert_eq!(take_scope(&mut json!({"x": 1})), Ok(None));
        assert_eq!(take_scope(&mut json!("text")), Ok(None));
    }

    #[test]
    fn bad_shapes_name_the_field_and_leave_the_output() {
        let cases = [
            (json!(5), "$.scopeTransition must be an object"),
            (json!({"kind": "swap"}), "$.scopeTransition.kind must be"),
            (
                json!({"kind": "replace"}),
                "$.scopeTransition.scope is required",
            ),
            (
                json!({"kind": "replace", "scope": {"id": "a"}}),
                "$.scopeTransition.scope.cwd is required",
            ),
            (
                json!({"kind": "replace", "scope": {"id": "", "cwd": "x"}}),
                "$.scopeTransition.scope.id is required",
            ),
            (
                json!({"kind": "replace", "scope": {"id": "a", "cwd": "x", "exports": [1]}}),
                "$.scopeTransition.scope.exports must be an object",
            ),
        ];
        for (transition, said) in cases {
            let mut out = json!({"scopeTransition": transition});
            let before = out.clone();
            let issues = take_scope(&mut out).unwrap_err();
            assert!(
                issues.iter().any(|i| i.contains(said)),
                "{issues:?} / {said}"
            );
            assert_eq!(out, before);
        }
    }
}
