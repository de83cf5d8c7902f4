//! Anchors: heads kept outside the database, so a truncated or rewritten log is caught.
//!
//! The chain proves that every event a cast still has is the one that was written, but not that
//! the cast still has every event: deleting a cast's last decision (its rows and a fixed-up head
//! row) or losing the WAL leaves a valid, shorter chain. An anchor is a small file a person keeps
//! elsewhere (another disk, a backup, a git repository, a printout) that records, per stream,
//! the last head castlog saw: its seq and its chain hash. Because that hash covers every earlier
//! event, a log still holds the anchored history exactly when the stream's event at the
//! anchored seq exists and carries the anchored hash (and the chain verifies).
//!
//! # What it proves, and what not
//! - It proves that nothing up to the anchored seq was removed or replaced, for every stream
//!   named in the anchor: a stream that is gone, shorter, or whose event at the anchored seq has
//!   another hash (rewritten, or forked away) is reported.
//! - It does not prove anything about events appended after the anchor was last written: those
//!   can still be cut off unseen. Keep the anchor up to date (`--anchor FILE` on every command
//!   that drives a cast) to narrow that window.
//! - It is only as trustworthy as the place it is kept: whoever can rewrite both the database
//!   and the anchor can hide a truncation.
//!
//! # Format (version 1)
//! One JSON document, written whole (a temporary file renamed over the old one):
//!
//! ```json
//! {
//!   "castlog_anchor": 1,
//!   "heads": [
//!     {"cast": "demo", "seq": 73, "hash": "6b7e…(64 hex digits)"}
//!   ]
//! }
//! ```
//!
//! `heads` is sorted by cast and names each stream at most once. A reader refuses any other
//! version and any entry whose seq is 0 or whose hash is not 64 hex digits.

use std::collections::BTreeMap;

use castlog_core::id::{CastId, Digest, Seq};
use serde::{Deserialize, Serialize};

use crate::log::{CastHead, EventLog, LogError};
use crate::verify::{Problem, ProblemKind};

/// The anchor format this build reads and writes.
pub const VERSION: u32 = 1;

/// The heads an anchor recorded, by stream.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Anchor {
    heads: BTreeMap<CastId, AnchoredHead>,
}

/// One stream's recorded head.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AnchoredHead {
    /// Seq of the stream's last event when the anchor was moved.
    pub seq: Seq,
    /// Chain hash of that event; the log must still hold it at `seq`.
    pub hash: Digest,
}

/// An anchor file that cannot be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AnchorError {
    /// Not a JSON document of the anchor's shape.
    #[error("not a castlog anchor: {0}")]
    Malformed(#[source] serde_json::Error),
    /// Written by a castlog with another format.
    #[error(
        "anchor format version {found} is not one this castlog reads (it reads version {VERSION})"
    )]
    Version {
        /// `castlog_anchor` as the file gives it.
        found: u64,
    },
    /// One entry is not a head.
    #[error("anchor entry {index} (cast {cast:?}): {message}")]
    Entry {
        /// Its 1-based place in `heads`.
        index: usize,
        /// Stream id the entry gives, as written.
        cast: String,
        /// What is wrong.
        message: String,
    },
}

#[derive(Serialize, Deserialize)]
struct File {
    castlog_anchor: u64,
    heads: Vec<Entry>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Entry {
    cast: String,
    seq: u64,
    hash: String,
}

/// What moving an anchor forward did for one stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Advance {
    /// The stream was not in the anchor: its head is added.
    Added,
    /// The log extends the anchored head (or equals it): the anchor now holds the log's head.
    Moved,
    /// The log no longer holds the anchored head: the entry is kept as it was.
    Refused(Problem),
}

impl Anchor {
    /// An anchor with no heads.
    pub fn new() -> Self {
        Self::default()
    }

    /// Reads an anchor document.
    pub fn parse(bytes: &[u8]) -> Result<Anchor, AnchorError> {
        let file: File = serde_json::from_slice(bytes).map_err(AnchorError::Malformed)?;
        if file.castlog_anchor != u64::from(VERSION) {
            return Err(AnchorError::Version {
                found: file.castlog_anchor,
            });
        }
        let mut heads = BTreeMap::new();
        for (i, entry) in file.heads.into_iter().enumerate() {
            let bad = |message: &str| AnchorError::Entry {
                index: i + 1,
                cast: entry.cast.clone(),
                message: message.to_owned(),
            };
            if entry.cast.is_empty() {
                return Err(bad("the cast is empty"));
            }
            if entry.seq == 0 {
                return Err(bad("seq 0 is no event's seq (seqs start at 1)"));
            }
            let hash =
                Digest::from_hex(&entry.hash).map_err(|_| bad("the hash is not 64 hex digits"))?;
            let head = AnchoredHead {
                seq: Seq(entry.seq),
                hash,
            };
            if heads.insert(CastId::new(&entry.cast), head).is_some() {
                return Err(bad("the cast is named twice"));
            }
        }
        Ok(Anchor { heads })
    }

