//! Whether a text carries a rework reason, checked against all of a prompt's reasons at once.
//!
//! A prompt leaves out of its handoff context every paragraph that carries another work item's
//! rework reason (handoff rule 1), and out of its previous output one that carries a reason its
//! own follow-up block already shows. A text carries a reason when, whitespace collapsed and
//! the reason's trailing cut mark dropped, one contains the other; texts under 20 bytes must be
//! equal instead.
//!
//! The check used to be one substring search per (text, reason) pair, each over the whole text.
//! [`Reasons`] reads each reason once per prompt and keeps, for each reason of 20 bytes or more,
//! the 8 bytes in its middle (its anchor). A text contains a reason only where the text holds
//! that anchor at the matching offset, so one pass over the text's bytes, each 8-byte window
//! looked up in a 4,096-bit filter of the anchors, finds every place worth comparing. The
//! answer is exactly the pairwise one (pinned against it by a property test below).

use std::borrow::Cow;

/// Bytes under which a text and a reason must be equal rather than contain one another.
const SHORT: usize = 20;

/// Bytes in a reason's anchor: one little-endian `u64`.
const ANCHOR: usize = 8;

/// `text` with every run of whitespace made one space and the ends trimmed; borrowed when it
/// is already so (plain ASCII with single spaces, the common case).
pub(super) fn collapse(text: &str) -> Cow<'_, str> {
    let bytes = text.as_bytes();
    let plain = text.is_ascii()
        && !bytes.first().is_some_and(u8::is_ascii_whitespace)
        && !bytes.last().is_some_and(u8::is_ascii_whitespace)
        && !bytes
            .iter()
            .any(|b| b.is_ascii_whitespace() && *b != b' ' || *b == 0x0b)
        && !text.contains("  ");
    if plain {
        Cow::Borrowed(text)
    } else {
        Cow::Owned(text.split_whitespace().collect::<Vec<_>>().join(" "))
    }
}

/// The rework reasons one prompt checks its texts against, each read once.
pub(super) struct Reasons<'a> {
    /// Every reason collapsed, its trailing cut mark dropped.
    collapsed: Vec<Cow<'a, str>>,
    /// For each reason of [`SHORT`] bytes or more: its anchor, its index in `collapsed` and
    /// the anchor's offset in it; sorted by anchor.
    anchors: Vec<(u64, usize, usize)>,
    /// One bit per [`slot`] of an anchor in `anchors`.
    filter: [u64; 64],
    /// The longest collapsed reason, in bytes.
    longest: usize,
}

/// The filter bit of an 8-byte window: the top 12 bits of a multiplicative hash.
fn slot(window: u64) -> usize {
    (window.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 52) as usize
}

/// The 8 bytes at `at` of `bytes` as a little-endian `u64` (0 past the end, never read so).
fn window(bytes: &[u8], at: usize) -> u64 {
    bytes
        .get(at..at + ANCHOR)
        .and_then(|w| <[u8; ANCHOR]>::try_from(w).ok())
        .map_or(0, u64::from_le_bytes)
}

impl<'a> Reasons<'a> {
    /// The reasons, each collapsed once.
    pub(super) fn new(reasons: impl IntoIterator<Item = &'a str>) -> Self {
        let collapsed: Vec<Cow<'a, str>> = reasons
            .into_iter()
            .map(|r| collapse(r.trim_end_matches('…')))
            .collect();
        let mut anchors = Vec::new();
        let mut filter = [0u64; 64];
        for (index, reason) in collapsed.iter().enumerate() {
            if reason.len() >= SHORT {
                let offset = (reason.len() - ANCHOR) / 2;
                let anchor = window(reason.as_bytes(), offset);
                let bit = slot(anchor);
                filter[bit / 64] |= 1 << (bit % 64);
                anchors.push((anchor, index, offset));
            }
        }
        anchors.sort_unstable();
        let longest = collapsed.iter().map(|r| r.len()).max().unwrap_or(0);
        Self {
            collapsed,
            anchors,
            filter,
            longest,
        }
    }

    /// Whether `text` carries any of the reasons.
    pub(super) fn carried_by(&self, text: &str) -> bool {
        if self.collapsed.is_empty() {
            return false;
        }
        let text = collapse(text);
        if text.len() < SHORT {
            return self.collapsed.iter().any(|r| **r == *text);
        }
        self.within(&text) || self.around(&text)
    }

    /// Whether a reason of [`SHORT`] bytes or more lies inside `text` (collapsed, as long).
    fn within(&self, text: &str) -> bool {
        let bytes = text.as_bytes();
        if self.anchors.is_empty() || bytes.len() < ANCHOR {
            return false;
        }
        for at in 0..=bytes.len() - ANCHOR {
            let key = window(bytes, at);
            let bit = slot(key);
            if self.filter[bit / 64] & (1 << (bit % 64)) == 0 {
                continue;
            }
            let first = self.anchors.partition_point(|&(k, _, _)| k < key);
            for &(_, index, offset) in self.anchors[first..]
                .iter()
                .take_while(|&&(k, _, _)| k == key)
            {
                let reason = self.collapsed[index].as_bytes();
                let found = at
                    .checked_sub(offset)
                    .and_then(|start| bytes.get(start..start + reason.len()))
                    .is_some_and(|span| span == reason);
                if found {
                    return true;
                }
            }
        }
        false
    }

