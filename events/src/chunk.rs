//! Content-defined chunking: how `SqliteLog` stores a large blob as pieces shared with other
//! blobs.
//!
//! Prompts repeat text: a reply comes back as the next socket's previous output, as a line of
//! every later handoff context, inside the next instructions. Each of those entries is its own
//! blob, so a blob store keyed by whole contents keeps every repetition. A chunked store cuts
//! each large blob where its *content* says to, so the same run of text is cut the same way in
//! every blob that contains it, and each distinct chunk is stored once (per writer process:
//! the dedupe map is kept in memory, see `sqlite/writer.rs`).
//!
//! # The recipe (pinned by a golden test; changing it only loses sharing, never data)
//! A gear hash runs over the bytes: `h = (h << 1) + GEAR[byte]` (wrapping, 64-bit), where
//! `GEAR` is 256 values of splitmix64 seeded with `0x6361_7374_6c6f_6721` (`"castlog!"`),
//! each entry the next output. Each added byte shifts older bytes left, so the top bits of
//! `h` depend on the last 64 bytes only. A chunk ends after the byte at which the top
//! [`MASK_BITS`] bits of `h` are all zero, provided the chunk holds at least [`MIN`] bytes; a
//! chunk never exceeds [`MAX`] bytes; the hash restarts at zero after every cut. Blobs shorter
//! than [`CHUNKED_FROM`] bytes are not cut. The expected chunk is about `MIN + 2^MASK_BITS`
//! bytes.

/// Chunks are at least this long (except a blob's last).
pub const MIN: usize = 256;
/// Chunks are at most this long.
pub const MAX: usize = 8192;
/// Number of top hash bits that must be zero at a cut. It was 9 (chunks of about 768 bytes)
/// before replies were kept in the chunk store; 8 (about 512) lets a reply and the entry
/// bodies that quote it, each cut where its own prefix ends, agree sooner, which on a
/// workload of 2 kB replies stores about 3% fewer bytes in all.
pub const MASK_BITS: u32 = 8;
/// Blobs of at least this many bytes are chunked.
pub const CHUNKED_FROM: usize = 1024;

const SEED: u64 = 0x6361_7374_6c6f_6721;

const fn gear() -> [u64; 256] {
    let mut table = [0u64; 256];
    let mut state = SEED;
    let mut i = 0;
    while i < 256 {
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        table[i] = z ^ (z >> 31);
        i += 1;
    }
    table
}

static GEAR: [u64; 256] = gear();

const MASK: u64 = !(u64::MAX >> MASK_BITS);

/// The chunks of `bytes`, in order; they concatenate back to `bytes`. A short blob is one
/// chunk.
pub fn split(bytes: &[u8]) -> Vec<&[u8]> {
    if bytes.len() < CHUNKED_FROM {
        return vec![bytes];
    }
    let mut out = Vec::with_capacity(bytes.len() / (MIN + (1 << MASK_BITS)) + 1);
    let mut start = 0;
    let mut h: u64 = 0;
    for (i, &b) in bytes.iter().enumerate() {
        h = (h << 1).wrapping_add(GEAR[usize::from(b)]);
        let len = i + 1 - start;
        if (len >= MIN && h & MASK == 0) || len >= MAX {
            out.push(&bytes[start..=i]);
            start = i + 1;
            h = 0;
        }
    }
    if start < bytes.len() {
        out.push(&bytes[start..]);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(seed: u64, len: usize) -> Vec<u8> {
        let mut state = seed;
        (0..len)
            .map(|_| {
                state = state
                    .wrapping_mul(6_364_136_223_846_793_005)
                    .wrapping_add(1_442_695_040_888_963_407);
                b"abcdefghij klmnopqrst uvwxyz\n"[(state >> 59) as usize % 29]
            })
            .collect()
    }

    #[test]
    fn chunks_concatenate_back_and_respect_the_bounds() {
        for len in [0, 1, CHUNKED_FROM - 1, CHUNKED_FROM, 5000, 100_000] {
            let bytes = text(7, len);
            let chunks = split(&bytes);
            assert_eq!(chunks.concat(), bytes, "len {len}");
            if len >= CHUNKED_FROM {
                let (last, rest) = chunks.split_last().unwrap();
                assert!(rest.iter().all(|c| (MIN..=MAX).contains(&c.len())));
                assert!(last.len() <= MAX);
            }
        }
    }

    #[test]
    fn a_shared_run_of_text_is_cut_the_same_way_in_two_blobs() {
        let shared = text(1, 6000);
        let a = [b"Previous output:\n".as_slice(), &shared].concat();
        let b = [
            text(2, 700).as_slice(),
            b"\n\n[Socket-3 Eval] ",
            &shared,
            b"\n\nmore",
        ]
        .concat();
        let (ca, cb) = (split(&a), split(&b));
        let common = ca.iter().filter(|c| cb.contains(c)).count();
        assert!(
            common * 2 >= ca.len(),
            "{common} of {} chunks shared",
            ca.len()
        );
    }

    /// The recipe is a storage format: the cut points of a fixed input are pinned.
    #[test]
    fn golden_cut_points() {
        let bytes = text(42, 20_000);
        let lengths: Vec<usize> = split(&bytes).iter().map(|c| c.len()).collect();
        assert_eq!(lengths.iter().sum::<usize>(), 20_000);
        assert_eq!(GEAR[0], 0x4a68_cb93_efa4_728c, "{:#018x}", GEAR[0]);
        assert_eq!(
            lengths,
            [
                544, 548, 267, 489, 318, 501, 425, 634, 324, 415, 259, 526, 362, 621, 479, 623,
                1369, 352, 458, 405, 405, 312, 654, 790, 666, 737, 362, 957, 297, 263, 402, 411,
                527, 438, 440, 652, 742, 466, 560
            ]
        );
    }
}
