//! castlog's pure domain.
//!
//! Everything here is deterministic and total: no I/O, no clock, no randomness, no environment.
//! Time arrives through [`env::Env`]; everything nondeterministic arrives as an [`input::Input`]
//! and becomes state only through an [`event::Event`].
//!
//! # Layout
//! - [`id`]: ids and counters as newtypes, and the [`id::Digest`] carried by events.
//! - [`event`]: the v1 event vocabulary and its storage rules (kind, version, payload).
//! - [`input`]: what arrives from outside a cast.
//! - [`env`]: the injected clock reading.
//! - [`calendar`]: calendar dates and the time zones castlog knows (New York with DST, UTC,
//!   fixed offsets).
//! - [`claims`]: the claims ledger's rules (claim ids, claim days, transitions).
//! - [`syntax`]: serde_json's errors in words, for messages that say where in a file.
//! - `hostile` (tests only, feature `hostile`): damaged real files as proptest strategies, and
//!   the check that a user-facing message has no Rust debug formatting.
//!
//! # Example
//! ```
//! use castlog_core::event::{CastAborted, Event};
//!
//! let event = Event::from(CastAborted { reason: "stopped by hand".into() });
//! let bytes = event.encode();
//! assert_eq!(event.kind(), "cast_aborted");
//! assert_eq!(Event::decode("cast_aborted", 1, &bytes).unwrap(), event);
//! ```
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod calendar;
pub mod claims;
pub mod env;
pub mod event;
pub mod eventing;
pub mod handoff;
#[cfg(any(test, feature = "hostile"))]
pub mod hostile;
pub mod id;
pub mod input;
pub mod loadout;
pub mod machine;
pub mod path;
pub mod prompt;
pub mod syntax;
pub mod template;
