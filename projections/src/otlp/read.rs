//! A cast's trace read from its log: the fold over its records, with the prompts rebuilt from
//! their blobs when content is asked for.

use std::ops::ControlFlow;

use castlog_core::event::Event;
use castlog_core::id::{CastId, Seq};
use castlog_events::{EventLog, Recorded};
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;

use opentelemetry_proto::tonic::trace::v1::Span;

use super::{CastTrace, OtlpError, TraceOptions};
use crate::prompt;

/// The placement policy whose prompts `--otel-content` rebuilds (none without content).
pub fn content_policy<L: EventLog + ?Sized>(
    log: &L,
    cast: &CastId,
    options: TraceOptions,
) -> Result<Option<std::borrow::Cow<'static, castlog_core::prompt::Policy>>, OtlpError> {
    if !options.content {
        return Ok(None);
    }
    prompt::policy_of(log, cast)
        .map(Some)
        .map_err(|source| OtlpError::Prompt {
            cast: cast.to_string(),
            seq: 1,
            source,
        })
}

impl CastTrace {
    /// Folds one record of `log`, rebuilding a dispatched prompt's messages when `policy` is
    /// given (content asked for).
    pub fn observe_record<L: EventLog + ?Sized>(
        &mut self,
        log: &L,
        policy: Option<&castlog_core::prompt::Policy>,
        record: &Recorded,
    ) -> Result<(), OtlpError> {
        let event = match self.decoder.event_in(log, record) {
            Ok(event) => event,
            // A stream of another context: its events carry no spans.
            Err(castlog_core::event::DecodeError::UnknownKind { .. }) => {
                self.pass(record);
                return Ok(());
            }
            Err(source) => {
                return Err(OtlpError::Decode {
                    cast: record.cast.to_string(),
                    seq: record.seq.get(),
                    source,
                });
            }
        };
        let messages = match (&event, policy) {
            (Event::PromptDispatched(p), Some(policy)) => Some(
                prompt::messages(log, policy, &p.prompt_hash, &p.placements).map_err(|source| {
                    OtlpError::Prompt {
                        cast: record.cast.to_string(),
                        seq: record.seq.get(),
                        source,
                    }
                })?,
            ),
            _ => None,
        };
        self.observe(record, &event, messages.as_deref());
        Ok(())
    }
}

/// The trace of `cast` as its log holds it now.
pub fn trace_of<L: EventLog + ?Sized>(
    log: &L,
    cast: &CastId,
    options: TraceOptions,
) -> Result<ExportTraceServiceRequest, OtlpError> {
    let policy = content_policy(log, cast, options)?;
    let mut trace = CastTrace::new(cast.clone(), options);
    let mut failed = None;
    log.scan(cast, Seq::FIRST, &mut |record| match trace.observe_record(
        log,
        policy.as_deref(),
        &record,
    ) {
        Ok(()) => ControlFlow::Continue(()),
        Err(err) => {
            failed = Some(err);
            ControlFlow::Break(())
        }
    })?;
    match failed {
        Some(err) => Err(err),
        None => Ok(trace.finish()),
    }
}

/// A trace sent as it grows: what can be sent before the cast's end, then the rest.
impl CastTrace {
    /// The spans no later event can change, not handed out before: every span but the
    /// root, the current visit's and the current model call's (events only ever reach those
    /// three). A trace sent as it grows sends these, then [`CastTrace::finish_rest`].
    pub fn settled(&mut self) -> Vec<Span> {
        let live = [
            Some(0),
            self.visit.as_ref().map(|v| v.index),
            self.call.as_ref().map(|c| c.index),
        ];
        let mut out = Vec::new();
        for (index, span) in self.spans.iter().enumerate() {
            if !self.told[index] && !live.contains(&Some(index)) {
                self.told[index] = true;
                out.push(span.clone());
            }
        }
        out
    }

    /// [`CastTrace::finish`] without the spans [`CastTrace::settled`] handed out: together
    /// they are the same spans, each once.
    pub fn finish_rest(self) -> ExportTraceServiceRequest {
        let told = self.told.clone();
        let mut request = self.finish();
        for resource in &mut request.resource_spans {
            for scope in &mut resource.scope_spans {
                let mut index = 0;
                scope.spans.retain(|_| {
                    let keep = !told.get(index).copied().unwrap_or(false);
                    index += 1;
                    keep
                });
            }
        }
        request
    }
}
