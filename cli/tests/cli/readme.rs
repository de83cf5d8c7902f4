//! The README's command blocks run as written, in order, in one scratch directory (with the
//! shipped `fixtures/`), the way a newcomer pastes them.
//!
//! Two kinds of block are run:
//! - a ```sh block holds commands only: every `castlog` line must exit as the README says (0, or
//!   the `exit N` its trailing comment names) without a panic;
//! - a ```console block holds `$ COMMAND` lines, each followed by the output it prints (stdout
//!   and stderr as a terminal shows them, one stream): the output must match what is shown, so
//!   the README never shows output castlog does not print. In shown output, `[..]` stands for
//!   any text within a line (ids, times, hashes, paths) and a line `...` for any number of lines
//!   (output left out); a command shown with no output must print nothing.
//!
//! A line ending in `\` continues on the next. A line that cannot run here is skipped only for a
//! reason listed in [`SKIPPED`]; a command other than `castlog` runs only when [`RUN_AS_WRITTEN`]
//! lists it, and a new command that is neither `castlog` nor listed fails the test until it is. ```text blocks are illustrations (a damaged database, a PostgreSQL setup)
//! and are not run.

use std::path::Path;
use std::process::Command;

use crate::common::{Sandbox, castlog_bin};

/// Lines that cannot run in a test, by a piece of their text, and why.
const SKIPPED: &[(&str, &str)] = &[
    ("cargo ", "builds or tests the workspace itself"),
    ("ollama", "needs a local Ollama server and a model"),
    ("openai:", "needs a chat-completions server"),
    ("cmd:llm", "needs the llm CLI and an API key"),
    ("cmd:claude", "needs the claude CLI and an account"),
    ("python3 ", "installs the peers' Python harness from PyPI"),
    (
        "for W in",
        "the benchmark loop: minutes of release-build work",
    ),
    ("(cd ../shared/peer", "runs the peers' harness"),
    (
        "./target/release/castlog bench synth --items 500",
        "a release-build benchmark of 500 items: minutes in a test's debug build",
    ),
    (
        "bench/peers/run.sh",
        "runs castlog and the peers for minutes",
    ),
    ("...", "a placeholder for arguments shown earlier"),
    (
        "castlog serve",
        "a server that runs until it is stopped (cli/tests/cli/serve.rs runs it)",
    ),
    (
        "clm-db98317518456fe1",
        "a claim of the engagement walkthrough's own database",
    ),
];

/// Commands other than `castlog` a README line may run, by how the line starts, and why.
const RUN_AS_WRITTEN: &[(&str, &str)] = &[(
    "git init -q ",
    "makes the git repository a tool cast checkpoints its files in",
)];

/// One command of a block: continuation lines joined, with its 1-based README line and, in a
/// console block, the output the README shows after it.
struct Line {
    number: usize,
    text: String,
    shown: Option<Vec<String>>,
}

#[derive(Clone, Copy, PartialEq)]
enum Block {
    None,
    Sh,
    Console,
    Other,
}

/// The commands of every ```sh and ```console block, in order.
fn readme_lines(readme: &str) -> Vec<Line> {
    let mut lines: Vec<Line> = Vec::new();
    let mut block = Block::None;
    let mut pending: Option<Line> = None;
    for (i, raw) in readme.lines().enumerate() {
        if raw.starts_with("```") {
            block = match (block, raw.trim()) {
                (Block::None, "```sh") => Block::Sh,
                (Block::None, "```console") => Block::Console,
                (Block::None, _) => Block::Other,
                _ => Block::None,
            };
            continue;
        }
        let command = match block {
            Block::None | Block::Other => continue,
            Block::Sh => Some(raw.trim()),
            Block::Console if pending.is_some() => Some(raw.trim()),
            Block::Console => raw.strip_prefix("$ ").map(str::trim),
        };
        let Some(piece) = command else {
            if let Some(shown) = lines.last_mut().and_then(|l| l.shown.as_mut()) {
                shown.push(raw.to_owned());
            }
            continue;
        };
        let mut line = pending.take().unwrap_or(Line {
            number: i + 1,
            text: String::new(),
            shown: (block == Block::Console).then(Vec::new),
        });
        if let Some(head) = piece.strip_suffix('\\') {
            line.text.push_str(head);
            line.text.push(' ');
            pending = Some(line);
            continue;
        }
        line.text.push_str(piece);
        if !line.text.is_empty() && !line.text.starts_with('#') {
            lines.push(line);
        }
    }
    lines
}

