//! The engagement schedule: one run a day at an unpredictable but reproducible time inside
//! 08:00–18:00 New York time, and never after that day's post.
//!
//! - [`plan_day`]: the day's slot is 08:00 local plus `n` seconds, `n < 36,000`, where `n` is
//!   the first 8 bytes (big-endian) of the injected digest (blake3 in castlog) of
//!   `castlog-engagement-schedule-v1\n{seed}\n{YYYY-MM-DD}`, modulo 36,000. The same seed and
//!   day always give the same slot; another seed gives another. (The reference drew the
//!   seconds from CPython's Mersenne Twister seeded with a BLAKE2b digest; castlog keeps the
//!   properties, not the exact times.) The local clock is America/New_York with the daylight-
//!   saving rule of [`crate::calendar::Zone`], so the slot's offset is −4 (EDT) or −5 (EST) as
//!   the day has it, switch days included.
//! - [`check`]: a run may go ahead only on the plan's day, inside the window,
//!   at or after the slot, and when nothing was posted that day. A missed slot may still run
//!   later the same day, never after 18:00.
//! - [`idempotency_key`]: `engagement:YYYY-MM-DD`, one per day, whatever the seed.
//!
//! Everything here is pure: the digest comes in as a function, the time as milliseconds.

use castlog_core::calendar::{Date, Zone};
use castlog_core::env::DigestFn;

/// The window opens at this local hour.
pub const WINDOW_START_HOUR: i64 = 8;
/// The window closes at this local hour (exclusive).
pub const WINDOW_END_HOUR: i64 = 18;
/// The zone the window is in.
pub const ZONE: Zone = Zone::NewYork;

const MS_PER_HOUR: i64 = 3_600_000;
const WINDOW_SECONDS: u64 = ((WINDOW_END_HOUR - WINDOW_START_HOUR) * 3_600) as u64;

/// One day's slot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// The day (New York).
    pub day: Date,
    /// The slot, in ms since the epoch.
    pub at_ms: i64,
}

impl Plan {
    /// The day's idempotency key.
    pub fn key(&self) -> String {
        idempotency_key(self.day)
    }

    /// The offset from UTC at the slot, in minutes (−240 or −300).
    pub fn offset_minutes(&self) -> i32 {
        ZONE.offset_minutes(self.at_ms)
    }

    /// `EDT` or `EST`.
    pub fn zone_abbreviation(&self) -> &'static str {
        abbreviation(self.at_ms)
    }

    /// `YYYY-MM-DD HH:MM EDT`.
    pub fn slot(&self) -> String {
        local_minute(self.at_ms)
    }

    /// The preview line: `YYYY-MM-DD HH:MM EDT (key engagement:YYYY-MM-DD)`.
    pub fn line(&self) -> String {
        format!("{} (key {})", self.slot(), self.key())
    }
}

/// `EDT` or `EST` at the instant.
fn abbreviation(at_ms: i64) -> &'static str {
    if ZONE.offset_minutes(at_ms) == -240 {
        "EDT"
    } else {
        "EST"
    }
}

/// `YYYY-MM-DD HH:MM EDT` of an instant in New York.
pub fn local_minute(at_ms: i64) -> String {
    let (date, ms) = ZONE.local(at_ms);
    let minutes = ms / 60_000;
    format!(
        "{date} {:02}:{:02} {}",
        minutes / 60,
        minutes % 60,
        abbreviation(at_ms)
    )
}

/// The key of a day's run, whatever the seed: `engagement:YYYY-MM-DD`.
pub fn idempotency_key(day: Date) -> String {
    format!("engagement:{day}")
}

/// The slot of `day` for `seed`.
pub fn plan_day(day: Date, seed: &str, digest: DigestFn) -> Plan {
    let text = format!("castlog-engagement-schedule-v1\n{seed}\n{day}");
    let hash = digest(text.as_bytes()).0;
    let mut first = [0u8; 8];
    first.copy_from_slice(&hash[..8]);
    let seconds = u64::from_be_bytes(first) % WINDOW_SECONDS;
    // `seconds` < 36,000: it always fits.
    let offset_ms = i64::try_from(seconds).unwrap_or(0) * 1000;
    Plan {
        day,
        at_ms: ZONE.instant(day, WINDOW_START_HOUR * MS_PER_HOUR + offset_ms),
    }
}

/// The plans of `days` days from `start`.
pub fn preview(start: Date, days: u32, seed: &str, digest: DigestFn) -> Vec<Plan> {
    (0..i64::from(days))
        .map(|n| plan_day(start.plus_days(n), seed, digest))
        .collect()
}

/// Why a run may not go ahead now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Skip {
    /// Something was already posted that day.
    AlreadyPosted,
    /// It is another day in New York than the plan's.
    NotThePlannedDay,
    /// It is before 08:00 or from 18:00 on, New York time.
    OutsideWindow,
    /// The window is open but the slot has not come yet.
    BeforeSlot,
}

impl Skip {
    /// The reason string (a report's `refused` and the schedule rejection's reason).
    pub fn reason(&self) -> &'static str {
        match self {
            Skip::AlreadyPosted => "already_posted_today",
            Skip::NotThePlannedDay => "not_the_planned_day",
            Skip::OutsideWindow => "outside_window",
            Skip::BeforeSlot => "before_slot",
        }
    }

    /// The reason with what the schedule and the clock say, as a sentence.
    pub fn sentence(&self, plan: &Plan, now_ms: i64) -> String {
        let now = local_minute(now_ms);
        let slot = plan.line();
        match self {
            Skip::AlreadyPosted => format!(
                "already_posted_today: a post already went out on {} (or may have); the next run is tomorrow",
                plan.day
            ),
            Skip::NotThePlannedDay => {
                format!("not_the_planned_day: it is {now}, the plan is for {slot}")
            }
            Skip::OutsideWindow => format!(
                "outside_window: it is {now}; runs happen from {WINDOW_START_HOUR:02}:00 to {WINDOW_END_HOUR:02}:00 New York time (slot {slot})"
            ),
            Skip::BeforeSlot => format!("before_slot: it is {now}; the slot is {slot}"),
        }
    }
}

