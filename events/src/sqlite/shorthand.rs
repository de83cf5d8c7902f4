//! Shorthand (schema v11): an event payload written shorter, byte for byte reversible, before
//! it is stored (and packed when it is long, see `pack.rs`). Most payloads are a hundred bytes
//! or two of field names and a few values: a general compressor has nothing to find in so
//! little, and unpacking a frame for every event would slow every read of a cast.
//!
//! # The recipe (storage only; pinned by golden tests)
//! A payload is shortened only when it holds no byte below `20` (castlog's JSON never does;
//! JSON escapes every control character in a string and needs none outside one), so the
//! marker bytes below cannot be mistaken for its own. Reading left to right:
//! - a digest, `"` then 64 lowercase hex digits then `"`, is written `"`, [`DIGEST`] (`1e`),
//!   its 32 bytes, `"`;
//! - the cast's own id (the row's address names the cast already; a dispatch key, a post's
//!   idempotency key and `cast_started` repeat it), at least [`CAST_FROM`] bytes long, is
//!   written [`OWN_CAST`] (`1d`);
//! - a phrase of `phrases.rs` (the longest that matches) is written [`PHRASE`] (`1c`) then its
//!   index;
//! - every other byte is written as it is.
//!
//! Expanding reads the same way: [`DIGEST`] and the 32 bytes after it are the digest's hex,
//! [`OWN_CAST`] is the cast's id, [`PHRASE`] and the byte after it that phrase, and every
//! other byte is itself.

/// Marks a phrase's index.
pub(super) const PHRASE: u8 = 0x1c;
/// Marks a digest's 32 bytes.
pub(super) const DIGEST: u8 = 0x1e;
/// Stands for the cast's own id.
pub(super) const OWN_CAST: u8 = 0x1d;
/// Shorter cast ids are left as they are.
pub(super) const CAST_FROM: usize = 4;

use super::phrases::{PHRASES, by_second_byte};
use super::scan;

const HEX: &[u8; 16] = b"0123456789abcdef";

/// `payload` in shorthand for cast `cast`, or `None` when it holds a byte below `20` or
/// nothing to shorten.
pub(super) fn shorten(payload: &[u8], cast: &str) -> Option<Vec<u8>> {
    if scan::has_control(payload) {
        return None;
    }
    let cast = cast.as_bytes();
    let cast = (cast.len() >= CAST_FROM && !scan::has_control(cast)).then_some(cast);
    // Where a digest, a phrase or the cast's id may start: a quote, or the id's first byte
    // (a few bytes apart in most payloads: a plain scan costs less than a vector search's
    // setup).
    let first = cast.map_or(b'"', |cast| cast[0]);
    let next = |from: &[u8]| from.iter().position(|&b| b == b'"' || b == first);
    let phrases = by_second_byte();
    let mut out = Vec::with_capacity(payload.len());
    let mut shortened = false;
    let mut i = 0;
    while i < payload.len() {
        let Some(skip) = next(&payload[i..]) else {
            out.extend_from_slice(&payload[i..]);
            break;
        };
        out.extend_from_slice(&payload[i..i + skip]);
        i += skip;
        let b = payload[i];
        let phrase = || {
            let second = *payload.get(i + 1)?;
            phrases[usize::from(second)]
                .iter()
                .copied()
                .find(|&k| payload[i..].starts_with(PHRASES[usize::from(k)].as_bytes()))
        };
        if b == b'"'
            && let Some(digest) = digest_at(payload, i + 1)
        {
            out.push(b'"');
            out.push(DIGEST);
            out.extend_from_slice(&digest);
            out.push(b'"');
            i += 66;
            shortened = true;
        } else if let Some(cast) = cast
            && payload[i..].starts_with(cast)
        {
            out.push(OWN_CAST);
            i += cast.len();
            shortened = true;
        } else if b == b'"'
            && let Some(k) = phrase()
        {
            out.push(PHRASE);
            out.push(k);
            i += PHRASES[usize::from(k)].len();
            shortened = true;
        } else {
            out.push(b);
            i += 1;
        }
    }
    shortened.then_some(out)
}

/// The 32 bytes of the digest whose hex starts at `at`, when 64 lowercase hex digits and a
/// closing quote are there.
fn digest_at(payload: &[u8], at: usize) -> Option<[u8; 32]> {
    let hex = payload.get(at..at + 64)?;
    if payload.get(at + 64) != Some(&b'"') {
        return None;
    }
    let mut digest = [0u8; 32];
    for (byte, pair) in digest.iter_mut().zip(hex.chunks_exact(2)) {
        *byte = (nibble(pair[0])? << 4) | nibble(pair[1])?;
    }
    Some(digest)
}

fn nibble(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        _ => None,
    }
}