/// The exit code a line's trailing comment promises (`# ... exit N ...`), else 0.
fn expected_code(text: &str) -> i32 {
    let Some((_, comment)) = text.split_once(" #") else {
        return 0;
    };
    let words: Vec<&str> = comment.split_whitespace().collect();
    words
        .windows(2)
        .find(|w| w[0] == "exit")
        .and_then(|w| w[1].trim_end_matches([',', ':', ')']).parse().ok())
        .unwrap_or(0)
}

/// Whether one printed line is the shown one, `[..]` standing for any text.
fn line_matches(shown: &str, actual: &str) -> bool {
    let (shown, actual) = (shown.trim_end(), actual.trim_end());
    let pieces: Vec<&str> = shown.split("[..]").collect();
    let [first, middle @ .., last] = pieces.as_slice() else {
        return shown == actual;
    };
    let Some(mut rest) = actual.strip_prefix(first) else {
        return false;
    };
    for piece in middle {
        match rest.find(piece) {
            Some(at) => rest = &rest[at + piece.len()..],
            None => return false,
        }
    }
    rest.len() >= last.len() && rest.ends_with(last)
}

/// Whether printed output is the shown output, a `...` line standing for any number of lines
/// (blank lines at the end of either do not count).
fn output_matches(shown: &[String], actual: &[&str]) -> bool {
    let shown = trim_blank_tail(shown);
    let actual = trim_blank_tail(actual);
    match shown.split_first() {
        None => actual.is_empty(),
        Some((first, rest)) if first.trim() == "..." => {
            (0..=actual.len()).any(|skip| output_matches(rest, &actual[skip..]))
        }
        Some((first, rest)) => actual
            .split_first()
            .is_some_and(|(line, more)| line_matches(first, line) && output_matches(rest, more)),
    }
}

fn trim_blank_tail<S: AsRef<str>>(lines: &[S]) -> &[S] {
    let end = lines
        .iter()
        .rposition(|l| !l.as_ref().trim().is_empty())
        .map_or(0, |i| i + 1);
    &lines[..end]
}

#[test]
fn every_castlog_line_of_the_readme_runs_as_written() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let sandbox = Sandbox::new();
    std::os::unix::fs::symlink(root.join("fixtures"), sandbox.path("fixtures")).unwrap();
    let bin_dir = Path::new(castlog_bin()).parent().unwrap().to_owned();
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut exported: Vec<(String, String)> = Vec::new();
    let (mut ran, mut compared) = (0, 0);
    for line in readme_lines(&readme) {
        if SKIPPED.iter().any(|(needle, _)| line.text.contains(needle)) {
            continue;
        }
        if let Some(assignment) = line.text.strip_prefix("export ") {
            let assignment = assignment.split(" #").next().unwrap_or("").trim();
            let (name, value) = assignment.split_once('=').unwrap_or_else(|| {
                panic!("README line {}: export without NAME=VALUE", line.number)
            });
            exported.push((name.to_owned(), value.to_owned()));
            continue;
        }
        assert!(
            line.text.starts_with("castlog ")
                || RUN_AS_WRITTEN
                    .iter()
                    .any(|(start, _)| line.text.starts_with(start)),
            "README line {} runs `{}`: make it a castlog command, or list why it cannot run in \
             SKIPPED",
            line.number,
            line.text
        );
        // A console block shows one stream, as a terminal does: stderr goes where stdout goes.
        let script = match line.shown {
            Some(_) => format!("exec 2>&1\n{}", line.text),
            None => line.text.clone(),
        };
        let output = Command::new("sh")
            .args(["-c", &script])
            .current_dir(sandbox.dir.path())
            .env("PATH", &path)
            .env("HOME", sandbox.dir.path())
            .env("NO_COLOR", "1")
            .env_remove("CASTLOG_DB")
            .env_remove("CASTLOG_ANCHOR")
            .env_remove("RUST_LOG")
            .env_remove("PI_MATERIA_PROFILE_DIR")
            .env_remove("XDG_CONFIG_HOME")
            .envs(exported.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(
            output.status.code(),
            Some(expected_code(&line.text)),
            "README line {}: `{}`\nstdout: {stdout}\nstderr: {stderr}",
            line.number,
            line.text,
        );
        assert!(
            !stderr.contains("panicked") && !stdout.contains("panicked"),
            "README line {}: {stdout}{stderr}",
            line.number
        );
        if let Some(shown) = &line.shown {
            let actual: Vec<&str> = stdout.lines().collect();
            assert!(
                output_matches(shown, &actual),
                "README line {}: `{}` prints other output than the README shows\n--- shown\n{}\n\
                 --- printed\n{stdout}",
                line.number,
                line.text,
                shown.join("\n"),
            );
            compared += 1;
        }
        ran += 1;
    }
    assert!(ran >= 30, "only {ran} README lines ran");
    assert!(
        compared >= 10,
        "only {compared} README outputs were compared"
    );
}

