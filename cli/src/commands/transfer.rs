//! `export` and `import`.

use std::io::{BufWriter, ErrorKind, Write};
use std::path::Path;

use castlog_core::id::CastId;
use castlog_events::codec::{self, CodecError, Format};
use castlog_projections::otlp;
use serde_json::json;

use crate::args::{ExportArgs, FormatArg, ImportArgs};
use crate::error::CliError;
use crate::globals::Globals;
use crate::output;

/// `castlog export CAST -o FILE`. The export is written as the cast is read, one event or
/// blob at a time.
pub fn export(db: &Path, args: &ExportArgs, globals: &Globals) -> Result<(), CliError> {
    if let Some(dir) = &args.artifacts {
        return super::projections::artifacts(db, &args.cast, dir, args.json);
    }
    let Some(output) = &args.output else {
        return Err(CliError::user("export needs -o FILE or --artifacts DIR"));
    };
    let log = super::open(db)?;
    let head = super::inspect::head_of(&log, &args.cast)?;
    let (format, name) = match args.format {
        FormatArg::Jsonl => (Format::Jsonl, "jsonl"),
        FormatArg::Bincode => (Format::Bincode, "bincode"),
        FormatArg::OtlpJson => return export_otlp(&log, &head.cast, output, args, globals),
    };
    let to_stdout = output.as_os_str() == "-";
    if to_stdout {
        if matches!(format, Format::Bincode) {
            return Err(CliError::user(
                "bincode is binary: write it to a file with -o FILE",
            ));
        }
        if args.json {
            return Err(CliError::user(
                "--json and -o - both want stdout: write the export to a file",
            ));
        }
        let mut out = BufWriter::new(std::io::stdout().lock());
        return match codec::write_export(&log, &head.cast, format, &mut out)
            .and_then(|_| out.flush().map_err(CodecError::from))
        {
            // A reader that went away early (`| head`) ends the export quietly.
            Err(CodecError::Write { source }) if source.kind() == ErrorKind::BrokenPipe => Ok(()),
            other => other.map(drop).map_err(CliError::from),
        };
    }
    let cannot_write = |e: &dyn std::fmt::Display| {
        CliError::user(format!("cannot write {}: {e}", output.display()))
    };
    let file = std::fs::File::create(output).map_err(|e| cannot_write(&e))?;
    let mut out = BufWriter::new(file);
    let written = codec::write_export(&log, &head.cast, format, &mut out)
        .and_then(|written| Ok(out.flush().map(|()| written)?));
    let written = match written {
        Ok(written) => written,
        Err(err) => {
            drop(out);
            // Half an export is no export: a file made for it goes (a device stays).
            if std::fs::metadata(output).is_ok_and(|m| m.is_file()) {
                let _ = std::fs::remove_file(output);
            }
            return Err(match err {
                CodecError::Write { source } => cannot_write(&source),
                other => other.into(),
            });
        }
    };
    let summary = json!({
        "cast": head.cast,
        "format": name,
        "file": output.display().to_string(),
        "events": written.events,
        "blobs": written.blobs,
        "bytes": written.bytes,
    });
    if args.json {
        output::json(&summary)
    } else {
        crate::say!(
            "exported cast {} ({} events, {} blobs) to {} as {name}, {} bytes",
            head.cast,
            written.events,
            written.blobs,
            output.display(),
            written.bytes
        );
        Ok(())
    }
}

/// `export --format otlp-json`: the cast's trace, built whole (a read model of the log).
fn export_otlp(
    log: &castlog_events::Database,
    cast: &CastId,
    output: &Path,
    args: &ExportArgs,
    globals: &Globals,
) -> Result<(), CliError> {
    let options = otlp::TraceOptions {
        content: globals.otel_content,
    };
    let trace = otlp::trace_of(log, cast, options)?;
    let spans: usize = trace
        .resource_spans
        .iter()
        .flat_map(|r| &r.scope_spans)
        .map(|s| s.spans.len())
        .sum();
    let bytes = otlp::to_json(&trace);
    if output.as_os_str() == "-" {
        if args.json {
            return Err(CliError::user(
                "--json and -o - both want stdout: write the export to a file",
            ));
        }
        let mut out = std::io::stdout().lock();
        return match out.write_all(&bytes).and_then(|()| out.flush()) {
            Err(e) if e.kind() == ErrorKind::BrokenPipe => Ok(()),
            other => other.map_err(CliError::from),
        };
    }
    std::fs::write(output, &bytes)
        .map_err(|e| CliError::user(format!("cannot write {}: {e}", output.display())))?;
    if args.json {
        output::json(&json!({
            "cast": cast,
            "format": "otlp-json",
            "file": output.display().to_string(),
            "spans": spans,
            "bytes": bytes.len(),
        }))
    } else {
        crate::say!(
            "exported cast {cast} ({spans} spans) to {} as otlp-json, {} bytes",
            output.display(),
            bytes.len()
        );
        Ok(())
    }
}

/// `castlog import FILE`.
pub fn import(db: &Path, args: &ImportArgs) -> Result<(), CliError> {
    let bytes = std::fs::read(&args.file)
        .map_err(|e| CliError::user(format!("cannot read {}: {e}", args.file.display())))?;
    let export =
        codec::decode(&bytes).map_err(|e| CliError::from(e).context(args.file.display()))?;
    let log = super::open_or_create(db)?;
    codec::import_in(&log, &export, super::CONTEXTS)?;
    let cast: &CastId = &export.head.cast;
    if args.json {
        output::json(&json!({
            "cast": cast,
            "events": export.events.len(),
            "blobs": export.blobs.len(),
            "head": export.head.seq,
            "hash": export.head.hash,
        }))
    } else {
        crate::say!(
            "imported cast {cast} ({} events, {} blobs), head {} {}",
            export.events.len(),
            export.blobs.len(),
            export.head.seq,
            export.head.hash.short()
        );
        Ok(())
    }
}
