//! The hash chain: how each recorded event commits to everything before it.
//!
//! # Recipe (format version 1)
//!
//! Every recorded event carries `prev` (the hash of the event before it in the same cast) and
//! `hash`. The hash is BLAKE3 in derive-key mode with the context string
//! [`CONTEXT`] = `"castlog event chain v1"`, over these bytes, in this order:
//!
//! ```text
//! +--------+-----------------+-----------+---------+---------+-----------------+-----+----------+---------+
//! | prev   | cast len (u32)  | cast utf8 | seq u64 | at_ms   | kind len (u32)  | kind| v (u16)  | payload |
//! | 32 B   | little-endian   |           | LE      | u64 LE  | little-endian   |utf8 | LE       | len u64 |
//! +--------+-----------------+-----------+---------+---------+-----------------+-----+----------+ LE, then|
//!                                                                                                 | bytes   |
//!                                                                                                 +---------+
//! ```
//!
//! - `prev` is [`Digest::ZERO`] for the first event of a cast that is not a fork; for the first
//!   event of a fork it is the parent's hash at the fork seq, so the child commits to the
//!   parent's whole prefix (like a git parent).
//! - The header fields are encoded by hand, never through serde, so no serializer upgrade can
//!   change a hash.
//! - The payload is hashed as the exact bytes stored; verification re-reads stored bytes and
//!   never re-serializes an event.
//!
//! The recipe is pinned by golden hashes in `fixtures/golden/chain-v1.json`; a test fails if any
//! of them changes. A new recipe gets a new context string and a new golden file.

use castlog_core::id::{CastId, Digest, Seq};

/// The derive-key context string of format version 1.
pub const CONTEXT: &str = "castlog event chain v1";

/// The derive-key hasher with the context already absorbed; cloning it skips hashing the
/// context string for every event.
static CHAIN_HASHER: std::sync::LazyLock<blake3::Hasher> =
    std::sync::LazyLock::new(|| blake3::Hasher::new_derive_key(CONTEXT));
static BLOB_HASHER: std::sync::LazyLock<blake3::Hasher> =
    std::sync::LazyLock::new(|| blake3::Hasher::new_derive_key(BLOB_CONTEXT));

/// The derive-key context string of blob addresses.
pub const BLOB_CONTEXT: &str = "castlog blob v1";

/// The fields of one event that the hash covers, borrowed.
#[derive(Debug, Clone, Copy)]
pub struct Link<'a> {
    /// Hash of the previous event (the fork parent's at the fork point, or zero).
    pub prev: &'a Digest,
    /// Stream the event belongs to.
    pub cast: &'a CastId,
    /// The event's seq.
    pub seq: Seq,
    /// The event's time.
    pub at_ms: u64,
    /// Event kind as stored (`cast_started`, ...).
    pub kind: &'a str,
    /// Schema version of the payload's kind.
    pub v: u16,
    /// Payload exactly as stored, never re-serialized.
    pub payload: &'a [u8],
}

impl Link<'_> {
    /// The chain hash of this event.
    pub fn hash(&self) -> Digest {
        let mut hasher = CHAIN_HASHER.clone();
        hasher.update(&self.prev.0);
        put_str(&mut hasher, self.cast.as_str());
        hasher.update(&self.seq.get().to_le_bytes());
        hasher.update(&self.at_ms.to_le_bytes());
        put_str(&mut hasher, self.kind);
        hasher.update(&self.v.to_le_bytes());
        hasher.update(&(self.payload.len() as u64).to_le_bytes());
        hasher.update(self.payload);
        Digest(*hasher.finalize().as_bytes())
    }
}

fn put_str(hasher: &mut blake3::Hasher, text: &str) {
    // Lengths of names are u32: a cast id or kind longer than 4 GiB cannot be stored anyway.
    let len = u32::try_from(text.len()).unwrap_or(u32::MAX);
    hasher.update(&len.to_le_bytes());
    hasher.update(text.as_bytes());
}

/// The content address of a blob: plain BLAKE3 of its bytes (derive-key mode with
/// `"castlog blob v1"`), so identical texts are stored once.
pub fn blob_hash(bytes: &[u8]) -> Digest {
    blob_hash_of_parts(&[bytes])
}

/// The content hash of a frozen loadout, as `cast_started` and `cast_forked` record it
/// (`loadout_hash`): [`blob_hash`] of the loadout's JSON bytes exactly as the event's payload
/// stores them (`frozen` is the value the event carries, `Loadout::to_json`; inside the
/// payload it is written compactly by the same serializer, so these are the stored bytes, a
/// test pins that on recorded casts). The one place the hash is computed: `diff` compares the
/// recorded hashes and never computes one again.
pub fn loadout_hash(frozen: &serde_json::Value) -> Digest {
    // A `Value` always renders (its map keys are strings), so nothing is dropped here.
    blob_hash(&serde_json::to_vec(frozen).unwrap_or_default())
}

/// [`blob_hash`] of the parts' concatenation, without making it.
pub fn blob_hash_of_parts(parts: &[&[u8]]) -> Digest {
    let mut hasher = BLOB_HASHER.clone();
    for part in parts {
        hasher.update(part);
    }
    Digest(*hasher.finalize().as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn link<'a>(prev: &'a Digest, cast: &'a CastId, payload: &'a [u8]) -> Link<'a> {
        Link {
            prev,
            cast,
            seq: Seq(1),
            at_ms: 0,
            kind: "cast_aborted",
            v: 1,
            payload,
        }
    }

    #[test]
    fn every_field_changes_the_hash() {
        let cast = CastId::new("c");
        let base = link(&Digest::ZERO, &cast, b"{}").hash();
        let other_prev = Digest([1; 32]);
        assert_ne!(base, link(&other_prev, &cast, b"{}").hash());
        let other_cast = CastId::new("d");
        assert_ne!(base, link(&Digest::ZERO, &other_cast, b"{}").hash());
        assert_ne!(base, link(&Digest::ZERO, &cast, b"{ }").hash());
        assert_ne!(
            base,
            Link {
                seq: Seq(2),
                ..link(&Digest::ZERO, &cast, b"{}")
            }
            .hash()
        );
        assert_ne!(
            base,
            Link {
                at_ms: 1,
                ..link(&Digest::ZERO, &cast, b"{}")
            }
            .hash()
        );
        assert_ne!(
            base,
            Link {
                kind: "cast_abortee",
                ..link(&Digest::ZERO, &cast, b"{}")
            }
            .hash()
        );
        assert_ne!(
            base,
            Link {
                v: 2,
                ..link(&Digest::ZERO, &cast, b"{}")
            }
            .hash()
        );
    }

    #[test]
    fn length_prefixes_keep_fields_apart() {
        // "ab" + "c" must not hash like "a" + "bc".
        let a = CastId::new("ab");
        let b = CastId::new("a");
        let x = Link {
            kind: "c",
            ..link(&Digest::ZERO, &a, b"")
        }
        .hash();
        let y = Link {
            kind: "bc",
            ..link(&Digest::ZERO, &b, b"")
        }
        .hash();
        assert_ne!(x, y);
    }
}
