//! INPUT.json: what one engagement run works on.
//!
//! ```json
//! {
//!   "conversation_id": "sk:agent:vast:discord:guild:1524917037191925871",
//!   "now": "2026-06-10T15:00:00Z",
//!   "results": [{"text": "sam: Adding ss31 for 4 weeks.", "provenance": {
//!       "canonical_turn_id": "t1", "source_role": "requester", "actor_id": "actor:discord:42",
//!       "origin_channel_id": "111", "source_message_id": "1250000000000000000"}}],
//!   "sources": {"t1": {"message_id": "1250000000000000000", "channel_id": "111",
//!       "guild_id": "1", "author_id": "42", "source_actor_id": "actor:discord:42"}},
//!   "senders": {"t1": "sam"},
//!   "later_texts": {"t1": [{"text": "the ss31 went fine", "at": "2026-06-09T10:00:00Z"}]},
//!   "subject_terms": {"t1": ["ss31"]},
//!   "allowlist": {"source_channel_ids": ["111"], "post_channel_ids": ["999"], "labels": {}},
//!   "settings": {"zone": "America/New_York", "draft_attempt_cap": 3,
//!                "guild_id": "1524917037191925871"}
//! }
//! ```
//!
//! Everything but `results` and `allowlist` is optional. `now` (RFC 3339 or ms since the epoch)
//! defaults to the clock. Every setting defaults to the reference's value, but for the guild
//! replies are sent in (`settings.guild_id`), which is the deployment's: when the settings do
//! not name it, it is the guild the conversation id names (`…:guild:ID`), else none (a send
//! then carries an empty `reply_to_guild_id`). Nothing in the input
//! can turn posting on: only `--post` does, so keys like `post` or `posting_enabled` are refused.
//!
//! `settings.day_scope` says what one claimed day covers: `"deployment"` (the default, as the
//! reference has it) gives the whole deployment one engagement post per day in the claim zone,
//! whichever allowed channel it goes to; `"destination"` gives each post channel its own day. A
//! run recorded before the setting has no `day_scope` in its recorded settings: it was decided
//! per destination, and its recorded refusals verify as they are.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use castlog_core::calendar::{DEFAULT_ZONE, Date, Zone};

/// Why an INPUT.json was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{path}: {reason}")]
pub struct InputError {
    /// Where (`results[3].provenance`, `settings.zone`, `$`).
    pub path: String,
    /// What is wrong and what to do.
    pub reason: String,
}

fn bad(path: impl Into<String>, reason: impl Into<String>) -> InputError {
    InputError {
        path: path.into(),
        reason: reason.into(),
    }
}

/// Where a search hit came from.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Provenance {
    /// Turn id the hit is for; the candidate's id.
    pub canonical_turn_id: String,
    /// `requester`, `subject`, `assistant`, `mixed`, `unattributed`.
    pub source_role: String,
    /// `actor:discord:<id>`.
    pub actor_id: String,
    /// Channel the message was posted in, checked against the source allowlist.
    pub origin_channel_id: String,
    /// Platform message id (a snowflake, which carries its send time).
    pub source_message_id: String,
}

/// One retrieval result.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RawResult {
    /// The hit's text (may carry a `sender:` prefix).
    #[serde(default)]
    pub text: String,
    /// Its provenance, if any.
    #[serde(default)]
    pub provenance: Option<Provenance>,
}

/// An attestation written at ingest.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct SourceRecord {
    /// Platform message id (a snowflake) the record attests.
    pub message_id: String,
    /// Channel the attested message is in; must match the hit's.
    pub channel_id: String,
    /// The guild (not checked, as in the reference).
    pub guild_id: String,
    /// Platform user id without the `actor:discord:` prefix.
    pub author_id: String,
    /// Actor id (`actor:discord:<id>`) the ingest recorded; must match the hit's.
    pub source_actor_id: String,
}

/// Channel id lists. Labels are display-only and never decide membership.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Allowlist {
    /// Channels candidates may come from.
    pub source_channel_ids: Vec<String>,
    /// Channels posts may go to.
    pub post_channel_ids: Vec<String>,
    /// Display labels.
    pub labels: BTreeMap<String, String>,
}

