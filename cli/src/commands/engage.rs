//! `castlog engage`: the engagement runner on an INPUT.json, one engage cast per run.

use std::path::Path;
use std::time::Duration;

use castlog_core::calendar::Date;
use castlog_core::env::Clock;
use castlog_core::id::CastId;
use castlog_engage::fetcher;
use castlog_engage::pipeline::input;
use castlog_engage::pipeline::schedule;
use castlog_engage::pipeline::scorecard::{self, BUILTIN_FIXTURES};
use castlog_engage::runner::{EngageError, Roles, engage};
use castlog_events::LogError;
use castlog_events::chain::blob_hash;
use castlog_replay::clock::SystemClock;
use serde_json::json;

use crate::args::{EngageArgs, ScheduleArgs, ScorecardArgs};
use crate::error::CliError;
use crate::output;

fn required<'a>(spec: &'a Option<String>, flag: &str, what: &str) -> Result<&'a str, CliError> {
    spec.as_deref()
        .filter(|s| !s.trim().is_empty())
        .ok_or_else(|| {
            CliError::user(format!(
                "engage needs {flag} SPEC ({what}): scripted:FILE, cmd:PROGRAM ARGS... or openai:BASE_URL#MODEL"
            ))
        })
}

/// `castlog engage`.
pub fn run(
    db: &Path,
    args: &EngageArgs,
    globals: &crate::globals::Globals,
) -> Result<(), CliError> {
    let shown = args.input.display().to_string();
    let text = std::fs::read_to_string(&args.input)
        .map_err(|e| CliError::user(format!("cannot read {shown}: {e}")))?;
    let input = input::parse(&text).map_err(|e| CliError::user(format!("{shown}: {e}")))?;
    if args
        .schedule
        .as_deref()
        .is_some_and(|s| s.trim().is_empty())
    {
        return Err(CliError::user(
            "--schedule needs a seed: the same seed gives the same daily slots (see engage-schedule)",
        ));
    }
    let qualifier_spec = required(&args.qualifier, "--qualifier", "the hook detector")?;
    let drafter_spec = required(&args.drafter, "--drafter", "the question drafter")?;
    let judge_spec = required(&args.judge, "--judge", "the fidelity judge")?;
    let fetcher_spec = args.fetcher.as_deref().ok_or_else(|| {
        CliError::user(
            "engage needs --fetcher SPEC (the live source check): cmd:PROGRAM ARGS... or file:DIR",
        )
    })?;
    // Everything is checked before anything is recorded.
    let mut sender = super::cast::sender(&args.posting, globals)?;
    let mut fetcher = fetcher::from_spec(
        fetcher_spec,
        &super::cast::cwd(),
        Duration::from_millis(input.settings.fetch_timeout_ms),
        &globals.launcher,
    )
    .map_err(|e| CliError::user(e.to_string()))?;
    let mut qualifier = super::cast::agent(qualifier_spec, 0, None, None, globals)?;
    let mut drafter = super::cast::agent(drafter_spec, 0, None, None, globals)?;
    let mut judge = super::cast::agent(judge_spec, 0, None, None, globals)?;
    let log = super::open_or_create(db)?;
    let clock = SystemClock;
    let now = input
        .now_ms
        .and_then(|n| u64::try_from(n).ok())
        .unwrap_or_else(|| clock.now_ms());
    let chosen = args
        .cast
        .as_ref()
        .map(|id| super::chosen_cast(&log, id))
        .transpose()?;
    let stamp = output::timestamp(clock.now_ms())
        .replace([':', '.'], "-")
        .trim_end_matches('Z')
        .to_owned();
    let base = format!("engage-{stamp}");
    let mut n = 1;
    // Recorded with the run: a spec's URL may carry a user and password.
    let scrub = |spec: &str| globals.launcher.redactor().scrub(spec);
    let specs = json!({
        "qualifier": scrub(qualifier_spec),
        "drafter": scrub(drafter_spec),
        "judge": scrub(judge_spec),
        "fetcher": scrub(fetcher_spec),
        "sender": sender.as_ref().map(|s| scrub(&s.spec())),
    });
    // A generated id can be taken by a run started in the same millisecond: the first append
    // fails (nothing was recorded or asked yet) and the next id is tried.
    let (cast, report) = loop {
        let cast = match &chosen {
            Some(id) => id.clone(),
            None if n == 1 => CastId::new(base.as_str()),
            None => CastId::new(format!("{base}-{n}")),
        };
        let result = engage(
            &log,
            &cast,
            &input,
            Roles {
                qualifier: qualifier.as_mut(),
                drafter: drafter.as_mut(),
                judge: judge.as_mut(),
                fetcher: fetcher.as_mut(),
                sender: sender
                    .as_mut()
                    .map(|s| s.as_mut() as &mut dyn castlog_replay::sender::Sender),
            },
            now,
            specs.clone(),
            args.schedule.as_deref(),
        );
        match result {
            Err(EngageError::Log(LogError::Conflict { .. } | LogError::CastExists { .. }))
                if chosen.is_none() && n < 100 =>
            {
                n += 1;
            }
            Err(EngageError::Log(e)) => return Err(e.into()),
            Err(e) => return Err(CliError::internal(e.to_string())),
            Ok(report) => break (cast, report),
        }
    };
    if args.json {
        output::json(&report)?;
    } else {
        crate::say!("{}", report.render(input.settings.report_examples as usize));
    }
    if report.error.is_empty() {
        Ok(())
    } else {
        Err(CliError::internal(format!(
            "engage cast {cast} stopped early: {}; its report above is complete up to there",
            report.error
        )))
    }
}

