//! castlog's engagement context: from retrieval results to at most one checked follow-up
//! question, posted at most once (`castlog engage`).
//!
//! An engage run is a stream of its own in the log (an *engage cast*), written only by this
//! crate: its events are [`event::EngageEvent`]s (plus the posting events of the claims
//! ledger, which stay core's), decided by the engage machine ([`machine`]) like a cast's by
//! the cast machine, re-decided by `castlog verify` ([`redecide`]) and shown to readers that
//! do not know its types through [`event::VOCABULARY`]. The crate sits beside
//! `castlog-replay`, below the CLI; the cast machine's crates do not know it.
//!
//! # Layout
//! - [`pipeline`]: the pure stages (input, collect, verify, qualify, history gates, rank,
//!   live check, drafts, selection, fingerprint, scorecard, schedule).
//! - [`event`]: the engagement vocabulary ([`event::EngageEvent`], kinds, versions, payloads)
//!   and its timeline lines.
//! - [`machine`]: [`machine::EngageState`], `evolve`, `decide` and the inverse `input_of`.
//! - [`runner`]: one run's effects (agents, fetcher, claims ledger, sender), step by step
//!   through the machine.
//! - [`redecide`]: `verify`'s re-decision of an engage cast.
//! - [`report`]: [`report::EngagementReport`], the run's report as a projection of its events.
//! - [`fetcher`]: the `Fetcher` port (cmd, file) of the live check.
//! - [`scorecard`]: running a fidelity judge over the scorecard's fixtures.
//!
//! # Example
//! ```
//! use castlog_core::event::Contexts;
//! use castlog_engage::event::{EngageEvent, EngagementFinished, VOCABULARY};
//!
//! let finished = EngageEvent::from(EngagementFinished {
//!     outcome: "skip".into(),
//!     refused: "no_verified_candidate".into(),
//!     skip_stage: String::new(),
//!     skip_reason: String::new(),
//!     error: String::new(),
//! });
//! assert_eq!(finished.kind(), "engagement_finished");
//! const CONTEXTS: Contexts = Contexts::with(&[&VOCABULARY]);
//! let line = CONTEXTS.describe("engagement_finished", 1, &finished.encode());
//! assert_eq!(line, Some(Ok("finished: skip (no_verified_candidate)".to_owned())));
//! ```
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod event;
pub mod fetcher;
pub mod machine;
pub mod pipeline;
pub mod redecide;
pub mod report;
pub mod runner;
pub mod scorecard;
