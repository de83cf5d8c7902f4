//! Property tests of the scripted agent's line parser: damaged copies of real scripts, bytes
//! that are not UTF-8 among them, are read or refused naming a 1-based line in words, and a
//! script that is read answers every turn without a panic.

use proptest::prelude::*;

use castlog_core::hostile::{self, damaged, json_like, noise, rust_formatting};

use super::{Agent, AgentError, AgentTurn, ScriptedAgent, TurnRequest};

const BUILD_LOOP: &str = include_str!("../../../fixtures/scripts/build-loop.jsonl");
const CONSULT: &str = include_str!("../../../fixtures/scripts/consult.jsonl");
const FULL_AUTO: &str = include_str!("../../../fixtures/scripts/full-auto.jsonl");

/// Opens `bytes` as a script and asks it for every line, alternating agent turns and pauses;
/// `Err` says what was wrong with a message or a line number.
fn read_and_ask(bytes: &[u8]) -> Result<(), String> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let path = dir.path().join("script.jsonl");
    std::fs::write(&path, bytes).map_err(|e| e.to_string())?;
    let mut agent = match ScriptedAgent::open(&path, 0) {
        Ok(agent) => agent,
        Err(err) => {
            if let AgentError::BadLine { line: 0, .. } = err {
                return Err(format!("a 0-based line: {err}"));
            }
            return rust_formatting(&err.to_string()).map_or(Ok(()), Err);
        }
    };
    for turn in 0..=agent.lines.len() * 2 {
        let request = TurnRequest {
            messages: &[],
            refinement: turn % 3 == 2,
            model: None,
            thinking: None,
            tools: &[],
            cwd: None,
            schema: None,
        };
        if let AgentTurn::Exhausted(message) = agent.turn(&request)
            && let Some(why) = rust_formatting(&message)
        {
            return Err(why);
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(hostile::config(256))]

    #[test]
    fn a_damaged_script_is_read_or_refused_in_words(
        bytes in prop_oneof![
            damaged(BUILD_LOOP.as_bytes()),
            damaged(CONSULT.as_bytes()),
            damaged(FULL_AUTO.as_bytes()),
            noise(b""),
        ]
    ) {
        if let Err(why) = read_and_ask(&bytes) {
            prop_assert!(false, "{why}");
        }
    }

    #[test]
    fn a_line_of_arbitrary_json_is_read_or_refused_in_words(
        lines in prop::collection::vec(json_like(BUILD_LOOP), 1..4)
    ) {
        let text: Vec<String> = lines.iter().map(ToString::to_string).collect();
        if let Err(why) = read_and_ask(text.join("\n").as_bytes()) {
            prop_assert!(false, "{why}");
        }
    }
}