/// `castlog engage-scorecard`: the judge over the fixtures; exit 1 unless it passes.
pub fn scorecard(args: &ScorecardArgs, globals: &crate::globals::Globals) -> Result<(), CliError> {
    let (text, shown) = match &args.fixtures {
        Some(path) => (
            std::fs::read_to_string(path)
                .map_err(|e| CliError::user(format!("cannot read {}: {e}", path.display())))?,
            path.display().to_string(),
        ),
        None => (
            BUILTIN_FIXTURES.to_owned(),
            "the built-in fixtures".to_owned(),
        ),
    };
    let fixtures =
        scorecard::parse_fixtures(&text).map_err(|e| CliError::user(format!("{shown}: {e}")))?;
    let mut judge = super::cast::agent(&args.judge, 0, None, None, globals)?;
    let card = castlog_engage::scorecard::score(judge.as_mut(), &fixtures);
    if args.json {
        output::json(&card.to_json())?;
    } else {
        for r in card.results.iter().filter(|r| !r.correct()) {
            let kind = if r.injection {
                "injection failure"
            } else if r.false_negative() {
                "false negative"
            } else {
                "false positive"
            };
            let judged = if r.actual_faithful {
                "faithful"
            } else {
                "unfaithful"
            };
            let reason = if r.reason.is_empty() {
                String::new()
            } else {
                format!(" ({})", r.reason)
            };
            crate::say!("  {kind:<17} {}: judged {judged}{reason}", r.name);
        }
        crate::say!(
            "{}: {}",
            if card.passed() { "passed" } else { "FAILED" },
            card.summary()
        );
    }
    // Injection failures are false negatives, so a passed card has none.
    if card.passed() {
        Ok(())
    } else {
        Err(CliError::user(format!(
            "the judge {} does not pass the fidelity scorecard ({}); do not use it with engage",
            args.judge,
            card.summary()
        )))
    }
}

/// `castlog engage-schedule`: the slots of the coming days.
pub fn schedule(args: &ScheduleArgs) -> Result<(), CliError> {
    if args.seed.trim().is_empty() {
        return Err(CliError::user(
            "--seed must not be empty: the same seed gives the same slots",
        ));
    }
    let start = match &args.start {
        Some(text) => Date::parse(text).map_err(|e| CliError::user(format!("--start: {e}")))?,
        None => {
            let now = i64::try_from(SystemClock.now_ms()).unwrap_or(i64::MAX);
            schedule::ZONE.date(now)
        }
    };
    let plans = schedule::preview(start, args.days, &args.seed, blob_hash);
    if args.json {
        return output::json(&json!({
            "zone": schedule::ZONE.name(),
            "window": format!(
                "{:02}:00-{:02}:00",
                schedule::WINDOW_START_HOUR,
                schedule::WINDOW_END_HOUR
            ),
            "days": plans.iter().map(|p| json!({
                "day": p.day.to_string(),
                "slot": p.slot(),
                "at": output::timestamp(u64::try_from(p.at_ms).unwrap_or(0)),
                "at_ms": p.at_ms,
                "offset_minutes": p.offset_minutes(),
                "zone": p.zone_abbreviation(),
                "key": p.key(),
                "line": p.line(),
            })).collect::<Vec<_>>(),
        }));
    }
    for plan in &plans {
        crate::say!("{}", plan.line());
    }
    Ok(())
}
