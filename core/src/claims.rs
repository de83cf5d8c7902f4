//! The claims ledger's rules: claim ids, the claim day in a time zone, the transition state
//! machine, and the one-claim-per-destination-per-day rule.
//!
//! A post goes out at most once because it is *claimed* before anything is sent: a durable
//! `post_claimed` event names the claim, the destination and the calendar day it counts for.
//! Only then may a sender run; its result becomes `post_staged` (a message id) or
//! `post_refused` (a definite refusal); an unknown result (`post_outcome_unknown`) leaves the
//! claim pending, and nothing ever retries it: a person resolves it (`post_resolved`).
//!
//! The transitions, enforced wherever a claim changes (the cast machine, `castlog claims
//! resolve`, the engagement runner):
//!
//! ```text
//! pending ──▶ staged ──▶ approved ──▶ posted
//!    │           └──────────────────▶ declined   (from staged or approved)
//!    ├──▶ refused
//!    └──▶ abandoned
//! ```
//!
//! Apart from its status, a claim that went out (staged, approved or posted) may carry a
//! person's record of how it was received (`post_response_recorded`: answered or ignored). It
//! does not move the status; the engagement runner's thread rule reads it.
//!
//! A dry-run claim (`dry_run: true`) is terminal from the start: nothing was sent and nothing
//! will be. Pending, staged, approved and posted claims *hold their day*: no other claim for the
//! same destination on the same day may go out. Refused, abandoned, declined and dry-run claims
//! release it.
//!
//! Everything here is pure: the day is computed from a millisecond instant and a [`Zone`], the
//! claim id from its parts and the injected digest function.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::env::DigestFn;
use crate::event::{PostClaimed, PostRefused, Resolution, Response};
use crate::id::{CastId, ClaimId};

/// The zone claim days are counted in unless configured otherwise (as in the reference).
pub const DEFAULT_ZONE: &str = "America/New_York";

/// A time zone the claim day can be computed in.
///
/// castlog reads no time-zone database (the core does no I/O), so it knows a small set of zones
/// exactly: `America/New_York` (US Eastern with the US daylight-saving rule in force since 2007:
/// UTC-4 from the second Sunday of March, 02:00 local, to the first Sunday of November, 02:00
/// local; UTC-5 otherwise; the rule is applied to every year), `UTC`, and fixed offsets written
/// `+HH:MM` / `-HH:MM` (or `+HH`). Any other name is a configuration error.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Zone {
    /// US Eastern time with daylight saving (the default).
    #[default]
    NewYork,
    /// Coordinated universal time.
    Utc,
    /// A fixed offset from UTC, in minutes (east positive).
    Fixed {
        /// Minutes east of UTC.
        minutes: i32,
    },
}

/// A zone name castlog does not know.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown time zone {name:?}: use America/New_York, UTC or a fixed offset like +02:00 or -05:00"
)]
pub struct ZoneError {
    /// The rejected name.
    pub name: String,
}

const MS_PER_MINUTE: i64 = 60_000;
const MS_PER_DAY: i64 = 86_400_000;

impl Zone {
    /// Parses a zone name.
    pub fn parse(name: &str) -> Result<Zone, ZoneError> {
        let bad = || ZoneError {
            name: name.to_owned(),
        };
        let trimmed = name.trim();
        match trimmed {
            "America/New_York" | "US/Eastern" => return Ok(Zone::NewYork),
            "UTC" | "Etc/UTC" | "Z" => return Ok(Zone::Utc),
            _ => {}
        }
        let (sign, rest) = match trimmed.as_bytes().first() {
            Some(b'+') => (1, &trimmed[1..]),
            Some(b'-') => (-1, &trimmed[1..]),
            _ => return Err(bad()),
        };
        let (hours, minutes) = match rest.split_once(':') {
            Some((h, m)) => (h, m),
            None => (rest, "00"),
        };
        let digits = |s: &str| s.len() == 2 && s.bytes().all(|b| b.is_ascii_digit());
        if !digits(hours) || !digits(minutes) {
            return Err(bad());
        }
        let h: i32 = hours.parse().map_err(|_| bad())?;
        let m: i32 = minutes.parse().map_err(|_| bad())?;
        if h > 14 || m > 59 {
            return Err(bad());
        }
        Ok(Zone::Fixed {
            minutes: sign * (h * 60 + m),
        })
    }