    /// The document [`Anchor::parse`] reads, ending in a newline.
    pub fn render(&self) -> String {
        let file = File {
            castlog_anchor: u64::from(VERSION),
            heads: self
                .heads
                .iter()
                .map(|(cast, head)| Entry {
                    cast: cast.as_str().to_owned(),
                    seq: head.seq.get(),
                    hash: head.hash.to_hex(),
                })
                .collect(),
        };
        // A struct of strings and integers always serializes.
        let mut text = serde_json::to_string_pretty(&file).unwrap_or_default();
        text.push('\n');
        text
    }

    /// The anchored head of `cast`, if any.
    pub fn get(&self, cast: &CastId) -> Option<AnchoredHead> {
        self.heads.get(cast).copied()
    }

    /// Every anchored stream with its head, sorted by cast.
    pub fn heads(&self) -> impl Iterator<Item = (&CastId, AnchoredHead)> {
        self.heads.iter().map(|(cast, head)| (cast, *head))
    }

    /// How many streams are anchored.
    pub fn len(&self) -> usize {
        self.heads.len()
    }

    /// Whether no stream is anchored.
    pub fn is_empty(&self) -> bool {
        self.heads.is_empty()
    }

    /// Moves `head.cast`'s entry to `head`, but only if the log still holds the anchored head
    /// (an anchor never forgets history the log has lost).
    pub fn advance(
        &mut self,
        log: &(impl EventLog + ?Sized),
        head: &CastHead,
    ) -> Result<Advance, LogError> {
        let Some(anchored) = self.get(&head.cast) else {
            self.heads.insert(
                head.cast.clone(),
                AnchoredHead {
                    seq: head.seq,
                    hash: head.hash,
                },
            );
            return Ok(Advance::Added);
        };
        if let Some(problem) = check_head(log, &head.cast, anchored, Some(head))? {
            return Ok(Advance::Refused(problem));
        }
        self.heads.insert(
            head.cast.clone(),
            AnchoredHead {
                seq: head.seq,
                hash: head.hash,
            },
        );
        Ok(Advance::Moved)
    }
}

/// What is wrong with `cast` against its anchored head: gone, shorter, or holding another
/// event at the anchored seq. `head` is the log's head of `cast` (`None`: the log has no
/// such stream).
pub fn check_head(
    log: &(impl EventLog + ?Sized),
    cast: &CastId,
    anchored: AnchoredHead,
    head: Option<&CastHead>,
) -> Result<Option<Problem>, LogError> {
    let problem = |message: String| Problem {
        cast: cast.clone(),
        seq: anchored.seq,
        kind: ProblemKind::Anchor,
        message,
    };
    let Some(head) = head else {
        return Ok(Some(problem(format!(
            "the cast is gone: the anchor recorded it at seq {} (hash {})",
            anchored.seq,
            anchored.hash.to_hex()
        ))));
    };
    if head.seq < anchored.seq {
        return Ok(Some(problem(format!(
            "the cast ends at seq {}, but the anchor recorded seq {} (hash {}): events {} to {} \
             are gone",
            head.seq,
            anchored.seq,
            anchored.hash.to_hex(),
            head.seq.next(),
            anchored.seq
        ))));
    }
    let found = if head.seq == anchored.seq {
        Some(head.hash)
    } else {
        log.read(cast, anchored.seq, Some(anchored.seq))?
            .first()
            .map(|r| r.hash)
    };
    Ok(match found {
        Some(hash) if hash == anchored.hash => None,
        Some(hash) => Some(problem(format!(
            "the event at seq {} has hash {}, but the anchor recorded {}: the history up to \
             the anchor was rewritten, or this is another cast of the same name",
            anchored.seq,
            hash.to_hex(),
            anchored.hash.to_hex()
        ))),
        None => Some(problem(format!(
            "the cast has no event at seq {}, which the anchor recorded (hash {})",
            anchored.seq,
            anchored.hash.to_hex()
        ))),
    })
}

