//! `--otlp-endpoint URL`: after a command that drove casts, each cast it moved is sent as
//! OTLP/HTTP protobuf to `URL/v1/traces`. The trace is the read model of the log
//! (`castlog_projections::otlp`), so sending it again after a resume repeats the same span
//! ids and a collector sees one trace growing. Sending never fails the command: a collector
//! that is down or slow costs a warning on stderr and at most [`TIMEOUT`] per request.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use castlog_core::id::CastId;
use castlog_events::{Database, EventLog};
use castlog_projections::otlp::{self, TraceOptions};

use crate::output;

/// How long one request may take before it is given up.
const TIMEOUT: Duration = Duration::from_secs(5);

/// Spans per request, so a long cast goes out in bodies of a bounded size.
const BATCH: usize = 512;

/// Every cast's head seq before the command ran (nothing when there is no database yet).
pub fn heads_before(db: &Path) -> BTreeMap<CastId, u64> {
    Database::open_existing(db)
        .and_then(|log| log.casts())
        .map(|heads| heads.into_iter().map(|h| (h.cast, h.seq.get())).collect())
        .unwrap_or_default()
}

/// Sends the trace of every cast whose head moved since `before`; problems are warnings.
pub fn send_moved(
    db: &Path,
    before: &BTreeMap<CastId, u64>,
    endpoint: &str,
    options: TraceOptions,
) {
    // The endpoint may carry a token (`https://user:token@host`): what is printed is scrubbed.
    let redactor = castlog_replay::secrets::Redactor::from_env();
    let warn = |what: &dyn std::fmt::Display| {
        let line =
            format!("warning: --otlp-endpoint {endpoint}: {what} (the cast itself is unaffected)");
        output::to_stderr(format_args!("{}", redactor.scrub(&line)));
    };
    let Ok(log) = Database::open_existing(db) else {
        return;
    };
    let heads = match log.casts() {
        Ok(heads) => heads,
        Err(err) => return warn(&format_args!("cannot list the casts: {err}")),
    };
    let url = traces_url(endpoint);
    let client = match reqwest::blocking::Client::builder()
        .timeout(TIMEOUT)
        .build()
    {
        Ok(client) => client,
        Err(err) => return warn(&format_args!("cannot make an HTTP client: {err}")),
    };
    for head in heads {
        let moved = before.get(&head.cast) != Some(&head.seq.get());
        if !moved || castlog_replay::ledger::is_ledger_chain(&head.cast) {
            continue;
        }
        let trace = match otlp::trace_of(&log, &head.cast, options) {
            Ok(trace) => trace,
            Err(err) => {
                warn(&format_args!(
                    "cannot build the trace of cast {}: {err}",
                    head.cast
                ));
                continue;
            }
        };
        for batch in otlp::batches(trace, BATCH) {
            let sent = client
                .post(&url)
                .header(reqwest::header::CONTENT_TYPE, "application/x-protobuf")
                .body(otlp::to_protobuf(&batch))
                .send()
                .and_then(reqwest::blocking::Response::error_for_status);
            if let Err(err) = sent {
                warn(&format_args!(
                    "cannot send the trace of cast {} to {url}: {err}",
                    head.cast
                ));
                break;
            }
        }
    }
}

/// `URL/v1/traces`, unless URL names that path already.
fn traces_url(endpoint: &str) -> String {
    let base = endpoint.trim_end_matches('/');
    if base.ends_with("/v1/traces") {
        base.to_owned()
    } else {
        format!("{base}/v1/traces")
    }
}

#[cfg(test)]
mod tests {
    use super::traces_url;

    #[test]
    fn the_traces_path_is_added_once() {
        assert_eq!(traces_url("http://h:4318"), "http://h:4318/v1/traces");
        assert_eq!(traces_url("http://h:4318/"), "http://h:4318/v1/traces");
        assert_eq!(traces_url("http://h/v1/traces"), "http://h/v1/traces");
    }
}
