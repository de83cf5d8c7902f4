//! Events of other bounded contexts, as readers that do not know their types see them.
//!
//! One log holds the streams of several contexts: the cast machine's casts (this crate's
//! [`Event`]), and streams such as an engage run's, whose events another crate owns. Every
//! record is stored as `(kind, v, payload bytes)`, so a reader that goes over every event of
//! any stream (`show`, `export`, `import`, `verify`, the timeline) needs of a foreign event
//! only two things: whether its bytes decode, and a line describing it. A context gives them
//! through [`Vocabulary`]; the binary lists its contexts once in a [`Contexts`] value and
//! hands it to those readers. Adding a context never edits [`Event`].

use std::fmt;

use super::{DecodeError, Event};

/// A bounded context's event vocabulary, seen through its stored form.
pub trait Vocabulary: Sync {
    /// The context's name (`engagement`), for messages.
    fn context(&self) -> &'static str;

    /// Every kind the context owns, with the newest schema version it reads.
    fn kinds(&self) -> &'static [(&'static str, u16)];

    /// Decodes a stored event of one of its kinds and describes it in one line (the
    /// timeline's summary); an error says why the bytes are not an event of the kind.
    fn describe(&self, kind: &str, v: u16, payload: &[u8]) -> Result<String, DecodeError>;
}

/// The contexts a reader knows besides the cast machine's (whose kinds come first: a kind the
/// machine owns is never looked up here).
#[derive(Clone, Copy, Default)]
pub struct Contexts {
    others: &'static [&'static dyn Vocabulary],
}

impl fmt::Debug for Contexts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list()
            .entries(self.others.iter().map(|v| v.context()))
            .finish()
    }
}

impl Contexts {
    /// The cast machine's vocabulary alone.
    pub const MACHINE: Contexts = Contexts { others: &[] };

    /// The machine's vocabulary and `others`'.
    pub const fn with(others: &'static [&'static dyn Vocabulary]) -> Self {
        Contexts { others }
    }

    /// The context that owns `kind`, when it is not the machine's.
    pub fn owner(&self, kind: &str) -> Option<&'static dyn Vocabulary> {
        if Event::KINDS.iter().any(|(k, _)| *k == kind) {
            return None;
        }
        self.others
            .iter()
            .copied()
            .find(|v| v.kinds().iter().any(|(k, _)| *k == kind))
    }

    /// Whether stored bytes decode as an event of `kind` in the context that owns it.
    pub fn check(&self, kind: &str, v: u16, payload: &[u8]) -> Result<(), DecodeError> {
        match self.owner(kind) {
            Some(vocabulary) => vocabulary.describe(kind, v, payload).map(drop),
            None => Event::decode(kind, v, payload).map(drop),
        }
    }

    /// The description of a stored event of another context; `None` for a kind the machine
    /// owns or no context knows.
    pub fn describe(
        &self,
        kind: &str,
        v: u16,
        payload: &[u8],
    ) -> Option<Result<String, DecodeError>> {
        self.owner(kind).map(|voc| voc.describe(kind, v, payload))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Notes;

    impl Vocabulary for Notes {
        fn context(&self) -> &'static str {
            "notes"
        }
        fn kinds(&self) -> &'static [(&'static str, u16)] {
            &[("note_taken", 1), ("cast_aborted", 1)]
        }
        fn describe(&self, kind: &str, _: u16, payload: &[u8]) -> Result<String, DecodeError> {
            std::str::from_utf8(payload)
                .map(|text| format!("note {text}"))
                .map_err(|e| DecodeError::Payload {
                    kind: kind.to_owned(),
                    source: crate::event::PayloadCause::new(e),
                })
        }
    }

    const NOTES: Contexts = Contexts::with(&[&Notes]);

    #[test]
    fn a_kind_of_another_context_is_checked_and_described_by_it() {
        assert_eq!(NOTES.check("note_taken", 1, b"hi"), Ok(()));
        assert!(NOTES.check("note_taken", 1, b"\xff").is_err());
        assert_eq!(
            NOTES.describe("note_taken", 1, b"hi"),
            Some(Ok("note hi".into()))
        );
        assert!(matches!(
            Contexts::MACHINE.check("note_taken", 1, b"hi"),
            Err(DecodeError::UnknownKind { .. })
        ));
    }

    /// The machine's kinds cannot be taken over by a context.
    #[test]
    fn the_machine_owns_its_kinds_first() {
        assert!(NOTES.owner("cast_aborted").is_none());
        assert!(NOTES.check("cast_aborted", 1, b"hi").is_err());
        assert_eq!(NOTES.describe("cast_aborted", 1, b"{}"), None);
        assert_eq!(format!("{NOTES:?}"), "[\"notes\"]");
    }
}
