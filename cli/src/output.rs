//! Printing: one JSON document with `--json`, text otherwise.

use serde::Serialize;

use crate::error::CliError;

/// Whether this process printed its JSON document already. Stdout is the process's, so this
/// is too: a command that printed its document and then fails (a `verify` report with
/// problems) must not print a second one.
static PRINTED_JSON: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Prints `value` as one JSON document on stdout.
pub fn json(value: &impl Serialize) -> Result<(), CliError> {
    let text = serde_json::to_string_pretty(value)
        .map_err(|e| CliError::internal(format!("cannot render JSON output: {e}")))?;
    PRINTED_JSON.store(true, std::sync::atomic::Ordering::Relaxed);
    crate::say!("{text}");
    Ok(())
}

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
    use std::io::Write;
    let mut stdout = std::io::stdout().lock();
    if let Err(err) = stdout
        .write_fmt(args)
        .and_then(|()| stdout.write_all(b"\n"))
    {
        if err.kind() == std::io::ErrorKind::BrokenPipe {
            std::process::exit(0);
        }
        let _ = writeln!(std::io::stderr(), "castlog: cannot write to stdout: {err}");
        std::process::exit(i32::from(crate::error::INTERNAL));
    }
}

/// Writes `castlog: <line>` to stderr (a note or a warning beside the command's output); a
/// closed stderr leaves nobody to tell.
pub fn to_stderr(line: std::fmt::Arguments<'_>) {
    use std::io::Write;
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