/// Whether a run may go ahead at `now_ms` (and if not, why).
pub fn check(plan: &Plan, now_ms: i64, already_posted: bool) -> Result<(), Skip> {
    let (date, ms) = ZONE.local(now_ms);
    if already_posted {
        return Err(Skip::AlreadyPosted);
    }
    if date != plan.day {
        return Err(Skip::NotThePlannedDay);
    }
    if !(WINDOW_START_HOUR * MS_PER_HOUR..WINDOW_END_HOUR * MS_PER_HOUR).contains(&ms) {
        return Err(Skip::OutsideWindow);
    }
    if now_ms < plan.at_ms {
        return Err(Skip::BeforeSlot);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use castlog_core::id::Digest;

    /// A stand-in digest (the real one is blake3): FNV-1a spread over 32 bytes.
    fn digest(bytes: &[u8]) -> Digest {
        let mut out = [0u8; 32];
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for (i, chunk) in out.chunks_mut(8).enumerate() {
            for b in bytes.iter().chain(&[i as u8]) {
                h ^= u64::from(*b);
                h = h.wrapping_mul(0x0100_0000_01b3);
            }
            chunk.copy_from_slice(&h.to_be_bytes());
        }
        Digest(out)
    }

    fn day(text: &str) -> Date {
        Date::parse(text).unwrap()
    }

    fn at(date: &str, hour: i64, minute: i64) -> i64 {
        ZONE.instant(day(date), hour * MS_PER_HOUR + minute * 60_000)
    }

    #[test]
    fn item_30_every_slot_is_inside_the_window_on_its_own_day() {
        let start = day("2026-01-01");
        for seed in ["a", "b", "castlog", ""] {
            for plan in preview(start, 366, seed, digest) {
                let (date, ms) = ZONE.local(plan.at_ms);
                assert_eq!(date, plan.day, "{seed}: {}", plan.line());
                assert!(
                    (8 * MS_PER_HOUR..18 * MS_PER_HOUR).contains(&ms),
                    "{seed}: {}",
                    plan.line()
                );
            }
        }
    }

    #[test]
    fn item_30_daylight_saving_days_get_their_offsets() {
        let spring = plan_day(day("2026-03-08"), "s", digest);
        assert_eq!(spring.offset_minutes(), -240);
        assert!(spring.line().contains(" EDT (key engagement:2026-03-08)"));
        let fall = plan_day(day("2026-11-01"), "s", digest);
        assert_eq!(fall.offset_minutes(), -300);
        assert!(fall.line().contains(" EST (key engagement:2026-11-01)"));
        assert_eq!(
            plan_day(day("2026-03-07"), "s", digest).offset_minutes(),
            -300
        );
        assert_eq!(
            plan_day(day("2026-10-31"), "s", digest).offset_minutes(),
            -240
        );
    }

    #[test]
    fn item_30_the_key_is_per_day_and_does_not_depend_on_the_seed() {
        let d = day("2026-06-10");
        let a = plan_day(d, "alpha", digest);
        let b = plan_day(d, "beta", digest);
        assert_eq!(a.key(), "engagement:2026-06-10");
        assert_eq!(a.key(), b.key());
        assert_eq!(
            a,
            plan_day(d, "alpha", digest),
            "deterministic per seed and day"
        );
        let days = preview(d, 30, "alpha", digest);
        let other = preview(d, 30, "beta", digest);
        assert!(days.iter().zip(&other).any(|(x, y)| x.at_ms != y.at_ms));
        assert_ne!(days[0].key(), days[1].key());
    }

    #[test]
    fn item_30_no_run_before_the_slot_after_18_or_after_a_post() {
        let plan = Plan {
            day: day("2026-06-10"),
            at_ms: at("2026-06-10", 11, 30),
        };
        let run = |h, m, posted| check(&plan, at("2026-06-10", h, m), posted);
        assert_eq!(run(7, 59, false), Err(Skip::OutsideWindow));
        assert_eq!(run(11, 29, false), Err(Skip::BeforeSlot));
        assert_eq!(run(11, 30, false), Ok(()));
        assert_eq!(
            run(17, 59, false),
            Ok(()),
            "a missed slot may run later that day"
        );
        assert_eq!(run(18, 0, false), Err(Skip::OutsideWindow));
        assert_eq!(run(23, 0, false), Err(Skip::OutsideWindow));
        assert_eq!(run(12, 0, true), Err(Skip::AlreadyPosted));
        assert_eq!(
            check(&plan, at("2026-06-11", 12, 0), false),
            Err(Skip::NotThePlannedDay)
        );
        // 01:00 UTC on the 11th is still the 10th in New York, but 21:00 there.
        assert_eq!(
            check(&plan, at("2026-06-10", 21, 0), false),
            Err(Skip::OutsideWindow)
        );
        let sentence = Skip::BeforeSlot.sentence(&plan, at("2026-06-10", 9, 5));
        assert_eq!(
            sentence,
            "before_slot: it is 2026-06-10 09:05 EDT; the slot is 2026-06-10 11:30 EDT (key engagement:2026-06-10)"
        );
    }
}
