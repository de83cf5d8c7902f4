//! `--exit-status`: a command that drives a cast tells by its exit code how the cast stands
//! (4 failed, 5 waiting for an agent or a person), so a script can branch without parsing;
//! without the flag those casts exit 0 as before.

use crate::common::{Sandbox, fixture, scripted};

#[test]
fn a_failed_cast_exits_4_a_waiting_one_5_a_completed_one_0() {
    let sandbox = Sandbox::new();
    let build = fixture("loadouts/build-loop.json");
    let consult = fixture("loadouts/consult.json");
    let exhausted = scripted("build-loop-exhausted.jsonl");
    let by_hand = scripted("consult-by-hand.jsonl");
    let run = |args: &[&str]| {
        let run = sandbox.run(args);
        assert!(!run.stderr.contains("panicked"), "{}", run.stderr);
        run
    };
    // Without the flag a failed cast is still exit 0.
    let plain = run(&[
        "run", &build, "--task", "t", "--agent", &exhausted, "--cast", "plain",
    ]);
    assert_eq!(plain.code, 0, "{}", plain.stderr);

    let failed = run(&[
        "run",
        &build,
        "--task",
        "t",
        "--agent",
        &exhausted,
        "--cast",
        "ex",
        "--exit-status",
        "--json",
    ]);
    assert_eq!(failed.code, 4, "{}", failed.stderr);
    // The cast's own document is the one JSON document, and says the same.
    assert_eq!(failed.json()["status"], "failed");
    assert!(
        failed.stderr.contains("cast ex: failed"),
        "{}",
        failed.stderr
    );

    let waiting = run(&[
        "run",
        &consult,
        "--task",
        "t",
        "--agent",
        &by_hand,
        "--cast",
        "plan",
        "--exit-status",
    ]);
    assert_eq!(waiting.code, 5, "{}", waiting.stderr);
    let refined = run(&[
        "refine",
        "plan",
        "two items",
        "--agent",
        &by_hand,
        "--exit-status",
    ]);
    assert_eq!(refined.code, 5, "{}", refined.stderr);
    let done = run(&["continue", "plan", "--agent", &by_hand, "--exit-status"]);
    assert_eq!(done.code, 0, "{}", done.stderr);

    // A recast of the failed cast from its start, answered to the end, completes.
    let recast = run(&[
        "recast",
        "plain",
        "--at",
        "Socket-1:1",
        "--agent",
        &scripted("build-loop.jsonl"),
        "--cast",
        "again",
        "--exit-status",
    ]);
    assert_eq!(recast.code, 0, "{}", recast.stderr);
}
