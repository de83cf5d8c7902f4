//! The handoff contract: how a socket's output is parsed and what a JSON output may contain.
//!
//! Parsing is lenient the way the reference is: the first fenced code block if there is one,
//! else the text from the first `{` or `[`, and the first complete JSON value in it (trailing
//! prose is ignored). Validation returns every issue as a sentence the agent can act on in its
//! repair turn.
//!
//! Extra top-level keys of an agent's output: a cast under the conformance rules
//! (`machine::CONFORMANCE` 1) accepts any, as the reference does, once the socket reads `$` (an
//! assignment whose source is `$` or starts with `$.`, or an advance condition with `$.`); a
//! cast recorded before them accepts only the keys a `$.key` path consumes (pinned by
//! `whole_output_assign_does_not_admit_extra_keys`).
//!
//! The `event` side-channel (pi-materia §2.5 b): a top-level `event` array of objects, each with
//! a non-empty string `type` and, when given, `severity` (debug, info, warning, error,
//! critical), a string `message`, an object `payload` and an object `source`. [`take_events`]
//! checks it and takes it out of the output, so routing and validation see the rest.

use serde_json::Value;

use crate::event::When;

mod scope;

use crate::loadout::Socket;
pub use scope::{ScopeTransition, take_scope};

mod schema;

pub use schema::{SCHEMA_NAME, contract_schema};

/// The keys an agent may always emit.
pub const CANONICAL_KEYS: [&str; 4] = ["workItems", "satisfied", "context", "text"];

/// Why an output holds no JSON value. Its words are recorded in `output_rejected` (and
/// re-decided by `verify`), so they are frozen.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LenientError {
    /// Neither `{` nor `[` occurs in the output.
    #[error("the output contains no JSON object")]
    NoObject,
    /// The text from the first `{` or `[` on is not JSON.
    #[error("the output is not valid JSON: {0}")]
    Invalid(#[source] serde_json::Error),
    /// The text from the first `{` or `[` on ends before a value does.
    #[error("the output contains no JSON value")]
    NoValue,
}

/// Parses an output leniently into one JSON value.
pub fn parse_lenient(text: &str) -> Result<Value, LenientError> {
    let candidate = fenced_block(text).unwrap_or(text);
    let start = candidate.find(['{', '[']).ok_or(LenientError::NoObject)?;
    let body = &candidate[start..];
    let mut values = serde_json::Deserializer::from_str(body).into_iter::<Value>();
    match values.next() {
        Some(Ok(value)) => Ok(value),
        Some(Err(err)) => Err(LenientError::Invalid(err)),
        None => Err(LenientError::NoValue),
    }
}

fn fenced_block(text: &str) -> Option<&str> {
    let open = text.find("```")?;
    let after = &text[open + 3..];
    let body_start = after.find('\n').map_or(0, |i| i + 1);
    let body = &after[body_start..];
    let close = body.find("```")?;
    Some(&body[..close])
}

/// The `$.key` top-level keys this socket consumes (from assignments and advance conditions).
fn consumed_keys(socket: &Socket) -> Vec<String> {
    let mut keys = Vec::new();
    let mut take = |expr: &str| {
        let mut rest = expr;
        while let Some(pos) = rest.find("$.") {
            let tail = &rest[pos + 2..];
            let key: String = tail
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == '-')
                .collect();
            if !key.is_empty() {
                keys.push(key);
            }
            rest = tail;
        }
    };
    for (_, source) in &socket.assign {
        take(source);
    }
    if let Some(when) = socket.advance.as_ref().and_then(|a| a.when.as_deref()) {
        take(when);
    }
    keys
}

/// Whether routing or advancing reads `satisfied`.
pub fn needs_satisfied(socket: &Socket) -> bool {
    socket
        .edges
        .iter()
        .any(|e| matches!(e.when, When::Satisfied | When::NotSatisfied))
        || socket
            .advance
            .as_ref()
            .and_then(|a| a.when.as_deref())
            .is_some_and(|w| matches!(w.trim(), "satisfied" | "not_satisfied"))
}

/// Whether the socket must emit `workItems`.
pub fn needs_work_items(socket: &Socket) -> bool {
    socket.generator
        || socket
            .assign
            .iter()
            .any(|(target, source)| target == "workItems" && source.trim() == "$.workItems")
}

/// The severities an `event` may carry.
const SEVERITIES: [&str; 5] = ["debug", "info", "warning", "error", "critical"];