impl Allowlist {
    /// Whether candidates may come from `channel`.
    pub fn may_source(&self, channel: &str) -> bool {
        !channel.is_empty() && self.source_channel_ids.iter().any(|c| c == channel)
    }

    /// Whether posts may go to `channel`.
    pub fn may_post(&self, channel: &str) -> bool {
        !channel.is_empty() && self.post_channel_ids.iter().any(|c| c == channel)
    }
}

/// The run's constants, the reference's values by default.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Settings {
    /// Zone claim days are counted in (`America/New_York` unless set).
    pub zone: String,
    /// Drafter calls per run (`DRAFT_ATTEMPT_CAP`).
    pub draft_attempt_cap: u32,
    /// Candidates the live walk checks per attempt.
    pub live_walk_max: u32,
    /// Younger than this (hours) is `same_day`.
    pub same_day_hours: u32,
    /// The timed window's start (days, inclusive).
    pub timed_min_days: u32,
    /// The timed window's end (days, inclusive).
    pub timed_max_days: u32,
    /// A later on-subject message this recent (hours) blocks the candidate.
    pub reopened_window_hours: u32,
    /// A member tagged this recently (days, strict) is not tagged again.
    pub member_cooldown_days: u32,
    /// Questions asked this recently (days, inclusive) are compared.
    pub similarity_window_days: u32,
    /// A fingerprint distance at or below this is a repeat.
    pub similarity_distance: u32,
    /// The channel cap's window (days, inclusive).
    pub channel_window_days: u32,
    /// Posts per destination per window before the cap blocks.
    pub channel_max_in_window: u32,
    /// The quote shown in the report is cut to this many characters.
    pub quote_max_chars: u32,
    /// A fetcher taking longer than this (ms) is killed (`source_unreachable`).
    pub fetch_timeout_ms: u64,
    /// Examples per rejection group in the text report.
    pub report_examples: u32,
    /// The guild (server) a reply is sent in: `reply_to_guild_id` of every send. Empty in the
    /// file: the guild the conversation id names ([`parse`] fills it in).
    pub guild_id: String,
    /// What one claimed day covers (see the module documentation).
    pub day_scope: DayScope,
}

/// What one claimed engagement day covers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DayScope {
    /// One post per day for the whole deployment, on every destination together.
    #[default]
    Deployment,
    /// One post per day on each destination.
    Destination,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            zone: DEFAULT_ZONE.to_owned(),
            draft_attempt_cap: 3,
            live_walk_max: 3,
            same_day_hours: 24,
            timed_min_days: 2,
            timed_max_days: 7,
            reopened_window_hours: 12,
            member_cooldown_days: 14,
            similarity_window_days: 60,
            similarity_distance: 12,
            channel_window_days: 7,
            channel_max_in_window: 3,
            quote_max_chars: 500,
            fetch_timeout_ms: 10_000,
            report_examples: 2,
            guild_id: String::new(),
            day_scope: DayScope::default(),
        }
    }
}

/// A later message in a candidate's thread.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LaterText {
    /// The later message's words.
    pub text: String,
    /// When (ms since the epoch).
    pub at_ms: i64,
}

/// A parsed INPUT.json.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EngageInput {
    /// Conversation id the retrieval results came from (empty if the input names none).
    pub conversation: String,
    /// The run's "now", when the input fixes it.
    pub now_ms: Option<i64>,
    /// The retrieval results, in order.
    pub results: Vec<RawResult>,
    /// Attested sources by turn id.
    pub sources: BTreeMap<String, SourceRecord>,
    /// Display handles by turn id.
    pub senders: BTreeMap<String, String>,
    /// Later messages by turn id.
    pub later_texts: BTreeMap<String, Vec<LaterText>>,
    /// Subject terms by turn id.
    pub subject_terms: BTreeMap<String, Vec<String>>,
    /// Channels candidates may come from and posts may go to.
    pub allowlist: Allowlist,
    /// The run's constants (caps, windows, zone), defaults filled in.
    pub settings: Settings,
}

/// Keys that would grant posting permission; refused so no input can turn posting on.
const PERMISSION_KEYS: [&str; 6] = [
    "post",
    "posting_enabled",
    "enabled",
    "allow_post",
    "force",
    "dry_run",
];

