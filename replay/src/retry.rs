//! How an agent retries a transient failure: how many attempts a prompt gets, how long the
//! agent waits before the next one (exponential backoff from BASE to MAX, with jitter), and a
//! server's `Retry-After`.
//!
//! Every attempt is recorded (`agent_failed`, with its attempt number and the wait chosen in
//! its message), so nothing here is needed to replay a cast: replay never calls an agent. The
//! jitter is the only randomness, and it lives here, drawn from a generator the caller seeds
//! (the CLI from the clock, tests with a fixed seed).

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// Attempts a prompt gets when no policy says otherwise (the first and two retries).
pub const DEFAULT_ATTEMPTS: u32 = 3;

/// The first backoff when none is given.
pub const DEFAULT_BASE: Duration = Duration::from_millis(500);

/// The longest backoff when none is given.
pub const DEFAULT_MAX: Duration = Duration::from_secs(8);

/// The share of a backoff the jitter may take off when none is given.
pub const DEFAULT_JITTER: f64 = 0.25;

/// The longest `Retry-After` honoured; a server asking for more is waited for this long.
pub const RETRY_AFTER_CAP: Duration = Duration::from_secs(600);

/// How often a wait looks at the cancel flag.
const CANCEL_POLL: Duration = Duration::from_millis(50);

/// How many attempts a prompt gets and how long to wait between them.
#[derive(Debug, Clone, PartialEq)]
pub struct RetryPolicy {
    /// Attempts in all (at least 1): the first call and `attempts - 1` retries.
    pub attempts: u32,
    /// The wait after the first failure, doubled per failure in a row.
    pub base: Duration,
    /// Cap on one wait, before jitter: doubling stops there.
    pub max: Duration,
    /// The share (0 to 1) of a backoff that may be taken off at random, so clients that failed
    /// together do not come back together.
    pub jitter: f64,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            attempts: DEFAULT_ATTEMPTS,
            base: DEFAULT_BASE,
            max: DEFAULT_MAX,
            jitter: DEFAULT_JITTER,
        }
    }
}

/// A bad `--retries`, `--backoff` or `--jitter` value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RetryError {
    /// `--backoff` is not `BASE..MAX`.
    #[error("--backoff needs BASE..MAX in seconds, e.g. 0.5..8 ({message})")]
    BadBackoff {
        /// What is wrong.
        message: String,
    },
    /// `--jitter` is not a share from 0 to 1.
    #[error("--jitter needs a share from 0 to 1, e.g. 0.25 (got {given})")]
    BadJitter {
        /// The `--jitter` text as given.
        given: String,
    },
}

/// Parses `BASE..MAX` (seconds, fractions allowed) into the two durations.
pub fn parse_backoff(text: &str) -> Result<(Duration, Duration), RetryError> {
    let bad = |message: &str| RetryError::BadBackoff {
        message: message.to_owned(),
    };
    let (base, max) = text
        .split_once("..")
        .ok_or_else(|| bad("the .. between BASE and MAX is missing"))?;
    let seconds = |part: &str, name: &str| {
        part.trim()
            .parse::<f64>()
            .ok()
            .filter(|s| s.is_finite() && *s >= 0.0 && *s <= RETRY_AFTER_CAP.as_secs_f64())
            .map(Duration::from_secs_f64)
            .ok_or_else(|| bad(&format!("{name} is not a number of seconds from 0 to 600")))
    };
    let (base, max) = (seconds(base, "BASE")?, seconds(max, "MAX")?);
    if base > max {
        return Err(bad("BASE is longer than MAX"));
    }
    Ok((base, max))
}

/// Parses a jitter share from 0 to 1.
pub fn parse_jitter(text: &str) -> Result<f64, RetryError> {
    text.trim()
        .parse::<f64>()
        .ok()
        .filter(|j| (0.0..=1.0).contains(j))
        .ok_or_else(|| RetryError::BadJitter {
            given: text.to_owned(),
        })
}

