//! `castlog show CAST --follow`: the cast's events printed as they are appended, by whichever
//! machine appends them, until it completes, fails or is aborted.
//!
//! It reads the log again (the events after the last one printed) every [`POLL`] on SQLite;
//! on PostgreSQL it waits for an append's announcement (LISTEN, see `events/src/postgres/
//! schema/v2.sql`), at most [`POLL_LISTENING`], and reads then. A reader holds no lock and sees
//! every committed append, whoever made it.

use std::ops::ControlFlow;
use std::time::Duration;

use castlog_core::event::{DecodeError, Event};
use castlog_core::id::{CastId, Seq};
use castlog_events::{Database, Decoder, EventLog, Recorded};
use serde_json::Value;

use crate::error::CliError;

/// How often the log is read for new events.
const POLL: Duration = Duration::from_millis(200);

/// The longest wait for an announcement before the log is read anyway.
const POLL_LISTENING: Duration = Duration::from_secs(2);

/// The kinds that end a cast (a revive may start it again; following stops there).
const TERMINAL: &[&str] = &["cast_completed", "cast_failed", "cast_aborted"];

/// Prints every event of `cast` from its first, then each one appended, until a terminal
/// one; with `json`, each event as one JSON document on a line of its own.
pub(crate) fn follow(
    log: &Database,
    cast: &CastId,
    json: bool,
    as_json: fn(&Recorded, Result<&Event, &DecodeError>) -> Value,
) -> Result<(), CliError> {
    if !json {
        crate::say!("cast {cast} (following: Ctrl-C stops)");
    }
    let mut listener = log.listen_appends()?;
    let mut next = Seq::FIRST;
    let mut decoder = Decoder::new();
    loop {
        let mut ended = false;
        log.scan(cast, next, &mut |record| {
            let decoded = decoder.event_in(log, &record);
            if json {
                let line =
                    serde_json::to_string(&as_json(&record, decoded.as_ref())).unwrap_or_default();
                crate::say!("{line}");
            } else {
                super::inspect::say_event(&record, decoded.as_ref());
            }
            next = record.seq.next();
            ended = TERMINAL.contains(&record.kind.as_str());
            ControlFlow::Continue(())
        })?;
        if ended {
            return Ok(());
        }
        match listener.as_mut() {
            Some(listener) => {
                listener.wait(POLL_LISTENING)?;
            }
            None => std::thread::sleep(POLL),
        }
    }
}
