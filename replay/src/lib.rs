//! Driving and re-driving casts.
#![forbid(unsafe_code)]
#![warn(missing_docs)]
