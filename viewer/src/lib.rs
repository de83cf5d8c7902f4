//! castlog's HTML views of a cast, read from the log through the projections: the report
//! (`castlog report`), the diff of two casts, and the casts list `castlog serve` opens on.
//!
//! Every page is one self-contained document: styles and script inline, nothing fetched, so a
//! report opens from disk and prints. Colour is never the only signal (every state is also a
//! label, a prefix or a line style) and every long list is a `details` element, opened on
//! demand with the keyboard.
//!
//! # Layout
//! - [`gather`]: a cast's report model, folded from its full history once.
//! - [`report`]: the report page (summary, graph, timeline, prompts; the diff when given).
//! - [`graph`]: the loadout graph as inline SVG with traversal counts.
//! - [`diffview`]: two casts aligned by (socket, item, visit), first divergence marked.
//! - [`files`]: the file changes each step made, from the workspace checkpoints.
//! - [`casts`]: the casts list with its filter.
//! - [`packed`]: the long lists of a long cast, deflated until opened.
//! - [`page`]: the document around every view (styles, script, print and keyboard rules).
//! - [`error`]: the views' error, `ViewError`.
//!
//! # Example
//! ```
//! use castlog_core::event::{Contexts, Event};
//! use castlog_core::id::{CastId, Seq};
//! use castlog_core::loadout::load_config;
//! use castlog_core::machine::decide::started_event;
//! use castlog_events::chain::blob_hash;
//! use castlog_events::{EventLog, InMemoryLog, Pending};
//! use castlog_viewer::gather::CastReport;
//!
//! let config = load_config(r#"{"activeLoadout": "One", "loadouts": {"One": {"entry": "Socket-1",
//!     "sockets": {"Socket-1": {"materia": "Greet"}}}},
//!     "materia": {"Greet": {"type": "agent", "tools": "none", "prompt": "Greet {{request}}."}}}"#)?;
//! let loadout = config.resolve(None)?;
//! let hash = blob_hash(&serde_json::to_vec(&loadout.to_json())?);
//! let log = InMemoryLog::new();
//! let cast = CastId::new("a");
//! let started = started_event(cast.clone(), &loadout, hash, "the team".into(), "recommended".into(), None);
//! log.append(&cast, Seq(1), &[Pending::new(0, &Event::from(started))])?;
//! let report = CastReport::gather(&log, &cast, Contexts::MACHINE)?;
//! let html = castlog_viewer::report::report(&report, None, &Default::default());
//! assert!(html.starts_with("<!DOCTYPE html>") && html.contains("Socket-1"));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod casts;
pub mod diffview;
pub mod error;
pub mod files;
pub mod gather;
pub mod graph;
pub mod packed;
pub mod page;
pub mod report;

pub use error::ViewError;
