//! Hostile files through the real binary: damaged configs, exports and agent scripts end with
//! exit 1 or 3 and a message in words on stderr, never a panic (exit 101). The property tests
//! run few cases (each runs castlog); the defects they found have one regression test each.

use std::sync::OnceLock;

use castlog_core::hostile::{self, damaged, rust_formatting};
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;

use crate::casts::TASK;
use crate::common::{Run, Sandbox, fixture};

const BUILD_LOOP: &str = include_str!("../../../fixtures/loadouts/build-loop.json");
const DEFAULT: &str = include_str!("../../../fixtures/pi-materia-default.json");
const SCRIPT: &str = include_str!("../../../fixtures/scripts/build-loop.jsonl");

/// Cases per property: each case is one or two castlog runs.
const CASES: u32 = 24;

/// A run that failed must have failed as a user error (1) or an integrity failure (3) and said
/// why in words; a run that succeeded (the damage left a valid file) is fine.
fn refused_in_words(run: &Run) -> Result<(), TestCaseError> {
    prop_assert!(
        !run.stderr.contains("panicked") && run.code != 101,
        "castlog panicked: {}",
        run.stderr
    );
    if run.code == 0 {
        return Ok(());
    }
    prop_assert!(
        run.code == 1 || run.code == 3,
        "exit {}: {}",
        run.code,
        run.stderr
    );
    if let Some(why) = rust_formatting(&run.stderr) {
        return Err(TestCaseError::fail(why));
    }
    Ok(())
}

/// `run CONFIG` of the build loop's task with the agent `script` (the fixture's if `None`).
fn run_with(sandbox: &Sandbox, config: &[u8], script: Option<&[u8]>) -> Run {
    let config_path = sandbox.path("config.json");
    std::fs::write(&config_path, config).unwrap();
    let script_path = match script {
        Some(bytes) => {
            let path = sandbox.path("script.jsonl");
            std::fs::write(&path, bytes).unwrap();
            path.to_str().unwrap().to_owned()
        }
        None => fixture("scripts/build-loop.jsonl"),
    };
    let agent = format!("scripted:{script_path}");
    sandbox.run(&[
        "run",
        config_path.to_str().unwrap(),
        "--task",
        TASK,
        "--agent",
        &agent,
    ])
}

/// The JSONL and bincode exports of a build-loop cast (prompts and entry bodies as blobs).
fn exports() -> &'static [Vec<u8>; 2] {
    static EXPORTS: OnceLock<[Vec<u8>; 2]> = OnceLock::new();
    EXPORTS.get_or_init(|| {
        let sandbox = Sandbox::new();
        let agent = format!("scripted:{}", fixture("scripts/build-loop.jsonl"));
        let run = sandbox.finish(&mut sandbox.build_loop("c", &agent));
        assert_eq!(run.code, 0, "{}", run.stderr);
        ["jsonl", "bincode"].map(|format| {
            let file = sandbox.path(format);
            let out = sandbox.run(&[
                "export",
                "c",
                "--format",
                format,
                "-o",
                file.to_str().unwrap(),
            ]);
            assert_eq!(out.code, 0, "{}", out.stderr);
            std::fs::read(file).unwrap()
        })
    })
}

fn import(bytes: &[u8]) -> Run {
    let sandbox = Sandbox::new();
    let file = sandbox.path("cast.export");
    std::fs::write(&file, bytes).unwrap();
    sandbox.run(&["import", file.to_str().unwrap()])
}

proptest! {
    #![proptest_config(hostile::config(CASES))]

    #[test]
    fn a_damaged_config_is_refused_in_words(
        config in prop_oneof![damaged(BUILD_LOOP.as_bytes()), damaged(DEFAULT.as_bytes())]
    ) {
        refused_in_words(&run_with(&Sandbox::new(), &config, None))?;
    }

    #[test]
    fn a_damaged_script_is_refused_in_words(script in damaged(SCRIPT.as_bytes())) {
        let run = run_with(&Sandbox::new(), BUILD_LOOP.as_bytes(), Some(&script));
        refused_in_words(&run)?;
    }

    #[test]
    fn a_damaged_export_is_refused_in_words(
        bytes in prop_oneof![damaged(&exports()[0]), damaged(&exports()[1])]
    ) {
        refused_in_words(&import(&bytes))?;
    }
}

