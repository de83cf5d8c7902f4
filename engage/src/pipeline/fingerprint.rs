//! The similarity fingerprint of a question (a 64-bit simhash) and the distance between two.
//!
//! Recipe (compatible with the reference's stored values): lower-case the text and take the
//! tokens matching `[a-z0-9]+` (ASCII only); drop the 31 stop-words and every token of two
//! characters or fewer; no tokens left gives 0 ("no signal", which skips the similarity rule
//! both ways). For each token occurrence (duplicates count) take BLAKE2b with an 8-byte digest
//! (the digest-length parameter is 8; this is not a cut BLAKE2b-512) of its UTF-8 bytes, read it
//! as a big-endian u64, and for each bit add +1 when set and -1 when not. An output bit is set
//! iff its sum is strictly positive. The distance is the popcount of the XOR.
//!
//! BLAKE2b is written out below (RFC 7693) because the core takes no hashing dependency; the
//! golden vectors of the reference pin it.

/// The reference's stop-words.
const STOP_WORDS: [&str; 31] = [
    "a", "an", "and", "are", "as", "at", "be", "but", "by", "did", "do", "for", "from", "have",
    "how", "in", "is", "it", "of", "on", "or", "the", "to", "was", "were", "what", "when", "which",
    "with", "you", "your",
];

const IV: [u64; 8] = [
    0x6a09_e667_f3bc_c908,
    0xbb67_ae85_84ca_a73b,
    0x3c6e_f372_fe94_f82b,
    0xa54f_f53a_5f1d_36f1,
    0x510e_527f_ade6_82d1,
    0x9b05_688c_2b3e_6c1f,
    0x1f83_d9ab_fb41_bd6b,
    0x5be0_cd19_137e_2179,
];

const SIGMA: [[usize; 16]; 12] = [
    [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15],
    [14, 10, 4, 8, 9, 15, 13, 6, 1, 12, 0, 2, 11, 7, 5, 3],
    [11, 8, 12, 0, 5, 2, 15, 13, 10, 14, 3, 6, 7, 1, 9, 4],
    [7, 9, 3, 1, 13, 12, 11, 14, 2, 6, 5, 10, 4, 0, 15, 8],
    [9, 0, 5, 7, 2, 4, 10, 15, 14, 1, 11, 12, 6, 8, 3, 13],
    [2, 12, 6, 10, 0, 11, 8, 3, 4, 13, 7, 5, 15, 14, 1, 9],
    [12, 5, 1, 15, 14, 13, 4, 10, 0, 7, 6, 3, 9, 2, 8, 11],
    [13, 11, 7, 14, 12, 1, 3, 9, 5, 0, 15, 4, 8, 6, 2, 10],
    [6, 15, 14, 9, 11, 3, 0, 8, 12, 2, 13, 7, 1, 4, 10, 5],
    [10, 2, 8, 4, 7, 6, 1, 5, 15, 11, 9, 14, 3, 12, 13, 0],
    [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15],
    [14, 10, 4, 8, 9, 15, 13, 6, 1, 12, 0, 2, 11, 7, 5, 3],
];

fn mix(v: &mut [u64; 16], a: usize, b: usize, c: usize, d: usize, x: u64, y: u64) {
    v[a] = v[a].wrapping_add(v[b]).wrapping_add(x);
    v[d] = (v[d] ^ v[a]).rotate_right(32);
    v[c] = v[c].wrapping_add(v[d]);
    v[b] = (v[b] ^ v[c]).rotate_right(24);
    v[a] = v[a].wrapping_add(v[b]).wrapping_add(y);
    v[d] = (v[d] ^ v[a]).rotate_right(16);
    v[c] = v[c].wrapping_add(v[d]);
    v[b] = (v[b] ^ v[c]).rotate_right(63);
}