/// Checks every stream the anchor names (or, with `only`, those of them in `only`) against the
/// log: one problem per stream that is gone, shorter, or forked away from its anchored head.
pub fn check(
    log: &(impl EventLog + ?Sized),
    anchor: &Anchor,
    only: Option<&[CastId]>,
) -> Result<Vec<Problem>, LogError> {
    let mut problems = Vec::new();
    for (cast, anchored) in anchor.heads() {
        if only.is_some_and(|only| !only.contains(cast)) {
            continue;
        }
        let head = log.head(cast)?;
        problems.extend(check_head(log, cast, anchored, head.as_ref())?);
    }
    Ok(problems)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::InMemoryLog;
    use crate::record::Pending;
    use castlog_core::event::{CastAborted, Event};

    fn log_with(cast: &str, events: u64) -> InMemoryLog {
        let log = InMemoryLog::new();
        let cast = CastId::new(cast);
        for seq in 1..=events {
            let event = Event::from(CastAborted {
                reason: format!("event {seq}"),
            });
            log.append(&cast, Seq(seq), &[Pending::new(seq, &event)])
                .expect("append");
        }
        log
    }

    fn head(log: &InMemoryLog, cast: &str) -> CastHead {
        log.head(&CastId::new(cast))
            .expect("head")
            .expect("the cast exists")
    }

    #[test]
    fn an_anchor_renders_and_parses_back() {
        let log = log_with("demo", 3);
        let mut anchor = Anchor::new();
        assert_eq!(
            anchor.advance(&log, &head(&log, "demo")).expect("advance"),
            Advance::Added
        );
        let text = anchor.render();
        assert!(text.starts_with("{\n  \"castlog_anchor\": 1,"), "{text}");
        assert_eq!(Anchor::parse(text.as_bytes()).expect("parse"), anchor);
    }

    #[test]
    fn a_log_that_extends_the_anchor_passes_and_moves_it() {
        let log = log_with("demo", 5);
        let mut anchor = Anchor::new();
        anchor.heads.insert(
            CastId::new("demo"),
            AnchoredHead {
                seq: Seq(3),
                hash: log
                    .read(&CastId::new("demo"), Seq(3), Some(Seq(3)))
                    .expect("read")[0]
                    .hash,
            },
        );
        assert!(check(&log, &anchor, None).expect("check").is_empty());
        assert_eq!(
            anchor.advance(&log, &head(&log, "demo")).expect("advance"),
            Advance::Moved
        );
        assert_eq!(
            anchor.get(&CastId::new("demo")).map(|h| h.seq),
            Some(Seq(5))
        );
    }

    #[test]
    fn a_shorter_cast_is_reported_at_the_anchored_seq_and_the_anchor_is_kept() {
        let long = log_with("demo", 5);
        let mut anchor = Anchor::new();
        anchor
            .advance(&long, &head(&long, "demo"))
            .expect("advance");
        let short = log_with("demo", 3);
        let problems = check(&short, &anchor, None).expect("check");
        assert_eq!(problems.len(), 1);
        assert_eq!(problems[0].seq, Seq(5));
        assert_eq!(problems[0].kind, ProblemKind::Anchor);
        assert!(
            problems[0].message.contains("events 4 to 5 are gone"),
            "{}",
            problems[0].message
        );
        let before = anchor.clone();
        assert!(matches!(
            anchor
                .advance(&short, &head(&short, "demo"))
                .expect("advance"),
            Advance::Refused(_)
        ));
        assert_eq!(anchor, before);
    }

    #[test]
    fn a_rewritten_prefix_and_a_missing_cast_are_reported() {
        let first = log_with("demo", 3);
        let mut anchor = Anchor::new();
        anchor
            .advance(&first, &head(&first, "demo"))
            .expect("advance");
        // The same seqs with other payloads: another chain under the same name.
        let other = InMemoryLog::new();
        for seq in 1..=4 {
            let event = Event::from(CastAborted {
                reason: format!("other {seq}"),
            });
            other
                .append(&CastId::new("demo"), Seq(seq), &[Pending::new(seq, &event)])
                .expect("append");
        }
        let problems = check(&other, &anchor, None).expect("check");
        assert_eq!(problems.len(), 1);
        assert!(
            problems[0].message.contains("rewritten"),
            "{}",
            problems[0].message
        );
        let problems = check(&InMemoryLog::new(), &anchor, None).expect("check");
        assert!(
            problems[0].message.contains("the cast is gone"),
            "{}",
            problems[0].message
        );
    }

    #[test]
    fn malformed_anchors_are_refused_with_the_place() {
        let cases: [(&str, &str); 5] = [
            ("not json", "not a castlog anchor"),
            (r#"{"castlog_anchor": 2, "heads": []}"#, "version 2"),
            (
                r#"{"castlog_anchor": 1, "heads": [{"cast": "a", "seq": 0, "hash": ""}]}"#,
                "entry 1 (cast \"a\"): seq 0",
            ),
            (
                r#"{"castlog_anchor": 1, "heads": [{"cast": "a", "seq": 1, "hash": "zz"}]}"#,
                "entry 1 (cast \"a\"): the hash is not 64 hex digits",
            ),
            (
                r#"{"castlog_anchor": 1, "heads": [{"cast": "", "seq": 1, "hash": "zz"}]}"#,
                "the cast is empty",
            ),
        ];
        for (text, expected) in cases {
            let err = Anchor::parse(text.as_bytes()).expect_err(text);
            assert!(err.to_string().contains(expected), "{text}: {err}");
        }
    }
}