/// The wait before the next attempt and what chose it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Wait {
    /// Time to sleep before the next attempt (the backoff with its jitter, or `Retry-After`).
    pub delay: Duration,
    /// True when the server's `Retry-After` chose it, false for the backoff.
    pub retry_after: bool,
}

impl Wait {
    /// The words recorded in the failure's message: `waiting 1s (Retry-After) before attempt
    /// 2 of 3`.
    pub fn describe(&self, next_attempt: u32, attempts: u32) -> String {
        let why = if self.retry_after {
            "Retry-After"
        } else {
            "backoff"
        };
        format!(
            "waiting {} ({why}) before attempt {next_attempt} of {attempts}",
            seconds(self.delay)
        )
    }
}

/// A duration in seconds with at most millisecond digits: `1s`, `0.5s`, `1.234s`.
fn seconds(delay: Duration) -> String {
    let millis = delay.as_millis();
    let (whole, frac) = (millis / 1000, millis % 1000);
    if frac == 0 {
        return format!("{whole}s");
    }
    let frac = format!("{frac:03}");
    format!("{whole}.{}s", frac.trim_end_matches('0'))
}

/// A policy with its jitter source, as one agent uses it.
#[derive(Debug, Clone)]
pub struct Retrier {
    policy: RetryPolicy,
    rng: fastrand::Rng,
}

impl Retrier {
    /// Draws jitter from a generator seeded with `seed` (the same seed, the same waits).
    pub fn new(policy: RetryPolicy, seed: u64) -> Self {
        Self {
            policy,
            rng: fastrand::Rng::with_seed(seed),
        }
    }

    /// Attempts, backoff and jitter this schedule follows.
    pub fn policy(&self) -> &RetryPolicy {
        &self.policy
    }

    /// The wait after `failures` (at least 1) transient failures in a row: the server's
    /// `retry_after` when it sent one (capped at [`RETRY_AFTER_CAP`], no jitter: it named a
    /// time), else the backoff `base * 2^(failures-1)` capped at `max`, less a random share of
    /// at most `jitter`.
    pub fn wait(&mut self, failures: u32, retry_after: Option<Duration>) -> Wait {
        if let Some(after) = retry_after {
            return Wait {
                delay: after.min(RETRY_AFTER_CAP),
                retry_after: true,
            };
        }
        let full = backoff(&self.policy, failures);
        let cut = full.mul_f64(self.policy.jitter.clamp(0.0, 1.0) * self.rng.f64());
        Wait {
            // Whole milliseconds, so the recorded words are the wait slept.
            delay: Duration::from_millis(
                u64::try_from(full.saturating_sub(cut).as_millis()).unwrap_or(u64::MAX),
            ),
            retry_after: false,
        }
    }
}

/// The backoff without jitter after `failures` transient failures in a row.
pub fn backoff(policy: &RetryPolicy, failures: u32) -> Duration {
    if failures == 0 || policy.base.is_zero() {
        return Duration::ZERO;
    }
    let factor = 1u32.checked_shl(failures - 1).unwrap_or(u32::MAX);
    policy
        .base
        .checked_mul(factor)
        .unwrap_or(policy.max)
        .min(policy.max)
}

/// Reads a `Retry-After` header: delay-seconds or an HTTP date, which is turned into a wait
/// from `now_ms` (a date already past is no wait). `None` when it is neither.
pub fn parse_retry_after(value: &str, now_ms: u64) -> Option<Duration> {
    let value = value.trim();
    if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) {
        return Some(Duration::from_secs(value.parse().unwrap_or(u64::MAX)));
    }
    let at = httpdate::parse_http_date(value).ok()?;
    let at = at.duration_since(std::time::UNIX_EPOCH).ok()?;
    Some(at.saturating_sub(Duration::from_millis(now_ms)))
}

