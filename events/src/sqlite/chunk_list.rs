//! How a chunked blob's row lists its chunks (`blobs.bytes` when `blobs.chunked` is not 0).
//!
//! # The two forms
//! - `chunked = 1` (schema v4 to v10): each chunk's row id as an 8-byte big-endian integer,
//!   in order.
//! - `chunked = 2` (schema v11 on): each row id as the difference from the one before it (0
//!   before the first), zigzag-mapped to an unsigned number (`d >= 0` → `2d`, `d < 0` →
//!   `-2d - 1`) and written as LEB128 (`varint.rs`). A blob's new chunks are stored one after another, so
//!   most differences are 1 and take one byte; a chunk shared with an older blob takes a few.
//!
//! Both forms read back to the same ids; the writer writes the second.

use super::varint;

/// The `chunked` value of a row in the first form.
pub(super) const FIXED: i64 = 1;
/// The `chunked` value of a row in the second form, the one the writer writes.
pub(super) const DELTAS: i64 = 2;

/// `ids` in the [`DELTAS`] form.
pub(super) fn encode(ids: &[i64]) -> Vec<u8> {
    let mut out = Vec::with_capacity(ids.len() * 2);
    let mut before = 0i64;
    for &id in ids {
        let d = id.wrapping_sub(before);
        before = id;
        varint::write(((d << 1) ^ (d >> 63)) as u64, &mut out);
    }
    out
}

/// The row ids a list of form `chunked` holds, or what is wrong with it.
pub(super) fn decode(chunked: i64, bytes: &[u8]) -> Result<Vec<i64>, String> {
    match chunked {
        FIXED => {
            if !bytes.len().is_multiple_of(8) {
                return Err(format!(
                    "its chunk list is {} bytes, not a multiple of 8",
                    bytes.len()
                ));
            }
            Ok(bytes
                .chunks_exact(8)
                .map(|id| i64::from_be_bytes(id.try_into().unwrap_or_default()))
                .collect())
        }
        DELTAS => {
            let mut ids = Vec::with_capacity(bytes.len());
            let mut before = 0i64;
            let mut pos = 0;
            while pos < bytes.len() {
                let n = varint::read(bytes, &mut pos)
                    .map_err(|why| format!("its chunk list {why} (after chunk {})", ids.len()))?;
                let d = ((n >> 1) as i64) ^ -((n & 1) as i64);
                before = before.wrapping_add(d);
                ids.push(before);
            }
            Ok(ids)
        }
        other => Err(format!(
            "its chunked column holds {other}, not 0, {FIXED} or {DELTAS}"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deltas_read_back_to_the_ids_and_mostly_take_a_byte() {
        let ids = [1, 2, 3, 4, 700_000, 700_001, 9, i64::MAX, 1];
        let bytes = encode(&ids);
        assert_eq!(decode(DELTAS, &bytes).unwrap(), ids);
        // A run of new chunks: one byte each.
        let run: Vec<i64> = (5000..5010).collect();
        let bytes = encode(&run);
        assert_eq!(bytes.len(), 2 + 9);
        assert_eq!(decode(DELTAS, &bytes).unwrap(), run);
    }

    #[test]
    fn the_form_is_pinned() {
        // 1 (+1 → 2), 3 (+2 → 4), 2 (-1 → 1), 130 (+128 → 256 = 0x80 0x02).
        assert_eq!(encode(&[1, 3, 2, 130]), vec![0x02, 0x04, 0x01, 0x80, 0x02]);
        let fixed: Vec<u8> = [7i64, 8].iter().flat_map(|id| id.to_be_bytes()).collect();
        assert_eq!(decode(FIXED, &fixed).unwrap(), vec![7, 8]);
    }

    #[test]
    fn a_damaged_list_is_named() {
        assert!(
            decode(DELTAS, &[0x80])
                .unwrap_err()
                .contains("ends inside a number")
        );
        assert!(
            decode(DELTAS, &[0xff; 11])
                .unwrap_err()
                .contains("longer than 64 bits")
        );
        assert!(
            decode(FIXED, &[0; 9])
                .unwrap_err()
                .contains("not a multiple of 8")
        );
        assert!(decode(5, &[]).unwrap_err().contains("holds 5"));
    }
}
