//! Snapshots of every rendered prompt of the fixture casts (hermetic: fixed clock and ids).

use castlog_core::event::Event;
use castlog_core::id::{CastId, Seq};
use castlog_core::prompt::policy::RECOMMENDED;
use castlog_events::{EventLog, InMemoryLog};
use castlog_projections::prompt;

use crate::drive::run;

fn prompts(config: &str, script: &str) -> String {
    let log = InMemoryLog::new();
    run(&log, config, None, script, "snap");
    let mut out = String::new();
    for record in log.read(&CastId::new("snap"), Seq::FIRST, None).unwrap() {
        if let Ok(Event::PromptDispatched(p)) = record.event() {
            // Rebuilt from the entry blobs and checked against the recorded digest.
            let messages =
                prompt::messages(&log, &RECOMMENDED, &p.prompt_hash, &p.placements).unwrap();
            out.push_str(&format!(
                "==================== seq {} {} visit {} turn {}\n",
                record.seq, p.socket, p.visit, p.turn
            ));
            for m in messages {
                out.push_str(&format!("--- {}\n{}\n", m.role.as_str(), m.content));
            }
        }
    }
    out
}

#[test]
fn build_loop_prompts() {
    insta::assert_snapshot!(prompts(
        "loadouts/build-loop.json",
        "scripts/build-loop.jsonl"
    ));
}

#[test]
fn consult_prompts() {
    insta::assert_snapshot!(prompts("loadouts/consult.json", "scripts/consult.jsonl"));
}