/// Sleeps `delay`, waking early when `cancel` is set; false when it was cancelled.
pub fn sleep(delay: Duration, cancel: Option<&AtomicBool>) -> bool {
    let Some(cancel) = cancel else {
        std::thread::sleep(delay);
        return true;
    };
    let until = std::time::Instant::now() + delay;
    loop {
        if cancel.load(Ordering::SeqCst) {
            return false;
        }
        let left = until.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            return true;
        }
        std::thread::sleep(left.min(CANCEL_POLL));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(jitter: f64) -> RetryPolicy {
        RetryPolicy {
            attempts: 5,
            base: Duration::from_millis(500),
            max: Duration::from_secs(8),
            jitter,
        }
    }

    #[test]
    fn backoff_doubles_and_is_capped() {
        let p = policy(0.0);
        assert_eq!(backoff(&p, 0), Duration::ZERO);
        assert_eq!(backoff(&p, 1), Duration::from_millis(500));
        assert_eq!(backoff(&p, 2), Duration::from_secs(1));
        assert_eq!(backoff(&p, 4), Duration::from_secs(4));
        assert_eq!(backoff(&p, 5), Duration::from_secs(8));
        assert_eq!(backoff(&p, 40), Duration::from_secs(8));
    }

    #[test]
    fn jitter_takes_at_most_its_share_and_a_seed_repeats_it() {
        let mut a = Retrier::new(policy(0.5), 7);
        let mut b = Retrier::new(policy(0.5), 7);
        for failures in 1..=6 {
            let (wa, wb) = (a.wait(failures, None), b.wait(failures, None));
            assert_eq!(wa, wb);
            let full = backoff(&policy(0.0), failures);
            assert!(
                wa.delay <= full && wa.delay >= full / 2,
                "{wa:?} of {full:?}"
            );
        }
        let mut none = Retrier::new(policy(0.0), 1);
        assert_eq!(none.wait(2, None).delay, Duration::from_secs(1));
    }

    #[test]
    fn retry_after_wins_over_the_backoff_and_is_capped() {
        let mut r = Retrier::new(policy(0.5), 1);
        let wait = r.wait(1, Some(Duration::from_secs(3)));
        assert_eq!(wait.delay, Duration::from_secs(3));
        assert!(wait.retry_after);
        assert_eq!(
            r.wait(1, Some(Duration::from_secs(99_999))).delay,
            RETRY_AFTER_CAP
        );
        assert_eq!(
            wait.describe(2, 5),
            "waiting 3s (Retry-After) before attempt 2 of 5"
        );
        assert_eq!(seconds(Duration::from_millis(1250)), "1.25s");
    }

    #[test]
    fn retry_after_reads_seconds_and_http_dates() {
        // 2015-10-21T07:28:00Z in milliseconds.
        let now = 1_445_412_480_000;
        assert_eq!(parse_retry_after(" 7 ", now), Some(Duration::from_secs(7)));
        assert_eq!(
            parse_retry_after("Wed, 21 Oct 2015 07:28:02 GMT", now),
            Some(Duration::from_secs(2))
        );
        assert_eq!(
            parse_retry_after("Wed, 21 Oct 2015 07:27:00 GMT", now),
            Some(Duration::ZERO)
        );
        assert_eq!(parse_retry_after("soon", now), None);
        assert_eq!(parse_retry_after("-1", now), None);
    }

    #[test]
    fn backoff_and_jitter_options_parse() {
        assert_eq!(
            parse_backoff("0.5..8").unwrap(),
            (Duration::from_millis(500), Duration::from_secs(8))
        );
        assert!(parse_backoff("8..1").is_err());
        assert!(parse_backoff("1").is_err());
        assert!(parse_backoff("x..1").is_err());
        assert_eq!(parse_jitter("0.25").unwrap(), 0.25);
        assert!(parse_jitter("2").is_err());
    }

    #[test]
    fn a_cancelled_sleep_ends_early() {
        let flag = AtomicBool::new(true);
        assert!(!sleep(Duration::from_secs(60), Some(&flag)));
        assert!(sleep(Duration::ZERO, None));
    }
}
