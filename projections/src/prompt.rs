//! The prompt a `prompt_dispatched` event sent, rebuilt from the log.
//!
//! The machine stores each context entry's text once, as a blob, and records where every
//! entry went (the placements); the rendered messages are named by their digest but not
//! stored, since they repeat the entries (a reply shown in later prompts would otherwise be
//! kept once per prompt). [`messages`] fetches the entry blobs, assembles them with the cast's
//! policy (`prompt::assemble`, the same code the renderer uses) and checks the result against
//! the recorded `prompt_hash`, so a rebuilt prompt is byte for byte the one that was sent or
//! an error naming what differs. Casts recorded before prompts were rebuilt kept the rendered
//! prompt as a blob; it is used when present.

use std::borrow::Cow;

use castlog_core::event::{Destination, Event, Placement};
use castlog_core::id::{CastId, Digest, Seq};
use castlog_core::prompt::{self, Message, Policy};
use castlog_events::chain::blob_hash;
use castlog_events::{EventLog, LogError};

/// Why a prompt could not be rebuilt.
#[derive(Debug, thiserror::Error)]
pub enum PromptError {
    /// Reading the cast or a blob failed.
    #[error(transparent)]
    Log(#[from] LogError),
    /// An entry's body blob is not in the database.
    #[error("the body blob {hash} of entry {entry:?} is missing (run `castlog verify`)")]
    MissingBody {
        /// Id of the entry whose body is missing.
        entry: String,
        /// Address of the missing body blob, in hex.
        hash: String,
    },
    /// An entry's body is not UTF-8 text.
    #[error("the body blob {hash} of entry {entry:?} is not UTF-8 text")]
    NotText {
        /// Id of the entry whose body is not text.
        entry: String,
        /// Address of the body blob, in hex.
        hash: String,
    },
    /// A stored rendered prompt (from an older castlog) does not match its address.
    #[error("the stored prompt blob {hash} does not match its content")]
    Damaged {
        /// Address of the stored blob, in hex.
        hash: String,
    },
    /// A stored rendered prompt does not decode.
    #[error(
        "the prompt blob {hash} does not decode: {}{}",
        castlog_core::syntax::json_error(.source),
        castlog_core::syntax::column(.source)
    )]
    Undecodable {
        /// Address of the stored blob, in hex.
        hash: String,
        /// The decoder's error.
        #[source]
        source: serde_json::Error,
    },
    /// A placement names a role castlog does not know.
    #[error(transparent)]
    Role(#[from] prompt::UnknownRole),
    /// The entries assemble to a prompt other than the one recorded.
    #[error("the entries assemble to {rebuilt}, not the recorded prompt {recorded}")]
    Drift {
        /// The `prompt_hash` the dispatch recorded, in hex.
        recorded: String,
        /// Hash of the messages the entries assemble to, in hex.
        rebuilt: String,
    },
    /// The cast (or the root of its fork chain) has no readable `cast_started`.
    #[error("cast {cast}: no cast_started event to take the prompt policy from")]
    NoStart {
        /// Cast whose prompt was asked for.
        cast: String,
    },
    /// The cast names a policy castlog does not know.
    #[error("cast {cast}: unknown prompt policy {policy:?}")]
    UnknownPolicy {
        /// Cast whose prompt was asked for.
        cast: String,
        /// Policy name as `cast_started` records it.
        policy: String,
    },
}

/// The placement policy of `cast`: the one its root `cast_started` names (recasts inherit it),
/// or the document it records for a policy from a file.
pub fn policy_of<L: EventLog + ?Sized>(
    log: &L,
    cast: &CastId,
) -> Result<Cow<'static, Policy>, PromptError> {
    let root = castlog_events::log::ancestors(log, cast)?
        .pop()
        .unwrap_or_else(|| cast.clone());
    let first = log.read(&root, Seq::FIRST, Some(Seq::FIRST))?;
    let started = first.first().and_then(|r| match r.event() {
        Ok(Event::CastStarted(s)) => Some(s),
        _ => None,
    });
    let started = started.ok_or_else(|| PromptError::NoStart {
        cast: root.to_string(),
    })?;
    if let Some(doc) = &started.policy_document {
        return Policy::from_json(doc)
            .map(Cow::Owned)
            .map_err(|e| PromptError::UnknownPolicy {
                cast: root.to_string(),
                policy: format!("{} (its recorded document: {e})", started.policy),
            });
    }
    Policy::named(&started.policy)
        .map(Cow::Borrowed)
        .ok_or_else(|| PromptError::UnknownPolicy {
            cast: root.to_string(),
            policy: started.policy,
        })
}

/// The messages a `prompt_dispatched` event (its `prompt_hash` and `placements`) sent,
/// rebuilt and checked against the hash.
pub fn messages<L: EventLog + ?Sized>(
    log: &L,
    policy: &Policy,
    prompt_hash: &Digest,
    placements: &[Placement],
) -> Result<Vec<Message>, PromptError> {
    if let Some(stored) = log.get_blob(prompt_hash)? {
        // A blob stored by an older castlog: used only if it is what the digest names.
        if blob_hash(&stored) != *prompt_hash {
            return Err(PromptError::Damaged {
                hash: prompt_hash.short(),
            });
        }
        return serde_json::from_slice(&stored).map_err(|source| PromptError::Undecodable {
            hash: prompt_hash.short(),
            source,
        });
    }
    let mut bodies = Vec::with_capacity(placements.len());
    for placement in placements {
        if placement.destination == Destination::Dropped {
            bodies.push(String::new());
            continue;
        }
        let bytes = log
            .get_blob(&placement.body)?
            .ok_or_else(|| PromptError::MissingBody {
                entry: placement.entry.clone(),
                hash: placement.body.short(),
            })?;
        let text = String::from_utf8(bytes).map_err(|_| PromptError::NotText {
            entry: placement.entry.clone(),
            hash: placement.body.short(),
        })?;
        bodies.push(text);
    }
    let texts: Vec<&str> = bodies.iter().map(String::as_str).collect();
    let (messages, _) = prompt::assemble(placements, &texts, policy)?;
    let rebuilt = blob_hash(&prompt::messages_json(&messages));
    if rebuilt != *prompt_hash {
        let (recorded, rebuilt) = prompt_hash.short_pair(&rebuilt);
        return Err(PromptError::Drift { recorded, rebuilt });
    }
    Ok(messages)
}
