//! `show` and `export` print a cast as they read it; what they print must stay byte for byte
//! what the build before streaming printed. `fixtures/exports/` holds two casts exported by
//! that build (`stream`, a build-loop run with quotes, a tab and non-ASCII in its task, and
//! `stream-fork`, a failed recast of it) with its `show` outputs and bincode exports. The
//! `show` outputs differ from that build's in one deliberate way only: edge conditions and
//! failure classes are named as the log writes them (`not_satisfied`, not `NotSatisfied`).
//! `exports/reads/` holds what `diff` and `replay --json` printed on these casts and three
//! more (`diff-a`, `diff-b`, `diff-r`) before they stopped keeping every step and line.

use rstest::rstest;

use crate::common::{Sandbox, fixture};

/// A sandbox holding both fixture casts, imported from their JSONL exports.
fn imported() -> Sandbox {
    let sandbox = Sandbox::new();
    for cast in ["stream", "stream-fork"] {
        let run = sandbox.run(&["import", &fixture(&format!("exports/{cast}.jsonl"))]);
        assert_eq!(run.code, 0, "{}", run.stderr);
    }
    sandbox
}

fn pinned(name: &str) -> Vec<u8> {
    std::fs::read(fixture(&format!("exports/{name}"))).unwrap()
}

#[rstest]
#[case::origin("stream")]
#[case::recast("stream-fork")]
fn show_and_export_print_the_bytes_they_printed_before_streaming(#[case] name: &str) {
    let sandbox = imported();
    let cast = format!("fixture-{name}");

    let show = sandbox.run(&["show", &cast, "--json"]);
    assert_eq!(show.code, 0, "{}", show.stderr);
    assert_eq!(show.stdout.as_bytes(), pinned(&format!("{name}.show.json")));
    let text = sandbox.run(&["show", &cast]);
    assert_eq!(text.stdout.as_bytes(), pinned(&format!("{name}.show.txt")));

    let stdout = sandbox.run(&["export", &cast, "-o", "-"]);
    assert_eq!(stdout.code, 0, "{}", stdout.stderr);
    assert_eq!(stdout.stdout.as_bytes(), pinned(&format!("{name}.jsonl")));
    for format in ["jsonl", "bincode"] {
        let file = sandbox.path(&format!("{name}.{format}"));
        let file_arg = file.to_str().unwrap();
        let run = sandbox.run(&[
            "export", &cast, "--format", format, "-o", file_arg, "--json",
        ]);
        assert_eq!(run.code, 0, "{}", run.stderr);
        let bytes = std::fs::read(&file).unwrap();
        assert_eq!(bytes, pinned(&format!("{name}.{format}")), "{format}");
        assert_eq!(run.json()["bytes"], bytes.len());
    }
}

/// The streamed bincode export imports into another database as the same cast.
#[test]
fn a_streamed_bincode_export_imports_as_the_same_cast() {
    let sandbox = imported();
    let other = sandbox.path("other.db");
    for name in ["stream", "stream-fork"] {
        let file = sandbox.path(&format!("{name}.bincode"));
        let file_arg = file.to_str().unwrap();
        let cast = format!("fixture-{name}");
        let run = sandbox.run(&["export", &cast, "--format", "bincode", "-o", file_arg]);
        assert_eq!(run.code, 0, "{}", run.stderr);
        let run = sandbox.run_on(&other, &["import", file_arg, "--json"]);
        assert_eq!(run.code, 0, "{}", run.stderr);
        let shown = sandbox.run_on(&other, &["show", &cast, "--json"]);
        assert_eq!(
            shown.stdout.as_bytes(),
            pinned(&format!("{name}.show.json"))
        );
    }
    assert_eq!(sandbox.run_on(&other, &["verify", "--all"]).code, 0);
}

/// The casts of the diff fixtures: `diff-a`, a build-loop run; `diff-b`, the same run whose
/// evaluator accepts the greeting at once (other outputs, routing and data); `diff-r`, a
/// recast of `diff-a` at `Socket-3:3` with other replies (steps that begin in its parent).
fn imported_with_diffs() -> Sandbox {
    let sandbox = imported();
    for cast in ["diff-a", "diff-b", "diff-r"] {
        let run = sandbox.run(&["import", &fixture(&format!("exports/{cast}.jsonl"))]);
        assert_eq!(run.code, 0, "{}", run.stderr);
    }
    sandbox
}

/// `diff` keeps a digest per step and reads again only the steps that differ; `--json` and
/// text must print what it printed when it kept every step in full (`exports/reads/`, made
/// by that build).
#[rstest]
#[case::recast("stream", "stream-fork")]
#[case::recast_first("stream-fork", "stream")]
#[case::itself("stream", "stream")]
#[case::other_replies("diff-a", "diff-b")]
#[case::recast_at_item_two("diff-a", "diff-r")]
#[case::two_descendants("diff-r", "diff-b")]
fn diff_prints_the_bytes_it_printed_when_it_kept_every_step(#[case] a: &str, #[case] b: &str) {
    let sandbox = imported_with_diffs();
    let (ca, cb) = (format!("fixture-{a}"), format!("fixture-{b}"));
    let json = sandbox.run(&["diff", &ca, &cb, "--json"]);
    assert_eq!(json.code, 0, "{}", json.stderr);
    assert_eq!(
        json.stdout.as_bytes(),
        pinned(&format!("reads/{a}.{b}.diff.json"))
    );
    let text = sandbox.run(&["diff", &ca, &cb]);
    assert_eq!(text.code, 0, "{}", text.stderr);
    assert_eq!(
        text.stdout.as_bytes(),
        pinned(&format!("reads/{a}.{b}.diff.txt"))
    );
}

/// `replay` keeps the timeline's length, not its lines; `--json` must print what it printed
/// when it kept every line, folding from the first event and then from its checkpoints.
#[rstest]
#[case::origin("stream")]
#[case::recast("stream-fork")]
#[case::recast_at_item_two("diff-r")]
fn replay_prints_the_bytes_it_printed_when_it_kept_every_line(#[case] name: &str) {
    let sandbox = imported_with_diffs();
    let cast = format!("fixture-{name}");
    for run in ["first", "again"] {
        let replay = sandbox.run(&["replay", &cast, "--json"]);
        assert_eq!(replay.code, 0, "{}", replay.stderr);
        assert_eq!(
            replay.stdout.as_bytes(),
            pinned(&format!("reads/{name}.replay-{run}.json"))
        );
    }
}
