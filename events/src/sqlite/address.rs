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

/// The columns of the events table before schema v6, the only ones its upgrade copies.
const V5_COLUMNS: [&str; 8] = [
    "cast_id", "seq", "at_ms", "kind", "v", "payload", "prev", "hash",
];

/// Why the v6 upgrade stopped.
pub(crate) enum GuardError {
    Sql(rusqlite::Error),
    Refused(String),
}

impl From<rusqlite::Error> for GuardError {
    fn from(e: rusqlite::Error) -> Self {
        GuardError::Sql(e)
    }
}

/// Checks around the schema v6 upgrade (`schema/v6.sql`), which copies the events table row
/// by row: before it, that the table has only the columns castlog writes (another column
/// would be dropped, and one named `rowid` would hide the row ids the copy goes by); after it,
/// that every row is either in the new table or in `events_apart`.
pub(crate) struct UpgradeGuard {
    rows: i64,
}

impl UpgradeGuard {
    pub(crate) fn before(conn: &rusqlite::Connection) -> Result<Self, GuardError> {
        let mut stmt = conn.prepare("SELECT name FROM pragma_table_info('events')")?;
        let columns = stmt
            .query_map([], |r| r.get::<_, String>(0))?
            .collect::<Result<Vec<_>, _>>()?;
        let unknown: Vec<&str> = columns
            .iter()
            .map(String::as_str)
            // SQLite's column names are case-insensitive.
            .filter(|c| !V5_COLUMNS.iter().any(|k| k.eq_ignore_ascii_case(c)))
            .collect();
        if !unknown.is_empty() {
            return Err(GuardError::Refused(format!(
                "the events table has columns castlog does not write ({}), which the upgrade \
                 would drop",
                unknown.join(", ")
            )));
        }
        let rows = conn.query_row("SELECT count(*) FROM events", [], |r| r.get(0))?;
        Ok(Self { rows })
    }

    pub(crate) fn after(&self, conn: &rusqlite::Connection) -> Result<(), GuardError> {
        let rows: i64 = conn.query_row(
            "SELECT (SELECT count(*) FROM events) + (SELECT count(*) FROM events_apart)",
            [],
            |r| r.get(0),
        )?;
        if rows == self.rows {
            Ok(())
        } else {
            Err(GuardError::Refused(format!(
                "the events table held {} rows and its copy {rows}",
                self.rows
            )))
        }
    }
}

/// An event row that no read of its cast sees where its own fields say it belongs (see
/// [`SqliteLog::misplaced_events`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MisplacedEvent {
    /// The cast it is reported under, if the `casts` table lists it: for a row changed in
    /// place, the cast whose range holds it; for a row kept apart, the cast its key names.
    /// Otherwise it is reported under that range's key or its own.
    pub cast: Option<CastId>,
    /// The cast key its row names, as stored (SQL literal syntax).
    pub key: String,
    /// The seq it is reported at: where a changed row is read, or the seq a kept-apart row
    /// names when that seq has an address.
    pub seq: Option<Seq>,
    /// The seq column as stored (SQL literal syntax).
    pub seq_shown: String,
    /// Where it is.
    pub place: Place,
}

/// Where a [`MisplacedEvent`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
    /// In the events table at an address its cast key or seq column disagrees with: the row
    /// was changed in place.
    InPlace {
        /// The key of the id range holding it (None for an id no range has).
        range_key: Option<i64>,
    },
    /// In `events_apart`, kept by the schema v6 upgrade.
    Apart {
        /// Row id the event had before the schema v6 upgrade.
        old_row: i64,
        /// Whether a row of the log holds the address its key and seq name (it is then a
        /// second copy of that seq).
        shadowed: bool,
    },
}

/// The SQL value of the address the cast key and seq columns of the row aliased `t` give,
/// NULL when they have none.
fn address_of(t: &str) -> String {
    format!(
        "CASE WHEN typeof({t}.cast_id) = 'integer' AND {t}.cast_id BETWEEN 1 AND 2147483647
              AND typeof({t}.seq) = 'integer' AND {t}.seq BETWEEN 1 AND 4294967295
         THEN {t}.cast_id * 4294967296 + {t}.seq END"
    )
}