fn field<T: serde::de::DeserializeOwned>(
    root: &serde_json::Map<String, Value>,
    key: &str,
) -> Result<Option<T>, InputError> {
    match root.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => serde_json::from_value(v.clone())
            .map(Some)
            .map_err(|e| bad(key, format!("does not have the expected shape: {e}"))),
    }
}

/// A JSON document, or an error at `$` naming the line and column.
pub(crate) fn json_document(text: &str) -> Result<Value, InputError> {
    serde_json::from_str(text).map_err(|e| {
        bad(
            "$",
            format!(
                "not valid JSON ({}): {}",
                castlog_core::syntax::place(&e, text),
                castlog_core::syntax::json_error(&e)
            ),
        )
    })
}

/// Parses and checks an INPUT.json text.
pub fn parse(text: &str) -> Result<EngageInput, InputError> {
    let Value::Object(root) = json_document(text)? else {
        return Err(bad(
            "$",
            "INPUT.json must be an object with `results` and `allowlist`",
        ));
    };
    for key in PERMISSION_KEYS {
        if root.contains_key(key) {
            return Err(bad(
                key,
                "posting is switched on only by `--post` on the command line, never by input",
            ));
        }
    }
    let results: Vec<RawResult> = match root.get("results") {
        Some(Value::Array(items)) => {
            let mut out = Vec::with_capacity(items.len());
            for (i, item) in items.iter().enumerate() {
                out.push(serde_json::from_value(item.clone()).map_err(|e| {
                    bad(format!("results[{i}]"), format!("not a search result: {e}"))
                })?);
            }
            out
        }
        Some(_) => return Err(bad("results", "must be an array of search results")),
        None => return Err(bad("results", "is missing; give the retrieval results")),
    };
    let allowlist: Allowlist = field(&root, "allowlist")?.ok_or_else(|| {
        bad(
            "allowlist",
            "is missing; give source_channel_ids and post_channel_ids",
        )
    })?;
    let mut settings: Settings = field(&root, "settings")?.unwrap_or_default();
    Zone::parse(&settings.zone).map_err(|e| bad("settings.zone", e.to_string()))?;
    if settings.draft_attempt_cap == 0 || settings.live_walk_max == 0 {
        return Err(bad(
            "settings",
            "draft_attempt_cap and live_walk_max must be at least 1",
        ));
    }
    let conversation: String = field(&root, "conversation_id")?.unwrap_or_default();
    if settings.guild_id.is_empty() {
        settings.guild_id = conversation_guild(&conversation)
            .unwrap_or_default()
            .to_owned();
    } else if settings.guild_id.trim().is_empty() {
        return Err(bad(
            "settings.guild_id",
            "must not be empty; leave it out for the guild the conversation_id names",
        ));
    }
    if settings.timed_min_days > settings.timed_max_days {
        return Err(bad(
            "settings.timed_min_days",
            "must not be larger than timed_max_days",
        ));
    }
    let sources = match root.get("sources") {
        Some(Value::Array(items)) => {
            // A list of records keyed by their own `canonical_turn_id`.
            let mut map = BTreeMap::new();
            for (i, item) in items.iter().enumerate() {
                let turn = item
                    .get("canonical_turn_id")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                if turn.is_empty() {
                    continue;
                }
                let record = SourceRecord::deserialize(item).map_err(|e| {
                    bad(format!("sources[{i}]"), format!("not a source record: {e}"))
                })?;
                map.insert(turn.to_owned(), record);
            }
            map
        }
        // A map by turn id: each record is read on its own, so an error names its key.
        Some(Value::Object(records)) => records
            .iter()
            .map(|(turn, record)| {
                SourceRecord::deserialize(record)
                    .map(|record| (turn.clone(), record))
                    .map_err(|e| {
                        bad(
                            format!("sources.{turn}"),
                            format!("not a source record: {e}"),
                        )
                    })
            })
            .collect::<Result<BTreeMap<_, _>, _>>()?,
        _ => field(&root, "sources")?.unwrap_or_default(),
    };
    let mut later_texts = BTreeMap::new();
    if let Some(Value::Object(map)) = root.get("later_texts") {
        for (turn, items) in map {
            let Value::Array(items) = items else {
                return Err(bad(format!("later_texts.{turn}"), "must be an array"));
            };
            let mut out = Vec::new();
            for (i, item) in items.iter().enumerate() {
                let at = format!("later_texts.{turn}[{i}]");
                let text = item
                    .get("text")
                    .and_then(Value::as_str)
                    .ok_or_else(|| bad(&at, "needs a `text` string"))?;
                let when = item
                    .get("at")
                    .ok_or_else(|| bad(&at, "needs an `at` time"))?;
                out.push(LaterText {
                    text: text.to_owned(),
                    at_ms: time_of(when).map_err(|e| bad(format!("{at}.at"), e.to_string()))?,
                });
            }
            later_texts.insert(turn.clone(), out);
        }
    }
    let now_ms = match root.get("now") {
        None | Some(Value::Null) => None,
        Some(v) => Some(time_of(v).map_err(|e| bad("now", e.to_string()))?),
    };
    Ok(EngageInput {
        conversation,
        now_ms,
        results,
        sources,
        senders: field(&root, "senders")?.unwrap_or_default(),
        later_texts,
        subject_terms: field(&root, "subject_terms")?.unwrap_or_default(),
        allowlist,
        settings,
    })
}

