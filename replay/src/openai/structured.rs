//! Structured output: the handoff contract of a JSON socket sent as
//! `response_format: {type: "json_schema", json_schema: {name, schema, strict: false}}`, so a
//! server that constrains its replies to a schema answers in the contract's shape and fewer
//! repair turns are needed (the repair turn stays the fallback: validation still judges).
//!
//! `--structured on|off|auto` chooses: `off` (the default) never sends it; `on` always does, so
//! a server that refuses it stops the cast as any other HTTP 4xx does; `auto` sends it until the
//! server answers HTTP 400 with a body naming `response_format`, which the driver records
//! (`agent_failed` with `structured_off`) before it asks again without it, for the rest of the
//! cast.

use std::fmt;
use std::str::FromStr;

use serde_json::{Value, json};

/// Whether an `openai:` agent sends the handoff contract as a response format.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Structured {
    /// Always, for JSON sockets.
    On,
    /// Never.
    #[default]
    Off,
    /// For JSON sockets, until the server refuses it (an HTTP 400 naming `response_format`).
    Auto,
}

impl Structured {
    /// The words of the option.
    pub const VALUES: [&'static str; 3] = ["on", "off", "auto"];
}

impl fmt::Display for Structured {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Structured::On => "on",
            Structured::Off => "off",
            Structured::Auto => "auto",
        })
    }
}

/// A `--structured` value that is not on, off or auto.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("--structured takes on, off or auto, not {0:?}")]
pub struct BadStructured(pub String);

impl FromStr for Structured {
    type Err = BadStructured;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim() {
            "on" => Ok(Structured::On),
            "off" => Ok(Structured::Off),
            "auto" => Ok(Structured::Auto),
            other => Err(BadStructured(other.to_owned())),
        }
    }
}

/// The `response_format` a request carries for `schema`.
pub fn response_format(schema: &Value) -> Value {
    json!({
        "type": "json_schema",
        "json_schema": {
            "name": castlog_core::handoff::SCHEMA_NAME,
            "schema": schema,
            "strict": false,
        },
    })
}

/// Whether an error answer refuses the response format: HTTP 400 with a body that names
/// `response_format` (OpenAI's `param`, or the words of a server that does not know it).
pub fn refuses_response_format(status: u16, body: &str) -> bool {
    status == 400 && body.contains("response_format")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_option_reads_its_three_words_and_nothing_else() {
        for word in Structured::VALUES {
            assert_eq!(word.parse::<Structured>().unwrap().to_string(), word);
        }
        assert_eq!(Structured::default(), Structured::Off);
        assert!(
            "yes"
                .parse::<Structured>()
                .unwrap_err()
                .to_string()
                .contains("on, off or auto")
        );
    }

    #[test]
    fn only_a_400_naming_the_field_is_a_refusal() {
        let body = r#"{"error":{"message":"Unrecognized request argument supplied: response_format","param":"response_format"}}"#;
        assert!(refuses_response_format(400, body));
        assert!(!refuses_response_format(400, r#"{"error":"bad model"}"#));
        assert!(!refuses_response_format(422, body));
        let format = response_format(&json!({"type": "object"}));
        assert_eq!(format["type"], "json_schema");
        assert_eq!(format["json_schema"]["name"], "handoff");
        assert_eq!(format["json_schema"]["schema"]["type"], "object");
    }
}
