//! castlog's read models: pure folds over recorded events.
//!
//! # Layout
//! - [`audit`]: every prompt with its placements, and the placement lint.
//! - [`timeline`]: one human line per event (`castlog show`).
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod audit;
pub mod timeline;
