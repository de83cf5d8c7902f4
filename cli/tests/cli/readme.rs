//! The README's command blocks run as written, in order, in one scratch directory (with the
//! shipped `fixtures/`), the way a newcomer pastes them. Every `castlog` line of every `sh`
//! block must exit as the README says (0, or the `exit N` its comment names) without a panic;
//! a line that cannot run here is skipped only for a reason listed in [`SKIPPED`], and a new
//! command that is neither `castlog` nor listed fails the test until it is.

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

/// One command line of a block: continuation lines joined, with its 1-based README line.
struct Line {
    number: usize,
    text: String,
}

/// The command lines of every ```sh block, in order.
fn sh_lines(readme: &str) -> Vec<Line> {
    let mut lines = Vec::new();
    let mut in_sh = false;
    let mut pending: Option<Line> = None;
    for (i, raw) in readme.lines().enumerate() {
        if raw.starts_with("```") {
            in_sh = !in_sh && raw.trim() == "```sh";
            continue;
        }
        if !in_sh {
            continue;
        }
        let mut line = pending.take().unwrap_or(Line {
            number: i + 1,
            text: String::new(),
        });
        let piece = raw.trim();
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
    let mut ran = 0;
    for line in sh_lines(&readme) {
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
            line.text.starts_with("castlog "),
            "README line {} runs `{}`: make it a castlog command, or list why it cannot run in \
             SKIPPED",
            line.number,
            line.text
        );
        let output = Command::new("sh")
            .args(["-c", &line.text])
            .current_dir(sandbox.dir.path())
            .env("PATH", &path)
            .env("HOME", sandbox.dir.path())
            .env("NO_COLOR", "1")
            .env_remove("CASTLOG_DB")
            .env_remove("CASTLOG_ANCHOR")
            .env_remove("RUST_LOG")
            .envs(exported.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(
            output.status.code(),
            Some(expected_code(&line.text)),
            "README line {}: `{}`\nstdout: {}\nstderr: {stderr}",
            line.number,
            line.text,
            String::from_utf8_lossy(&output.stdout)
        );
        assert!(
            !stderr.contains("panicked"),
            "README line {}: {stderr}",
            line.number
        );
        ran += 1;
    }
    assert!(ran >= 30, "only {ran} README lines ran");
}

#[test]
fn readme_lines_are_joined_and_their_exit_codes_read() {
    let lines =
        sh_lines("text\n```sh\n# a comment\ncastlog run a \\\n    --json   # exit 3\n```\n");
    assert_eq!(lines.len(), 1);
    assert_eq!(lines[0].number, 4);
    assert_eq!(lines[0].text, "castlog run a  --json   # exit 3");
    assert_eq!(expected_code(&lines[0].text), 3);
    assert_eq!(expected_code("castlog casts"), 0);
}