/// The guild a conversation id names (`sk:agent:vast:discord:guild:ID`), if any.
fn conversation_guild(conversation: &str) -> Option<&str> {
    let mut parts = conversation.split(':');
    parts.find(|part| *part == "guild")?;
    parts.next().filter(|guild| !guild.is_empty())
}

/// Why a value is not a time.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TimeError {
    /// A number that is not whole milliseconds.
    #[error("{value} is not a whole number of milliseconds")]
    NotWholeMillis {
        /// The JSON number as the input wrote it.
        value: String,
    },
    /// Text that is not an RFC 3339 time.
    #[error("{text:?} is not an RFC 3339 time like 2026-06-10T15:00:00Z")]
    NotRfc3339 {
        /// The string as the input wrote it.
        text: String,
    },
    /// Neither a number nor text.
    #[error("expected RFC 3339 text or milliseconds, found {found}")]
    NotATime {
        /// The value as JSON.
        found: String,
    },
}

/// A time given as ms since the epoch or RFC 3339 text.
fn time_of(value: &Value) -> Result<i64, TimeError> {
    match value {
        Value::Number(n) => n.as_i64().ok_or_else(|| TimeError::NotWholeMillis {
            value: n.to_string(),
        }),
        Value::String(s) => parse_rfc3339(s),
        other => Err(TimeError::NotATime {
            found: other.to_string(),
        }),
    }
}

