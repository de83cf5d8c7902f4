//! Where an event row is: its row id is its address (the format is written in
//! `schema/v6.sql`).
//!
//! `id = key * 2^32 + seq`, where `key` is the cast's row id in `casts` and `seq` its 1-based
//! seq. A cast's events are then one range of ids in seq order (read by a range scan of the
//! table itself, with no index beside it), a cast being appended to grows at the end of its
//! range, and a seq is taken at most once: a stale writer's insert hits the row id already
//! there, which is the optimistic-concurrency guard a `UNIQUE(cast_id, seq)` index gave
//! before version 6.

use castlog_core::id::{CastId, Seq};

use super::{SqliteLog, map_err};
use crate::log::LogError;

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

/// An event row that is not at its address (see [`SqliteLog::misplaced_events`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MisplacedEvent {
    /// Its row id.
    pub row: i64,
    /// The cast whose key it names, if the `casts` table lists one.
    pub cast: Option<CastId>,
    /// The cast key it names, as stored (SQL literal syntax).
    pub key: String,
    /// Its seq, when the row names a cast key and seq that have an address.
    pub seq: Option<Seq>,
    /// The seq column as stored (SQL literal syntax).
    pub seq_shown: String,
    /// Whether another row is at its address (this one is then a second copy of that seq).
    pub shadowed: bool,
}

impl SqliteLog {
    /// Events stored under a cast key the `casts` table does not list (its row was deleted, so
    /// no head names them), as `(key, first seq, events)` per key.
    pub fn orphaned_events(&self) -> Result<Vec<(i64, Seq, u64)>, LogError> {
        self.read_with(|conn| {
            let failed = |e: rusqlite::Error| map_err("looking for events of no cast", &e);
            let mut stmt = conn
                .prepare(
                    "SELECT cast_id, min(seq), count(*) FROM events
                     WHERE id > 0 AND cast_id NOT IN (SELECT id FROM casts)
                     GROUP BY cast_id ORDER BY cast_id",
                )
                .map_err(failed)?;
            let rows = stmt
                .query_map([], |r| {
                    Ok((
                        r.get::<_, i64>(0)?,
                        r.get::<_, i64>(1)?,
                        r.get::<_, i64>(2)?,
                    ))
                })
                .map_err(failed)?;
            rows.map(|row| {
                let (key, first, count) = row.map_err(failed)?;
                Ok((key, Seq(first.max(0) as u64), count.max(0) as u64))
            })
            .collect()
        })
    }

    /// Event rows whose id is not the address their cast key and seq give: rows the schema v6
    /// upgrade kept apart (a second copy of a seq, or a key or seq no cast can have) and rows
    /// changed in place. No read of a cast sees them. In row id order.
    pub fn misplaced_events(&self) -> Result<Vec<MisplacedEvent>, LogError> {
        self.read_with(|conn| {
            let failed = |e: rusqlite::Error| map_err("looking for misplaced events", &e);
            let mut stmt = conn
                .prepare(
                    "WITH rows AS (
                         SELECT id, cast_id AS key, seq,
                             CASE WHEN typeof(cast_id) = 'integer'
                                       AND cast_id BETWEEN 1 AND 2147483647
                                       AND typeof(seq) = 'integer'
                                       AND seq BETWEEN 1 AND 4294967295
                                  THEN cast_id * 4294967296 + seq END AS address
                         FROM events)
                     SELECT r.id, c.cast_id, quote(r.key), quote(r.seq), r.address,
                            EXISTS (SELECT 1 FROM events a WHERE a.id = r.address)
                     FROM rows r LEFT JOIN casts c ON c.id = r.key
                     WHERE r.id IS NOT r.address ORDER BY r.id",
                )
                .map_err(failed)?;
            let rows = stmt
                .query_map([], |r| {
                    let address: Option<i64> = r.get(4)?;
                    Ok(MisplacedEvent {
                        row: r.get(0)?,
                        cast: r.get::<_, Option<String>>(1)?.map(CastId::new),
                        key: r.get(2)?,
                        seq: address.map(|a| Seq((a & MAX_SEQ as i64) as u64)),
                        seq_shown: r.get(3)?,
                        shadowed: r.get(5)?,
                    })
                })
                .map_err(failed)?;
            rows.map(|row| row.map_err(failed)).collect()
        })
    }
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
