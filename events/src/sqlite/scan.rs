//! Byte scans the stored forms of payloads run over every payload they write or read
//! (`split.rs`, `shorthand.rs`), a word or a vector at a time instead of a byte at a time.

/// Whether `bytes` holds a byte below `20` (a control character).
pub(super) fn has_control(bytes: &[u8]) -> bool {
    const ONES: u64 = u64::from_ne_bytes([0x01; 8]);
    const HIGHS: u64 = u64::from_ne_bytes([0x80; 8]);
    let mut words = bytes.chunks_exact(8);
    // A byte below 0x20 is one that borrows when 0x20 is taken from it while its top bit is
    // clear; the test is exact for whether any byte of the word is one.
    let found = words.by_ref().any(|word| {
        let x = u64::from_ne_bytes(word.try_into().unwrap_or_default());
        x.wrapping_sub(ONES * 0x20) & !x & HIGHS != 0
    });
    found || words.remainder().iter().any(|&b| b < 0x20)
}

/// Whether `bytes` holds a byte JSON's string form writes otherwise than as itself: `"`, `\`
/// or a control character.
pub(super) fn needs_escape(bytes: &[u8]) -> bool {
    memchr::memchr2(b'"', b'\\', bytes).is_some() || has_control(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn the_scans_agree_with_a_byte_at_a_time(bytes in proptest::collection::vec(any::<u8>(), 0..100)) {
            prop_assert_eq!(has_control(&bytes), bytes.iter().any(|&b| b < 0x20));
            prop_assert_eq!(
                needs_escape(&bytes),
                bytes.iter().any(|&b| b < 0x20 || b == b'"' || b == b'\\')
            );
        }
    }

    #[test]
    fn every_byte_is_judged_where_it_stands() {
        for at in 0..20 {
            for b in [0x00, 0x1f, 0x20, 0x7f, 0x80, 0xff] {
                let mut bytes = vec![b'a'; 20];
                bytes[at] = b;
                assert_eq!(has_control(&bytes), b < 0x20, "{b:#x} at {at}");
            }
        }
    }
}
