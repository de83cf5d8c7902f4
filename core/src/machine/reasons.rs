//! Whether a text carries a rework reason, checked against all of a prompt's reasons at once.
//!
//! A prompt leaves out of its handoff context every paragraph that carries one of its own
//! follow-up block's reasons or another work item's rework reason (handoff rule 1), and out of
//! its previous output one that carries a reason its own follow-up block already shows. A text
//! carries a reason when, whitespace collapsed and the reason's trailing cut mark dropped, one
//! contains the other; texts under 20 bytes must be equal instead.
//!
//! The check used to be one substring search per (text, reason) pair, each over the whole text.
//! [`Reasons`] reads each reason once per prompt and keeps, for each reason of 20 bytes or more,
//! the 8 windows of 8 bytes that start at the 8 consecutive offsets around its middle (its
//! anchors). Wherever a text holds a reason, one of those 8 windows starts at an offset of the
//! text that is a multiple of 8, so one pass over every eighth window of the text, each looked
//! up in a 4,096-bit filter of the anchors, finds every place worth comparing. The answer is
//! exactly the pairwise one (pinned against it by a property test below).

use std::borrow::Cow;

/// Bytes under which a text and a reason must be equal rather than contain one another.
const SHORT: usize = 20;

/// Bytes in a window: one little-endian `u64`.
const WINDOW: usize = 8;

/// The text's windows read: one in this many (and as many anchors per reason).
const STRIDE: usize = 8;

/// Whether a byte is whitespace to `str::split_whitespace` (the ASCII ones: tab, line feed,
/// vertical tab, form feed, carriage return, space).
fn is_space(byte: u8) -> bool {
    matches!(byte, b'\t'..=b'\r' | b' ')
}

/// `text` with every run of whitespace made one space and the ends trimmed; borrowed when it
/// is already so (plain ASCII with single spaces, the common case). ASCII text is checked in
/// passes without branches (which the compiler makes wide) and copied a word at a time; other
/// text is split as `str::split_whitespace` splits it.
pub(super) fn collapse(text: &str) -> Cow<'_, str> {
    if !text.is_ascii() {
        return Cow::Owned(text.split_whitespace().collect::<Vec<_>>().join(" "));
    }
    let bytes = text.as_bytes();
    let other_space = bytes
        .iter()
        .fold(false, |seen, &b| seen | (is_space(b) && b != b' '));
    let double = bytes
        .iter()
        .zip(bytes.iter().skip(1))
        .fold(false, |seen, (&a, &b)| seen | (a == b' ' && b == b' '));
    let ends = bytes.first() == Some(&b' ') || bytes.last() == Some(&b' ');
    if !other_space && !double && !ends {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    for word in text.split(|c: char| c.is_ascii() && is_space(c as u8)) {
        if word.is_empty() {
            continue;
        }
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(word);
    }
    Cow::Owned(out)
}

/// Which of a prompt's reasons a text is checked against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Among {
    /// Only those of the prompt's own follow-up block.
    Own,
    /// Its own and every other work item's.
    All,
}

/// The rework reasons one prompt checks its texts against, each read once.
pub(super) struct Reasons<'a> {
    /// Every reason collapsed, its trailing cut mark dropped, with whether it is the prompt's
    /// own.
    collapsed: Vec<(Cow<'a, str>, bool)>,
    /// For each reason of [`SHORT`] bytes or more, its [`STRIDE`] anchors: the anchor, the
    /// reason's index in `collapsed` and the anchor's offset in it; sorted by anchor.
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
        .get(at..at + WINDOW)
        .and_then(|w| <[u8; WINDOW]>::try_from(w).ok())
        .map_or(0, u64::from_le_bytes)
}

