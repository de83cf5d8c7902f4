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
//! - [`prompt`]: the prompt a dispatch sent, rebuilt from its entry blobs and checked.
//! - [`timeline`]: one human line per event (`castlog show`).
//! - [`otlp`]: a cast as OpenTelemetry traces (OTLP, GenAI semantic conventions).
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod audit;
pub mod claims;
pub mod manifest;
pub mod otlp;
pub mod projection;
pub mod prompt;
pub mod timeline;
pub mod views;
