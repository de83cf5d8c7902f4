//! The prompt template language: `{{ key }}`, applied to materia prompts.
//!
//! Keys: `request`, `stateJson` / `itemJson` (pretty JSON of `state.data` / its `item`),
//! `lastOutput`, `lastJson`, `state.<path>`, `item.<path>`, `cursor.<name>`, `lastJson.<path>`;
//! anything else is a path into `state.data`. Missing and null values render empty, strings raw,
//! other values as 2-space JSON. An unclosed `{{` is kept as text.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::path::{self, Scope};

/// What a template can see.
#[derive(Debug, Clone, Copy)]
pub struct TemplateScope<'a> {
    /// What the person asked the cast to do (`{{request}}`).
    pub request: &'a str,
    /// `state.data`.
    pub data: &'a Value,
    /// The last committed JSON.
    pub last_json: Option<&'a Value>,
    /// Raw text of the last completed output (`{{lastOutput}}`).
    pub last_output: Option<&'a str>,
    /// Loop cursors by name, each the 0-based index of the current item.
    pub cursors: &'a BTreeMap<String, u64>,
}

/// Renders a JSON value as the template language does.
pub fn show(value: Option<&Value>) -> String {
    match value {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(text)) => text.clone(),
        Some(other) => serde_json::to_string_pretty(other).unwrap_or_default(),
    }
}

fn lookup(scope: &TemplateScope<'_>, key: &str) -> String {
    let paths = Scope {
        output: None,
        data: scope.data,
        last_json: scope.last_json,
        last_output: scope.last_output,
    };
    match key {
        "request" => scope.request.to_owned(),
        "stateJson" => show(Some(scope.data)),
        "itemJson" => show(scope.data.get("item")),
        "lastOutput" => scope.last_output.unwrap_or_default().to_owned(),
        "lastJson" => show(scope.last_json),
        _ => {
            if let Some(name) = key.strip_prefix("cursor.") {
                return scope
                    .cursors
                    .get(name)
                    .map(u64::to_string)
                    .unwrap_or_default();
            }
            show(path::resolve(&paths, key).as_ref())
        }
    }
}

/// Renders `template`.
pub fn render(template: &str, scope: &TemplateScope<'_>) -> String {
    render_with(template, scope, |value| value)
}

/// Renders `template`, passing every substituted value through `value` first (a prompt fences
/// them: they are data, the template's own text is not).
pub fn render_with(
    template: &str,
    scope: &TemplateScope<'_>,
    value: impl Fn(String) -> String,
) -> String {
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(start) = rest.find("{{") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        match after.find("}}") {
            Some(end) => {
                out.push_str(&value(lookup(scope, after[..end].trim())));
                rest = &after[end + 2..];
            }
            None => {
                out.push_str(&rest[start..]);
                rest = "";
            }
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn every_key_kind_renders() {
        let data = json!({"vcs": {"kind": "git"}, "item": {"title": "T"}, "n": null});
        let last = json!({"context": "c"});
        let cursors = BTreeMap::from([("workItemIndex".to_owned(), 2)]);
        let scope = TemplateScope {
            request: "do it",
            data: &data,
            last_json: Some(&last),
            last_output: Some("out"),
            cursors: &cursors,
        };
        let text = render(
            "{{request}}|{{ item.title }}|{{state.vcs.kind}}|{{cursor.workItemIndex}}|{{lastJson.context}}|{{lastOutput}}|{{n}}|{{nope}}|{{vcs}}",
            &scope,
        );
        assert_eq!(text, "do it|T|git|2|c|out|||{\n  \"kind\": \"git\"\n}");
        assert_eq!(render("a {{ unclosed", &scope), "a {{ unclosed");
        assert!(render("{{stateJson}}", &scope).contains("\"vcs\""));
    }
}
