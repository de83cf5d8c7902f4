//! The `Fetcher` port: re-fetching a source message for the engagement runner's live check.
//!
//! # Fetcher SPEC
//! - `cmd:PROGRAM ARGS…`: spawned without a shell, `{"channel_id", "message_id"}` on stdin; it
//!   prints `{"status": N, "payload": {...}}` (or a bare payload, meaning 200). A failure to
//!   start, a non-zero exit or a timeout is `source_unreachable`; output that is not such JSON
//!   is `source_response_unreadable`.
//! - `file:DIR`: reads `DIR/<message_id>.json` in the same format; a missing file is a 404.

use std::path::{Path, PathBuf};
use std::time::Duration;

use castlog_replay::process::{self, Launcher};
use serde_json::{Value, json};

use crate::pipeline::live::{Fetched, read_fetch_output};

/// Something that fetches a source message again.
pub trait Fetcher {
    /// Fetches `message_id` in `channel_id`.
    fn fetch(&mut self, channel_id: &str, message_id: &str) -> Fetched;
}

/// Why a fetcher SPEC names no fetcher.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SpecError {
    /// `cmd:` without a program.
    #[error("cmd: needs a program, e.g. --fetcher \"cmd:./fetch.sh\"")]
    NoProgram,
    /// `file:` without a directory.
    #[error("file: needs a directory, e.g. --fetcher file:sources")]
    NoDirectory,
    /// `file:` naming something that is not a directory.
    #[error(
        "file: {} is not a directory (the fetcher reads one JSON file per message id from it)",
        dir.display()
    )]
    NotADirectory {
        /// The path, resolved against the working directory.
        dir: PathBuf,
    },
    /// Neither `cmd:` nor `file:`.
    #[error("unknown fetcher spec {spec:?}: use cmd:PROGRAM ARGS... or file:DIR")]
    Unknown {
        /// The SPEC as given.
        spec: String,
    },
}

/// Builds the fetcher a SPEC names; a `cmd:` program is started by `launcher`.
pub fn from_spec(
    spec: &str,
    cwd: &Path,
    timeout: Duration,
    launcher: &Launcher,
) -> Result<Box<dyn Fetcher>, SpecError> {
    if let Some(rest) = spec.strip_prefix("cmd:") {
        let argv: Vec<String> = rest.split_whitespace().map(str::to_owned).collect();
        if argv.is_empty() {
            return Err(SpecError::NoProgram);
        }
        return Ok(Box::new(CommandFetcher {
            argv,
            cwd: cwd.to_path_buf(),
            timeout,
            launcher: launcher.clone(),
        }));
    }
    if let Some(dir) = spec.strip_prefix("file:") {
        if dir.trim().is_empty() {
            return Err(SpecError::NoDirectory);
        }
        let dir = cwd.join(dir.trim());
        // A mistyped directory would read as "every message was deleted".
        if !dir.is_dir() {
            return Err(SpecError::NotADirectory { dir });
        }
        return Ok(Box::new(FileFetcher { dir }));
    }
    Err(SpecError::Unknown {
        spec: spec.to_owned(),
    })
}

/// A program per fetch.
#[derive(Debug, Clone)]
pub struct CommandFetcher {
    argv: Vec<String>,
    cwd: PathBuf,
    timeout: Duration,
    launcher: Launcher,
}

impl Fetcher for CommandFetcher {
    fn fetch(&mut self, channel_id: &str, message_id: &str) -> Fetched {
        let input = json!({ "channel_id": channel_id, "message_id": message_id }).to_string();
        match process::run(
            &self.launcher,
            &self.argv,
            &self.cwd,
            &[],
            input.as_bytes(),
            self.timeout,
        ) {
            Err(err) => Fetched::Failed(err.to_string()),
            Ok(done) if done.timed_out => Fetched::Failed(format!(
                "the fetcher did not answer within {:?} and was killed",
                self.timeout
            )),
            Ok(done) if done.code != Some(0) => Fetched::Failed(format!(
                "the fetcher exited with {}: {}",
                done.code
                    .map_or_else(|| "a signal".to_owned(), |c| format!("code {c}")),
                done.stderr.trim().chars().take(200).collect::<String>()
            )),
            Ok(done) => read_fetch_output(&done.stdout),
        }
    }
}

/// One JSON file per message.
#[derive(Debug, Clone)]
pub struct FileFetcher {
    dir: PathBuf,
}

impl FileFetcher {
    /// A file fetcher reading `dir`.
    pub fn new(dir: PathBuf) -> Self {
        Self { dir }
    }
}

impl Fetcher for FileFetcher {
    fn fetch(&mut self, _channel_id: &str, message_id: &str) -> Fetched {
        // Message ids are digits; anything else would name another file.
        if message_id.is_empty() || !message_id.bytes().all(|b| b.is_ascii_alphanumeric()) {
            return Fetched::Response {
                status: 404,
                payload: Value::Null,
            };
        }
        let path = self.dir.join(format!("{message_id}.json"));
        match std::fs::read_to_string(&path) {
            Ok(text) => read_fetch_output(&text),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Fetched::Response {
                status: 404,
                payload: Value::Null,
            },
            Err(e) => Fetched::Failed(format!("cannot read {}: {e}", path.display())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_fetcher_reads_payloads_and_404s() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("123.json"),
            r#"{"status": 200, "payload": {"author": {"id": "42"}}}"#,
        )
        .unwrap();
        std::fs::write(dir.path().join("124.json"), "garbage").unwrap();
        let mut f = FileFetcher::new(dir.path().to_path_buf());
        assert!(matches!(
            f.fetch("c", "123"),
            Fetched::Response { status: 200, .. }
        ));
        assert!(matches!(
            f.fetch("c", "999"),
            Fetched::Response { status: 404, .. }
        ));
        assert!(matches!(f.fetch("c", "124"), Fetched::Unreadable(_)));
        assert!(matches!(
            f.fetch("c", "../x"),
            Fetched::Response { status: 404, .. }
        ));
    }

    #[test]
    fn command_fetcher_names_hangs_and_garbage() {
        let dir = tempfile::tempdir().unwrap();
        let mut hang = from_spec(
            "cmd:sleep 5",
            dir.path(),
            Duration::from_millis(200),
            &Launcher::default(),
        )
        .unwrap();
        assert!(matches!(hang.fetch("c", "1"), Fetched::Failed(m) if m.contains("did not answer")));
        let mut garbage = from_spec(
            "cmd:echo nope",
            dir.path(),
            Duration::from_secs(5),
            &Launcher::default(),
        )
        .unwrap();
        assert!(
            matches!(garbage.fetch("c", "1"), Fetched::Unreadable(m) if m.contains("not JSON"))
        );
        assert!(
            from_spec(
                "http:x",
                dir.path(),
                Duration::from_secs(1),
                &Launcher::default()
            )
            .is_err()
        );
    }

    // The review's case: a fetcher script whose `sleep` outlives the killed shell.
    #[test]
    fn a_hanging_fetcher_script_is_stopped_at_the_timeout() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("hang.sh"),
            "#!/bin/sh\nsleep 30\necho late\n",
        )
        .unwrap();
        let mut hang = from_spec(
            "cmd:sh hang.sh",
            dir.path(),
            Duration::from_millis(300),
            &Launcher::default(),
        )
        .unwrap();
        let started = std::time::Instant::now();
        let fetched = hang.fetch("c", "1");
        let took = started.elapsed();
        assert!(
            matches!(&fetched, Fetched::Failed(m) if m.contains("did not answer within 300ms")),
            "{fetched:?}"
        );
        assert!(took < Duration::from_secs(10), "took {took:?}");
    }
}