/// Parses `YYYY-MM-DDTHH:MM:SS[.fff](Z|±HH:MM)` into ms since the epoch. The date, the offset
/// and the instant they name are the calendar's (`Date::parse`, `Zone::parse`,
/// `Zone::instant`); only the time of day is read here.
pub fn parse_rfc3339(text: &str) -> Result<i64, TimeError> {
    let err = || TimeError::NotRfc3339 {
        text: text.to_owned(),
    };
    let t = text.trim();
    let (date, rest) = match (t.get(..10), t.get(10..)) {
        (Some(date), Some(rest)) if rest.starts_with(['T', 't', ' ']) => (date, &rest[1..]),
        _ => return Err(err()),
    };
    let date = Date::parse(date).map_err(|_| err())?;
    // HH:MM:SS, then an optional fraction, then the offset.
    let field = |range: std::ops::Range<usize>, max: i64| -> Result<i64, TimeError> {
        let part = rest.get(range).ok_or_else(err)?;
        if part.len() != 2 || !part.bytes().all(|c| c.is_ascii_digit()) {
            return Err(err());
        }
        part.parse::<i64>()
            .ok()
            .filter(|n| *n <= max)
            .ok_or_else(err)
    };
    if rest.get(2..3) != Some(":") || rest.get(5..6) != Some(":") {
        return Err(err());
    }
    let (hour, minute, second) = (field(0..2, 23)?, field(3..5, 59)?, field(6..8, 60)?);
    let mut zone = rest.get(8..).ok_or_else(err)?;
    let mut millis = 0;
    if let Some(frac) = zone.strip_prefix('.') {
        let digits = frac.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return Err(err());
        }
        let padded: String = frac[..digits]
            .chars()
            .chain("000".chars())
            .take(3)
            .collect();
        millis = padded.parse::<i64>().map_err(|_| err())?;
        zone = &frac[digits..];
    }
    let zone = match zone {
        "Z" | "z" => Zone::Utc,
        offset if offset.starts_with(['+', '-']) => Zone::parse(offset).map_err(|_| err())?,
        _ => return Err(err()),
    };
    let ms_of_day = ((hour * 60 + minute) * 60 + second) * 1000 + millis;
    Ok(zone.instant(date, ms_of_day))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_input_with_a_string_left_open_names_the_line_it_ends() {
        let err = json_document("{\"results\": [\n  {\"text\": \"open\n]}").unwrap_err();
        assert_eq!(
            err.reason,
            "not valid JSON (line 2, column 17): control character (\\u0000-\\u001F) found while parsing a string"
        );
    }

    #[test]
    fn times_parse() {
        assert_eq!(parse_rfc3339("1970-01-01T00:00:00Z"), Ok(0));
        assert_eq!(parse_rfc3339("1970-01-01T01:00:00+01:00"), Ok(0));
        assert_eq!(parse_rfc3339("1970-01-01T00:00:01.5Z"), Ok(1500));
        assert_eq!(
            parse_rfc3339("2026-06-10T11:00:00-04:00"),
            Ok(1_781_103_600_000)
        );
        assert!(parse_rfc3339("yesterday").is_err());
        assert!(parse_rfc3339("2026-13-01T00:00:00Z").is_err());
        assert!(parse_rfc3339("2026-02-30T00:00:00Z").is_err());
        assert!(parse_rfc3339("2026-06-10T24:00:00Z").is_err());
        assert!(parse_rfc3339("2026-06-10T10:00:00UTC").is_err());
        assert_eq!(
            parse_rfc3339("soon").unwrap_err().to_string(),
            "\"soon\" is not an RFC 3339 time like 2026-06-10T15:00:00Z"
        );
    }

    /// The guild replies go to is the input's, never a built-in deployment's.
    #[test]
    fn the_guild_comes_from_the_settings_or_the_conversation() {
        let input = |extra: &str| {
            parse(&format!(r#"{{"results": [], "allowlist": {{}}{extra}}}"#))
                .unwrap()
                .settings
                .guild_id
        };
        assert_eq!(input(""), "");
        assert_eq!(
            input(r#", "conversation_id": "sk:agent:vast:discord:guild:77""#),
            "77"
        );
        assert_eq!(
            input(r#", "conversation_id": "sk:guild:77", "settings": {"guild_id": "5"}"#),
            "5"
        );
        assert_eq!(input(r#", "conversation_id": "sk:guild:""#), "");
    }

    #[test]
    fn inputs_are_checked_with_paths() {
        let err = parse("{").unwrap_err();
        assert_eq!(err.path, "$");
        assert!(err.reason.contains("line 1"));
        let err = parse(r#"{"results": [], "allowlist": {}, "post": true}"#).unwrap_err();
        assert_eq!(err.path, "post");
        let err = parse(r#"{"results": [1], "allowlist": {}}"#).unwrap_err();
        assert_eq!(err.path, "results[0]");
        let err = parse(r#"{"results": []}"#).unwrap_err();
        assert_eq!(err.path, "allowlist");
        let err =
            parse(r#"{"results": [], "allowlist": {}, "settings": {"zone": "Mars"}}"#).unwrap_err();
        assert_eq!(err.path, "settings.zone");
        let err =
            parse(r#"{"results": [], "allowlist": {}, "settings": {"nope": 1}}"#).unwrap_err();
        assert_eq!(err.path, "settings");
        let err = parse(r#"{"results": [], "allowlist": {}, "sources": {"t1": 5}}"#).unwrap_err();
        assert_eq!(err.path, "sources.t1");
        assert!(err.reason.contains("not a source record"), "{}", err.reason);
        let ok =
            parse(r#"{"results": [], "allowlist": {}, "now": "2026-01-01T00:00:00Z"}"#).unwrap();
        assert_eq!(ok.settings, Settings::default());
        assert_eq!(ok.now_ms, Some(1_767_225_600_000));
    }
}
