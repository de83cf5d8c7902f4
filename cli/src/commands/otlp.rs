//! `--otlp-endpoint URL`: the casts a command moves are sent as OTLP/HTTP protobuf to
//! `URL/v1/traces`. A cast the command drives is sent as it proceeds ([`Stream`]): a thread
//! of its own folds each event once durable and posts the spans no later event can change,
//! batched (whatever came in while a request was out goes in the next, at most [`BATCH`]
//! spans each); the cast never waits for it. The root span and the spans still open go when
//! the drive ends. Every other cast the command moved is sent whole at the end
//! ([`send_moved`]). The trace is the read model of the log (`castlog_projections::otlp`),
//! so sending it again after a resume repeats the same span ids and a collector sees one
//! trace growing. Sending never fails the command: a collector that is down or slow costs a
//! warning on stderr and at most [`TIMEOUT`] per request.
//!
//! `opentelemetry-otlp` is not used. Its `SpanExporter::export(&self, Vec<SpanData>)`
//! (with `opentelemetry_sdk` 0.33) would take spans built by hand (`SpanData`'s fields are
//! public, so the log's ids and times could be kept), but castlog's trace already is the
//! official OTLP messages (`opentelemetry-proto`, the types that exporter encodes into):
//! using it would turn each message into `SpanData` and back for the same bytes, add
//! `opentelemetry`, `opentelemetry_sdk` and `opentelemetry-otlp`, and call an async
//! `export` from a thread that has no executor, for one POST of bytes castlog encodes
//! already; batching the SDK's way (`BatchSpanProcessor`) would also send a span once, when
//! it ends, where a resumed cast must send its spans again with the same ids.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use castlog_core::id::{CastId, Seq};
use castlog_events::{Database, EventLog, Recorded};
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

/// The casts whose trace a [`Stream`] sent (or gave up sending, with a warning).
pub type Streamed = Arc<Mutex<BTreeSet<CastId>>>;

/// Prints a warning about sending to `endpoint`; the endpoint may carry a token
/// (`https://user:token@host`), so what is printed is scrubbed.
fn warn(endpoint: &str, what: &dyn std::fmt::Display) {
    let redactor = castlog_replay::secrets::Redactor::from_env();
    let line =
        format!("warning: --otlp-endpoint {endpoint}: {what} (the cast itself is unaffected)");
    output::to_stderr(format_args!("{}", redactor.scrub(&line)));
}

fn client() -> Result<reqwest::blocking::Client, reqwest::Error> {
    reqwest::blocking::Client::builder()
        .timeout(TIMEOUT)
        .build()
}

/// Posts `request`'s spans in requests of at most [`BATCH`].
fn post(
    client: &reqwest::blocking::Client,
    url: &str,
    request: otlp::ExportTraceServiceRequest,
) -> Result<(), reqwest::Error> {
    for batch in otlp::batches(request, BATCH) {
        client
            .post(url)
            .header(reqwest::header::CONTENT_TYPE, "application/x-protobuf")
            .body(otlp::to_protobuf(&batch))
            .send()
            .and_then(reqwest::blocking::Response::error_for_status)?;
    }
    Ok(())
}

