//! Ranking by specificity: `min(words/25, 1) + min(digits/6, 1)` (0..2), best first, ties
//! broken by turn id. Ranking only orders; it never admits or rejects.

use super::Candidate;

/// The specificity score of a text.
pub fn specificity(text: &str) -> f64 {
    let text = text.trim();
    if text.is_empty() {
        return 0.0;
    }
    let words = text.split_whitespace().count() as f64;
    let digits = text.chars().filter(char::is_ascii_digit).count() as f64;
    (words / 25.0).min(1.0) + (digits / 6.0).min(1.0)
}

/// Candidates with their scores, best first.
pub fn rank(candidates: Vec<Candidate>) -> Vec<(Candidate, f64)> {
    let mut scored: Vec<(Candidate, f64)> = candidates
        .into_iter()
        .map(|c| {
            let score = specificity(&c.text);
            (c, score)
        })
        .collect();
    scored.sort_by(|(a, sa), (b, sb)| {
        sb.partial_cmp(sa)
            .unwrap_or(std::cmp::Ordering::Equal)
            .then_with(|| a.turn_id.cmp(&b.turn_id))
    });
    scored
}
