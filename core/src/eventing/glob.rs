//! The glob patterns of `eventFilter`, over dot-separated event types: `*` as a whole segment
//! matches one segment, `*` inside a segment any run of characters within it (`debug_*`), `**`
//! as a whole segment zero or more segments (`lifecycle.**.failed`); anything else matches
//! literally.

/// Whether `pattern` matches the event type `kind`.
pub fn matches(pattern: &str, kind: &str) -> bool {
    if pattern == "**" {
        return true;
    }
    if !pattern.contains('*') {
        return pattern == kind;
    }
    if kind.is_empty() {
        return false;
    }
    let pattern: Vec<&str> = pattern.split('.').collect();
    let kind: Vec<&str> = kind.split('.').collect();
    segments(&pattern, &kind)
}

fn segments(pattern: &[&str], kind: &[&str]) -> bool {
    match pattern.split_first() {
        None => kind.is_empty(),
        Some((&"**", rest)) => (0..=kind.len()).any(|skip| segments(rest, &kind[skip..])),
        Some((first, rest)) => match kind.split_first() {
            Some((segment, tail)) => segment_matches(first, segment) && segments(rest, tail),
            None => false,
        },
    }
}

/// One segment: `*` anywhere in it stands for any run of characters.
fn segment_matches(pattern: &str, segment: &str) -> bool {
    let mut parts = pattern.split('*');
    let Some(first) = parts.next() else {
        return pattern == segment;
    };
    let Some(mut rest) = segment.strip_prefix(first) else {
        return false;
    };
    let parts: Vec<&str> = parts.collect();
    let Some((last, middle)) = parts.split_last() else {
        return rest.is_empty();
    };
    for part in middle {
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    rest.len() >= last.len() && rest.ends_with(last)
}

#[cfg(test)]
mod tests {
    use super::matches;

    #[test]
    fn literal_patterns_match_exactly() {
        assert!(matches("lifecycle.cast.started", "lifecycle.cast.started"));
        assert!(!matches("lifecycle.cast", "lifecycle.cast.started"));
    }

    #[test]
    fn a_star_segment_is_one_segment() {
        assert!(matches("lifecycle.cast.*", "lifecycle.cast.failed"));
        assert!(!matches("lifecycle.*", "lifecycle.cast.failed"));
        assert!(matches("result.*", "result.pr_created"));
    }

    #[test]
    fn a_double_star_is_any_number_of_segments() {
        assert!(matches("**", ""));
        assert!(matches("lifecycle.**", "lifecycle.socket.completed"));
        assert!(matches("lifecycle.**", "lifecycle"));
        assert!(matches("lifecycle.**.failed", "lifecycle.cast.failed"));
        assert!(matches("lifecycle.**.failed", "lifecycle.a.b.failed"));
        assert!(!matches("lifecycle.**.failed", "lifecycle.cast.completed"));
    }

    #[test]
    fn a_star_inside_a_segment_stays_in_it() {
        assert!(matches("debug_*", "debug_trace"));
        assert!(!matches("debug_*", "debug_trace.more"));
        assert!(matches("a*c*e", "abcde"));
        assert!(!matches("a*c*e", "abcd"));
        assert!(matches("*ed", "failed"));
        assert!(!matches("ab*ba", "aba"));
    }
}
