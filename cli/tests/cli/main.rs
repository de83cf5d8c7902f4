//! Integration tests of the `castlog` binary: each module drives the real executable.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

mod anchor;
mod bench;
mod casts;
mod casts_errors;
mod casts_pauses;
mod claims;
mod crash;
mod cycles;
mod engage;
mod engage_verify;
mod exit_status;
mod fence;
mod hostile;
mod json_errors;
mod lifetime;
mod lint_clean;
mod log_commands;
mod otlp;
mod placement;
mod prompts;
mod read_only;
mod readme;
mod recast;
mod replay;
mod retries;
mod schedule;
mod scorecard;
mod secrets;
mod streams;
mod terminal;
mod upgrade;
mod verify_damage;
mod watch;
