//! `show` and `export` print a cast as they read it; what they print must stay byte for byte
//! what the build before streaming printed. `fixtures/exports/` holds two casts exported by
//! that build (`stream`, a build-loop run with quotes, a tab and non-ASCII in its task, and
//! `stream-fork`, a failed recast of it) with its `show` outputs and bincode exports. The
//! `show` outputs differ from that build's in one deliberate way only: edge conditions and
//! failure classes are named as the log writes them (`not_satisfied`, not `NotSatisfied`).

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