/// The trace of one driven cast, sent as it proceeds by a thread of its own. Dropping it ends
/// the drive's part: the thread sends what is left and is waited for.
#[derive(Debug)]
pub struct Stream {
    records: Option<mpsc::Sender<Recorded>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Stream {
    /// A stream of `cast` of the database `db`, when `--otlp-endpoint` is given.
    pub fn of(db: &Path, cast: &CastId, globals: &crate::globals::Globals) -> Option<Stream> {
        let endpoint = globals.otlp_endpoint.clone()?;
        let options = TraceOptions {
            content: globals.otel_content,
        };
        let (records, received) = mpsc::channel();
        let (db, cast, streamed) = (db.to_path_buf(), cast.clone(), globals.streamed.clone());
        let thread = std::thread::Builder::new()
            .name("castlog-otlp".into())
            .spawn(move || send_as_it_grows(&db, &cast, &endpoint, options, &received, &streamed))
            .ok()?;
        Some(Stream {
            records: Some(records),
            thread: Some(thread),
        })
    }

    /// Hands on a durable record; never waits (the channel is unbounded).
    pub fn recorded(&self, record: &Recorded) {
        if let Some(records) = &self.records {
            let _ = records.send(record.clone());
        }
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        drop(self.records.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// The stream's thread: folds every record it is handed (and the records before the first,
/// from the log), posts what settles, and at the end what is left.
fn send_as_it_grows(
    db: &Path,
    cast: &CastId,
    endpoint: &str,
    options: TraceOptions,
    received: &mpsc::Receiver<Recorded>,
    streamed: &Streamed,
) {
    let done = || {
        if let Ok(mut set) = streamed.lock() {
            set.insert(cast.clone());
        }
    };
    let url = traces_url(endpoint);
    let (Ok(log), Ok(client)) = (Database::open_existing(db), client()) else {
        // Nothing sent: the end of the command sends the cast whole.
        return;
    };
    let Ok(policy) = otlp::content_policy(&log, cast, options) else {
        return;
    };
    let mut trace = otlp::CastTrace::new(cast.clone(), options);
    let mut next = Seq::FIRST;
    let mut failed = false;
    let fold = |trace: &mut otlp::CastTrace, record: &Recorded, next: &mut Seq| {
        if record.seq < *next {
            return Ok(());
        }
        if record.seq > *next {
            // The records before a durable one are durable too.
            let earlier = log.read(cast, *next, Some(Seq(record.seq.get() - 1)))?;
            for r in &earlier {
                trace.observe_record(&log, policy.as_deref(), r)?;
            }
        }
        trace.observe_record(&log, policy.as_deref(), record)?;
        *next = record.seq.next();
        Ok::<(), otlp::OtlpError>(())
    };
    while let Ok(first) = received.recv() {
        // Everything that came in meanwhile goes in the same requests.
        let mut folded = fold(&mut trace, &first, &mut next);
        for record in received.try_iter() {
            folded = folded.and_then(|()| fold(&mut trace, &record, &mut next));
        }
        if let Err(err) = folded {
            warn(
                endpoint,
                &format_args!("cannot build the trace of cast {cast}: {err}"),
            );
            return done();
        }
        let settled = trace.settled();
        if failed || settled.is_empty() {
            continue;
        }
        if let Err(err) = post(&client, &url, otlp::request(settled)) {
            warn(
                endpoint,
                &format_args!("cannot send the trace of cast {cast} to {url}: {err}"),
            );
            failed = true;
        }
    }
    if !failed && let Err(err) = post(&client, &url, trace.finish_rest()) {
        warn(
            endpoint,
            &format_args!("cannot send the trace of cast {cast} to {url}: {err}"),
        );
    }
    done();
}

/// Sends the trace of every cast whose head moved since `before` and that no [`Stream`] sent;
/// problems are warnings.
pub fn send_moved(
    db: &Path,
    before: &BTreeMap<CastId, u64>,
    endpoint: &str,
    options: TraceOptions,
    streamed: &Streamed,
) {
    let streamed = streamed.lock().map(|s| s.clone()).unwrap_or_default();
    let warn = |what: &dyn std::fmt::Display| warn(endpoint, what);
    let Ok(log) = Database::open_existing(db) else {
        return;
    };
    let heads = match log.casts() {
        Ok(heads) => heads,
        Err(err) => return warn(&format_args!("cannot list the casts: {err}")),
    };
    let url = traces_url(endpoint);
    let client = match client() {
        Ok(client) => client,
        Err(err) => return warn(&format_args!("cannot make an HTTP client: {err}")),
    };
    for head in heads {
        let moved = before.get(&head.cast) != Some(&head.seq.get());
        if !moved
            || streamed.contains(&head.cast)
            || head.kind == castlog_events::StreamKind::ClaimsLedger
        {
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
        if let Err(err) = post(&client, &url, trace) {
            warn(&format_args!(
                "cannot send the trace of cast {} to {url}: {err}",
                head.cast
            ));
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
