//! `export` and `import`.

use std::io::Write;
use std::path::Path;

use castlog_core::id::CastId;
use castlog_events::codec::{self, Format};
use serde_json::json;

use crate::args::{ExportArgs, FormatArg, ImportArgs};
use crate::error::CliError;
use crate::output;

/// `castlog export CAST -o FILE`.
pub fn export(db: &Path, args: &ExportArgs) -> Result<(), CliError> {
    if let Some(dir) = &args.artifacts {
        return super::projections::artifacts(db, &args.cast, dir, args.json);
    }
    let Some(output) = &args.output else {
        return Err(CliError::user("export needs -o FILE or --artifacts DIR"));
    };
    let log = super::open(db)?;
    let head = super::inspect::head_of(&log, &args.cast)?;
    let export = codec::collect(&log, &head.cast)?;
    let (format, name) = match args.format {
        FormatArg::Jsonl => (Format::Jsonl, "jsonl"),
        FormatArg::Bincode => (Format::Bincode, "bincode"),
    };
    let bytes = codec::encode(&export, format);
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
        std::io::stdout().lock().write_all(&bytes)?;
        return Ok(());
    }
    std::fs::write(output, &bytes)
        .map_err(|e| CliError::user(format!("cannot write {}: {e}", output.display())))?;
    let summary = json!({
        "cast": head.cast,
        "format": name,
        "file": output.display().to_string(),
        "events": export.events.len(),
        "blobs": export.blobs.len(),
        "bytes": bytes.len(),
    });
    if args.json {
        output::json(&summary)
    } else {
        crate::say!(
            "exported cast {} ({} events, {} blobs) to {} as {name}, {} bytes",
            head.cast,
            export.events.len(),
            export.blobs.len(),
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
    let export = codec::decode(&bytes).map_err(|e| {
        let err = CliError::from(e);
        CliError {
            message: format!("{}: {}", args.file.display(), err.message),
            ..err
        }
    })?;
    let log = super::open_or_create(db)?;
    codec::import(&log, &export)?;
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
