//! The one decoding step every layout that may name an earlier event shares: a payload holds
//! a text in full (`output`, `value`, `reason`) or names where it is (`output_of`, `value_of`,
//! `reason_of`), exactly one of the two, and a name is read through what the reader gives for
//! its seq.

use super::{DecodeError, Earlier, PayloadCause};
use crate::id::Seq;

/// A text a payload holds in full, or the name of the earlier event that holds it.
pub(super) enum Text<T, N> {
    /// The text itself.
    Inline(T),
    /// Where it is.
    Named(N),
}

/// Which of `field` (in full) and `named_field` (its name) a payload of `kind` holds: exactly
/// one of them.
pub(super) fn inline_or_named<T, N>(
    kind: &str,
    (field, inline): (&str, Option<T>),
    (named_field, named): (&str, Option<N>),
) -> Result<Text<T, N>, DecodeError> {
    match (inline, named) {
        (Some(text), None) => Ok(Text::Inline(text)),
        (None, Some(name)) => Ok(Text::Named(name)),
        (Some(_), Some(_)) => Err(invalid(
            kind,
            format!("`{field}` and `{named_field}` are both given"),
        )),
        (None, None) => Err(invalid(kind, format!("missing field `{field}`"))),
    }
}

/// The earlier event at `seq` a payload of `kind` names, as the reader gives it; without it
/// the payload does not decode ([`DecodeError::Unresolved`]).
pub(super) fn earlier_at(
    kind: &str,
    seq: Seq,
    earlier: &mut dyn FnMut(Seq) -> Option<Earlier>,
) -> Result<Earlier, DecodeError> {
    earlier(seq).ok_or_else(|| DecodeError::Unresolved {
        kind: kind.to_owned(),
        seq,
    })
}

/// A payload of `kind` that is JSON but not a valid event of its kind, and why.
pub(super) fn invalid(kind: &str, message: String) -> DecodeError {
    DecodeError::Payload {
        kind: kind.to_owned(),
        source: PayloadCause::new(message),
    }
}

/// A payload of `kind` that does not decode as its stored form.
pub(super) fn undecodable(kind: &str, err: serde_json::Error) -> DecodeError {
    DecodeError::Payload {
        kind: kind.to_owned(),
        source: PayloadCause::new(err),
    }
}
