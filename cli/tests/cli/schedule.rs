//! `castlog engage-schedule` and `engage --schedule SEED` (spec §2.13, item 30): one slot a
//! day inside 08:00–18:00 New York time, daylight saving followed, a key per day whatever the
//! seed, and no run before the slot, after 18:00 or after that day's post.

use serde_json::{Value, json};

use crate::common::{Run, Sandbox};
use crate::engage::{claims, engage, engage_fixture, roles};

fn preview(sandbox: &Sandbox, start: &str, days: &str, seed: &str) -> Vec<Value> {
    let run = sandbox.run(&[
        "engage-schedule",
        "--start",
        start,
        "--days",
        days,
        "--seed",
        seed,
        "--json",
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    run.json()["days"].as_array().unwrap().clone()
}

/// Minutes after local midnight of a slot's `YYYY-MM-DD HH:MM ZZZ`.
fn slot_minutes(slot: &str) -> i64 {
    let hhmm = &slot[11..16];
    hhmm[..2].parse::<i64>().unwrap() * 60 + hhmm[3..].parse::<i64>().unwrap()
}

#[test]
fn item_30_every_slot_is_inside_the_window_on_its_own_day() {
    let sandbox = Sandbox::new();
    for (start, seed) in [("2026-03-06", "team-a"), ("2026-10-28", "team-b")] {
        for day in preview(&sandbox, start, "60", seed) {
            let date = day["day"].as_str().unwrap();
            let slot = day["slot"].as_str().unwrap();
            assert!(slot.starts_with(date), "{day}");
            let minutes = slot_minutes(slot);
            assert!((8 * 60..18 * 60).contains(&minutes), "{day}");
            // The UTC instant and the offset agree with the local slot.
            let at = day["at"].as_str().unwrap();
            assert_eq!(&at[..10], date, "{day}");
            let utc = at[11..13].parse::<i64>().unwrap() * 60 + at[14..16].parse::<i64>().unwrap();
            let offset = day["offset_minutes"].as_i64().unwrap();
            assert_eq!(utc + offset, minutes, "{day}");
            assert_eq!(day["key"], format!("engagement:{date}"));
            assert_eq!(
                day["line"],
                format!("{slot} (key engagement:{date})"),
                "{day}"
            );
        }
    }
}

#[test]
fn item_30_daylight_saving_days_get_their_offsets() {
    let sandbox = Sandbox::new();
    let offset = |start: &str| {
        let days = preview(&sandbox, start, "2", "team-a");
        (
            days[0]["offset_minutes"].as_i64().unwrap(),
            days[1]["offset_minutes"].as_i64().unwrap(),
            days[1]["zone"].as_str().unwrap().to_owned(),
        )
    };
    assert_eq!(offset("2026-03-07"), (-300, -240, "EDT".into()));
    assert_eq!(offset("2026-10-31"), (-240, -300, "EST".into()));
    let text = sandbox.run(&[
        "engage-schedule",
        "--start",
        "2026-03-06",
        "--days",
        "7",
        "--seed",
        "team-a",
    ]);
    assert_eq!(text.code, 0, "{}", text.stderr);
    let lines: Vec<&str> = text.stdout.lines().collect();
    assert_eq!(lines.len(), 7);
    assert!(lines[1].starts_with("2026-03-07 ") && lines[1].contains(" EST (key"));
    assert!(
        lines[2].ends_with(" EDT (key engagement:2026-03-08)"),
        "{}",
        lines[2]
    );
}

#[test]
fn item_30_the_key_is_per_day_and_does_not_depend_on_the_seed() {
    let sandbox = Sandbox::new();
    let a = preview(&sandbox, "2026-06-01", "14", "team-a");
    let b = preview(&sandbox, "2026-06-01", "14", "team-b");
    let keys = |days: &[Value]| days.iter().map(|d| d["key"].clone()).collect::<Vec<_>>();
    assert_eq!(keys(&a), keys(&b));
    assert!(a.iter().zip(&b).any(|(x, y)| x["slot"] != y["slot"]));
    assert_eq!(a, preview(&sandbox, "2026-06-01", "14", "team-a"));
}

#[test]
fn bad_schedule_arguments_are_named() {
    let sandbox = Sandbox::new();
    let run = sandbox.run(&["engage-schedule", "--start", "2026-02-30", "--seed", "s"]);
    assert_eq!(run.code, 1);
    assert!(
        run.stderr.contains("--start: \"2026-02-30\" is not a date"),
        "{}",
        run.stderr
    );
    let run = sandbox.run(&["engage-schedule", "--seed", " "]);
    assert_eq!(run.code, 1);
    assert!(
        run.stderr.contains("--seed must not be empty"),
        "{}",
        run.stderr
    );
    let run = sandbox.run(&["engage-schedule", "--seed", "s", "--days", "0"]);
    assert_eq!(run.code, 1, "a usage error is the user's: {}", run.stderr);
    assert!(run.stderr.contains("--days"), "{}", run.stderr);
    let input = crate::common::fixture("engage/input.json");
    let run = engage(&sandbox, &input, &["--schedule", ""]);
    assert_eq!(run.code, 1);
    assert!(
        run.stderr.contains("--schedule needs a seed"),
        "{}",
        run.stderr
    );
    assert_eq!(
        sandbox.run(&["casts", "--json"]).code,
        1,
        "nothing was recorded"
    );
}

/// Runs the fixture at `now_ms` on schedule `team-a`, with a drafter that records its calls.
fn scheduled_run(sandbox: &Sandbox, now_ms: i64, extra: &[&str]) -> Run {
    let mut input = engage_fixture();
    input["now"] = json!(now_ms);
    let path = sandbox.write("scheduled.json", &input.to_string());
    let drafter = sandbox.write(
        "drafter.sh",
        &format!(
            "cat > /dev/null\necho call >> {}\necho '{}'\n",
            sandbox.path("drafter-calls").display(),
            json!({"question": "How has the ss31 been treating your sleep so far?"})
        ),
    );
    let drafter = format!("cmd:sh {drafter}");
    let mut args = vec!["--schedule", "team-a", "--drafter", drafter.as_str()];
    args.extend_from_slice(extra);
    engage(sandbox, &path, &args)
}

#[test]
fn item_30_engage_on_schedule_skips_by_name_before_the_slot_after_18_and_after_a_post() {
    let sandbox = Sandbox::new();
    let day = &preview(&sandbox, "2026-06-10", "1", "team-a")[0];
    let slot = day["at_ms"].as_i64().unwrap();
    let minute = 60_000;
    // 2026-06-10 is EDT: 07:30 local is 11:30Z, 18:30 local is 22:30Z.
    let early = 1_781_091_000_000;
    let late = 1_781_130_600_000;
    for (now, reason) in [
        (slot - minute, "before_slot"),
        (early, "outside_window"),
        (late, "outside_window"),
    ] {
        let run = scheduled_run(&sandbox, now, &[]);
        assert_eq!(run.code, 0, "{}", run.stderr);
        let report = run.json();
        assert_eq!(report["outcome"], "skip", "{report}");
        assert_eq!(report["refused"], reason, "{report}");
        assert_eq!(report["skip_stage"], "schedule");
        assert!(
            report["skip_reason"].as_str().unwrap().starts_with(reason),
            "{report}"
        );
        assert_eq!(report["schedule"]["key"], "engagement:2026-06-10");
        assert_eq!(report["schedule"]["ok"], false);
        assert_eq!(report["rejections"], json!([]));
    }
    assert!(claims(&sandbox).is_empty());
    assert!(
        !sandbox.path("drafter-calls").exists(),
        "an agent was asked"
    );

    // At the slot the run goes ahead, and posts.
    let on_time = scheduled_run(
        &sandbox,
        slot + minute,
        &["--post", "--sender", "file:outbox"],
    );
    assert_eq!(on_time.code, 0, "{}", on_time.stderr);
    let report = on_time.json();
    assert_eq!(report["schedule"]["ok"], true);
    assert_eq!(report["send"], "staged", "{report}");
    assert!(sandbox.path("drafter-calls").exists());

    // Later the same day, within the window: the day's post has gone out.
    let again = scheduled_run(&sandbox, slot + 2 * minute, &[]);
    assert_eq!(again.code, 0, "{}", again.stderr);
    let report = again.json();
    assert_eq!(report["refused"], "already_posted_today", "{report}");
    assert_eq!(report["schedule"]["already_posted"], true);
    let mut args = vec![
        "engage".to_owned(),
        sandbox.path("scheduled.json").display().to_string(),
    ];
    args.extend(roles());
    args.extend(["--schedule".to_owned(), "team-a".to_owned()]);
    let text = sandbox.run(&args.iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(text.code, 0, "{}", text.stderr);
    let line = format!(
        "schedule     : {} (key engagement:2026-06-10): already_posted_today",
        day["slot"].as_str().unwrap()
    );
    assert!(text.stdout.contains(&line), "{}", text.stdout);
    assert_eq!(sandbox.run(&["verify", "--json"]).json()["ok"], true);
}