/// Takes the `event` side-channel out of a JSON output: its events, or every issue with it (the
/// output is left as it was then). An output without `event` gives no events.
pub fn take_events(value: &mut Value) -> Result<Vec<Value>, Vec<String>> {
    let Some(map) = value.as_object_mut() else {
        return Ok(Vec::new());
    };
    let Some(events) = map.get("event") else {
        return Ok(Vec::new());
    };
    let Value::Array(list) = events else {
        return Err(vec![
            "\"event\" at $.event must be an array of {type, severity?, message?, payload?, \
             source?} objects"
                .to_owned(),
        ]);
    };
    let mut issues = Vec::new();
    for (i, event) in list.iter().enumerate() {
        let at = format!("$.event[{i}]");
        let Value::Object(fields) = event else {
            issues.push(format!("{at} must be an object with a string \"type\""));
            continue;
        };
        if fields
            .get("type")
            .and_then(Value::as_str)
            .is_none_or(|t| t.trim().is_empty())
        {
            issues.push(format!("{at}.type is required: a non-empty string"));
        }
        if let Some(severity) = fields.get("severity")
            && !severity.as_str().is_some_and(|s| SEVERITIES.contains(&s))
        {
            issues.push(format!(
                "{at}.severity must be one of debug, info, warning, error, critical"
            ));
        }
        type Check = (&'static str, fn(&Value) -> bool, &'static str);
        let checks: [Check; 3] = [
            ("message", Value::is_string, "a string"),
            ("payload", Value::is_object, "an object"),
            ("source", Value::is_object, "an object"),
        ];
        for (key, ok, wanted) in checks {
            if fields.get(key).is_some_and(|v| !ok(v)) {
                issues.push(format!("{at}.{key} must be {wanted}"));
            }
        }
    }
    if !issues.is_empty() {
        return Err(issues);
    }
    match map.remove("event") {
        Some(Value::Array(list)) => Ok(list),
        _ => Ok(Vec::new()),
    }
}

/// Whether a socket reads `$` (an assignment from `$` or `$.…`, an advance condition with
/// `$.`): under the conformance rules its agent output may carry any extra top-level key.
fn reads_dollar(socket: &Socket) -> bool {
    socket
        .assign
        .iter()
        .any(|(_, source)| source.trim() == "$" || source.trim().starts_with("$."))
        || socket
            .advance
            .as_ref()
            .and_then(|a| a.when.as_deref())
            .is_some_and(|w| w.contains("$."))
}

/// Validates a parsed JSON output of `socket` as a cast recorded before the conformance rules
/// does. Returns every issue found (empty = valid).
pub fn validate(socket: &Socket, value: &Value) -> Vec<String> {
    validate_under(socket, value, 0)
}

/// Validates a parsed JSON output of `socket` under a cast's `conformance` rules
/// (`machine::CONFORMANCE`). Returns every issue found (empty = valid).
pub fn validate_under(socket: &Socket, value: &Value, conformance: u32) -> Vec<String> {
    let mut issues = Vec::new();
    let Value::Object(map) = value else {
        issues.push("the output must be one JSON object, not an array or a scalar".to_owned());
        return issues;
    };
    let agent = socket.is_agent();
    let consumed = consumed_keys(socket);
    let open = conformance >= 1 && reads_dollar(socket);
    if agent {
        for key in map.keys() {
            let schedule = socket.parallel && key == "parallelSchedule";
            if !open
                && !schedule
                && !CANONICAL_KEYS.contains(&key.as_str())
                && !consumed.contains(key)
            {
                issues.push(format!(
                    "unexpected top-level field \"{key}\": only workItems, satisfied and context are allowed; put explanations in context"
                ));
            }
        }
        if map.get("text").is_some_and(Value::is_string) && !consumed.iter().any(|k| k == "text") {
            issues.push(
                "\"text\" is not read by this socket: move the prose into context and drop text"
                    .to_owned(),
            );
        }
    }
    type Check = (&'static str, fn(&Value) -> bool, &'static str);
    let type_checks: [Check; 4] = [
        ("context", Value::is_string, "a string"),
        ("text", Value::is_string, "a string"),
        ("satisfied", Value::is_boolean, "a boolean"),
        ("workItems", Value::is_array, "an array"),
    ];
    for (key, ok, wanted) in type_checks {
        if let Some(v) = map.get(key)
            && !ok(v)
        {
            issues.push(format!("\"{key}\" at $.{key} must be {wanted}"));
        }
    }
    if needs_satisfied(socket) && !map.contains_key("satisfied") {
        issues.push(
            "\"satisfied\" at $.satisfied is required: a boolean saying whether the work is accepted"
                .to_owned(),
        );
    }
    if needs_work_items(socket) && !map.contains_key("workItems") {
        issues.push(
            "\"workItems\" at $.workItems is required: an array of {title, context} objects"
                .to_owned(),
        );
    }
    if (agent || socket.generator)
        && let Some(Value::Array(items)) = map.get("workItems")
    {
        for (i, item) in items.iter().enumerate() {
            work_item_issues(i, item, &mut issues);
        }
    }
    if socket.parallel {
        let items = match map.get("workItems") {
            Some(Value::Array(items)) => items.len(),
            _ => 0,
        };
        schedule_issues(map.get("parallelSchedule"), items, &mut issues);
    }
    for (_, source) in &socket.assign {
        if let Some(path) = source.trim().strip_prefix("$.")
            && crate::path::get(value, path).is_none()
        {
            issues.push(format!(
                "$.{path} is required by this socket's assignments but missing"
            ));
        }
    }
    issues
}

