//! Printing: one JSON document with `--json`, text otherwise.
//!
//! A document is written to stdout while it is serialized, never rendered whole first, so a
//! document with a part read from the log as it is written ([`Scanned`] under
//! [`WithField`]) takes memory for one event at a time, whatever the cast's length.

use std::cell::RefCell;
use std::io::Write;
use std::ops::ControlFlow;

use castlog_core::event::{DecodeError, Event};
use castlog_core::id::{CastId, Seq};
use castlog_events::{Decoder, EventLog, LogError, Recorded};
use serde::ser::{Error as _, SerializeMap, SerializeSeq};
use serde::{Serialize, Serializer};
use serde_json::{Map, Value};

use crate::error::CliError;

/// Whether this process printed its JSON document already (or began to: a document streamed
/// from the log may end early). Stdout is the process's, so this is too: a command that
/// printed its document and then fails (a `verify` report with problems) must not print a
/// second one.
static PRINTED_JSON: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Whether [`json`] printed a document.
pub fn printed_json() -> bool {
    PRINTED_JSON.load(std::sync::atomic::Ordering::Relaxed)
}

/// Prints `err` as the command's one JSON document: `{"error": {"code", "kind", "message"}}`,
/// `kind` one of `user`, `internal`, `integrity` (the exit code's meaning).
pub fn error_json(err: &CliError) {
    let document = serde_json::json!({
        "error": {
            "code": err.code,
            "kind": crate::error::kind_of(err.code),
            "message": err.message,
        }
    });
    crate::say!(
        "{}",
        serde_json::to_string_pretty(&document).unwrap_or_default()
    );
}

/// Prints `value` as one JSON document on stdout (pretty, then a newline).
pub fn json(value: &impl Serialize) -> Result<(), CliError> {
    PRINTED_JSON.store(true, std::sync::atomic::Ordering::Relaxed);
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    let written = match serde_json::to_writer_pretty(&mut out, value) {
        Err(e) if !e.is_io() => {
            return Err(CliError::internal(format!(
                "cannot render JSON output: {e}"
            )));
        }
        Err(e) => Err(std::io::Error::from(e)),
        Ok(()) => out.write_all(b"\n").and_then(|()| out.flush()),
    };
    if let Err(err) = written {
        stdout_failed(&err);
    }
    Ok(())
}

/// A JSON array of one item per event of a cast, made by `item` while the log is scanned:
/// the events are never all in memory. A read error ends the document early; printing it
/// then fails, and [`Scanned::failure`] holds the log's error.
pub struct Scanned<'a, F> {
    log: &'a dyn EventLog,
    cast: &'a CastId,
    item: F,
    failure: RefCell<Option<LogError>>,
}

impl<'a, F> Scanned<'a, F> {
    /// The events of `cast` from its first, each as `item` makes it.
    pub fn new(log: &'a dyn EventLog, cast: &'a CastId, item: F) -> Self {
        Self {
            log,
            cast,
            item,
            failure: RefCell::new(None),
        }
    }

    /// The log's error, if reading the cast failed while the array was written.
    pub fn failure(&self) -> Option<LogError> {
        self.failure.borrow_mut().take()
    }
}

impl<F, T> Serialize for Scanned<'_, F>
where
    F: Fn(&Recorded, Result<&Event, &DecodeError>) -> T,
    T: Serialize,
{
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        // No length: serde_json writes an empty array and a known-empty one alike (`[]`).
        let mut seq = serializer.serialize_seq(None)?;
        let mut failed = None;
        let mut decoder = Decoder::new();
        let scanned = self.log.scan(self.cast, Seq::FIRST, &mut |record| {
            let decoded = decoder.event_in(self.log, &record);
            match seq.serialize_element(&(self.item)(&record, decoded.as_ref())) {
                Ok(()) => ControlFlow::Continue(()),
                Err(e) => {
                    failed = Some(e);
                    ControlFlow::Break(())
                }
            }
        });
        if let Some(e) = failed {
            return Err(e);
        }
        if let Err(e) = scanned {
            let message = e.to_string();
            *self.failure.borrow_mut() = Some(e);
            return Err(S::Error::custom(message));
        }
        seq.end()
    }
}

