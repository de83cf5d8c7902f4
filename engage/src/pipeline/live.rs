//! The verdict on a re-fetched source message (stage `live_source`).
//!
//! The fetcher answers with an HTTP-like status and the platform's message payload. Mapping,
//! in order: a fetcher failure → `source_unreachable`; output that is not a fetch result →
//! `source_response_unreadable`; 404 → `source_message_deleted`; 403 →
//! `source_access_forbidden`; 429 → `source_rate_limited`; any other non-200 status or a
//! payload that is not an object → `source_unreachable`; an edit marker →
//! `source_message_edited`; no `author.id` → `source_response_unreadable`; another author →
//! `source_author_mismatch`; a present, different `channel_id` → `source_channel_mismatch`.
//!
//! castlog's fix: when the payload carries the message text (`content`), the quoted text must
//! be part of it (whitespace collapsed, case ignored), else `source_content_mismatch`. The
//! reference compared no text, so a search excerpt that no longer (or never) matched what the
//! member wrote could be quoted back to them.
//!
//! `source_rate_limited` and `source_unreachable` are about the bot, not the candidate: they
//! stop the walk. Every other failure rejects only that candidate.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::Candidate;

/// What a fetch gave.
#[derive(Debug, Clone, PartialEq)]
pub enum Fetched {
    /// The fetcher failed (could not run, timed out, exited non-zero).
    Failed(String),
    /// The fetcher's output is not a fetch result.
    Unreadable(String),
    /// A status and a payload.
    Response {
        /// The HTTP-like status.
        status: u16,
        /// Message the fetcher returned (its text is compared with the quote).
        payload: Value,
    },
}

/// Whether a re-fetched source still stands behind a candidate.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LiveCheck {
    /// Whether the candidate may be drafted.
    pub ok: bool,
    /// Reason code (`source_content_mismatch`, ...) when not ok; empty otherwise.
    pub reason: String,
    /// Status, ids or text that show why, when not ok.
    pub detail: String,
    /// Whether the live text contains the quote, when the payload had text.
    pub content_matched: Option<bool>,
}

fn fail(reason: &str, detail: impl Into<String>) -> LiveCheck {
    LiveCheck {
        ok: false,
        reason: reason.to_owned(),
        detail: detail.into(),
        content_matched: None,
    }
}

fn normalized(text: &str) -> String {
    text.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .to_lowercase()
}

/// The verdict on one fetched source.
pub fn check(candidate: &Candidate, fetched: &Fetched) -> LiveCheck {
    let (status, payload) = match fetched {
        Fetched::Failed(message) => return fail("source_unreachable", message.clone()),
        Fetched::Unreadable(message) => {
            return fail("source_response_unreadable", message.clone());
        }
        Fetched::Response { status, payload } => (*status, payload),
    };
    match status {
        404 => {
            return fail(
                "source_message_deleted",
                format!("message {}", candidate.source_message_id),
            );
        }
        403 => {
            return fail(
                "source_access_forbidden",
                format!("channel {}", candidate.channel_id),
            );
        }
        429 => return fail("source_rate_limited", ""),
        200 => {}
        other => return fail("source_unreachable", format!("status {other}")),
    }
    let Value::Object(payload) = payload else {
        return fail("source_unreachable", format!("status {status}"));
    };
    match payload.get("edited_timestamp") {
        None | Some(Value::Null) | Some(Value::Bool(false)) => {}
        Some(Value::String(s)) if s.is_empty() => {}
        Some(edited) => {
            let detail = edited
                .as_str()
                .map_or_else(|| edited.to_string(), str::to_owned);
            return fail("source_message_edited", detail);
        }
    }
    let author = match payload.get("author").and_then(|a| a.get("id")) {
        Some(Value::String(s)) if !s.trim().is_empty() => s.trim().to_owned(),
        Some(Value::Number(n)) => n.to_string(),
        _ => return fail("source_response_unreadable", "no author id"),
    };
    let stored = candidate.actor_id.rsplit(':').next().unwrap_or("").trim();
    if author != stored {
        return fail(
            "source_author_mismatch",
            format!("stored {stored} live {author}"),
        );
    }
    if let Some(channel) = payload.get("channel_id") {
        let live = channel
            .as_str()
            .map_or_else(|| channel.to_string(), str::to_owned);
        if live != candidate.channel_id {
            return fail(
                "source_channel_mismatch",
                format!("stored {} live {live}", candidate.channel_id),
            );
        }
    }
    let quoted = normalized(&candidate.text);
    if quoted.is_empty() {
        // Every message contains the empty string: a blank quote proves nothing.
        return LiveCheck {
            ok: false,
            reason: "source_content_mismatch".into(),
            detail: "the candidate quotes no text".into(),
            content_matched: Some(false),
        };
    }
    let mut content_matched = None;
    if let Some(Value::String(content)) = payload.get("content") {
        let matched = normalized(content).contains(&quoted);
        if !matched {
            let live: String = content.chars().take(80).collect();
            return LiveCheck {
                ok: false,
                reason: "source_content_mismatch".into(),
                detail: format!("live text is {live:?}"),
                content_matched: Some(false),
            };
        }
        content_matched = Some(true);
    }
    LiveCheck {
        ok: true,
        reason: String::new(),
        detail: String::new(),
        content_matched,
    }
}

/// Whether a failure is about the bot, not the candidate, and ends the walk.
pub fn stops_walk(reason: &str) -> bool {
    matches!(reason, "source_rate_limited" | "source_unreachable")
}

/// Reads a fetcher's output: `{"status": N, "payload": {...}}`, or a bare payload (status 200).
pub fn read_fetch_output(text: &str) -> Fetched {
    let value: Value = match serde_json::from_str(text.trim()) {
        Ok(v) => v,
        Err(e) => {
            let head: String = text.trim().chars().take(80).collect();
            return Fetched::Unreadable(format!("fetcher output is not JSON ({e}): {head:?}"));
        }
    };
    match value.get("status") {
        Some(Value::Number(n)) => match n.as_u64().and_then(|s| u16::try_from(s).ok()) {
            Some(status) => Fetched::Response {
                status,
                payload: value.get("payload").cloned().unwrap_or(Value::Null),
            },
            None => Fetched::Unreadable(format!("fetcher status {n} is not an HTTP status")),
        },
        Some(other) => Fetched::Unreadable(format!("fetcher status {other} is not a number")),
        None if value.is_object() => Fetched::Response {
            status: 200,
            payload: value,
        },
        None => Fetched::Unreadable("fetcher output is not an object".into()),
    }
}
