//! The `Sender` port: where a claimed post goes, and what came back.
//!
//! A sender is called at most once per claim, only after the claim is durable in the log and
//! its day is taken, and only when the run was started with `--post`. Nothing retries a send.
//! Its answer is one of three:
//! - staged (a message id came back),
//! - refused (a definite no: nothing was sent, e.g. the program could not start, an HTTP 4xx),
//! - unknown (the post may have gone out: no id, a non-zero exit, a timeout, an HTTP 5xx or a
//!   dropped connection). The claim stays pending until a person resolves it.
//!
//! # The envelope
//! Every sender receives the same envelope, a JSON object: `claim`, `cast`, `destination`,
//! `body`, and the extra fields of the post. An engagement send's extra fields are `question`
//! (the bare question), `reply_to_message_id` and `reply_to_channel_id` (the member's own
//! message), `reply_to_guild_id`, `mention_actor_id` and `can_reply_in_place` (true only when
//! the destination is the source channel). A post socket's send has none.
//!
//! # Sender SPEC
//! - `cmd:PROGRAM ARGS…`: spawned without a shell, the body on stdin; the message id is the
//!   trimmed stdout. The environment carries `CASTLOG_CLAIM`, `CASTLOG_DESTINATION`,
//!   `CASTLOG_CAST`, one `CASTLOG_<FIELD>` per extra field that is a string, number or bool
//!   (e.g. `CASTLOG_REPLY_TO_MESSAGE_ID`, `CASTLOG_CAN_REPLY_IN_PLACE=true`), and
//!   `CASTLOG_ENVELOPE`, the envelope as JSON without the body. At the timeout the program and
//!   every process it started are killed, and the send is unknown.
//! - `file:DIR`: writes the body to `DIR/<claim id>` (created if needed, never overwritten) and
//!   the envelope to `DIR/<claim id>.json`, and returns the body's file name as the id; for
//!   local use and tests.
//! - `webhook:URL`: an HTTP POST of the envelope as JSON; the id is the response JSON's `id` or
//!   `message_id` (a string or a number).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use castlog_core::id::{CastId, ClaimId};
use castlog_core::input::SendOutcome;
use serde_json::{Map, Value, json};

use crate::process::{self, Launcher};
use crate::secrets::{Redactor, without_userinfo};

/// How long a `cmd:` sender may run.
pub const COMMAND_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a `webhook:` request may take.
pub const WEBHOOK_TIMEOUT: Duration = Duration::from_secs(30);

/// One post to send.
#[derive(Debug, Clone, Copy)]
pub struct Outbound<'a> {
    /// Claim made (and durable) before the send; the envelope carries its id.
    pub claim: &'a ClaimId,
    /// Cast whose log holds the claim.
    pub cast: &'a CastId,
    /// Where it goes.
    pub destination: &'a str,
    /// Text to send, already rendered from the post's body path or template.
    pub body: &'a str,
    /// Extra fields for senders that carry structure (the engagement runner's reply
    /// reference, mention), as a JSON object or null.
    pub extra: &'a Value,
}

impl Outbound<'_> {
    /// The envelope every sender receives (see the module documentation).
    pub fn envelope(&self) -> Map<String, Value> {
        let mut envelope = Map::new();
        if let Value::Object(extra) = self.extra {
            envelope.extend(extra.clone());
        }
        envelope.insert("claim".into(), json!(self.claim));
        envelope.insert("cast".into(), json!(self.cast));
        envelope.insert("destination".into(), json!(self.destination));
        envelope.insert("body".into(), json!(self.body));
        envelope
    }

    /// The extra fields as environment variables of a `cmd:` sender: `CASTLOG_<FIELD>` for
    /// each scalar field, and `CASTLOG_ENVELOPE` (the envelope without the body).
    fn environment(&self) -> Vec<(String, String)> {
        let mut vars = Vec::new();
        if let Value::Object(extra) = self.extra {
            for (key, value) in extra {
                let text = match value {
                    Value::String(s) => s.clone(),
                    Value::Number(n) => n.to_string(),
                    Value::Bool(b) => b.to_string(),
                    _ => continue,
                };
                let name: String = key
                    .chars()
                    .map(|c| {
                        if c.is_ascii_alphanumeric() {
                            c.to_ascii_uppercase()
                        } else {
                            '_'
                        }
                    })
                    .collect();
                vars.push((format!("CASTLOG_{name}"), text));
            }
        }
        let mut envelope = self.envelope();
        envelope.remove("body");
        vars.push((
            "CASTLOG_ENVELOPE".into(),
            Value::Object(envelope).to_string(),
        ));
        vars
    }
}