/// A parallel generator's `parallelSchedule {version: 1, streams: [{name, workItemIndexes}]}`:
/// every work item index exactly once, each stream named (letters, digits, `-`, `_`; unique)
/// and given at least one item.
fn schedule_issues(schedule: Option<&Value>, items: usize, issues: &mut Vec<String>) {
    const SHAPE: &str =
        "{\"version\": 1, \"streams\": [{\"name\": \"a\", \"workItemIndexes\": [0, 1]}, ...]}";
    let Some(Value::Object(schedule)) = schedule else {
        issues.push(format!(
            "\"parallelSchedule\" at $.parallelSchedule is required of a parallel generator: {SHAPE}, covering every work item index exactly once"
        ));
        return;
    };
    if schedule.get("version") != Some(&Value::from(1)) {
        issues.push("$.parallelSchedule.version must be 1".to_owned());
    }
    let Some(Value::Array(streams)) = schedule.get("streams") else {
        issues.push(format!(
            "$.parallelSchedule.streams must be an array: {SHAPE}"
        ));
        return;
    };
    if streams.is_empty() {
        issues.push("$.parallelSchedule.streams must name at least one stream".to_owned());
    }
    let mut seen = vec![0u32; items];
    let mut names: Vec<&str> = Vec::new();
    for (i, stream) in streams.iter().enumerate() {
        let at = format!("$.parallelSchedule.streams.{i}");
        let name = stream.get("name").and_then(Value::as_str).unwrap_or("");
        let good = !name.is_empty()
            && name.len() <= 64
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
        if !good {
            issues.push(format!(
                "{at}.name must be a name of letters, digits, - and _ (at most 64)"
            ));
        } else if names.contains(&name) {
            issues.push(format!(
                "{at}.name {name:?} is used twice; name each stream once"
            ));
        } else {
            names.push(name);
        }
        let Some(Value::Array(indexes)) = stream.get("workItemIndexes") else {
            issues.push(format!(
                "{at}.workItemIndexes must be an array of work item indexes"
            ));
            continue;
        };
        if indexes.is_empty() {
            issues.push(format!(
                "{at}.workItemIndexes is empty; give the stream at least one item"
            ));
        }
        for index in indexes {
            match index.as_u64().and_then(|n| usize::try_from(n).ok()) {
                Some(n) if n < items => {
                    if let Some(count) = seen.get_mut(n) {
                        *count += 1;
                    }
                }
                _ => issues.push(format!(
                    "{at}.workItemIndexes holds {index}, which is not the index of one of the {items} work items"
                )),
            }
        }
    }
    for (n, count) in seen.iter().enumerate() {
        match count {
            0 => issues.push(format!(
                "work item {n} is in no stream of $.parallelSchedule"
            )),
            1 => {}
            _ => issues.push(format!(
                "work item {n} is in {count} streams of $.parallelSchedule; put it in exactly one"
            )),
        }
    }
}

