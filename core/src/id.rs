//! Identifiers and counters as newtypes.
//!
//! Every id that crosses a crate boundary has its own type so that a socket id can never be
//! passed where a cast id is expected. String ids serialize as plain JSON strings and counters
//! as plain JSON numbers, so the newtypes cost nothing in the log format.

use std::fmt;

use serde::{Deserialize, Serialize};

macro_rules! string_id {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        #[serde(transparent)]
        pub struct $name(String);

        impl $name {
            /// Wraps a string as this id.
            pub fn new(value: impl Into<String>) -> Self {
                Self(value.into())
            }

            /// The id as a string slice.
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.pad(&self.0)
            }
        }

        impl From<&str> for $name {
            fn from(value: &str) -> Self {
                Self(value.to_owned())
            }
        }
    };
}

string_id!(
    /// One run of a loadout. Chosen by the caller through `Env` and recorded, never invented
    /// inside `core`.
    CastId
);
string_id!(
    /// A socket of a loadout graph (pi-materia's `Socket-N` keys).
    SocketId
);
string_id!(
    /// A materia (agent role or utility) name as configured.
    MateriaName
);
string_id!(
    /// The key of the work item a socket visit runs for (`WI-1`, `0`, a quest id, ...).
    ItemKey
);
string_id!(
    /// A claim in the claim-before-send ledger; derived from cast, step, destination and attempt.
    ClaimId
);
string_id!(
    /// The key that makes a deferred dispatch idempotent.
    DispatchKey
);
string_id!(
    /// A configured event sink (`eventing.sinks.<id>`).
    SinkId
);
string_id!(
    /// An event of the event bus, derived from the log (the cast and the seq of the event it
    /// comes from), so a redelivery carries the same id: the receiver's idempotency key.
    BusEventId
);

macro_rules! counter {
    ($(#[$doc:meta])* $name:ident($inner:ty)) => {
        $(#[$doc])*
        #[derive(
            Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize,
        )]
        #[serde(transparent)]
        pub struct $name(pub $inner);

        impl $name {
            /// The raw counter value.
            pub fn get(self) -> $inner {
                self.0
            }

            /// The next value, saturating at the maximum.
            pub fn next(self) -> Self {
                Self(self.0.saturating_add(1))
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}", self.0)
            }
        }
    };
}

counter!(
    /// The 1-based position of an event in its cast's chain. `Seq(0)` means "before the first
    /// event" and is never stored.
    Seq(u64)
);
counter!(
    /// The 1-based visit number of a socket within a cast.
    Visit(u32)
);
counter!(
    /// The 1-based turn number within one socket visit (first prompt, repair, refinements).
    Turn(u32)
);

impl Seq {
    /// The first seq of every chain.
    pub const FIRST: Seq = Seq(1);
}

/// A 32-byte content or chain digest, written as 64 lowercase hex digits.
///
/// `core` never computes digests (that needs a hash function and belongs to `events`); it only
/// carries them, so they can be named in events (a fork's parent hash, a prompt hash, a blob).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Digest(pub [u8; 32]);

impl Digest {
    /// The all-zero digest, used as the `prev` of the first event of a cast that is not a fork.
    pub const ZERO: Digest = Digest([0; 32]);

    /// Lowercase hex rendering.
    pub fn to_hex(&self) -> String {
        const HEX: &[u8; 16] = b"0123456789abcdef";
        let mut out = String::with_capacity(64);
        for byte in self.0 {
            out.push(HEX[usize::from(byte >> 4)] as char);
            out.push(HEX[usize::from(byte & 0x0f)] as char);
        }
        out
    }

    /// Parses 64 hex digits (either case).
    pub fn from_hex(text: &str) -> Result<Digest, DigestParseError> {
        let bytes = text.as_bytes();
        if bytes.len() != 64 {
            return Err(DigestParseError {
                text: text.to_owned(),
            });
        }
        let mut out = [0u8; 32];
        for (i, pair) in bytes.chunks_exact(2).enumerate() {
            let hi = hex_value(pair[0]).ok_or_else(|| DigestParseError {
                text: text.to_owned(),
            })?;
            let lo = hex_value(pair[1]).ok_or_else(|| DigestParseError {
                text: text.to_owned(),
            })?;
            out[i] = (hi << 4) | lo;
        }
        Ok(Digest(out))
    }

    /// The first 12 hex digits, for human output of one digest.
    pub fn short(&self) -> String {
        let mut hex = self.to_hex();
        hex.truncate(SHORT_DIGITS);
        hex
    }

    /// `self` and `other` abbreviated for a message that shows both: prefixes of the same
    /// length, at least 12 hex digits and as long as it takes to tell them apart (two digests
    /// that share their first 12 digits would otherwise read as the same).
    pub fn short_pair(&self, other: &Digest) -> (String, String) {
        let (mut a, mut b) = (self.to_hex(), other.to_hex());
        let digits = a
            .bytes()
            .zip(b.bytes())
            .position(|(x, y)| x != y)
            .map_or(SHORT_DIGITS, |first| (first + 1).max(SHORT_DIGITS));
        a.truncate(digits);
        b.truncate(digits);
        (a, b)
    }
}

/// How many hex digits [`Digest::short`] shows.
const SHORT_DIGITS: usize = 12;

fn hex_value(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    }
}

/// A string that is not 64 hex digits.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not a digest (expected 64 hex digits): {text:?}")]
pub struct DigestParseError {
    /// The rejected text.
    pub text: String,
}

impl fmt::Display for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_hex())
    }
}

impl fmt::Debug for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Digest({})", self.short())
    }
}

impl Serialize for Digest {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.to_hex())
    }
}

impl<'de> Deserialize<'de> for Digest {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        Digest::from_hex(&text).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digest_hex_round_trips() {
        let mut bytes = [0u8; 32];
        for (i, b) in bytes.iter_mut().enumerate() {
            *b = (i as u8).wrapping_mul(37);
        }
        let d = Digest(bytes);
        assert_eq!(Digest::from_hex(&d.to_hex()), Ok(d));
        assert_eq!(Digest::from_hex(&d.to_hex().to_uppercase()), Ok(d));
    }

    #[test]
    fn two_digests_sharing_twelve_digits_are_shown_apart() {
        let a = Digest([0xab; 32]);
        let mut bytes = [0xab; 32];
        bytes[9] = 0xac; // hex digits 19 and 20 are "ab" and "ac": the 20th differs
        let b = Digest(bytes);
        assert_eq!(a.short(), b.short());
        let (sa, sb) = a.short_pair(&b);
        assert_eq!((sa.len(), sb.len()), (20, 20));
        assert_ne!(sa, sb);
        let (x, y) = Digest::ZERO.short_pair(&a);
        assert_eq!((x.len(), y.len()), (12, 12));
        assert_eq!(a.short_pair(&a), (a.short(), a.short()));
    }

    #[test]
    fn digest_rejects_bad_text() {
        assert!(Digest::from_hex("abc").is_err());
        assert!(Digest::from_hex(&"g".repeat(64)).is_err());
    }

    #[test]
    fn ids_serialize_transparently() {
        let json = serde_json::to_string(&(CastId::new("c1"), Seq(3), Visit(2))).unwrap();
        assert_eq!(json, r#"["c1",3,2]"#);
    }
}