    /// The canonical name (`America/New_York`, `UTC`, `+02:00`).
    pub fn name(&self) -> String {
        match self {
            Zone::NewYork => DEFAULT_ZONE.to_owned(),
            Zone::Utc => "UTC".to_owned(),
            Zone::Fixed { minutes } => {
                let sign = if *minutes < 0 { '-' } else { '+' };
                let abs = minutes.unsigned_abs();
                format!("{sign}{:02}:{:02}", abs / 60, abs % 60)
            }
        }
    }

    /// The offset from UTC in minutes at the instant `at_ms` (ms since the Unix epoch).
    pub fn offset_minutes(&self, at_ms: i64) -> i32 {
        match self {
            Zone::Utc => 0,
            Zone::Fixed { minutes } => *minutes,
            Zone::NewYork => {
                let (year, _, _) = civil_from_days(at_ms.div_euclid(MS_PER_DAY));
                // 02:00 EST = 07:00 UTC; 02:00 EDT = 06:00 UTC.
                let start = nth_sunday(year, 3, 2) * MS_PER_DAY + 7 * 3_600_000;
                let end = nth_sunday(year, 11, 1) * MS_PER_DAY + 6 * 3_600_000;
                if (start..end).contains(&at_ms) {
                    -4 * 60
                } else {
                    -5 * 60
                }
            }
        }
    }

    /// The local calendar date of the instant `at_ms`.
    pub fn date(&self, at_ms: i64) -> Date {
        self.local(at_ms).0
    }

    /// The local calendar date of the instant `at_ms` and the local time of day, in ms since
    /// local midnight.
    pub fn local(&self, at_ms: i64) -> (Date, i64) {
        let local = at_ms + i64::from(self.offset_minutes(at_ms)) * MS_PER_MINUTE;
        (
            Date::from_days(local.div_euclid(MS_PER_DAY)),
            local.rem_euclid(MS_PER_DAY),
        )
    }

    /// The instant at which the local clock reads `ms_of_day` on `date`. For a time the clock
    /// skips or shows twice (a daylight-saving switch) the offset in force just after the
    /// switch is used; castlog asks only for times far from one.
    pub fn instant(&self, date: Date, ms_of_day: i64) -> i64 {
        let wall = date.days() * MS_PER_DAY + ms_of_day;
        let first = wall - i64::from(self.offset_minutes(wall)) * MS_PER_MINUTE;
        wall - i64::from(self.offset_minutes(first)) * MS_PER_MINUTE
    }

    /// The claim day of the instant `at_ms`: its local date as `YYYY-MM-DD`.
    pub fn day(&self, at_ms: u64) -> String {
        self.date(i64::try_from(at_ms).unwrap_or(i64::MAX))
            .to_string()
    }
}

/// A calendar date.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Date {
    /// The year.
    pub year: i64,
    /// 1..=12.
    pub month: u32,
    /// 1..=31.
    pub day: u32,
}

impl Date {
    /// The date `days` days after 1970-01-01.
    pub fn from_days(days: i64) -> Date {
        let (year, month, day) = civil_from_days(days);
        Date { year, month, day }
    }

    /// Days since 1970-01-01.
    pub fn days(self) -> i64 {
        days_from_civil(self.year, self.month, self.day)
    }

    /// The date `n` days later (earlier when negative).
    pub fn plus_days(self, n: i64) -> Date {
        Date::from_days(self.days() + n)
    }

    /// Parses `YYYY-MM-DD` (a real calendar date).
    pub fn parse(text: &str) -> Result<Date, String> {
        let err = || format!("{text:?} is not a date like 2026-03-08");
        let t = text.trim();
        let b = t.as_bytes();
        if b.len() != 10 || b[4] != b'-' || b[7] != b'-' {
            return Err(err());
        }
        let num = |range: std::ops::Range<usize>| -> Result<u32, String> {
            let part = t.get(range).ok_or_else(err)?;
            if !part.bytes().all(|c| c.is_ascii_digit()) {
                return Err(err());
            }
            part.parse().map_err(|_| err())
        };
        let (year, month, day) = (num(0..4)?, num(5..7)?, num(8..10)?);
        let date = Date {
            year: i64::from(year),
            month,
            day,
        };
        // A date that does not round-trip (2026-02-30) does not exist.
        if !(1..=12).contains(&month) || Date::from_days(date.days()) != date {
            return Err(err());
        }
        Ok(date)
    }
}

