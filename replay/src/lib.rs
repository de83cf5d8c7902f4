//! Driving and re-driving casts: the driver, the agent and utility adapters, the system clock.
//!
//! # Layout
//! - [`driver`]: fold the log, decide, append, act, feed back (first run, resume, inputs).
//! - [`agent`]: the `Agent` port, the scripted and command adapters.
//! - [`openai`]: the `openai:BASE_URL#MODEL` agent (OpenAI-compatible chat completions).
//! - [`retry`]: retry policies: attempts, backoff with jitter, `Retry-After`.
//! - [`recorded`]: the `recorded:CAST` agent, answering from another cast's log (a cassette).
//! - [`sender`]: the `Sender` port (cmd, file, webhook) for post sockets and the engagement runner.
//! - [`ledger`]: destination ledgers: taking a claim's day with a compare-and-set.
//! - [`utility`]: utility sockets (commands, fixed outputs, built-ins).
//! - [`redecide`]: replay a log through the machine and report the first divergence.
//! - [`recast`]: forking a cast at a decision boundary, and a cast's full history.
//! - [`process`]: spawning a child without a shell in a process group that ends with castlog,
//!   with a timeout that kills the group, capped output, and a record while it runs.
//! - [`secrets`]: the environment deny list and scrubbing of recorded text.
//! - [`clock`]: the system clock.
//!
//! # Entry points
//! The stable way in from Rust: [`driver::Driver`] (`start` a cast, `open` one to feed it
//! inputs, `drive` it with an agent), [`driver::fold`] (a cast's state from its log), the
//! [`agent::Agent`] trait (implement it to answer prompts your way) with [`agent::TurnRequest`]
//! and [`agent::AgentTurn`], and [`clock::SystemClock`]. Two casts are compared with
//! `castlog_projections::diff::compare`, their outcomes being [`driver::fold`]'s status. The log is any
//! `castlog_events::EventLog` (`SqliteLog` on disk, `InMemoryLog` in tests); loadouts come
//! from `castlog_core::loadout::load_config`. `examples/custom_agent.rs` runs the whole path
//! into a SQLite file, reads a prompt's placements back and diffs two casts (`cargo run -p castlog-replay
//! --example custom_agent`).
//!
//! # Example
//! ```
//! use castlog_core::id::CastId;
//! use castlog_core::loadout::load_config;
//! use castlog_core::machine::decide::started_event;
//! use castlog_events::InMemoryLog;
//! use castlog_events::chain::loadout_hash;
//! use castlog_replay::agent::{Agent, AgentTurn, TurnRequest};
//! use castlog_replay::clock::SystemClock;
//! use castlog_replay::driver::{Driver, fold};
//!
//! struct Echo(&'static str);
//! impl Agent for Echo {
//!     fn turn(&mut self, _: &TurnRequest<'_>) -> AgentTurn {
//!         AgentTurn::Reply { text: self.0.into(), usage: None }
//!     }
//! }
//!
//! let config = load_config(r#"{"activeLoadout": "One", "loadouts": {"One": {"entry": "Socket-1",
//!     "sockets": {"Socket-1": {"materia": "Greet"}}}},
//!     "materia": {"Greet": {"type": "agent", "tools": "none", "prompt": "Greet {{request}}."}}}"#)?;
//! let loadout = config.resolve(None)?;
//! let log = InMemoryLog::new();
//! let hash = loadout_hash(&loadout.to_json());
//! for (cast, reply) in [("demo", "Hello!"), ("other", "Hi!")] {
//!     let started = started_event(CastId::new(cast), &loadout, hash, "the team".into(), "recommended".into(), None);
//!     let stop = Driver::start(&log, &SystemClock, started, std::path::Path::new("."))?.drive(&mut Echo(reply))?;
//!     assert_eq!(stop.status.as_str(), "completed");
//! }
//! assert_eq!(fold(&log, &CastId::new("demo"))?.0.status.as_str(), "completed");
//!
//! // The two casts differ only in the one socket's output.
//! let diff = castlog_projections::diff::compare(&log, &CastId::new("demo"), &CastId::new("other"))?;
//! let changed: Vec<_> = diff.steps[0].changes.iter().map(|c| c.field).collect();
//! assert_eq!(changed, ["output"]);
//! assert_eq!(diff.summary("completed", "completed"),
//!     "0 same, 1 changed, 0 only in demo, 0 only in other; demo completed, other completed");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod agent;
pub mod clock;
pub mod driver;
pub mod ledger;
pub mod openai;
pub mod process;
pub mod recast;
pub mod recorded;
pub mod redecide;
pub mod retry;
pub mod secrets;
pub mod sender;
pub mod tools;
pub mod utility;
pub mod webhooks;
pub mod workspace;