impl<'a> Reasons<'a> {
    /// The prompt's own reasons and the other items' ones, each collapsed once.
    pub(super) fn new(
        own: impl IntoIterator<Item = &'a str>,
        foreign: impl IntoIterator<Item = &'a str>,
    ) -> Self {
        let tagged = |mine: bool| move |r: &'a str| (collapse(r.trim_end_matches('…')), mine);
        let collapsed: Vec<(Cow<'a, str>, bool)> = own
            .into_iter()
            .map(tagged(true))
            .chain(foreign.into_iter().map(tagged(false)))
            .collect();
        let mut anchors = Vec::new();
        let mut filter = [0u64; 64];
        for (index, (reason, _)) in collapsed.iter().enumerate() {
            if reason.len() >= SHORT {
                // SHORT >= WINDOW + STRIDE: every anchor lies inside the reason.
                let first = (reason.len() - WINDOW - STRIDE) / 2;
                for offset in first..first + STRIDE {
                    let anchor = window(reason.as_bytes(), offset);
                    let bit = slot(anchor);
                    filter[bit / 64] |= 1 << (bit % 64);
                    anchors.push((anchor, index, offset));
                }
            }
        }
        anchors.sort_unstable();
        let longest = collapsed.iter().map(|(r, _)| r.len()).max().unwrap_or(0);
        Self {
            collapsed,
            anchors,
            filter,
            longest,
        }
    }

    /// Whether a reason counts for a check among `among`.
    fn counts(&self, index: usize, among: Among) -> bool {
        among == Among::All || self.collapsed[index].1
    }

    /// Whether `text` carries any of the reasons `among` names.
    pub(super) fn carried_by(&self, text: &str, among: Among) -> bool {
        if !(0..self.collapsed.len()).any(|i| self.counts(i, among)) {
            return false;
        }
        let text = collapse(text);
        if text.len() < SHORT {
            return (0..self.collapsed.len())
                .any(|i| self.counts(i, among) && *self.collapsed[i].0 == *text);
        }
        self.within(&text, among) || self.around(&text, among)
    }

    /// Whether a reason of [`SHORT`] bytes or more lies inside `text` (collapsed, as long).
    fn within(&self, text: &str, among: Among) -> bool {
        let bytes = text.as_bytes();
        if self.anchors.is_empty() || bytes.len() < WINDOW {
            return false;
        }
        for at in (0..=bytes.len() - WINDOW).step_by(STRIDE) {
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
                if !self.counts(index, among) {
                    continue;
                }
                let reason = self.collapsed[index].0.as_bytes();
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
    fn around(&self, text: &str, among: Among) -> bool {
        text.len() <= self.longest
            && (0..self.collapsed.len()).any(|i| {
                let reason = &self.collapsed[i].0;
                self.counts(i, among) && reason.len() >= text.len() && reason.contains(text)
            })
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
                let expected = overlaps_slowly(text, reason);
                let own = Reasons::new([reason], []);
                let foreign = Reasons::new([], [reason]);
                assert_eq!(
                    own.carried_by(text, Among::Own),
                    expected,
                    "{text:?} / {reason:?}"
                );
                assert_eq!(
                    own.carried_by(text, Among::All),
                    expected,
                    "{text:?} / {reason:?}"
                );
                assert_eq!(
                    foreign.carried_by(text, Among::All),
                    expected,
                    "{text:?} / {reason:?}"
                );
                assert!(
                    !foreign.carried_by(text, Among::Own),
                    "{text:?} / {reason:?}"
                );
            }
        }
    }

    #[test]
    fn all_reasons_at_once_answer_as_any_of_the_pairs() {
        let (own, foreign) = REASONS.split_at(3);
        let all = Reasons::new(own.iter().copied(), foreign.iter().copied());
        for text in TEXTS {
            assert_eq!(
                all.carried_by(text, Among::All),
                REASONS.iter().any(|r| overlaps_slowly(text, r)),
                "{text:?}"
            );
            assert_eq!(
                all.carried_by(text, Among::Own),
                own.iter().any(|r| overlaps_slowly(text, r)),
                "{text:?}"
            );
        }
        let none = Reasons::new([], []);
        assert!(!none.carried_by("anything at all, long enough", Among::All));
    }

    #[test]
    fn a_reason_is_found_at_every_offset_of_a_text() {
        let reason = "the tests fail on empty input, twice over";
        let index = Reasons::new([reason], []);
        for lead in 1..3 * STRIDE {
            let text = format!("{}{reason} and then some", "x".repeat(lead));
            assert!(index.carried_by(&text, Among::Own), "{lead} bytes before");
            // The reason without its last byte: neither holds the other.
            let cut = format!("{}{}", "x".repeat(lead), &reason[..reason.len() - 1]);
            assert!(
                !index.carried_by(&cut, Among::Own),
                "{lead} bytes before, cut"
            );
        }
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
            own in 0usize..6,
        ) {
            let own = own.min(reasons.len());
            let index = Reasons::new(
                reasons[..own].iter().map(String::as_str),
                reasons[own..].iter().map(String::as_str),
            );
            for text in &texts {
                // A text cut out of a reason, and a reason inside a longer text, too.
                let inside = format!("lead {text} tail");
                for text in [text.as_str(), inside.as_str()] {
                    prop_assert_eq!(
                        index.carried_by(text, Among::All),
                        reasons.iter().any(|r| overlaps_slowly(text, r)),
                        "{:?} / {:?}", text, reasons
                    );
                    prop_assert_eq!(
                        index.carried_by(text, Among::Own),
                        reasons[..own].iter().any(|r| overlaps_slowly(text, r)),
                        "{:?} / {:?}", text, reasons
                    );
                }
            }
            for reason in &reasons {
                let around = format!("before {reason} after");
                prop_assert_eq!(
                    index.carried_by(&around, Among::All),
                    reasons.iter().any(|r| overlaps_slowly(&around, r)),
                    "{:?} / {:?}", around, reasons
                );
            }
        }
    }
}
