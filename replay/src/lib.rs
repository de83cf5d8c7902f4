//! Driving and re-driving casts: the driver, the agent and utility adapters, the system clock.
//!
//! # Layout
//! - [`driver`]: fold the log, decide, append, act, feed back (first run, resume, inputs).
//! - [`agent`]: the `Agent` port, the scripted and command adapters.
//! - [`openai`]: the `openai:BASE_URL#MODEL` agent (OpenAI-compatible chat completions).
//! - [`recorded`]: the `recorded:CAST` agent, answering from another cast's log (a cassette).
//! - [`sender`]: the `Sender` port (cmd, file, webhook) for post sockets and the engagement runner.
//! - [`engage`]: the engagement runner's effects (agents, fetcher, poster), one engage cast per run.
//! - [`scorecard`]: running a fidelity judge over the scorecard's fixtures.
//! - [`fetcher`]: the `Fetcher` port (cmd, file) for the engagement runner's live check.
//! - [`ledger`]: destination ledgers: taking a claim's day with a compare-and-set.
//! - [`utility`]: utility sockets (commands, fixed outputs, built-ins).
//! - [`redecide`]: replay a log through the machine and report the first divergence.
//! - [`recast`]: forking a cast at a decision boundary, and a cast's full history.
//! - [`process`]: spawning a child without a shell in a process group that ends with castlog,
//!   with a timeout that kills the group, capped output, and a record while it runs.
//! - [`secrets`]: the environment deny list and scrubbing of recorded text.
//! - [`clock`]: the system clock.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod agent;
pub mod clock;
pub mod driver;
pub mod engage;
pub mod fetcher;
pub mod ledger;
pub mod openai;
pub mod process;
pub mod recast;
pub mod recorded;
pub mod redecide;
pub mod scorecard;
pub mod secrets;
pub mod sender;
pub mod utility;
