//! castlog's read models: pure folds over recorded events.
#![forbid(unsafe_code)]
#![warn(missing_docs)]
