//! Where an event row is: its row id is its address (the format is written in
//! `schema/v6.sql`).
//!
//! `id = key * 2^32 + seq`, where `key` is the cast's row id in `casts` and `seq` its 1-based
//! seq. A cast's events are then one range of ids in seq order (read by a range scan of the
//! table itself, with no index beside it), a cast being appended to grows at the end of its
//! range, and a seq is taken at most once: a stale writer's insert hits the row id already
//! there, which is the optimistic-concurrency guard a `UNIQUE(cast_id, seq)` index gave
//! before version 6.

use castlog_core::id::Seq;

/// The last seq a cast can reach.
pub const MAX_SEQ: u64 = (1 << 32) - 1;

/// Cast keys are below this, so that every id fits in a positive `i64`.
const KEY_LIMIT: i64 = 1 << 31;

/// The row id of the event at `seq` of the cast whose key is `key`; None when `seq` is 0 or
/// past [`MAX_SEQ`], or `key` is outside `1..2^31`.
pub(crate) fn event_row_id(key: i64, seq: Seq) -> Option<i64> {
    let seq = i64::try_from(seq.get())
        .ok()
        .filter(|s| (1..=MAX_SEQ as i64).contains(s))?;
    (1..KEY_LIMIT).contains(&key).then_some((key << 32) | seq)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_order_by_cast_then_seq_and_stay_inside_a_cast_range() {
        let id = |key, seq| event_row_id(key, Seq(seq)).unwrap();
        assert_eq!(id(1, 1), (1 << 32) + 1);
        assert_eq!(id(3, 7), 3 * 4_294_967_296 + 7);
        assert!(id(1, MAX_SEQ) < id(2, 1));
        assert!(id(2, 1) < id(2, 2));
        assert_eq!(id(KEY_LIMIT - 1, MAX_SEQ), i64::MAX);
    }

    #[test]
    fn seqs_and_keys_outside_the_format_have_no_id() {
        assert_eq!(event_row_id(1, Seq(0)), None);
        assert_eq!(event_row_id(1, Seq(MAX_SEQ + 1)), None);
        assert_eq!(event_row_id(1, Seq(u64::MAX)), None);
        assert_eq!(event_row_id(0, Seq(1)), None);
        assert_eq!(event_row_id(-1, Seq(1)), None);
        assert_eq!(event_row_id(KEY_LIMIT, Seq(1)), None);
    }
}
