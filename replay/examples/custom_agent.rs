//! castlog as a library: load a loadout, answer its prompts with an agent of your own, drive a
//! cast into a SQLite log, then read the cast's state and where every entry of a prompt went,
//! and diff it against a second cast whose agent wrote a warm greeting at once.
//!
//! Run it with `cargo run -p castlog-replay --example custom_agent`; it writes a database in
//! the system's temporary directory and removes it at the end.

use std::path::Path;

use castlog_core::id::{CastId, Seq};
use castlog_core::loadout::load_config;
use castlog_core::machine::decide::started_event;
use castlog_core::prompt::Role;
use castlog_events::chain::loadout_hash;
use castlog_events::{EventLog, SqliteLog};
use castlog_projections::audit::PlacementAudit;
use castlog_projections::diff::{self, StepStatus};
use castlog_projections::prompt;
use castlog_replay::agent::{Agent, AgentTurn, TurnRequest};
use castlog_replay::clock::SystemClock;
use castlog_replay::driver::{Driver, fold};

/// A two-socket loadout in pi-materia's format: a writer (Socket-1), then a reviewer (Socket-2) that says whether the
/// draft is good (the reviewer's `not_satisfied` edge sends it back to the writer once).
const CONFIG: &str = r#"{
  "activeLoadout": "Write-Review",
  "loadouts": {
    "Write-Review": {
      "entry": "Socket-1",
      "sockets": {
        "Socket-1": { "materia": "Writer", "edges": [{ "when": "always", "to": "Socket-2" }] },
        "Socket-2": {
          "materia": "Reviewer", "parse": "json",
          "edges": [{ "when": "not_satisfied", "to": "Socket-1", "maxTraversals": 1 }]
        }
      }
    }
  },
  "materia": {
    "Writer": { "type": "agent", "tools": "none", "prompt": "Write a one-line greeting for: {{request}}" },
    "Reviewer": { "type": "agent", "tools": "none", "prompt": "Is the greeting friendly? Answer in JSON." }
  }
}"#;

/// An agent of one's own: any type that answers a [`TurnRequest`] with an [`AgentTurn`]. This
/// one answers by looking at the prompt; a real one would call a model.
#[derive(Debug, Default)]
struct Greeter {
    drafts: u32,
    /// Whether the first draft is already warm (so the reviewer is satisfied at once).
    warm: bool,
}

impl Agent for Greeter {
    fn turn(&mut self, request: &TurnRequest<'_>) -> AgentTurn {
        // The materia's instructions are in the leading system message.
        let system = request
            .messages
            .iter()
            .find(|m| m.role == Role::System)
            .map_or("", |m| m.content.as_str());
        let text = if system.contains("Is the greeting friendly?") {
            // The first draft is sent back once with a reason; the rework reason is in the
            // writer's next prompt, placed by the policy.
            if self.drafts == 1 && !self.warm {
                r#"{"satisfied": false, "context": "Too curt: add a warm word."}"#.to_owned()
            } else {
                r#"{"satisfied": true, "context": "Friendly."}"#.to_owned()
            }
        } else {
            self.drafts += 1;
            if self.drafts == 1 && !self.warm {
                "Hello.".to_owned()
            } else {
                "Hello, and a warm welcome!".to_owned()
            }
        };
        AgentTurn::Reply { text, usage: None }
    }

    // Nothing this agent does reaches outside the process, so the driver may hold its steps
    // and fsync them in batches.
    fn local(&self) -> bool {
        true
    }
}

fn main() -> std::process::ExitCode {
    let db = std::env::temp_dir().join(format!("castlog-example-{}.db", std::process::id()));
    let result = run(&db);
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", db.display()));
    }
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("custom_agent: {err}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn run(db: &Path) -> Result<(), Box<dyn std::error::Error>> {
    // 1. Load and validate the config; pick its active loadout.
    let config = load_config(CONFIG)?;
    let loadout = config.resolve(None)?;

    // 2. Start a cast and drive it until it ends or waits.
    let log = SqliteLog::open(db)?;
    let clock = SystemClock;
    let cast = CastId::new("greeting-1");
    let started = started_event(
        cast.clone(),
        &loadout,
        loadout_hash(&loadout.to_json()),
        "a new colleague".to_owned(),
        "recommended".to_owned(),
        None,
    );
    let stop =
        Driver::start(&log, &clock, started, Path::new("."))?.drive(&mut Greeter::default())?;
    println!(
        "cast {cast}: {} {}",
        stop.status.as_str(),
        stop.message.as_deref().unwrap_or("")
    );

    // 3. The state is a fold of the log: read it back as any other process would.
    let (state, _) = fold(&log, &cast)?;
    println!(
        "{} events; writer visits: {}; data: {}",
        state.head,
        state
            .visits
            .get(&castlog_core::id::SocketId::new("Socket-1"))
            .copied()
            .unwrap_or_default(),
        serde_json::to_string(&state.data)?
    );

    // 4. Where every entry of the writer's second prompt went, and the messages as sent.
    let records = log.read(&cast, Seq::FIRST, None)?;
    let audit = PlacementAudit::fold(&records);
    let second = audit
        .prompts
        .iter()
        .filter(|p| p.socket.as_str() == "Socket-1")
        .nth(1)
        .ok_or("the writer was asked only once")?;
    for p in &second.placements {
        println!(
            "  {:<18} L{} {:<9} -> {:?} #{} ({})",
            p.source_type, p.layer, p.role, p.destination, p.position, p.rule
        );
    }
    let policy = prompt::policy_of(&log, &cast)?;
    let messages = prompt::messages(&log, &policy, &second.hash, &second.placements)?;
    let last = messages.last().ok_or("a prompt has messages")?;
    println!("last message ({:?}):\n{}", last.role, last.content);
    assert!(
        last.content.contains("Too curt"),
        "the rework reason reaches the writer"
    );

    // 5. A second cast of the same loadout and task, whose writer is warm at once; then the
    //    two side by side, steps aligned by (socket, item, visit).
    let other = CastId::new("greeting-2");
    let started = started_event(
        other.clone(),
        &loadout,
        loadout_hash(&loadout.to_json()),
        "a new colleague".to_owned(),
        "recommended".to_owned(),
        None,
    );
    let mut warm = Greeter {
        warm: true,
        ..Greeter::default()
    };
    Driver::start(&log, &clock, started, Path::new("."))?.drive(&mut warm)?;
    let diff = diff::compare(&log, &cast, &other)?;
    let outcome = |c: &CastId| fold(&log, c).map(|(s, _)| s.status.as_str());
    println!("diff: {}", diff.summary(outcome(&cast)?, outcome(&other)?));
    for step in &diff.steps {
        let fields: Vec<&str> = step.changes.iter().map(|c| c.field).collect();
        println!(
            "  {:<8} {} {}",
            step.status.as_str(),
            step.key,
            fields.join(", ")
        );
    }
    let first = diff.steps.first().ok_or("the casts have steps")?;
    assert_eq!(first.status, StepStatus::Changed, "the first drafts differ");
    let output = first
        .changes
        .iter()
        .find(|c| c.field == "output")
        .and_then(|c| c.diff.as_deref())
        .ok_or("the first drafts' outputs differ")?;
    println!("{output}");
    assert!(output.contains("-Hello.") && output.contains("+Hello, and a warm welcome!"));
    assert_eq!(
        diff.counts()[&StepStatus::OnlyA],
        2,
        "the rework visits are cast A's alone"
    );
    Ok(())
}
