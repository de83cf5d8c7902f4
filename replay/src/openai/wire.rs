//! The chat-completions wire shape: the recorded prompt as request messages, and a reply's
//! text, usage and tool calls read out of a response body.

use castlog_core::event::Usage;
use castlog_core::prompt::Message;
use serde_json::{Value, json};

/// The recorded prompt in the chat-completions shape: an `assistantToolCall` entry (its text
/// the call as `{"id", "name", "arguments"}`) becomes an assistant message with `tool_calls`,
/// a `toolResult` entry a `tool` message with its `tool_call_id`; every other message is
/// `{"role", "content"}` as recorded. An entry whose text does not read as a call (a damaged
/// or hand-made record) is sent as plain assistant text.
pub(super) fn wire_messages(messages: &[Message]) -> Vec<Value> {
    messages
        .iter()
        .map(|m| {
            let plain = || json!({ "role": m.role.as_str(), "content": m.content });
            let Some(call) = &m.tool_call else {
                return plain();
            };
            match m.role {
                castlog_core::prompt::Role::Tool => {
                    json!({ "role": "tool", "tool_call_id": call, "content": m.content })
                }
                castlog_core::prompt::Role::Assistant => {
                    let Ok(shown) = serde_json::from_str::<Value>(&m.content) else {
                        return plain();
                    };
                    let name = shown.get("name").and_then(Value::as_str).unwrap_or("");
                    // OpenAI sends arguments as a JSON string; one recorded as a value is
                    // sent back encoded.
                    let arguments = match shown.get("arguments") {
                        Some(Value::String(s)) => s.clone(),
                        Some(other) => other.to_string(),
                        None => "{}".into(),
                    };
                    json!({
                        "role": "assistant",
                        "content": null,
                        "tool_calls": [{
                            "id": call,
                            "type": "function",
                            "function": { "name": name, "arguments": arguments },
                        }],
                    })
                }
                _ => plain(),
            }
        })
        .collect()
}

/// The tool calls of a chat-completions body (`choices[0].message.tool_calls`, each
/// `{"id", "function": {"name", "arguments"}}`), with the text and usage beside them; `None`
/// when it asks for none. Arguments are kept as received (OpenAI sends a JSON string).
pub(super) fn tool_calls(
    text: &str,
) -> Option<(String, Option<Usage>, Vec<castlog_core::event::ToolRequest>)> {
    let value: Value = serde_json::from_str(text).ok()?;
    let message = value.get("choices")?.as_array()?.first()?.get("message")?;
    let list = message
        .get("tool_calls")?
        .as_array()
        .filter(|l| !l.is_empty())?;
    let calls = list
        .iter()
        .map(|c| {
            let function = c.get("function");
            castlog_core::event::ToolRequest {
                call: c.get("id").and_then(Value::as_str).unwrap_or("").to_owned(),
                tool: function
                    .and_then(|f| f.get("name"))
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_owned(),
                arguments: function
                    .and_then(|f| f.get("arguments"))
                    .cloned()
                    .unwrap_or_else(|| json!({})),
            }
        })
        .collect();
    let reply = message
        .get("content")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned();
    let usage = value.get("usage").filter(|u| u.is_object()).map(|u| {
        let count = |name: &str| u.get(name).and_then(Value::as_u64).unwrap_or(0);
        Usage {
            input: count("prompt_tokens"),
            output: count("completion_tokens"),
        }
    });
    Some((reply, usage, calls))
}

/// Reads `choices[0].message.content` and the usage out of a chat-completions body.
pub(super) fn parse_reply(text: &str) -> Result<(String, Option<Usage>), String> {
    let value: Value =
        serde_json::from_str(text).map_err(|e| format!("the body is not JSON ({e})"))?;
    let Some(choices) = value.get("choices") else {
        if let Some(error) = value.get("error") {
            let said = error
                .get("message")
                .and_then(Value::as_str)
                .map_or_else(|| error.to_string(), str::to_owned);
            return Err(format!("the body is an error, not choices: {said}"));
        }
        return Err("the body has no \"choices\"".into());
    };
    let first = choices
        .as_array()
        .and_then(|c| c.first())
        .ok_or_else(|| "\"choices\" is empty or not a list".to_owned())?;
    let content = first
        .get("message")
        .and_then(|m| m.get("content"))
        .ok_or_else(|| "choices[0].message.content is missing".to_owned())?;
    let reply = match content {
        Value::String(s) => s.clone(),
        // Some servers send content as parts: [{"type": "text", "text": "..."}].
        Value::Array(parts) if !parts.is_empty() => {
            let mut out = String::new();
            for part in parts {
                let Some(text) = part.get("text").and_then(Value::as_str) else {
                    return Err("choices[0].message.content has a part without text".into());
                };
                out.push_str(text);
            }
            out
        }
        Value::Null => return Err("choices[0].message.content is null".into()),
        _ => return Err("choices[0].message.content is not text".into()),
    };
    let usage = value.get("usage").filter(|u| u.is_object()).map(|u| {
        let count = |name: &str| u.get(name).and_then(Value::as_u64).unwrap_or(0);
        Usage {
            input: count("prompt_tokens"),
            output: count("completion_tokens"),
        }
    });
    Ok((reply, usage))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_parse_and_bad_bodies_are_named() {
        let (text, usage) = parse_reply(
            r#"{"choices":[{"message":{"role":"assistant","content":"hi"}}],"usage":{"prompt_tokens":5,"completion_tokens":2}}"#,
        )
        .unwrap();
        assert_eq!(text, "hi");
        assert_eq!(
            usage,
            Some(Usage {
                input: 5,
                output: 2
            })
        );
        let (text, usage) = parse_reply(
            r#"{"choices":[{"message":{"content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}}]}"#,
        )
        .unwrap();
        assert_eq!((text.as_str(), usage), ("ab", None));
        assert!(parse_reply("<html>").unwrap_err().contains("not JSON"));
        assert!(parse_reply("{}").unwrap_err().contains("no \"choices\""));
        assert!(
            parse_reply(r#"{"choices":[]}"#)
                .unwrap_err()
                .contains("empty")
        );
        assert!(
            parse_reply(r#"{"choices":[{"message":{}}]}"#)
                .unwrap_err()
                .contains("content is missing")
        );
        assert!(
            parse_reply(r#"{"error":{"message":"model not found"}}"#)
                .unwrap_err()
                .contains("model not found")
        );
    }
}
