//! The handoff contract of a JSON socket as a JSON Schema, for agents whose server constrains a
//! reply to one (`response_format: {type: "json_schema"}`). The schema says what
//! [`super::validate_under`] checks at the top level: the canonical keys and their types, the
//! keys the socket's assignments and advance condition read, what routing and generators
//! require, and whether other keys are allowed. Validation stays the judge (a server may ignore
//! the schema): an output that breaks the contract still gets its repair turn.

use serde_json::{Map, Value, json};

use crate::loadout::Socket;

/// The name the schema is sent under (`json_schema.name`).
pub const SCHEMA_NAME: &str = "handoff";

/// The JSON Schema of `socket`'s output under a cast's `conformance` rules.
pub fn contract_schema(socket: &Socket, conformance: u32) -> Value {
    let consumed = super::consumed_keys(socket);
    let mut properties = Map::new();
    properties.insert(
        "context".into(),
        json!({ "type": "string", "description": "Explanations and notes for the next step." }),
    );
    properties.insert("satisfied".into(), json!({ "type": "boolean" }));
    properties.insert(
        "workItems".into(),
        json!({
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "title": { "type": "string", "minLength": 1 },
                    "context": { "type": "string", "minLength": 1 },
                },
                "required": ["title", "context"],
                "additionalProperties": false,
            },
        }),
    );
    if consumed.iter().any(|k| k == "text") {
        properties.insert("text".into(), json!({ "type": "string" }));
    }
    for key in &consumed {
        properties.entry(key.clone()).or_insert_with(|| json!({}));
    }
    properties.insert(
        "event".into(),
        json!({
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "type": { "type": "string", "minLength": 1 },
                    "severity": {
                        "type": "string",
                        "enum": super::SEVERITIES,
                    },
                    "message": { "type": "string" },
                    "payload": { "type": "object" },
                    "source": { "type": "object" },
                },
                "required": ["type"],
            },
        }),
    );
    let mut required: Vec<String> = Vec::new();
    let mut require = |key: &str| {
        if !required.iter().any(|k| k == key) {
            required.push(key.to_owned());
        }
    };
    if super::needs_satisfied(socket) {
        require("satisfied");
    }
    if super::needs_work_items(socket) {
        require("workItems");
    }
    for (_, source) in &socket.assign {
        if let Some(path) = source.trim().strip_prefix("$.")
            && let Some(top) = path.split('.').next().filter(|k| !k.is_empty())
        {
            require(top);
        }
    }
    for key in &required {
        properties.entry(key.clone()).or_insert_with(|| json!({}));
    }
    let open = conformance >= 1 && super::reads_dollar(socket);
    json!({
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": open,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::When;
    use crate::loadout::{Edge, EdgeTarget};

    fn socket(assign: &[(&str, &str)], satisfied: bool, generator: bool) -> Socket {
        let edges = if satisfied {
            vec![Edge {
                when: When::Satisfied,
                to: EdgeTarget::End,
                max_traversals: None,
            }]
        } else {
            Vec::new()
        };
        crate::handoff::tests::socket(assign, edges, generator)
    }

    #[test]
    fn an_evaluator_must_say_satisfied_and_nothing_else_is_allowed() {
        let schema = contract_schema(&socket(&[], true, false), 2);
        assert_eq!(schema["type"], "object");
        assert_eq!(schema["required"], json!(["satisfied"]));
        assert_eq!(schema["additionalProperties"], json!(false));
        assert_eq!(schema["properties"]["satisfied"]["type"], "boolean");
        assert!(schema["properties"].get("text").is_none());
    }

    #[test]
    fn a_planner_must_give_work_items_and_assigned_keys_are_required() {
        let s = socket(&[("plan", "$.plan.steps")], false, true);
        let schema = contract_schema(&s, 2);
        assert_eq!(schema["required"], json!(["workItems", "plan"]));
        assert_eq!(
            schema["properties"]["workItems"]["items"]["required"],
            json!(["title", "context"])
        );
        assert!(schema["properties"]["plan"].is_object());
        // The socket reads `$.`: under the conformance rules any extra key is accepted.
        assert_eq!(schema["additionalProperties"], json!(true));
        assert_eq!(contract_schema(&s, 0)["additionalProperties"], json!(false));
    }

    #[test]
    fn a_schema_admits_what_validation_accepts() {
        let s = socket(&[("summary", "$.text")], true, false);
        let schema = contract_schema(&s, 2);
        assert_eq!(schema["properties"]["text"]["type"], "string");
        let output = json!({"satisfied": true, "text": "done", "context": "c"});
        assert!(super::super::validate_under(&s, &output, 2).is_empty());
        for key in output.as_object().unwrap().keys() {
            assert!(schema["properties"].get(key).is_some(), "{key}");
        }
    }
}
