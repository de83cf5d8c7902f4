//! The seal of a cache kept beside the log: state snapshots (`castlog_replay::driver`) and
//! projection checkpoints (`castlog_projections::projection`) are sealed the one way below.
//!
//! A cache is never trusted over the log: whoever reads one checks the chain hash it names
//! against the log's and folds the log to compare in `verify`. The seal is there to name a
//! stored row changed by accident or carelessness (a byte flipped, a row copied to another
//! cast, seq or name); anyone can compute it, so it proves nothing against intent.
//!
//! # The recipe
//! Stored bytes are the 32-byte seal followed by the payload (the cache's own encoding). The
//! seal is blake3, keyed as the log's blobs are ([`crate::chain::blob_hash_of_parts`]), over
//! these parts in order:
//!
//! ```text
//! purpose tag   "castlog state snapshot\0" or "castlog projection checkpoint\0"
//! cast id       UTF-8 bytes, then one zero byte
//! name          UTF-8 bytes (the projection's name, or "state"), then one zero byte
//! version       u32, big-endian (the payload's format)
//! seq           u64, big-endian (the last event the cache covers)
//! chain hash    32 bytes (the log's hash at that seq)
//! payload       the bytes themselves
//! ```
//!
//! Projection checkpoints were sealed this way before the two were one scheme, so their stored
//! rows still open. State snapshots were sealed without name and version; their format version
//! went up with this recipe (`castlog_core::machine::snapshot::VERSION` 4), so an older one is
//! of another format, ignored on use and folded past, never mistaken for damage. The hashes are
//! pinned by the tests below; a change of recipe must change the caches' versions.

use castlog_core::id::{CastId, Digest, Seq};

use crate::chain::blob_hash_of_parts;

/// What a cache is, the first part of its seal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Purpose {
    /// A snapshot of a cast's state.
    StateSnapshot,
    /// A checkpoint of a projection.
    ProjectionCheckpoint,
}

impl Purpose {
    fn tag(self) -> &'static [u8] {
        match self {
            Purpose::StateSnapshot => b"castlog state snapshot\0",
            Purpose::ProjectionCheckpoint => b"castlog projection checkpoint\0",
        }
    }
}

/// Everything a seal covers besides the payload: which cache, of which cast, at which point.
#[derive(Debug, Clone, Copy)]
pub struct Seal<'a> {
    /// What the cache is.
    pub purpose: Purpose,
    /// Stream whose cache it is.
    pub cast: &'a CastId,
    /// The projection's name, or `state` for a snapshot.
    pub name: &'a str,
    /// The payload's format.
    pub version: u32,
    /// Seq of the last event folded into the cache.
    pub seq: Seq,
    /// The log's chain hash at `seq`.
    pub hash: &'a Digest,
}

/// The length of a seal at the start of stored bytes.
pub const SEAL_LEN: usize = 32;

impl Seal<'_> {
    /// The seal over `payload` (see the module docs).
    pub fn over(&self, payload: &[u8]) -> Digest {
        blob_hash_of_parts(&[
            self.purpose.tag(),
            self.cast.as_str().as_bytes(),
            &[0],
            self.name.as_bytes(),
            &[0],
            &self.version.to_be_bytes(),
            &self.seq.get().to_be_bytes(),
            &self.hash.0,
            payload,
        ])
    }

    /// The bytes to store: the seal, then `payload`.
    pub fn wrap(&self, payload: &[u8]) -> Vec<u8> {
        let mut stored = Vec::with_capacity(SEAL_LEN + payload.len());
        stored.extend_from_slice(&self.over(payload).0);
        stored.extend_from_slice(payload);
        stored
    }

    /// The payload inside `stored`, if its seal holds for this cache.
    pub fn open<'s>(&self, stored: &'s [u8]) -> Option<&'s [u8]> {
        let (seal, payload) = stored.split_at_checked(SEAL_LEN)?;
        (seal == self.over(payload).0.as_slice()).then_some(payload)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seal<'a>(purpose: Purpose, cast: &'a CastId, name: &'a str, hash: &'a Digest) -> Seal<'a> {
        Seal {
            purpose,
            cast,
            name,
            version: 1,
            seq: Seq(5),
            hash,
        }
    }

    /// The recipe, pinned: a checkpoint's seal is the one checkpoints always had (the hash a
    /// build before this module gave), a snapshot's the one of this recipe.
    #[test]
    fn seals_are_pinned() {
        let cast = CastId::new("c");
        let hash = Digest([7; 32]);
        let checkpoint = seal(Purpose::ProjectionCheckpoint, &cast, "count", &hash);
        assert_eq!(
            checkpoint.over(b"\x05").to_hex(),
            "c4a71a3c23c833626bde511ffd851a7081214566898cd5f8fd161a75316183a1"
        );
        let snapshot = seal(Purpose::StateSnapshot, &cast, "state", &hash);
        assert_eq!(
            snapshot.over(b"{}").to_hex(),
            "b15523384827e87b5485ba78d60b5916eb080ecae3aebbe81ffedb278b182775"
        );
    }

    /// A checkpoint sealed the way `projections` did before (parts spelled out there) opens.
    #[test]
    fn a_checkpoint_sealed_by_the_old_recipe_opens() {
        let cast = CastId::new("c");
        let hash = Digest([7; 32]);
        let old = blob_hash_of_parts(&[
            b"castlog projection checkpoint\0",
            b"c",
            &[0],
            b"count",
            &[0],
            &1u32.to_be_bytes(),
            &5u64.to_be_bytes(),
            &hash.0,
            b"\x05",
        ]);
        let mut stored = old.0.to_vec();
        stored.push(5);
        let checkpoint = seal(Purpose::ProjectionCheckpoint, &cast, "count", &hash);
        assert_eq!(checkpoint.open(&stored), Some(&b"\x05"[..]));
        assert_eq!(checkpoint.wrap(b"\x05"), stored);
    }

    /// A byte changed anywhere, or the same bytes read as another cast's, seq's, name's,
    /// version's or purpose's, does not open.
    #[test]
    fn a_seal_opens_only_for_its_own_cache() {
        let cast = CastId::new("c");
        let other = CastId::new("d");
        let hash = Digest([7; 32]);
        let base = seal(Purpose::StateSnapshot, &cast, "state", &hash);
        let stored = base.wrap(b"payload");
        assert_eq!(base.open(&stored), Some(&b"payload"[..]));
        for i in 0..stored.len() {
            let mut flipped = stored.clone();
            flipped[i] ^= 1;
            assert_eq!(base.open(&flipped), None, "byte {i}");
        }
        let others = [
            Seal {
                cast: &other,
                ..base
            },
            Seal {
                seq: Seq(6),
                ..base
            },
            Seal {
                name: "count",
                ..base
            },
            Seal { version: 2, ..base },
            Seal {
                purpose: Purpose::ProjectionCheckpoint,
                ..base
            },
        ];
        for other in others {
            assert_eq!(other.open(&stored), None, "{other:?}");
        }
        assert_eq!(base.open(&stored[..31]), None);
    }
}
