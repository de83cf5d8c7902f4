//! Calendar days and the few time zones castlog knows: claim days, the engagement windows and
//! the schedule's slots. US Eastern time comes from the IANA time-zone database bundled into the
//! build (`jiff`'s copy, compiled in): the core reads no system file, no clock and no
//! environment, so a day is the same on every machine.

use std::fmt;
use std::sync::LazyLock;

use jiff::Timestamp;
use jiff::tz::{Offset, TimeZone, TimeZoneDatabase};

/// The zone claim days are counted in unless configured otherwise (as in the reference).
pub const DEFAULT_ZONE: &str = "America/New_York";

/// A time zone the claim day can be computed in.
///
/// castlog knows a small set of zones: `America/New_York` (US Eastern as the bundled IANA
/// database has it: since 2007 UTC-4 from the second Sunday of March, 02:00 local, to the first
/// Sunday of November, 02:00 local, and UTC-5 otherwise; earlier years by the rules then in
/// force), `UTC`, and fixed offsets written `+HH:MM` / `-HH:MM` (or `+HH`). Any other name is a
/// configuration error.
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
    /// The zone name exactly as the config or command line gave it.
    pub name: String,
}

/// US Eastern time from the database compiled into the build, looked up once. The bundled copy
/// always has it (a test says so); were it missing, Eastern standard time is used all year
/// rather than failing a claim.
static NEW_YORK: LazyLock<TimeZone> = LazyLock::new(|| {
    TimeZoneDatabase::bundled()
        .get(DEFAULT_ZONE)
        .unwrap_or_else(|_| TimeZone::fixed(Offset::constant(-5)))
});

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
                // Instants past the range the database covers (years beyond 9999) take the
                // offset at its edge.
                let at = Timestamp::from_millisecond(at_ms).unwrap_or(if at_ms < 0 {
                    Timestamp::MIN
                } else {
                    Timestamp::MAX
                });
                NEW_YORK.to_offset(at).seconds().div_euclid(60)
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

/// Text that is not a real calendar date in the form `YYYY-MM-DD`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{text:?} is not a date like 2026-03-08")]
pub struct DateError {
    /// The text as given, untrimmed.
    pub text: String,
}

/// A calendar date.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Date {
    /// Proleptic Gregorian year (astronomical: 0 is 1 BC).
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
    pub fn parse(text: &str) -> Result<Date, DateError> {
        let err = || DateError {
            text: text.to_owned(),
        };
        let t = text.trim();
        let b = t.as_bytes();
        if b.len() != 10 || b[4] != b'-' || b[7] != b'-' {
            return Err(err());
        }
        let num = |range: std::ops::Range<usize>| -> Result<u32, DateError> {
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

#[cfg(test)]
mod tests {
    use super::*;

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

    /// The zone comes from the bundled database, not the fallback.
    #[test]
    fn new_york_is_in_the_bundled_database() {
        assert!(TimeZoneDatabase::bundled().get(DEFAULT_ZONE).is_ok());
        assert_eq!(Zone::NewYork.offset_minutes(utc(2026, 7, 1, 0, 0)), -240);
    }

    /// The switches of years on either side of the ones pinned above, and 2007, the first
    /// year of the rule in force today.
    #[rstest::rstest]
    #[case::y2007((2007, 3, 11), (2007, 11, 4))]
    #[case::y2024((2024, 3, 10), (2024, 11, 3))]
    #[case::y2027((2027, 3, 14), (2027, 11, 7))]
    #[case::y2030((2030, 3, 10), (2030, 11, 3))]
    #[case::y2038((2038, 3, 14), (2038, 11, 7))]
    fn new_york_switches_on_the_us_rule(
        #[case] spring: (i64, u32, u32),
        #[case] fall: (i64, u32, u32),
    ) {
        let ny = Zone::NewYork;
        let (y, m, d) = spring;
        assert_eq!(ny.offset_minutes(utc(y, m, d, 6, 59) + 59_999), -300);
        assert_eq!(ny.offset_minutes(utc(y, m, d, 7, 0)), -240);
        let (y, m, d) = fall;
        assert_eq!(ny.offset_minutes(utc(y, m, d, 5, 59) + 59_999), -240);
        assert_eq!(ny.offset_minutes(utc(y, m, d, 6, 0)), -300);
    }

    /// Claim days around the switches: local midnight is 05:00Z in winter and 04:00Z in summer,
    /// and the day of the switch itself is 23 or 25 hours long.
    #[test]
    fn claim_days_end_at_local_midnight_across_the_switches() {
        let ny = Zone::NewYork;
        let day = |y, m, d, h, min| ny.day(utc(y, m, d, h, min) as u64);
        // Spring forward on 2026-03-08: the 7th ends at 05:00Z, the 8th at 04:00Z.
        assert_eq!(day(2026, 3, 8, 4, 59), "2026-03-07");
        assert_eq!(day(2026, 3, 8, 5, 0), "2026-03-08");
        assert_eq!(day(2026, 3, 9, 3, 59), "2026-03-08");
        assert_eq!(day(2026, 3, 9, 4, 0), "2026-03-09");
        // Fall back on 2026-11-01: the 31st ends at 04:00Z, the 1st at 05:00Z.
        assert_eq!(day(2026, 11, 1, 3, 59), "2026-10-31");
        assert_eq!(day(2026, 11, 1, 4, 0), "2026-11-01");
        assert_eq!(day(2026, 11, 2, 4, 59), "2026-11-01");
        assert_eq!(day(2026, 11, 2, 5, 0), "2026-11-02");
        // The local clock's reading on those days.
        let spring = Date::parse("2026-03-08").unwrap();
        assert_eq!(ny.local(utc(2026, 3, 8, 6, 59)), (spring, 7_140_000));
        assert_eq!(ny.local(utc(2026, 3, 8, 7, 0)), (spring, 3 * 3_600_000));
        let fall = Date::parse("2026-11-01").unwrap();
        assert_eq!(
            ny.local(utc(2026, 11, 1, 5, 30)),
            (fall, 3_600_000 + 1_800_000)
        );
        assert_eq!(
            ny.local(utc(2026, 11, 1, 6, 30)),
            (fall, 3_600_000 + 1_800_000)
        );
        assert_eq!(ny.instant(fall, 23 * 3_600_000), utc(2026, 11, 2, 4, 0));
        assert_eq!(ny.instant(spring, 23 * 3_600_000), utc(2026, 3, 9, 3, 0));
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
}
