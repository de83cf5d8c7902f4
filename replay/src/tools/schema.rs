//! The JSON schemas of the built-in tools' arguments, as an API that offers function tools
//! (OpenAI's `tools`) wants them: the shapes pi-materia's coding agent gives its tools.

use serde_json::{Value, json};

fn string(description: &str) -> Value {
    json!({ "type": "string", "description": description })
}

fn integer(description: &str) -> Value {
    json!({ "type": "integer", "description": description })
}

/// What `tool` does, and the schema of its arguments; `None` for a name that is no tool.
pub fn of(tool: &str) -> Option<(&'static str, Value)> {
    let object = |properties: Value, required: &[&str]| json!({ "type": "object", "properties": properties, "required": required });
    Some(match tool {
        "read" => (
            "Read a text file of the working directory (lines offset.. up to limit)",
            object(
                json!({
                    "path": string("path relative to the working directory"),
                    "offset": integer("first line to show, 1-based"),
                    "limit": integer("how many lines to show"),
                }),
                &["path"],
            ),
        ),
        "write" => (
            "Write a file (created or replaced) with the given content",
            object(
                json!({
                    "path": string("path relative to the working directory"),
                    "content": string("the whole new content"),
                }),
                &["path", "content"],
            ),
        ),
        "edit" => (
            "Replace exact text in a file: each oldText must match once, edits must not overlap",
            object(
                json!({
                    "path": string("path relative to the working directory"),
                    "edits": {
                        "type": "array",
                        "items": object(
                            json!({
                                "oldText": string("the exact text to replace"),
                                "newText": string("what replaces it"),
                            }),
                            &["oldText", "newText"],
                        ),
                    },
                }),
                &["path", "edits"],
            ),
        ),
        "bash" => (
            "Run a bash command in the working directory (not a sandbox: it has your rights)",
            object(
                json!({
                    "command": string("the command line"),
                    "timeout": integer("seconds before it is killed"),
                }),
                &["command"],
            ),
        ),
        "ls" => (
            "List a directory of the working directory",
            object(
                json!({ "path": string("directory, default the working directory") }),
                &[],
            ),
        ),
        "grep" => (
            "Search file contents for a regular expression",
            object(
                json!({
                    "pattern": string("the regular expression"),
                    "path": string("directory or file to search, default the working directory"),
                    "glob": string("only files whose name matches this glob"),
                }),
                &["pattern"],
            ),
        ),
        "find" => (
            "Find files whose path matches a glob",
            object(
                json!({
                    "pattern": string("the glob"),
                    "path": string("directory to search, default the working directory"),
                }),
                &["pattern"],
            ),
        ),
        _ => return None,
    })
}

/// The OpenAI function tools for `tools`, in order.
pub fn openai_tools(tools: &[&str]) -> Vec<Value> {
    tools
        .iter()
        .filter_map(|tool| {
            of(tool).map(|(description, parameters)| {
                json!({
                    "type": "function",
                    "function": { "name": tool, "description": description, "parameters": parameters },
                })
            })
        })
        .collect()
}