/// Something that sends posts.
pub trait Sender {
    /// Sends one post, once.
    fn send(&mut self, post: &Outbound<'_>) -> SendOutcome;

    /// The SPEC it was built from, for messages.
    fn spec(&self) -> String;
}

/// A sender SPEC castlog cannot build a sender from.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SenderError {
    /// `cmd:` without a program.
    #[error("cmd: needs a program, e.g. --sender \"cmd:./post.sh staging\"")]
    NoProgram,
    /// `file:` without a directory.
    #[error("file: needs a directory, e.g. --sender file:outbox")]
    NoDirectory,
    /// `webhook:` with text that is not a URL.
    #[error(
        "webhook: needs an http(s) URL, e.g. webhook:http://localhost:8080/post ({url:?}: {source})"
    )]
    NotAUrl {
        /// The text after `webhook:`.
        url: String,
        /// Why it does not parse.
        #[source]
        source: <reqwest::Url as std::str::FromStr>::Err,
    },
    /// `webhook:` with a URL of another scheme.
    #[error("webhook: needs an http or https URL, not {url:?}")]
    NotHttp {
        /// The URL given.
        url: String,
    },
    /// The HTTP client could not be built.
    #[error("cannot build the webhook client: {0}")]
    Client(#[source] reqwest::Error),
    /// No sender has this prefix.
    #[error("unknown sender spec {spec:?}: use cmd:PROGRAM ARGS..., file:DIR or webhook:URL")]
    UnknownSpec {
        /// The SPEC given.
        spec: String,
    },
}

/// Builds the sender a SPEC names; relative `file:` directories and `cmd:` programs are
/// resolved against `cwd`; a program is started by `launcher`, and a webhook's answers are
/// scrubbed by its redactor.
pub fn from_spec(
    spec: &str,
    cwd: &Path,
    launcher: &Launcher,
) -> Result<Box<dyn Sender>, SenderError> {
    if let Some(rest) = spec.strip_prefix("cmd:") {
        let argv: Vec<String> = rest.split_whitespace().map(str::to_owned).collect();
        if argv.is_empty() {
            return Err(SenderError::NoProgram);
        }
        return Ok(Box::new(CommandSender {
            argv,
            cwd: cwd.to_path_buf(),
            timeout: COMMAND_TIMEOUT,
            launcher: launcher.clone(),
        }));
    }
    if let Some(dir) = spec.strip_prefix("file:") {
        if dir.trim().is_empty() {
            return Err(SenderError::NoDirectory);
        }
        return Ok(Box::new(FileSender {
            dir: cwd.join(dir.trim()),
        }));
    }
    if let Some(url) = spec.strip_prefix("webhook:") {
        return Ok(Box::new(
            WebhookSender::new(url.trim(), WEBHOOK_TIMEOUT)?
                .with_redactor(launcher.redactor().clone()),
        ));
    }
    Err(SenderError::UnknownSpec {
        spec: spec.to_owned(),
    })
}

/// A program per post: body on stdin, message id on stdout.
#[derive(Debug, Clone)]
pub struct CommandSender {
    argv: Vec<String>,
    cwd: PathBuf,
    timeout: Duration,
    launcher: Launcher,
}

impl CommandSender {
    /// A command sender with a timeout.
    pub fn new(argv: Vec<String>, cwd: PathBuf, timeout: Duration) -> Self {
        Self {
            argv,
            cwd,
            timeout,
            launcher: Launcher::default(),
        }
    }
}

/// Cuts a sender's text for a reason string.
fn excerpt(text: &str) -> String {
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    let mut cut: String = flat.chars().take(200).collect();
    if flat.chars().count() > 200 {
        cut.push('…');
    }
    cut
}