impl fmt::Display for Date {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:04}-{:02}-{:02}", self.year, self.month, self.day)
    }
}

/// Days since 1970-01-01 to (year, month, day), proleptic Gregorian (H. Hinnant's algorithm).
pub fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

/// (year, month, day) to days since 1970-01-01.
pub fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let m = i64::from(month);
    let mp = if m > 2 { m - 3 } else { m + 9 };
    let doy = (153 * mp + 2) / 5 + i64::from(day) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The day number of the `n`-th Sunday of `month` in `year`.
fn nth_sunday(year: i64, month: u32, n: i64) -> i64 {
    let first = days_from_civil(year, month, 1);
    // 1970-01-01 was a Thursday: weekday 0 = Sunday.
    let weekday = (first + 4).rem_euclid(7);
    first + (7 - weekday) % 7 + 7 * (n - 1)
}

/// Where a claim stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ClaimStatus {
    /// Claimed; the send outcome is unknown (or the send has not happened yet).
    Pending,
    /// The sender accepted it (a review/staging message is up).
    Staged,
    /// It was refused (a gate, a lost race for the day, or the sender said no).
    Refused,
    /// A person said it was not sent and will not be.
    Abandoned,
    /// A staged post was approved for publishing.
    Approved,
    /// The approved post went out.
    Posted,
    /// A staged or approved post was declined; the day is released.
    Declined,
    /// A dry run: nothing was sent and nothing will be.
    DryRun,
}

impl ClaimStatus {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            ClaimStatus::Pending => "pending",
            ClaimStatus::Staged => "staged",
            ClaimStatus::Refused => "refused",
            ClaimStatus::Abandoned => "abandoned",
            ClaimStatus::Approved => "approved",
            ClaimStatus::Posted => "posted",
            ClaimStatus::Declined => "declined",
            ClaimStatus::DryRun => "dry_run",
        }
    }

    /// Whether a claim in this status holds its destination's day.
    pub fn holds_day(self) -> bool {
        matches!(
            self,
            ClaimStatus::Pending
                | ClaimStatus::Staged
                | ClaimStatus::Approved
                | ClaimStatus::Posted
        )
    }

    /// Whether a person has something left to do (the send outcome is unknown, or a staged or
    /// approved post waits for its next step).
    pub fn is_open(self) -> bool {
        matches!(
            self,
            ClaimStatus::Pending | ClaimStatus::Staged | ClaimStatus::Approved
        )
    }

    /// Whether something went out (or may have, for a pending claim).
    pub fn may_have_been_sent(self) -> bool {
        self.holds_day()
    }

    /// Whether the post certainly went out: staged, approved or posted.
    pub fn went_out(self) -> bool {
        matches!(
            self,
            ClaimStatus::Staged | ClaimStatus::Approved | ClaimStatus::Posted
        )
    }
}

impl fmt::Display for ClaimStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.as_str())
    }
}

/// One step of the state machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Transition {
    /// The sender (or a person) reported a message id.
    Staged,
    /// A definite refusal.
    Refused,
    /// A person says it was not sent.
    Abandoned,
    /// Approved for publishing.
    Approved,
    /// Published.
    Posted,
    /// Declined.
    Declined,
}

impl Transition {
    /// The status this step leads to.
    pub fn target(self) -> ClaimStatus {
        match self {
            Transition::Staged => ClaimStatus::Staged,
            Transition::Refused => ClaimStatus::Refused,
            Transition::Abandoned => ClaimStatus::Abandoned,
            Transition::Approved => ClaimStatus::Approved,
            Transition::Posted => ClaimStatus::Posted,
            Transition::Declined => ClaimStatus::Declined,
        }
    }

