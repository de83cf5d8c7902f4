//! `commit-sigil`: pi-materia's Commit-Sigil, a pass-through generator that checks every work
//! item title against the Conventional Commits format (`type(scope)!: description`) and echoes
//! `state.workItems` unchanged, with `satisfied` and a `context` naming the titles that fail.

use serde_json::{Value, json};

/// The types of the Conventional Commits specification and its common Angular set.
const TYPES: [&str; 11] = [
    "feat", "fix", "docs", "style", "refactor", "perf", "test", "build", "ci", "chore", "revert",
];

/// Why `title` is not a Conventional Commit title, or `None` when it is one.
pub(crate) fn problem(title: &str) -> Option<String> {
    let Some((head, description)) = title.split_once(": ") else {
        return Some("has no `type: description` (a colon and a space after the type)".into());
    };
    if description.trim().is_empty() {
        return Some("has an empty description".into());
    }
    let head = head.strip_suffix('!').unwrap_or(head);
    let kind = match head.split_once('(') {
        Some((kind, rest)) => match rest.strip_suffix(')') {
            Some(scope) if !scope.is_empty() && !scope.contains(['(', ')']) => kind,
            _ => return Some(format!("has a malformed scope in {head:?}")),
        },
        None => head,
    };
    if !TYPES.contains(&kind) {
        return Some(format!(
            "has the type {kind:?}; use one of {}",
            TYPES.join(", ")
        ));
    }
    None
}

/// The output for the utility's stdin `input`.
pub(crate) fn run(input: &Value) -> Value {
    let Some(items) = input.pointer("/state/workItems").and_then(Value::as_array) else {
        return json!({
            "workItems": [],
            "satisfied": false,
            "context": "Commit-Sigil found no state.workItems to check; place it after a generator",
            "state": { "commitSigil": { "ok": false, "invalid": [] } },
        });
    };
    let invalid: Vec<Value> = items
        .iter()
        .enumerate()
        .filter_map(|(i, item)| {
            let title = item
                .get("title")
                .and_then(Value::as_str)
                .unwrap_or_default();
            problem(title).map(|why| json!({ "index": i, "title": title, "problem": why }))
        })
        .collect();
    let context = if invalid.is_empty() {
        format!(
            "all {} work item titles are Conventional Commit titles",
            items.len()
        )
    } else {
        let lines: Vec<String> = invalid
            .iter()
            .map(|v| {
                format!(
                    "work item {} {:?} {}",
                    v["index"].as_u64().unwrap_or(0) + 1,
                    v["title"].as_str().unwrap_or_default(),
                    v["problem"].as_str().unwrap_or_default()
                )
            })
            .collect();
        format!(
            "rename these titles as Conventional Commits (`type(scope): description`): {}",
            lines.join("; ")
        )
    };
    json!({
        "workItems": items,
        "satisfied": invalid.is_empty(),
        "context": context,
        "state": { "commitSigil": { "ok": true, "invalid": invalid } },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conventional_titles_pass_and_others_say_why() {
        assert_eq!(problem("feat: add a greeting"), None);
        assert_eq!(problem("fix(cli)!: exit 1 on a bad flag"), None);
        assert!(
            problem("Add a greeting")
                .unwrap()
                .contains("no `type: description`")
        );
        assert!(problem("feature: x").unwrap().contains("\"feature\""));
        assert!(problem("feat(): x").unwrap().contains("malformed scope"));
        assert!(problem("feat: ").unwrap().contains("empty description"));
    }

    #[test]
    fn the_items_pass_through_unchanged_with_satisfied_and_context() {
        let items = json!([{"title": "feat: a", "context": "x"}, {"title": "b", "context": "y"}]);
        let out = run(&json!({"state": {"workItems": items}}));
        assert_eq!(out["workItems"], items);
        assert_eq!(out["satisfied"], false);
        assert!(
            out["context"]
                .as_str()
                .unwrap()
                .contains("work item 2 \"b\"")
        );
        let out =
            run(&json!({"state": {"workItems": [{"title": "docs: readme", "context": "z"}]}}));
        assert_eq!(out["satisfied"], true);
        assert_eq!(out["state"]["commitSigil"]["ok"], true);
    }
}