    /// Whether `text` (collapsed, [`SHORT`] bytes or more) lies inside a reason.
    fn around(&self, text: &str) -> bool {
        text.len() <= self.longest
            && self
                .collapsed
                .iter()
                .any(|r| r.len() >= text.len() && r.contains(text))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The reference behaviour the index must keep.
    fn overlaps_slowly(text: &str, reason: &str) -> bool {
        let slow = |t: &str| t.split_whitespace().collect::<Vec<_>>().join(" ");
        let text = slow(text);
        let reason = slow(reason.trim_end_matches('…'));
        if text.len() < 20 || reason.len() < 20 {
            return text == reason;
        }
        text.contains(&reason) || reason.contains(&text)
    }

    #[test]
    fn collapse_borrows_only_text_that_is_already_collapsed() {
        for text in [
            "",
            " ",
            "plain words here",
            " lead",
            "trail ",
            "two  spaces",
            "tab\there",
            "new\nline",
            "vertical\u{b}tab",
            "non\u{a0}breaking",
            "é accents é",
        ] {
            let slow = text.split_whitespace().collect::<Vec<_>>().join(" ");
            let fast = collapse(text);
            assert_eq!(fast, slow, "{text:?}");
            assert_eq!(
                matches!(fast, Cow::Borrowed(_)),
                slow == text && text.is_ascii(),
                "{text:?}"
            );
        }
    }

    const TEXTS: [&str; 11] = [
        "[Socket-3 Eval] verdict item-00011 try 1 rejected: the tests fail on empty input and more",
        "[Socket-3 Eval] verdict item-00012 try 1 rejected: the tests fail on empty input",
        "verdict item-00011",
        "short",
        "try 1 rejected: the tests fail",
        "",
        "verdict item-00011 try 1 rejected: the tests fail on empty input …",
        "verdict\titem-00011  try 1\u{a0}rejected:\nthe tests fail on empty input",
        "tests\nfail on  empty",
        "  verdict item-00011 try 1 rejected: the tests\nfail on  empty input  ",
        "verdict item-00011 try 1 rejected: the tests fail on empty input",
    ];

    const REASONS: [&str; 7] = [
        "verdict item-00011 try 1 rejected: the tests\nfail on  empty input …",
        "short",
        "",
        "try 1 rejected: the tests fail",
        "  the tests\tfail on empty input and more words here …",
        "…",
        "verdict item-00011 try 1 rejected: the tests fail on empty input",
    ];

    #[test]
    fn one_reason_at_a_time_answers_as_the_pairwise_check() {
        for text in TEXTS {
            for reason in REASONS {
                assert_eq!(
                    Reasons::new([reason]).carried_by(text),
                    overlaps_slowly(text, reason),
                    "{text:?} / {reason:?}"
                );
            }
        }
    }

    #[test]
    fn all_reasons_at_once_answer_as_any_of_the_pairs() {
        let all = Reasons::new(REASONS);
        for text in TEXTS {
            assert_eq!(
                all.carried_by(text),
                REASONS.iter().any(|r| overlaps_slowly(text, r)),
                "{text:?}"
            );
        }
        assert!(!Reasons::new([]).carried_by("anything at all, long enough"));
    }

    /// Words from a small vocabulary, so containments (and anchor collisions) are common.
    fn words(max: usize) -> impl Strategy<Value = String> {
        let word = prop::sample::select(vec![
            "a",
            "ab",
            "tests",
            "fail",
            "on",
            "empty",
            "input",
            "item-0001",
            "é",
            "…",
            " ",
            "\n",
            "\t",
        ]);
        prop::collection::vec(word, 0..max).prop_map(|w| w.join(" "))
    }

    proptest! {
        #[test]
        fn the_index_never_changes_the_answer(
            texts in prop::collection::vec(words(40), 1..4),
            reasons in prop::collection::vec(words(16), 0..6),
        ) {
            let index = Reasons::new(reasons.iter().map(String::as_str));
            for text in &texts {
                // A text cut out of a reason, and a reason inside a longer text, too.
                let inside = format!("lead {text} tail");
                for text in [text.as_str(), inside.as_str()] {
                    prop_assert_eq!(
                        index.carried_by(text),
                        reasons.iter().any(|r| overlaps_slowly(text, r)),
                        "{:?} / {:?}", text, reasons
                    );
                }
            }
            for reason in &reasons {
                let around = format!("before {reason} after");
                prop_assert_eq!(
                    index.carried_by(&around),
                    reasons.iter().any(|r| overlaps_slowly(&around, r)),
                    "{:?} / {:?}", around, reasons
                );
            }
        }
    }
}