    /// The step a person's resolution takes.
    pub fn of(resolution: &Resolution) -> Transition {
        match resolution {
            Resolution::Staged { .. } => Transition::Staged,
            Resolution::Abandoned => Transition::Abandoned,
            Resolution::Approved => Transition::Approved,
            Resolution::Posted => Transition::Posted,
            Resolution::Declined => Transition::Declined,
        }
    }
}

/// An illegal transition, naming the claim and its current state.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("claim {claim} is {from}: it cannot become {to} ({hint})")]
pub struct TransitionError {
    /// The claim.
    pub claim: ClaimId,
    /// Its current status.
    pub from: ClaimStatus,
    /// The status asked for.
    pub to: ClaimStatus,
    /// What the current status allows.
    pub hint: &'static str,
}

/// What each status allows, for error messages.
fn allowed(from: ClaimStatus) -> &'static str {
    match from {
        ClaimStatus::Pending => "a pending claim can become staged, refused or abandoned",
        ClaimStatus::Staged => "a staged claim can be approved or declined",
        ClaimStatus::Approved => "an approved claim can become posted or declined",
        ClaimStatus::Refused
        | ClaimStatus::Abandoned
        | ClaimStatus::Posted
        | ClaimStatus::Declined => "it is final",
        ClaimStatus::DryRun => "a dry run sent nothing and is final; run again with --post",
    }
}

/// Applies one transition to a claim in `from`, or says why it is illegal.
pub fn next(
    claim: &ClaimId,
    from: ClaimStatus,
    step: Transition,
) -> Result<ClaimStatus, TransitionError> {
    use ClaimStatus as S;
    use Transition as T;
    let ok = matches!(
        (from, step),
        (S::Pending, T::Staged | T::Refused | T::Abandoned)
            | (S::Staged, T::Approved | T::Declined)
            | (S::Approved, T::Posted | T::Declined)
    );
    if ok {
        Ok(step.target())
    } else {
        Err(TransitionError {
            claim: claim.clone(),
            from,
            to: step.target(),
            hint: allowed(from),
        })
    }
}

/// A response recorded on a claim that did not go out.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "claim {claim} is {status}: only a claim that went out (staged, approved or posted) can be answered or ignored"
)]
pub struct ResponseError {
    /// The claim.
    pub claim: ClaimId,
    /// Its current status.
    pub status: ClaimStatus,
}

/// Whether a person may record how `claim`'s post was received: only when it went out.
pub fn check_response(claim: &ClaimId, status: ClaimStatus) -> Result<(), ResponseError> {
    if status.went_out() {
        Ok(())
    } else {
        Err(ResponseError {
            claim: claim.clone(),
            status,
        })
    }
}

/// The id of a claim: a digest of its cast, step, destination and attempt, so that the same
/// claim decided again (replay, re-decide) gets the same id and two claims never share one.
pub fn claim_id(
    digest: DigestFn,
    cast: &CastId,
    step: &str,
    destination: &str,
    attempt: u32,
) -> ClaimId {
    let text = format!("castlog-claim-v1\n{cast}\n{step}\n{destination}\n{attempt}");
    // All 32 digest bytes folded into 8 (16 hex digits: short enough to type).
    let mut folded = [0u8; 8];
    for (i, byte) in digest(text.as_bytes()).0.iter().enumerate() {
        folded[i % 8] ^= byte;
    }
    let hex: String = folded.iter().map(|b| format!("{b:02x}")).collect();
    ClaimId::new(format!("clm-{hex}"))
}

/// One claim as the ledger knows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Claim {
    /// The claim.
    pub claim: ClaimId,
    /// The cast whose log holds its `post_claimed`.
    pub cast: CastId,
    /// The step that claimed (socket, `socket@item`, or an engagement stage).
    pub step: String,
    /// Where the post goes.
    pub destination: String,
    /// The day it counts for.
    pub day: String,
    /// The attempt for this step and destination.
    pub attempt: u32,
    /// Where it stands.
    pub status: ClaimStatus,
    /// Whether it was a dry run.
    pub dry_run: bool,
    /// The sender's (or the person's) message id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message_id: Option<String>,
    /// Why it was refused, or why its outcome is unknown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// When it was claimed (ms since the epoch).
    pub claimed_ms: u64,
    /// The blob of the body (absent for a claim refused before it was made).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<crate::id::Digest>,
    /// The member tagged by the post (engagement), for the cooldown rule.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tagged_actor: Option<String>,
    /// Source message ids the post follows up (engagement), for the thread rule.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub source_message_ids: Vec<String>,
    /// The question's topic fingerprint (engagement), for the similarity rule.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fingerprint: Option<u64>,
    /// How the post was received, when a person recorded it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response: Option<Response>,
}