fn work_item_issues(index: usize, item: &Value, issues: &mut Vec<String>) {
    let Value::Object(fields) = item else {
        issues.push(format!(
            "$.workItems.{index} must be an object with title and context"
        ));
        return;
    };
    for key in ["title", "context"] {
        match fields.get(key) {
            Some(Value::String(s)) if !s.trim().is_empty() => {}
            Some(_) => issues.push(format!(
                "$.workItems.{index}.{key} must be a non-empty string"
            )),
            None => issues.push(format!("$.workItems.{index}.{key} is missing")),
        }
    }
    for key in fields.keys() {
        if key != "title" && key != "context" {
            let hint = match key.as_str() {
                "architecture" | "architectureGuidance" => ": fold it into context",
                "passed" => ": use the top-level satisfied instead",
                _ => ": a work item has exactly title and context",
            };
            issues.push(format!("$.workItems.{index}.{key} is not allowed{hint}"));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::When;
    use crate::id::MateriaName;
    use crate::loadout::{AgentSpec, Edge, EdgeTarget, Parse, SocketKind};
    use serde_json::json;

    /// A JSON agent socket with these assignments and edges (the schema's tests use it too).
    pub(super) fn socket(assign: &[(&str, &str)], edges: Vec<Edge>, generator: bool) -> Socket {
        Socket {
            materia: MateriaName::new("M"),
            label: "M".into(),
            kind: SocketKind::Agent(AgentSpec {
                prompt: "p".into(),
                multi_turn: false,
                model: None,
                thinking: None,
                tools: None,
            }),
            generator,
            parallel: false,
            parse: Parse::Json,
            assign: assign
                .iter()
                .map(|(a, b)| ((*a).to_owned(), (*b).to_owned()))
                .collect(),
            edges,
            advance: None,
            foreach: None,
        }
    }

    fn eval_edges() -> Vec<Edge> {
        vec![Edge {
            when: When::Satisfied,
            to: EdgeTarget::End,
            max_traversals: None,
        }]
    }

    #[test]
    fn lenient_parse_finds_the_json() {
        assert_eq!(
            parse_lenient("sure:\n```json\n{\"a\":1}\n```\nbye").ok(),
            Some(json!({"a": 1}))
        );
        assert_eq!(
            parse_lenient("result {\"a\":[1]} trailing {").ok(),
            Some(json!({"a": [1]}))
        );
        assert!(matches!(
            parse_lenient("no json here"),
            Err(LenientError::NoObject)
        ));
        let invalid = parse_lenient("{\"a\": }").unwrap_err();
        assert!(matches!(invalid, LenientError::Invalid(_)), "{invalid:?}");
        assert!(
            invalid
                .to_string()
                .starts_with("the output is not valid JSON: expected value"),
            "{invalid}"
        );
    }

    #[test]
    fn satisfied_is_required_only_when_consumed() {
        let s = socket(&[], eval_edges(), false);
        assert_eq!(validate(&s, &json!({"context": "ok"})).len(), 1);
        assert!(validate(&s, &json!({"satisfied": true})).is_empty());
        let plain = socket(&[], vec![], false);
        assert!(validate(&plain, &json!({"context": "ok"})).is_empty());
    }

    #[test]
    fn wrong_types_and_extra_keys_are_issues() {
        let s = socket(&[], eval_edges(), false);
        let issues = validate(&s, &json!({"satisfied": "yes", "feedback": "x"}));
        assert!(
            issues
                .iter()
                .any(|i| i.contains("$.satisfied must be a boolean"))
        );
        assert!(issues.iter().any(|i| i.contains("\"feedback\"")));
    }

    #[test]
    fn under_the_conformance_rules_reading_dollar_admits_extra_keys() {
        let whole = socket(&[("lastCheck", "$")], eval_edges(), false);
        let reply = json!({"satisfied": true, "verdict": "x", "score": 3});
        assert!(validate_under(&whole, &reply, 1).is_empty());
        let path = socket(&[("v", "$.verdict")], eval_edges(), false);
        assert!(validate_under(&path, &reply, 1).is_empty());
        let none = socket(&[], eval_edges(), false);
        assert!(!validate_under(&none, &reply, 1).is_empty());
        let typed = validate_under(&whole, &json!({"satisfied": "yes", "x": 1}), 1);
        assert_eq!(
            typed,
            vec!["\"satisfied\" at $.satisfied must be a boolean"]
        );
    }

    #[test]
    fn the_event_side_channel_is_checked_and_taken_out() {
        let mut out = json!({"satisfied": true, "event": [
            {"type": "note", "severity": "info", "message": "m", "payload": {"a": 1}, "x": 2}
        ]});
        let events = take_events(&mut out).unwrap();
        assert_eq!(events.len(), 1);
        assert_eq!(events[0]["x"], 2);
        assert_eq!(out, json!({"satisfied": true}));
        let mut plain = json!({"satisfied": true});
        assert_eq!(take_events(&mut plain).unwrap(), Vec::<Value>::new());
        let mut bad = json!({"event": [
            {"type": ""}, "text", {"type": "t", "severity": "loud", "payload": 1, "source": "s"}
        ]});
        let issues = take_events(&mut bad).unwrap_err();
        assert_eq!(
            issues,
            vec![
                "$.event[0].type is required: a non-empty string",
                "$.event[1] must be an object with a string \"type\"",
                "$.event[2].severity must be one of debug, info, warning, error, critical",
                "$.event[2].payload must be an object",
                "$.event[2].source must be an object",
            ]
        );
        assert!(
            bad.get("event").is_some(),
            "a bad side-channel stays in the output"
        );
        let mut not_array = json!({"event": {"type": "t"}});
        assert!(take_events(&mut not_array).unwrap_err()[0].contains("must be an array"));
    }

    #[test]
    fn whole_output_assign_does_not_admit_extra_keys() {
        // The reference accepts any key once a socket assigns "$"; castlog does not.
        let s = socket(&[("lastCheck", "$")], eval_edges(), false);
        let issues = validate(&s, &json!({"satisfied": true, "verdict": "x"}));
        assert!(
            issues.iter().any(|i| i.contains("\"verdict\"")),
            "{issues:?}"
        );
        let consuming = socket(&[("v", "$.verdict")], eval_edges(), false);
        assert!(validate(&consuming, &json!({"satisfied": true, "verdict": "x"})).is_empty());
    }

    #[test]
    fn work_items_are_exactly_title_and_context() {
        let g = socket(&[("workItems", "$.workItems")], vec![], true);
        assert!(validate(&g, &json!({"workItems": [{"title": "a", "context": "b"}]})).is_empty());
        let issues = validate(
            &g,
            &json!({"workItems": [{"title": "", "context": "b", "id": 1}, "x"]}),
        );
        assert_eq!(issues.len(), 3, "{issues:?}");
        assert!(!validate(&g, &json!({"context": "none"})).is_empty());
    }

    #[test]
    fn text_needs_a_consumer() {
        let s = socket(&[], vec![], false);
        assert_eq!(validate(&s, &json!({"text": "prose"})).len(), 1);
        let t = socket(&[("summary", "$.text")], vec![], false);
        assert!(validate(&t, &json!({"text": "prose"})).is_empty());
    }

    /// An agent's JSON output in the shape the build loop's planner gives.
    const OUTPUT: &str = r#"{"workItems": [{"title": "Add a greeting", "context": "Print hello."}], "satisfied": false, "context": "two items", "text": "done"}"#;

    /// [`OUTPUT`] fenced, with prose around it, as agents reply.
    fn reply() -> String {
        format!("Here is the plan:\n```json\n{OUTPUT}\n```\nthat is all")
    }

    /// Every socket of every loadout of the bundled pi-materia config and the build loop.
    fn fixture_sockets() -> &'static [Socket] {
        static SOCKETS: std::sync::OnceLock<Vec<Socket>> = std::sync::OnceLock::new();
        SOCKETS.get_or_init(|| {
            let configs = [
                include_str!("../../fixtures/pi-materia-default.json"),
                include_str!("../../fixtures/loadouts/build-loop.json"),
            ];
            let mut sockets = Vec::new();
            for text in configs {
                let config = crate::loadout::load_config(text).unwrap();
                for name in &config.names {
                    if let Ok(loadout) = config.resolve(Some(name)) {
                        sockets.extend(loadout.sockets.into_values());
                    }
                }
            }
            sockets
        })
    }

    fn plain(message: &str) -> Result<(), proptest::test_runner::TestCaseError> {
        match crate::hostile::rust_formatting(message) {
            Some(why) => Err(proptest::test_runner::TestCaseError::fail(why)),
            None => Ok(()),
        }
    }

    proptest::proptest! {
        #![proptest_config(crate::hostile::config(256))]

        #[test]
        fn a_damaged_reply_parses_or_fails_in_words(
            bytes in crate::hostile::damaged(reply().as_bytes())
        ) {
            if let Err(err) = parse_lenient(&String::from_utf8_lossy(&bytes)) {
                plain(&err.to_string())?;
            }
        }

        #[test]
        fn any_json_output_is_judged_in_words(value in crate::hostile::json_like(OUTPUT)) {
            for socket in fixture_sockets() {
                for issue in validate(socket, &value) {
                    plain(&issue)?;
                }
            }
        }
    }
}