impl Sender for CommandSender {
    fn send(&mut self, post: &Outbound<'_>) -> SendOutcome {
        let Some(program) = self.argv.first() else {
            return SendOutcome::Refused {
                reason: "sender_unavailable: the sender command is empty".into(),
            };
        };
        let mut env = vec![
            ("CASTLOG_CLAIM".to_owned(), post.claim.as_str().to_owned()),
            (
                "CASTLOG_DESTINATION".to_owned(),
                post.destination.to_owned(),
            ),
            ("CASTLOG_CAST".to_owned(), post.cast.as_str().to_owned()),
        ];
        env.extend(post.environment());
        let done = match process::run(
            &self.launcher,
            &self.argv,
            &self.cwd,
            &env,
            post.body.as_bytes(),
            self.timeout,
        ) {
            Ok(done) => done,
            // Nothing ran, so nothing was sent: a definite refusal.
            Err(err) => {
                return SendOutcome::Refused {
                    reason: format!("sender_unavailable: {err}"),
                };
            }
        };
        if done.timed_out {
            return SendOutcome::Unknown {
                reason: format!(
                    "send_outcome_unknown: the sender {program} did not finish within {:?} and was killed",
                    self.timeout
                ),
            };
        }
        if done.code != Some(0) {
            let said = match excerpt(&done.stderr) {
                e if e.is_empty() => " (nothing on stderr)".to_owned(),
                e => format!(": {e}"),
            };
            return SendOutcome::Unknown {
                reason: format!(
                    "send_outcome_unknown: the sender {program} exited with {}{said}",
                    done.code
                        .map_or_else(|| "a signal".to_owned(), |c| format!("code {c}")),
                ),
            };
        }
        let id = done.stdout.trim();
        if id.is_empty() {
            return SendOutcome::Unknown {
                reason: format!(
                    "send_outcome_unknown: the sender {program} printed no message id; treating the send as unknown"
                ),
            };
        }
        SendOutcome::Staged {
            message_id: id.to_owned(),
        }
    }

    fn spec(&self) -> String {
        format!("cmd:{}", self.argv.join(" "))
    }
}

/// One file per post, named by the claim id, with its envelope beside it (`<claim>.json`).
#[derive(Debug, Clone)]
pub struct FileSender {
    dir: PathBuf,
}

impl FileSender {
    /// A file sender writing into `dir`.
    pub fn new(dir: PathBuf) -> Self {
        Self { dir }
    }
}

impl Sender for FileSender {
    fn send(&mut self, post: &Outbound<'_>) -> SendOutcome {
        if let Err(e) = std::fs::create_dir_all(&self.dir) {
            return SendOutcome::Refused {
                reason: format!(
                    "sender_unavailable: cannot create {}: {e}",
                    self.dir.display()
                ),
            };
        }
        let name = post.claim.as_str().to_owned();
        let path = self.dir.join(&name);
        let file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path);
        let mut file = match file {
            Ok(file) => file,
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                return SendOutcome::Unknown {
                    reason: format!(
                        "send_outcome_unknown: {} already exists; it may be this claim's earlier send",
                        path.display()
                    ),
                };
            }
            Err(e) => {
                return SendOutcome::Refused {
                    reason: format!("sender_unavailable: cannot create {}: {e}", path.display()),
                };
            }
        };
        let envelope = Value::Object(post.envelope()).to_string();
        let meta = self.dir.join(format!("{name}.json"));
        match file
            .write_all(post.body.as_bytes())
            .and_then(|()| file.sync_all())
            .and_then(|()| std::fs::write(&meta, envelope))
        {
            Ok(()) => SendOutcome::Staged { message_id: name },
            Err(e) => SendOutcome::Unknown {
                reason: format!(
                    "send_outcome_unknown: writing {} (or its envelope) failed: {e}",
                    path.display()
                ),
            },
        }
    }

    fn spec(&self) -> String {
        format!("file:{}", self.dir.display())
    }
}

/// An HTTP POST of the post as JSON.
#[derive(Debug)]
pub struct WebhookSender {
    url: reqwest::Url,
    client: reqwest::blocking::Client,
    /// Scrubs the reasons recorded from an answer (its body, the URL's userinfo).
    redactor: Redactor,
}

impl WebhookSender {
    /// A webhook sender for `url` with a per-request timeout.
    pub fn new(url: &str, timeout: Duration) -> Result<Self, SenderError> {
        let parsed = reqwest::Url::parse(url).map_err(|source| SenderError::NotAUrl {
            url: url.to_owned(),
            source,
        })?;
        if !matches!(parsed.scheme(), "http" | "https") {
            return Err(SenderError::NotHttp {
                url: url.to_owned(),
            });
        }
        let client = reqwest::blocking::Client::builder()
            .timeout(timeout)
            .build()
            .map_err(SenderError::Client)?;
        Ok(Self {
            url: parsed,
            client,
            redactor: Redactor::default(),
        })
    }

    /// Scrubs recorded reasons with `redactor` (URL userinfo is scrubbed by any).
    #[must_use]
    pub fn with_redactor(mut self, redactor: Redactor) -> Self {
        self.redactor = redactor;
        self
    }
}

/// The message id of a webhook's JSON answer: `id` or `message_id`, a string or a number.
pub fn id_of_response(value: &Value) -> Option<String> {
    ["id", "message_id"]
        .iter()
        .find_map(|key| match value.get(key) {
            Some(Value::String(s)) if !s.trim().is_empty() => Some(s.trim().to_owned()),
            Some(Value::Number(n)) => Some(n.to_string()),
            _ => None,
        })
}