#[test]
fn readme_lines_are_joined_and_their_exit_codes_read() {
    let lines =
        readme_lines("text\n```sh\n# a comment\ncastlog run a \\\n    --json   # exit 3\n```\n");
    assert_eq!(lines.len(), 1);
    assert_eq!(lines[0].number, 4);
    assert_eq!(lines[0].text, "castlog run a  --json   # exit 3");
    assert!(lines[0].shown.is_none());
    assert_eq!(expected_code(&lines[0].text), 3);
    assert_eq!(expected_code("castlog casts"), 0);
}

#[test]
fn console_blocks_pair_each_command_with_its_shown_output() {
    let readme = "```console\n$ castlog run a \\\n    --json\n{\"cast\": \"a\"}\n...\n\
                  $ castlog casts   # exit 1\n```\n```text\n$ castlog not-run\n```\n\
                  ```json\n{\"x\": 1}\n```\n";
    let lines = readme_lines(readme);
    assert_eq!(lines.len(), 2, "the text block is not run");
    assert_eq!(lines[0].text, "castlog run a  --json");
    assert_eq!(
        lines[0].shown.as_deref(),
        Some(&["{\"cast\": \"a\"}".to_owned(), "...".to_owned()][..])
    );
    assert_eq!(lines[1].number, 6);
    assert_eq!(lines[1].shown.as_deref(), Some(&[][..]));
    assert_eq!(expected_code(&lines[1].text), 1);
}

#[test]
fn shown_output_must_be_the_printed_output() {
    let shown = |text: &str| text.lines().map(str::to_owned).collect::<Vec<_>>();
    let printed = [
        "    1  cast_started  loadout Build-Loop (c3325e7a28d3)",
        "cast x: failed",
    ];
    // the same, `[..]` for a hash, `...` for lines left out
    assert!(output_matches(
        &shown("    1  cast_started  loadout Build-Loop ([..])\ncast x: failed"),
        &printed
    ));
    assert!(output_matches(&shown("...\ncast x: failed"), &printed));
    assert!(output_matches(
        &shown("...\n...\ncast x: failed\n..."),
        &printed
    ));
    assert!(output_matches(&shown("[..]\ncast [..]: failed"), &printed));
    assert!(output_matches(&shown("..."), &[]));
    assert!(output_matches(
        &shown("trailing blanks  "),
        &["trailing blanks"]
    ));
    // a different word, a missing line, a line too many, nothing printed
    assert!(!output_matches(&shown("...\ncast x: completed"), &printed));
    assert!(!output_matches(&shown("cast x: failed"), &printed));
    assert!(!output_matches(
        &shown("...\ncast x: failed\nmore"),
        &printed
    ));
    assert!(!output_matches(&shown(""), &printed));
    assert!(!output_matches(&shown("cast x: failed"), &[]));
    // `[..]` matches within one line only, and the text around it must all be there
    assert!(!line_matches("cast [..]: failed", "cast x: completed"));
    assert!(!line_matches("a[..]b[..]c", "a-c-b"));
    assert!(line_matches("a[..]b[..]c", "a-b-c"));
    assert!(!line_matches("ab[..]ba", "aba"));
}