impl Claim {
    /// The claim a `post_claimed` event creates.
    pub fn claimed(cast: &CastId, at_ms: u64, event: &PostClaimed) -> Claim {
        Claim {
            claim: event.claim.clone(),
            cast: cast.clone(),
            step: event.step.clone(),
            destination: event.destination.clone(),
            day: event.day.clone(),
            attempt: event.attempt,
            status: if event.dry_run {
                ClaimStatus::DryRun
            } else {
                ClaimStatus::Pending
            },
            dry_run: event.dry_run,
            message_id: None,
            reason: None,
            claimed_ms: at_ms,
            body: Some(event.body),
            tagged_actor: event.tagged_actor.clone(),
            source_message_ids: event.source_message_ids.clone(),
            fingerprint: event.fingerprint,
            response: None,
        }
    }

    /// The ledger entry of a claim refused before it was made (its day was held): listed,
    /// holding nothing, kept so the step's next attempt gets a new id.
    pub fn refused_unclaimed(cast: &CastId, at_ms: u64, event: &PostRefused) -> Claim {
        Claim {
            claim: event.claim.clone(),
            cast: cast.clone(),
            step: event.step.clone().unwrap_or_default(),
            destination: event.destination.clone().unwrap_or_default(),
            day: event.day.clone().unwrap_or_default(),
            attempt: event.attempt.unwrap_or(0),
            status: ClaimStatus::Refused,
            dry_run: event.dry_run,
            message_id: None,
            reason: Some(event.reason.clone()),
            claimed_ms: at_ms,
            body: None,
            tagged_actor: None,
            source_message_ids: Vec::new(),
            fingerprint: None,
            response: None,
        }
    }

    /// Checks and applies a transition.
    pub fn advance(&mut self, step: Transition) -> Result<(), TransitionError> {
        self.status = next(&self.claim, self.status, step)?;
        Ok(())
    }

    /// Whether this claim holds its destination's day.
    pub fn holds_day(&self) -> bool {
        !self.dry_run && self.status.holds_day()
    }
}

/// The claim that holds `destination` on `day`, if any (ignoring `except`, the claim asking).
pub fn day_holder<'a>(
    claims: impl IntoIterator<Item = &'a Claim>,
    destination: &str,
    day: &str,
    except: Option<&ClaimId>,
) -> Option<&'a Claim> {
    claims.into_iter().find(|c| {
        c.destination == destination
            && c.day == day
            && c.holds_day()
            && except.is_none_or(|e| *e != c.claim)
    })
}

/// The reason code of a claim refused because its day is taken.
pub const DAY_ALREADY_CLAIMED: &str = "day_already_claimed";