/// A JSON array of an iterator's items, each made as it is written. Written once: a second
/// serialization finds it empty.
pub struct Items<I>(RefCell<Option<I>>);

impl<I> Items<I> {
    /// The items `iter` yields.
    pub fn new(iter: I) -> Self {
        Self(RefCell::new(Some(iter)))
    }
}

impl<I> Serialize for Items<I>
where
    I: Iterator,
    I::Item: Serialize,
{
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut seq = serializer.serialize_seq(None)?;
        for item in self.0.borrow_mut().take().into_iter().flatten() {
            seq.serialize_element(&item)?;
        }
        seq.end()
    }
}

/// A JSON object: `fields`, with `value` under `key`, in the order `fields` puts `key`
/// (`json!` objects sort their keys), so it prints exactly as the object built whole would.
pub struct WithField<'a, T> {
    fields: Map<String, Value>,
    key: &'a str,
    value: &'a T,
}

impl<'a, T> WithField<'a, T> {
    /// `fields` (an object; anything else is taken as an empty one) with `value` at `key`.
    pub fn new(fields: Value, key: &'a str, value: &'a T) -> Self {
        let mut fields = match fields {
            Value::Object(map) => map,
            _ => Map::new(),
        };
        fields.insert(key.to_owned(), Value::Null);
        Self { fields, key, value }
    }
}

impl<T: Serialize> Serialize for WithField<'_, T> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.fields.len()))?;
        for (key, value) in &self.fields {
            if key == self.key {
                map.serialize_entry(key, self.value)?;
            } else {
                map.serialize_entry(key, value)?;
            }
        }
        map.end()
    }
}

/// Formats milliseconds since the epoch as an RFC 3339 UTC timestamp with milliseconds.
pub fn timestamp(at_ms: u64) -> String {
    let secs = at_ms / 1000;
    let ms = at_ms % 1000;
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let (y, m, d) = castlog_core::calendar::civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{ms:03}Z",
        rem / 3600,
        (rem / 60) % 60,
        rem % 60
    )
}

/// Writes one line to stdout. When stdout is closed early (`castlog show X | head`), castlog
/// stops quietly like any Unix filter instead of panicking.
pub fn write_line(args: std::fmt::Arguments<'_>) {
    let mut stdout = std::io::stdout().lock();
    if let Err(err) = stdout
        .write_fmt(args)
        .and_then(|()| stdout.write_all(b"\n"))
    {
        stdout_failed(&err);
    }
}

/// Ends the process after a failed write to stdout: quietly if the reader went away.
fn stdout_failed(err: &std::io::Error) -> ! {
    if err.kind() == std::io::ErrorKind::BrokenPipe {
        std::process::exit(0);
    }
    let _ = writeln!(std::io::stderr(), "castlog: cannot write to stdout: {err}");
    std::process::exit(i32::from(crate::error::INTERNAL));
}

/// Writes `castlog: <line>` to stderr (a note or a warning beside the command's output); a
/// closed stderr leaves nobody to tell.
pub fn to_stderr(line: std::fmt::Arguments<'_>) {
    let _ = writeln!(std::io::stderr(), "castlog: {line}");
}

/// `println!` that survives a closed stdout.
#[macro_export]
macro_rules! say {
    ($($arg:tt)*) => { $crate::output::write_line(format_args!($($arg)*)) };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_are_utc() {
        assert_eq!(timestamp(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(timestamp(1_795_991_101_123), "2026-11-29T22:25:01.123Z");
        assert_eq!(timestamp(951_782_400_000), "2000-02-29T00:00:00.000Z");
    }
}
