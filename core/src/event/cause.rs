//! The decoder's error beneath a [`super::DecodeError::Payload`].

use std::error::Error;
use std::fmt;
use std::sync::Arc;

/// Why a payload did not decode, kept as the decoder's own error (a `serde_json::Error` for
/// the JSON vocabularies, whatever another context's decoder returns) so a caller can walk to
/// it and downcast it.
///
/// Shared, so the error it sits in stays `Clone`; two causes are equal when they say the same
/// words. It is deliberately not an `Error` itself: it derefs to the error it holds, so that
/// error (not a wrapper around it) is what `source()` returns. Its `Display` says a
/// `serde_json::Error` in words (`syntax::json_error` and `syntax::column`), any other error
/// as that error says itself.
#[derive(Debug, Clone)]
pub struct PayloadCause(Arc<dyn Error + Send + Sync>);

impl PayloadCause {
    /// Keeps `err` as the cause.
    pub fn new(err: impl Into<Box<dyn Error + Send + Sync>>) -> Self {
        PayloadCause(Arc::from(err.into()))
    }
}

impl std::ops::Deref for PayloadCause {
    type Target = dyn Error + Send + Sync;

    fn deref(&self) -> &Self::Target {
        &*self.0
    }
}

impl fmt::Display for PayloadCause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0.downcast_ref::<serde_json::Error>() {
            Some(json) => write!(
                f,
                "{}{}",
                crate::syntax::json_error(json),
                crate::syntax::column(json)
            ),
            None => self.0.fmt(f),
        }
    }
}

impl PartialEq for PayloadCause {
    fn eq(&self, other: &Self) -> bool {
        self.to_string() == other.to_string()
    }
}

impl Eq for PayloadCause {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_json_error_is_said_in_words_and_kept_as_the_source() {
        let err = serde_json::from_slice::<u16>(b"\"x\"").unwrap_err();
        let words = format!(
            "{}{}",
            crate::syntax::json_error(&err),
            crate::syntax::column(&err)
        );
        let cause = PayloadCause::new(err);
        assert_eq!(cause.to_string(), words);
        assert!(cause.downcast_ref::<serde_json::Error>().is_some());
    }
}
