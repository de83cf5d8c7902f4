//! Integration tests of the `castlog` binary: each module drives the real executable.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

mod bench;
mod casts;
mod casts_errors;
mod casts_pauses;
mod claims;
mod crash;
mod engage;
mod log_commands;
mod prompts;
mod recast;
mod replay;
mod schedule;
mod scorecard;
mod streams;
mod watch;
