//! castlog's read models: pure folds over recorded events.
//!
//! # Layout
//! - [`timeline`]: one human line per event (`castlog show`).
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod timeline;