/// Expects exit `code`, stderr with every one of `needles` and none of `never`.
fn assert_refused(run: &Run, code: i32, needles: &[&str], never: &[&str]) {
    assert!(!run.stderr.contains("panicked"), "{}", run.stderr);
    assert_eq!(run.code, code, "{}", run.stderr);
    for needle in needles {
        assert!(
            run.stderr.contains(needle),
            "lacks {needle:?}: {}",
            run.stderr
        );
    }
    for bad in never {
        assert!(!run.stderr.contains(bad), "has {bad:?}: {}", run.stderr);
    }
}

#[test]
fn a_bincode_export_cut_short_is_refused_in_words() {
    let bincode = &exports()[1];
    let run = import(&bincode[..bincode.len() / 2]);
    assert_refused(
        &run,
        1,
        &["malformed bincode export", "ends in the middle"],
        &["UnexpectedEnd", "line 0", "{ "],
    );
}

#[test]
fn an_export_header_of_the_wrong_shape_is_refused_in_words() {
    let run = import(b"null\n");
    assert_refused(
        &run,
        1,
        &["not an export header", "expected an object, at column 4"],
        &["struct", "line 1 column"],
    );
}

#[test]
fn an_export_line_of_the_wrong_type_names_its_column_not_line_1() {
    let text = String::from_utf8(exports()[0].clone()).unwrap();
    let header = text.lines().next().unwrap();
    let run = import(format!("{header}\n{{\"seq\": \"one\"}}\n").as_bytes());
    assert_refused(
        &run,
        1,
        &["at line 2", "expected a non-negative integer, at column"],
        &["u64", "line 1 column"],
    );
}

#[test]
fn a_carried_blob_that_does_not_match_is_an_integrity_failure_not_line_0() {
    let text = String::from_utf8(exports()[0].clone()).unwrap();
    let zeros = "0".repeat(64);
    let run = import(format!("{text}{{\"blob\":\"{zeros}\",\"text\":\"forged\"}}\n").as_bytes());
    assert_refused(
        &run,
        3,
        &[&format!("blob {zeros} does not match its content")],
        &["line 0"],
    );
}

#[test]
fn a_config_with_a_string_left_open_names_the_line_it_ends() {
    let sandbox = Sandbox::new();
    let config = "{\n  \"activeLoadout\": \"Build-Loop\n}\n";
    let run = run_with(&sandbox, config.as_bytes(), None);
    assert_refused(&run, 1, &["line 2, column 31"], &["column 0"]);
}

#[test]
fn a_script_usage_of_the_wrong_shape_is_told_in_words() {
    let sandbox = Sandbox::new();
    let script = "{\"reply\": \"{}\", \"usage\": 5}\n";
    let run = run_with(&sandbox, BUILD_LOOP.as_bytes(), Some(script.as_bytes()));
    assert_refused(
        &run,
        1,
        &["line 1", "\"usage\" must be", "expected an object"],
        &["struct"],
    );
}

#[test]
fn a_script_line_that_is_not_utf8_names_its_line() {
    let sandbox = Sandbox::new();
    let script = b"{\"reply\": \"a\"}\n{\"reply\": \"caf\xe9\"}\n";
    let run = run_with(&sandbox, BUILD_LOOP.as_bytes(), Some(script));
    assert_refused(
        &run,
        1,
        &["script.jsonl line 2: not UTF-8 text"],
        &["stream did not contain"],
    );
}

#[test]
fn a_script_line_that_is_not_json_names_its_column() {
    let sandbox = Sandbox::new();
    let mut lines: Vec<&str> = SCRIPT.lines().take(2).collect();
    lines.push("{\"reply\": oops}");
    let script = lines.join("\n");
    let run = run_with(&sandbox, BUILD_LOOP.as_bytes(), Some(script.as_bytes()));
    assert_refused(
        &run,
        1,
        &["line 3: not JSON: expected value, at column 11"],
        &["line 1 column"],
    );
}