impl Sender for WebhookSender {
    fn send(&mut self, post: &Outbound<'_>) -> SendOutcome {
        match self.attempt(post) {
            SendOutcome::Staged { message_id } => SendOutcome::Staged {
                message_id: self.redactor.scrub(&message_id),
            },
            SendOutcome::Refused { reason } => SendOutcome::Refused {
                reason: self.redactor.scrub(&reason),
            },
            SendOutcome::Unknown { reason } => SendOutcome::Unknown {
                reason: self.redactor.scrub(&reason),
            },
        }
    }

    fn spec(&self) -> String {
        without_userinfo(&format!("webhook:{}", self.url)).into_owned()
    }
}

impl WebhookSender {
    /// One POST and what it came to, before scrubbing.
    fn attempt(&self, post: &Outbound<'_>) -> SendOutcome {
        let response = self
            .client
            .post(self.url.clone())
            .json(&Value::Object(post.envelope()))
            .send();
        let response = match response {
            Ok(r) => r,
            Err(e) if e.is_connect() && !e.is_timeout() => {
                // The connection was refused: the request never reached the server.
                return SendOutcome::Refused {
                    reason: format!("sender_unavailable: cannot connect to {}", self.url),
                };
            }
            Err(e) => {
                return SendOutcome::Unknown {
                    reason: format!(
                        "send_outcome_unknown: the webhook {} failed: {}",
                        self.url,
                        if e.is_timeout() {
                            "timed out".to_owned()
                        } else {
                            e.to_string()
                        }
                    ),
                };
            }
        };
        let status = response.status();
        let text = response.text().unwrap_or_default();
        if status.is_client_error() && status.as_u16() != 408 && status.as_u16() != 429 {
            return SendOutcome::Refused {
                reason: format!(
                    "webhook_refused: {} answered {status}: {}",
                    self.url,
                    excerpt(&text)
                ),
            };
        }
        if !status.is_success() {
            return SendOutcome::Unknown {
                reason: format!(
                    "send_outcome_unknown: {} answered {status}: {}",
                    self.url,
                    excerpt(&text)
                ),
            };
        }
        match serde_json::from_str::<Value>(&text)
            .ok()
            .as_ref()
            .and_then(id_of_response)
        {
            Some(id) => SendOutcome::Staged { message_id: id },
            None => SendOutcome::Unknown {
                reason: format!(
                    "send_outcome_unknown: {} answered {status} without an `id` or `message_id`: {}",
                    self.url,
                    excerpt(&text)
                ),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use super::*;

    fn post<'a>(claim: &'a ClaimId, cast: &'a CastId, extra: &'a Value) -> Outbound<'a> {
        Outbound {
            claim,
            cast,
            destination: "staging",
            body: "Did the new protocol help?",
            extra,
        }
    }

    #[test]
    fn specs_are_checked() {
        let cwd = Path::new(".");
        assert!(from_spec("cmd:", cwd, &Launcher::default()).is_err());
        assert!(from_spec("file:", cwd, &Launcher::default()).is_err());
        assert!(from_spec("webhook:ftp://x", cwd, &Launcher::default()).is_err());
        assert!(from_spec("webhook:not a url", cwd, &Launcher::default()).is_err());
        let err = from_spec("smtp:x", cwd, &Launcher::default())
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(err.contains("unknown sender spec"), "{err}");
        assert_eq!(
            from_spec("file:out", cwd, &Launcher::default())
                .map(|s| s.spec())
                .unwrap_or_default(),
            "file:./out"
        );
    }

    #[test]
    fn file_sender_writes_once_per_claim() {
        let dir = tempfile::tempdir().unwrap();
        let mut sender = FileSender::new(dir.path().join("outbox"));
        let claim = ClaimId::new("clm-1");
        let cast = CastId::new("c");
        let extra = Value::Null;
        assert_eq!(
            sender.send(&post(&claim, &cast, &extra)),
            SendOutcome::Staged {
                message_id: "clm-1".into()
            }
        );
        let written = std::fs::read_to_string(dir.path().join("outbox/clm-1")).unwrap();
        assert_eq!(written, "Did the new protocol help?");
        let envelope: Value = serde_json::from_str(
            &std::fs::read_to_string(dir.path().join("outbox/clm-1.json")).unwrap(),
        )
        .unwrap();
        assert_eq!(
            envelope,
            json!({"claim": "clm-1", "cast": "c", "destination": "staging",
                   "body": "Did the new protocol help?"})
        );
        // A second send for the same claim is never a silent overwrite.
        assert!(matches!(
            sender.send(&post(&claim, &cast, &extra)),
            SendOutcome::Unknown { .. }
        ));
    }

    #[test]
    fn command_sender_maps_exits_and_output() {
        let dir = tempfile::tempdir().unwrap();
        let claim = ClaimId::new("clm-2");
        let cast = CastId::new("c");
        let extra = Value::Null;
        let sh = |script: &str, timeout_s: u64| {
            CommandSender::new(
                vec!["sh".into(), "-c".into(), script.into()],
                dir.path().to_path_buf(),
                Duration::from_secs(timeout_s),
            )
        };
        let run = |script: &str| sh(script, 5).send(&post(&claim, &cast, &extra));
        assert_eq!(
            run("cat > /dev/null; echo \"  m-$CASTLOG_CLAIM  \""),
            SendOutcome::Staged {
                message_id: "m-clm-2".into()
            }
        );
        // Extra fields reach the program as variables, and the envelope (without the body).
        let extra = json!({"reply_to_message_id": "42", "can_reply_in_place": false,
                           "nested": {"skipped": true}});
        let mut s = sh(
            "cat > /dev/null; echo \"$CASTLOG_REPLY_TO_MESSAGE_ID/$CASTLOG_CAN_REPLY_IN_PLACE/${CASTLOG_NESTED:-none}/$CASTLOG_ENVELOPE\"",
            5,
        );
        let SendOutcome::Staged { message_id } = s.send(&post(&claim, &cast, &extra)) else {
            panic!("the variables reach the program");
        };
        let (fields, envelope) = message_id.split_at(message_id.find("/{").unwrap());
        assert_eq!(fields, "42/false/none");
        let envelope: Value = serde_json::from_str(&envelope[1..]).unwrap();
        assert_eq!(envelope["reply_to_message_id"], "42");
        assert_eq!(envelope["destination"], "staging");
        assert!(envelope.get("body").is_none(), "{envelope}");
        let SendOutcome::Unknown { reason } = run("cat > /dev/null") else {
            panic!("empty stdout is unknown");
        };
        assert!(reason.contains("no message id"), "{reason}");
        let SendOutcome::Unknown { reason } = run("echo oops >&2; exit 3") else {
            panic!("a failed exit is unknown");
        };
        assert!(
            reason.contains("code 3") && reason.contains("oops"),
            "{reason}"
        );
        let mut missing = CommandSender::new(
            vec!["/nonexistent/sender".into()],
            dir.path().to_path_buf(),
            Duration::from_secs(5),
        );
        assert!(matches!(
            missing.send(&post(&claim, &cast, &extra)),
            SendOutcome::Refused { .. }
        ));
        // A timeout stops the program and what it started (here a `sleep` that would hold
        // stdout open after the shell is killed), and the send is unknown: it may have gone out.
        let mut slow = sh("cat > /dev/null; sleep 30; echo late", 1);
        let started = Instant::now();
        let SendOutcome::Unknown { reason } = slow.send(&post(&claim, &cast, &extra)) else {
            panic!("a timeout is unknown");
        };
        let took = started.elapsed();
        assert!(reason.contains("did not finish within 1s"), "{reason}");
        assert!(took < Duration::from_secs(10), "took {took:?}");
    }

    #[test]
    fn webhook_ids_come_from_id_or_message_id() {
        assert_eq!(id_of_response(&json!({"id": "a"})), Some("a".into()));
        assert_eq!(
            id_of_response(&json!({"message_id": 42})),
            Some("42".into())
        );
        assert_eq!(id_of_response(&json!({"id": ""})), None);
        assert_eq!(id_of_response(&json!({"ok": true})), None);
    }

    // A webhook URL's user and password are not recorded with a send's outcome or shown in
    // its spec; nor is a secret the redactor knows.
    #[test]
    fn a_webhook_outcome_names_no_userinfo_or_secret() {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let url = format!("http://bot:hunter2-secret@127.0.0.1:{port}/post");
        let mut sender = WebhookSender::new(&url, Duration::from_secs(5))
            .unwrap()
            .with_redactor(Redactor::with_values([format!("{port}/post")]));
        let (claim, cast, extra) = (ClaimId::new("clm-3"), CastId::new("c"), Value::Null);
        let outcome = sender.send(&post(&claim, &cast, &extra));
        let SendOutcome::Refused { reason } = outcome else {
            panic!("a refused connection is a refusal: {outcome:?}");
        };
        assert_eq!(
            reason,
            "sender_unavailable: cannot connect to http://***@127.0.0.1:***"
        );
        assert_eq!(
            sender.spec(),
            format!("webhook:http://***@127.0.0.1:{port}/post")
        );
    }
}
