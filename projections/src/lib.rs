//! castlog's read models: pure folds over recorded events.
//!
//! Every read model implements [`projection::Projection`]; [`projection::catch_up`] brings one up
//! to date from a checkpoint that is never trusted over the log.
//!
//! # Layout
//! - [`projection`]: the trait, checkpoints and the catch-up runner.
//! - [`views`]: `CastView`, `Usage`, `Timeline`.
//! - [`manifest`]: the per-visit artifact tree of a cast.
//! - [`claims`]: `ClaimsLedger`, every claim of every cast (the claim-before-send ledger).
//! - [`audit`]: every prompt with its placements, and the placement lint (also of entries given
//!   as data, `audit::given`).
//! - [`diff`]: two casts side by side (common prefix, first divergence, aligned steps).
//! - [`history`]: a cast's full history, a recast's ancestors' prefix first.
//! - [`prompt`]: the prompt a dispatch sent, rebuilt from its entry blobs and checked.
//! - [`timeline`]: one human line per event (`castlog show`).
//! - [`otlp`]: a cast as OpenTelemetry traces (OTLP, GenAI semantic conventions).
//!
//! # Entry points
//! The stable way in from Rust: [`diff::compare`] (two casts side by side, giving a
//! [`diff::CastDiff`]), [`prompt::messages`] with [`prompt::policy_of`] (a dispatched prompt's
//! messages, rebuilt and checked against its hash), [`audit::PlacementAudit::fold`] (where every
//! entry of every prompt went), [`history::with_history`] (a cast's events, a recast's
//! ancestors' prefix first), [`timeline::TimelineLine::of`] and the [`projection::Projection`]
//! trait with [`projection::catch_up`]. Every function takes any `castlog_events::EventLog`.
//!
//! # Example
//! ```
//! use castlog_core::event::Event;
//! use castlog_core::id::{CastId, Seq};
//! use castlog_core::loadout::load_config;
//! use castlog_core::machine::decide::started_event;
//! use castlog_events::chain::blob_hash;
//! use castlog_events::{EventLog, InMemoryLog, Pending};
//! use castlog_projections::diff::compare;
//!
//! let config = load_config(r#"{"activeLoadout": "One", "loadouts": {"One": {"entry": "Socket-1",
//!     "sockets": {"Socket-1": {"materia": "Greet"}}}},
//!     "materia": {"Greet": {"type": "agent", "tools": "none", "prompt": "Greet {{request}}."}}}"#)?;
//! let loadout = config.resolve(None)?;
//! let hash = blob_hash(&serde_json::to_vec(&loadout.to_json())?);
//! let log = InMemoryLog::new();
//! for (cast, task) in [("a", "the team"), ("b", "the board")] {
//!     let started = started_event(CastId::new(cast), &loadout, hash, task.into(), "recommended".into(), None);
//!     log.append(&CastId::new(cast), Seq(1), &[Pending::new(0, &Event::from(started))])?;
//! }
//! // Two casts of one loadout with different tasks part at their first event.
//! let diff = compare(&log, &CastId::new("a"), &CastId::new("b"))?;
//! assert_eq!(diff.common_prefix, 0);
//! assert_eq!(diff.first_divergence.map(|d| d.position), Some(1));
//! assert!(diff.loadouts.is_none() && diff.steps.is_empty());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod audit;
pub mod claims;
pub mod diff;
pub mod history;
pub mod manifest;
pub mod otlp;
pub mod outbox;
pub mod projection;
pub mod prompt;
pub mod timeline;
pub mod views;
