//! Reading the events of a few kinds across casts ([`EventLog::scan_kinds`]) from the partial
//! index of the claim kinds (`schema/v7.sql`).
//!
//! SQLite uses a partial index only for a query whose WHERE clause holds the index's own
//! condition, so the query repeats `kind IN (...)` as the index has it, built from the same
//! list ([`castlog_core::claims::EVENT_KINDS`]); a test here pins the script's list to it and
//! checks that the query is answered from the index. Without the index the query reads the
//! whole table and gives the same rows, in the same order.

use std::ops::ControlFlow;
use std::sync::LazyLock;

use castlog_core::claims::EVENT_KINDS;
use castlog_core::id::{CastId, Seq};
use rusqlite::{Connection, params};

use super::address::{MAX_SEQ, event_row_id};
use super::{SqliteLog, map_err, rows};
use crate::log::{LogError, scan_kinds_by_cast};
use crate::record::Recorded;

/// The condition of the partial index `events_claims`, as its script writes it.
fn indexed_condition() -> String {
    let quoted: Vec<String> = EVENT_KINDS.iter().map(|k| format!("'{k}'")).collect();
    format!("kind IN ({})", quoted.join(", "))
}

/// The events of the indexed kinds with an address in `?1..=?2`, each with its cast's name,
/// in address order, that is cast by cast in the order of `casts` and in seq order. A row
/// under a key `casts` does not list (an orphan, named by `verify`) is left out, as a scan of
/// the listed casts leaves it out.
static QUERY: LazyLock<String> = LazyLock::new(|| {
    format!(
        "SELECT {}, c.cast_id FROM events e JOIN casts c ON c.id = e.id >> 32
         WHERE e.{} AND e.id BETWEEN ?1 AND ?2 ORDER BY e.id",
        rows::event_columns("e"),
        indexed_condition()
    )
});

/// The column of [`QUERY`] that holds the cast's name (after [`rows::event_columns`]).
const CAST_COLUMN: usize = rows::EVENT_COLUMN_COUNT;

impl SqliteLog {
    pub(super) fn scan_indexed_kinds(
        &self,
        kinds: &[&str],
        cast: Option<&CastId>,
        visit: &mut dyn FnMut(Recorded) -> ControlFlow<()>,
    ) -> Result<(), LogError> {
        if !kinds.iter().all(|k| EVENT_KINDS.contains(k)) {
            return scan_kinds_by_cast(self, kinds, cast, visit);
        }
        self.read_with(|conn| {
            let range = match cast {
                Some(cast) => {
                    let key = Self::cast_key(conn, cast)?
                        .ok_or_else(|| LogError::UnknownCast { cast: cast.clone() })?;
                    (
                        event_row_id(key, Seq::FIRST),
                        event_row_id(key, Seq(MAX_SEQ)),
                    )
                }
                None => (event_row_id(1, Seq::FIRST), Some(i64::MAX)),
            };
            let (Some(first), Some(last)) = range else {
                return Ok(());
            };
            indexed_rows(conn, kinds, first, last, visit)
        })
    }
}

fn indexed_rows(
    conn: &Connection,
    kinds: &[&str],
    first: i64,
    last: i64,
    visit: &mut dyn FnMut(Recorded) -> ControlFlow<()>,
) -> Result<(), LogError> {
    let context = "reading the claim events";
    let mut stmt = conn
        .prepare_cached(&QUERY)
        .map_err(|e| map_err(context, e))?;
    let mut found = stmt
        .query(params![first, last])
        .map_err(|e| map_err(context, e))?;
    // Consecutive rows mostly belong to one cast: its name is decoded once.
    let mut cast: Option<CastId> = None;
    let mut links = rows::Links::default();
    while let Some(row) = found.next().map_err(|e| map_err(context, e))? {
        let name = row
            .get_ref(CAST_COLUMN)
            .and_then(|v| v.as_str().map_err(Into::into))
            .map_err(|e| map_err(context, e))?;
        let current = match cast.take() {
            Some(c) if c.as_str() == name => c,
            _ => CastId::new(name),
        };
        let record =
            rows::event(conn, row, &current, &mut links).map_err(|bad| bad.into_error(&current))?;
        cast = Some(current);
        if !kinds.contains(&record.kind.as_str()) {
            continue;
        }
        if visit(record).is_break() {
            break;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The script's list is the one the code asks for: an index of other kinds would give
    /// the ledger too few rows, or be passed over by the query.
    #[test]
    fn the_index_holds_exactly_the_claim_kinds() {
        let script = include_str!("schema/v7.sql");
        let index = script
            .lines()
            .find(|l| l.starts_with("CREATE INDEX events_claims"))
            .expect("v7.sql creates events_claims");
        assert_eq!(
            index,
            format!(
                "CREATE INDEX events_claims ON events(id) WHERE {};",
                indexed_condition()
            )
        );
    }

    /// The query is answered from the index, for every cast and for one, without sorting.
    #[test]
    fn the_query_reads_the_index_not_the_table() {
        let conn = Connection::open_in_memory().unwrap();
        for script in super::super::open::MIGRATIONS {
            conn.execute_batch(script).unwrap();
        }
        let plan: Vec<String> = conn
            .prepare(&format!("EXPLAIN QUERY PLAN {}", *QUERY))
            .unwrap()
            .query_map(params![1, 2], |r| r.get::<_, String>(3))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert!(
            plan.iter()
                .any(|step| step.contains("SEARCH e USING INDEX events_claims")),
            "{plan:?}"
        );
        assert!(
            !plan.iter().any(|step| step.contains("TEMP B-TREE")),
            "{plan:?}"
        );
    }
}