/// The named refusal for a claim whose day is held by `holder`.
pub fn day_taken_reason(holder: &ClaimId, destination: &str, day: &str) -> String {
    format!(
        "{DAY_ALREADY_CLAIMED}: {destination} already has claim {holder} for {day} (a post has already gone out or may have)"
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::id::Digest;

    /// 2026-03-08T12:00:00Z etc., as ms.
    fn utc(year: i64, month: u32, day: u32, hour: i64, minute: i64) -> i64 {
        days_from_civil(year, month, day) * MS_PER_DAY + hour * 3_600_000 + minute * 60_000
    }

    #[test]
    fn civil_round_trips() {
        for days in [-800_000, -1, 0, 1, 19_000, 20_522, 2_000_000] {
            let (y, m, d) = civil_from_days(days);
            assert_eq!(days_from_civil(y, m, d), days);
        }
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(days_from_civil(2000, 2, 29), 11_016);
    }

    #[test]
    fn new_york_switches_at_two_in_the_morning_local() {
        let ny = Zone::NewYork;
        // 2026: DST from 2026-03-08 07:00Z to 2026-11-01 06:00Z.
        assert_eq!(ny.offset_minutes(utc(2026, 3, 8, 6, 59)), -300);
        assert_eq!(ny.offset_minutes(utc(2026, 3, 8, 7, 0)), -240);
        assert_eq!(ny.offset_minutes(utc(2026, 3, 8, 12, 0)), -240);
        assert_eq!(ny.offset_minutes(utc(2026, 11, 1, 5, 59)), -240);
        assert_eq!(ny.offset_minutes(utc(2026, 11, 1, 6, 0)), -300);
        assert_eq!(ny.offset_minutes(utc(2026, 11, 1, 15, 0)), -300);
        assert_eq!(ny.offset_minutes(utc(2025, 7, 4, 0, 0)), -240);
        assert_eq!(ny.offset_minutes(utc(2025, 1, 15, 0, 0)), -300);
        // 2025: second Sunday of March is the 9th, first Sunday of November the 2nd.
        assert_eq!(ny.offset_minutes(utc(2025, 3, 9, 7, 0)), -240);
        assert_eq!(ny.offset_minutes(utc(2025, 11, 2, 6, 0)), -300);
    }

    #[test]
    fn the_claim_day_is_the_local_calendar_day() {
        let ny = Zone::NewYork;
        // 03:00 UTC on the 3rd counts as the 2nd in New York (reference item 29).
        assert_eq!(ny.day(utc(2026, 6, 3, 3, 0) as u64), "2026-06-02");
        assert_eq!(Zone::Utc.day(utc(2026, 6, 3, 3, 0) as u64), "2026-06-03");
        // 23:30 and 00:30 Eastern are different days.
        assert_eq!(ny.day(utc(2026, 1, 16, 4, 30) as u64), "2026-01-15");
        assert_eq!(ny.day(utc(2026, 1, 16, 5, 30) as u64), "2026-01-16");
        let plus2 = Zone::parse("+02:00").unwrap();
        assert_eq!(plus2.day(utc(2026, 1, 15, 22, 30) as u64), "2026-01-16");
        assert_eq!(Zone::parse("-05:30").unwrap().name(), "-05:30");
    }

    #[test]
    fn local_times_round_trip_and_dates_parse() {
        let ny = Zone::NewYork;
        for (date, hour) in [("2026-03-08", 8), ("2026-11-01", 17), ("2026-07-04", 12)] {
            let date = Date::parse(date).unwrap();
            let at = ny.instant(date, hour * 3_600_000 + 90_000);
            assert_eq!(ny.local(at), (date, hour * 3_600_000 + 90_000));
        }
        // 08:00 on the spring-forward day is EDT (12:00Z); on the fall-back day EST (13:00Z).
        let spring = Date::parse("2026-03-08").unwrap();
        assert_eq!(ny.instant(spring, 8 * 3_600_000), utc(2026, 3, 8, 12, 0));
        let fall = Date::parse("2026-11-01").unwrap();
        assert_eq!(ny.instant(fall, 8 * 3_600_000), utc(2026, 11, 1, 13, 0));
        assert_eq!(spring.plus_days(1).to_string(), "2026-03-09");
        assert_eq!(spring.plus_days(-8).to_string(), "2026-02-28");
        for bad in [
            "2026-02-30",
            "2026-13-01",
            "26-03-08",
            "2026-3-8",
            "",
            "2026-03-0x",
        ] {
            assert!(Date::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn unknown_zones_are_refused_by_name() {
        for bad in ["Europe/Paris", "", "+2", "+25:00", "+02:75", "EST"] {
            let err = Zone::parse(bad).unwrap_err();
            assert!(err.to_string().contains("unknown time zone"), "{bad}");
        }
        assert_eq!(Zone::parse("UTC"), Ok(Zone::Utc));
        assert_eq!(Zone::parse("America/New_York"), Ok(Zone::NewYork));
        assert_eq!(Zone::parse("+05"), Ok(Zone::Fixed { minutes: 300 }));
    }

    #[test]
    fn transitions_follow_the_table() {
        use ClaimStatus as S;
        use Transition as T;
        let c = ClaimId::new("clm-1");
        let legal = [
            (S::Pending, T::Staged, S::Staged),
            (S::Pending, T::Refused, S::Refused),
            (S::Pending, T::Abandoned, S::Abandoned),
            (S::Staged, T::Approved, S::Approved),
            (S::Staged, T::Declined, S::Declined),
            (S::Approved, T::Posted, S::Posted),
            (S::Approved, T::Declined, S::Declined),
        ];
        for (from, step, to) in legal {
            assert_eq!(next(&c, from, step), Ok(to));
        }
        let statuses = [
            S::Pending,
            S::Staged,
            S::Refused,
            S::Abandoned,
            S::Approved,
            S::Posted,
            S::Declined,
            S::DryRun,
        ];
        let steps = [
            T::Staged,
            T::Refused,
            T::Abandoned,
            T::Approved,
            T::Posted,
            T::Declined,
        ];
        let mut refused = 0;
        for from in statuses {
            for step in steps {
                if legal.iter().any(|(f, s, _)| *f == from && *s == step) {
                    continue;
                }
                let err = next(&c, from, step).unwrap_err();
                assert_eq!(err.from, from);
                assert!(err.to_string().contains(from.as_str()), "{err}");
                refused += 1;
            }
        }
        assert_eq!(refused, statuses.len() * steps.len() - legal.len());
    }

    #[test]
    fn only_a_claim_that_went_out_takes_a_response() {
        use ClaimStatus as S;
        let c = ClaimId::new("clm-1");
        for ok in [S::Staged, S::Approved, S::Posted] {
            assert_eq!(check_response(&c, ok), Ok(()));
        }
        for refused in [S::Pending, S::Refused, S::Abandoned, S::Declined, S::DryRun] {
            let err = check_response(&c, refused).unwrap_err();
            assert!(err.to_string().contains(refused.as_str()), "{err}");
        }
    }

    #[test]
    fn claim_ids_are_deterministic_and_distinct() {
        fn fold(bytes: &[u8]) -> Digest {
            // A weak positional fold: the id must still tell the inputs apart.
            let mut out = [0u8; 32];
            for (i, b) in bytes.iter().enumerate() {
                out[i % 32] = out[i % 32].wrapping_mul(31).wrapping_add(*b);
            }
            Digest(out)
        }
        let cast = CastId::new("c");
        let a = claim_id(fold, &cast, "Socket-2", "dest", 1);
        assert_eq!(a, claim_id(fold, &cast, "Socket-2", "dest", 1));
        assert_ne!(a, claim_id(fold, &cast, "Socket-2", "dest", 2));
        assert_ne!(a, claim_id(fold, &cast, "Socket-3", "dest", 1));
        assert!(a.as_str().starts_with("clm-"));
    }

    #[test]
    fn one_claim_per_destination_per_day() {
        let base = Claim {
            claim: ClaimId::new("a"),
            cast: CastId::new("c"),
            step: "s".into(),
            destination: "d".into(),
            day: "2026-01-01".into(),
            attempt: 1,
            status: ClaimStatus::Pending,
            dry_run: false,
            message_id: None,
            reason: None,
            claimed_ms: 0,
            body: None,
            tagged_actor: None,
            source_message_ids: Vec::new(),
            fingerprint: None,
            response: None,
        };
        let mut dry = base.clone();
        dry.claim = ClaimId::new("dry");
        dry.dry_run = true;
        dry.status = ClaimStatus::DryRun;
        let mut refused = base.clone();
        refused.claim = ClaimId::new("r");
        refused.status = ClaimStatus::Refused;
        let claims = [dry, refused, base.clone()];
        assert_eq!(
            day_holder(&claims, "d", "2026-01-01", None).map(|c| c.claim.as_str()),
            Some("a")
        );
        assert!(day_holder(&claims, "d", "2026-01-02", None).is_none());
        assert!(day_holder(&claims, "other", "2026-01-01", None).is_none());
        assert!(day_holder(&claims, "d", "2026-01-01", Some(&base.claim)).is_none());
        let reason = day_taken_reason(&base.claim, "d", "2026-01-01");
        assert!(reason.starts_with(DAY_ALREADY_CLAIMED));
    }
}
