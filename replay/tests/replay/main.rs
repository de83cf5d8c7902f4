//! Integration tests of the driver and of re-decide.
#![allow(clippy::unwrap_used, clippy::expect_used)]

/// Driving fixture casts on the in-memory log with a fixed clock.
mod drive;
/// The engagement runner with scripted roles: engagement-spec §5 and castlog's fixes.
mod engage;
/// The `openai:` agent against a chat-completions server started on 127.0.0.1.
mod openai;
/// Two runs racing for one day, made deterministic: the compare-and-set at each call site.
mod race;
/// The `recorded:` agent (cassette): re-runs, occurrences, misses, fallback, resume.
mod recorded;
/// Re-deciding a log: exact reproduction, and the first divergence named by seq.
mod redecide;
/// Snapshots of rendered prompts.
mod snapshots;