fn compress(h: &mut [u64; 8], block: &[u8; 128], counter: u128, last: bool) {
    let mut m = [0u64; 16];
    for (i, word) in m.iter_mut().enumerate() {
        let mut bytes = [0u8; 8];
        bytes.copy_from_slice(&block[i * 8..i * 8 + 8]);
        *word = u64::from_le_bytes(bytes);
    }
    let mut v = [0u64; 16];
    v[..8].copy_from_slice(h);
    v[8..].copy_from_slice(&IV);
    v[12] ^= counter as u64;
    v[13] ^= (counter >> 64) as u64;
    if last {
        v[14] = !v[14];
    }
    for s in &SIGMA {
        mix(&mut v, 0, 4, 8, 12, m[s[0]], m[s[1]]);
        mix(&mut v, 1, 5, 9, 13, m[s[2]], m[s[3]]);
        mix(&mut v, 2, 6, 10, 14, m[s[4]], m[s[5]]);
        mix(&mut v, 3, 7, 11, 15, m[s[6]], m[s[7]]);
        mix(&mut v, 0, 5, 10, 15, m[s[8]], m[s[9]]);
        mix(&mut v, 1, 6, 11, 12, m[s[10]], m[s[11]]);
        mix(&mut v, 2, 7, 8, 13, m[s[12]], m[s[13]]);
        mix(&mut v, 3, 4, 9, 14, m[s[14]], m[s[15]]);
    }
    for i in 0..8 {
        h[i] ^= v[i] ^ v[i + 8];
    }
}

/// Unkeyed BLAKE2b of `data` with an 8-byte digest, read as a big-endian u64.
pub fn blake2b_8(data: &[u8]) -> u64 {
    const OUT: u64 = 8;
    let mut h = IV;
    h[0] ^= 0x0101_0000 ^ OUT;
    let mut counter: u128 = 0;
    let mut chunks = data.chunks(128).peekable();
    if chunks.peek().is_none() {
        compress(&mut h, &[0u8; 128], 0, true);
    }
    while let Some(chunk) = chunks.next() {
        let mut block = [0u8; 128];
        block[..chunk.len()].copy_from_slice(chunk);
        counter += chunk.len() as u128;
        compress(&mut h, &block, counter, chunks.peek().is_none());
    }
    // The digest is the first 8 bytes of h[0] in little-endian order.
    u64::from_be_bytes(h[0].to_le_bytes())
}

/// The tokens a fingerprint is made of.
pub fn tokens(text: &str) -> Vec<String> {
    let lower = text.to_lowercase();
    lower
        .split(|c: char| !(c.is_ascii_lowercase() || c.is_ascii_digit()))
        .filter(|t| t.len() > 2 && !STOP_WORDS.contains(t))
        .map(str::to_owned)
        .collect()
}

/// The topic fingerprint of a question; 0 means "no signal".
pub fn fingerprint(text: &str) -> u64 {
    let tokens = tokens(text);
    if tokens.is_empty() {
        return 0;
    }
    let mut sums = [0i64; 64];
    for token in &tokens {
        let hash = blake2b_8(token.as_bytes());
        for (bit, sum) in sums.iter_mut().enumerate() {
            if hash >> bit & 1 == 1 {
                *sum += 1;
            } else {
                *sum -= 1;
            }
        }
    }
    sums.iter()
        .enumerate()
        .filter(|(_, s)| **s > 0)
        .fold(0u64, |acc, (bit, _)| acc | (1 << bit))
}

/// The Hamming distance of two fingerprints.
pub fn distance(a: u64, b: u64) -> u32 {
    (a ^ b).count_ones()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blake2b_matches_the_rfc_shape() {
        // BLAKE2b-64 ("b2sum -l 64") of the empty string and of "abc".
        assert_eq!(blake2b_8(b""), 0xe4a6_a0577479b2b4);
        assert_eq!(blake2b_8(b"abc"), 0xd8bb_14d833d59559);
    }

    #[test]
    fn golden_vectors_of_the_reference() {
        let a = fingerprint("have you started the SS-31 yet");
        let b = fingerprint("did you start the SS-31 yet");
        let c = fingerprint("which marker changed your protocol");
        assert_eq!(a, 10_394_871_238_641_590_787);
        assert_eq!(a, 0x9042_0051_3128_2203);
        assert_eq!(b, 9_223_952_854_695_280_835);
        assert_eq!(distance(a, b), 12);
        assert_eq!(c, 96_595_594_963_456_924);
        assert!(distance(a, c) > 12);
        assert_eq!(fingerprint("is it ok"), 0);
        assert_eq!(fingerprint(""), 0);
    }
}