impl SqliteLog {
    /// Events in an id range no listed cast owns (the cast's row in `casts` was deleted, so no
    /// head names them), as `(key, first seq, events)` per key.
    pub fn orphaned_events(&self) -> Result<Vec<(i64, Seq, u64)>, LogError> {
        self.read_with(|conn| {
            let failed = |e: rusqlite::Error| map_err("looking for events of no cast", e);
            let mut stmt = conn
                .prepare(
                    "SELECT id >> 32 AS key, min(id & 4294967295), count(*) FROM events
                     WHERE id > 0 AND key NOT IN (SELECT id FROM casts)
                     GROUP BY key ORDER BY key",
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

    /// Event rows no read of a cast sees where their own fields put them: rows of the events
    /// table whose cast key or seq column was changed in place (of `casts` only, when given:
    /// the rows in their id ranges), then the rows the schema v6 upgrade kept apart (a second
    /// copy of a seq, a key or seq no event can have, a value of another type). Each part in
    /// row id order.
    pub fn misplaced_events(
        &self,
        casts: Option<&[CastId]>,
    ) -> Result<Vec<MisplacedEvent>, LogError> {
        self.read_with(|conn| {
            let failed = |e: rusqlite::Error| map_err("looking for misplaced events", e);
            let ranges: Vec<(i64, i64)> = match casts {
                None => vec![(i64::MIN, i64::MAX)],
                Some(casts) => {
                    let mut ranges = Vec::new();
                    for cast in casts {
                        if let Some(key) = Self::cast_key(conn, cast)? {
                            ranges.push((key << 32, (key << 32) | MAX_SEQ as i64));
                        }
                    }
                    ranges
                }
            };
            let mut out = Vec::new();
            let mut changed = conn
                .prepare_cached(&format!(
                    "SELECT e.id, c.cast_id, quote(e.cast_id), quote(e.seq)
                     FROM events e LEFT JOIN casts c ON e.id > 0 AND c.id = e.id >> 32
                     WHERE e.id BETWEEN ?1 AND ?2 AND e.id IS NOT ({}) ORDER BY e.id",
                    address_of("e")
                ))
                .map_err(failed)?;
            for (lo, hi) in ranges {
                let rows = changed
                    .query_map([lo, hi], |r| {
                        let id: i64 = r.get(0)?;
                        Ok(MisplacedEvent {
                            cast: r.get::<_, Option<String>>(1)?.map(CastId::new),
                            key: r.get(2)?,
                            seq: (id > 0).then_some(Seq((id & MAX_SEQ as i64) as u64)),
                            seq_shown: r.get(3)?,
                            place: Place::InPlace {
                                range_key: (id > 0).then_some(id >> 32),
                            },
                        })
                    })
                    .map_err(failed)?;
                for row in rows {
                    out.push(row.map_err(failed)?);
                }
            }
            // Files upgraded before `events_apart` was part of version 6 lack it (they had no
            // rows to keep apart then).
            let has_apart: bool = conn
                .query_row(
                    "SELECT EXISTS (SELECT 1 FROM sqlite_master
                                    WHERE type = 'table' AND name = 'events_apart')",
                    [],
                    |r| r.get(0),
                )
                .map_err(failed)?;
            if !has_apart {
                return Ok(out);
            }
            let mut apart = conn
                .prepare_cached(&format!(
                    "WITH rows AS (SELECT a.old_rowid, a.cast_id, a.seq, {} AS address
                                   FROM events_apart a)
                     SELECT r.old_rowid, c.cast_id, quote(r.cast_id), quote(r.seq), r.address,
                            EXISTS (SELECT 1 FROM events e WHERE e.id = r.address)
                     FROM rows r LEFT JOIN casts c ON c.id = r.cast_id
                     ORDER BY r.old_rowid",
                    address_of("a")
                ))
                .map_err(failed)?;
            let rows = apart
                .query_map([], |r| {
                    let address: Option<i64> = r.get(4)?;
                    Ok(MisplacedEvent {
                        cast: r.get::<_, Option<String>>(1)?.map(CastId::new),
                        key: r.get(2)?,
                        seq: address.map(|a| Seq((a & MAX_SEQ as i64) as u64)),
                        seq_shown: r.get(3)?,
                        place: Place::Apart {
                            old_row: r.get::<_, Option<i64>>(0)?.unwrap_or_default(),
                            shadowed: r.get(5)?,
                        },
                    })
                })
                .map_err(failed)?;
            for row in rows {
                let row = row.map_err(failed)?;
                let wanted =
                    casts.is_none_or(|casts| row.cast.as_ref().is_some_and(|c| casts.contains(c)));
                if wanted {
                    out.push(row);
                }
            }
            Ok(out)
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