/// The payload `short` is the shorthand of, for cast `cast`, or what is wrong with it.
pub(super) fn expand(short: &[u8], cast: &str) -> Result<Vec<u8>, String> {
    let mut out = Vec::with_capacity(short.len() * 2 + 64);
    let mut i = 0;
    while i < short.len() {
        // Markers are a few bytes apart in most payloads: a plain scan to the next one costs
        // less than a vector search's setup.
        let run = short[i..]
            .iter()
            .position(|b| (PHRASE..=DIGEST).contains(b))
            .unwrap_or(short.len() - i);
        out.extend_from_slice(&short[i..i + run]);
        i += run;
        let Some(&marker) = short.get(i) else {
            break;
        };
        match marker {
            DIGEST => {
                let Some(digest) = short.get(i + 1..i + 33) else {
                    return Err(format!("its shorthand ends inside a digest (at byte {i})"));
                };
                let mut hex = [0u8; 64];
                for (pair, &b) in hex.chunks_exact_mut(2).zip(digest) {
                    pair[0] = HEX[usize::from(b >> 4)];
                    pair[1] = HEX[usize::from(b & 0xf)];
                }
                out.extend_from_slice(&hex);
                i += 33;
            }
            OWN_CAST => {
                out.extend_from_slice(cast.as_bytes());
                i += 1;
            }
            PHRASE => {
                let phrase = short
                    .get(i + 1)
                    .and_then(|&k| PHRASES.get(usize::from(k)))
                    .ok_or_else(|| format!("its shorthand names no known phrase (at byte {i})"))?;
                out.extend_from_slice(phrase.as_bytes());
                i += 2;
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const CAST: &str = "demo-7";

    #[test]
    fn phrases_are_written_as_two_bytes_and_put_back() {
        let payload = br#"{"attempt":2,"item":"WI-7","item_label":"greet","materia":"Build","materia_label":"Build","socket":"Socket-2","visit":4}"#;
        let short = shorten(payload, CAST).unwrap();
        assert!(
            short.len() * 2 < payload.len(),
            "{} of {}",
            short.len(),
            payload.len()
        );
        assert_eq!(expand(&short, CAST).unwrap(), payload);
        assert!(
            expand(&[PHRASE, 255], CAST)
                .unwrap_err()
                .contains("no known phrase")
        );
        assert!(
            expand(&[PHRASE], CAST)
                .unwrap_err()
                .contains("no known phrase")
        );
    }

    #[test]
    fn digests_and_the_casts_id_are_written_shorter_and_put_back() {
        let digest = "0123456789abcdef".repeat(4);
        let payload = format!(
            r#"{{"body":"{digest}","key":"{CAST}:Socket-1:1:Socket-2:1","parent":"demo-70","x":"{}"}}"#,
            digest.to_uppercase()
        );
        let short = shorten(payload.as_bytes(), CAST).unwrap();
        // 31 bytes for the digest, 5 for each of the two ids, the phrases' savings besides.
        assert!(short.len() <= payload.len() - 31 - 2 * (CAST.len() - 1));
        assert_eq!(expand(&short, CAST).unwrap(), payload.as_bytes());
    }

    #[test]
    fn the_form_is_pinned() {
        let payload = format!(r#"["{}","demo-7",{{"visit":1}}]"#, "ab".repeat(32));
        let mut expected = b"[\"\x1e".to_vec();
        expected.extend([0xab; 32]);
        expected.extend(b"\",\"\x1d\",{\x1c\x1c1}]");
        assert_eq!(shorten(payload.as_bytes(), CAST).unwrap(), expected);
    }

    #[test]
    fn what_it_cannot_mark_safely_is_left_alone() {
        assert_eq!(shorten(b"{\"a\":\"\x1d\"}", CAST), None);
        assert_eq!(shorten(br#"{"a":"nothing to shorten"}"#, CAST), None);
        // A short cast id is not replaced.
        assert_eq!(shorten(br#"{"abc_id":"abc"}"#, "abc"), None);
        assert!(
            expand(&[DIGEST, 1, 2], CAST)
                .unwrap_err()
                .contains("inside a digest")
        );
    }

    proptest! {
        #[test]
        fn every_shorthand_expands_to_its_payload(
            parts in proptest::collection::vec(0u8..4, 0..40),
            seed in any::<u64>(),
        ) {
            let mut x = seed | 1;
            let mut payload = Vec::new();
            for part in parts {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                match part {
                    0 => payload.extend(format!("\"{:064x}\"", u128::from(x as u32)).bytes()),
                    1 => payload.extend(CAST.bytes()),
                    2 => payload.push(b'"'),
                    _ => payload.push(0x20 + (x % 0x5f) as u8),
                }
            }
            if let Some(short) = shorten(&payload, CAST) {
                prop_assert_eq!(expand(&short, CAST).unwrap(), payload);
            }
        }
    }
}
