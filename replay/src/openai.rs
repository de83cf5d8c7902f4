//! The `openai:BASE_URL#MODEL` agent: any OpenAI-compatible chat-completions endpoint (Ollama,
//! vLLM, llama.cpp server, LM Studio, OpenAI, OpenRouter).
//!
//! Each turn POSTs `{BASE_URL}/chat/completions` with `{"model", "messages", "stream": false}`,
//! the messages being the rendered prompt exactly as recorded (system fold, inline turns,
//! trailing mandate). The reply is `choices[0].message.content`; `usage.prompt_tokens` and
//! `usage.completion_tokens` become the recorded [`Usage`].
//!
//! For a JSON socket the handoff contract can go along as a JSON Schema response format
//! (`--structured`, see [`structured`]).
//!
//! # Failures
//! - HTTP 429, HTTP 5xx, a refused or dropped connection and a timeout are
//!   [`FailureClass::Transient`]: the driver asks again, up to the agent's attempts (its
//!   [`RetryPolicy`]), and before the next call this agent waits what the server's
//!   `Retry-After` asks (seconds or an HTTP date, read against the clock it was given), else a
//!   backoff with jitter (see [`crate::retry`]). The wait chosen is written in the recorded
//!   failure's message (`waiting 1s (Retry-After) before attempt 2 of 3`).
//! - A call in progress and a wait before one end soon after the cancel flag is set (Ctrl-C):
//!   the turn is an interruption, and the request is dropped unanswered.
//! - Any other status, and a success whose body is not the chat-completions shape (not JSON, no
//!   `choices`, no `content`), is an [`FailureClass::Interruption`] naming what was wrong (the
//!   status, a bounded excerpt of the body): the cast waits for `castlog resume`.
//!
//! # The API key
//! Sent as `Authorization: Bearer KEY` when given (the CLI reads `CASTLOG_API_KEY`, else
//! `OPENAI_API_KEY`, see [`api_key_from_env`]). It is never logged, never shown by `Debug`,
//! and removed from every message and reply this agent returns, so it cannot reach an event;
//! so are the other secrets its [`Redactor`] knows and the userinfo of any URL (an error body
//! that echoes the request, a base URL with `user:pass@`).

use std::fmt;
use std::io::Read;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use castlog_core::env::Clock;
use castlog_core::event::FailureClass;
use reqwest::StatusCode;
use reqwest::Url;
use reqwest::blocking::Client;
use reqwest::header::{AUTHORIZATION, CONTENT_TYPE, HeaderValue, RETRY_AFTER};
use serde_json::{Value, json};

use crate::agent::{Agent, AgentTurn, CANCELLED, TurnRequest};
use crate::retry::{Retrier, RetryPolicy};
use crate::secrets::Redactor;

pub mod structured;
mod wire;

pub use structured::Structured;
use wire::{parse_reply, tool_calls, wire_messages};

/// The request timeout when none is given.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(120);

/// How often a request in progress looks at the cancel flag.
const CANCEL_POLL: Duration = Duration::from_millis(50);

/// A successful body is read up to this many bytes.
const BODY_CAP: u64 = 16 << 20;

/// An error body is read up to this many bytes.
const ERROR_BODY_CAP: u64 = 64 << 10;

/// Characters of a body quoted in a failure message.
const EXCERPT_CHARS: usize = 300;

/// The environment variables the API key is read from, first one set wins.
pub const API_KEY_VARS: [&str; 2] = ["CASTLOG_API_KEY", "OPENAI_API_KEY"];

/// A bad `openai:` SPEC or a client that cannot be built.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OpenAiError {
    /// The SPEC is not `BASE_URL#MODEL`.
    #[error(
        "openai: needs BASE_URL#MODEL, e.g. openai:http://localhost:11434/v1#llama3.2 ({message})"
    )]
    BadSpec {
        /// What is wrong.
        message: String,
    },
    /// A URL of the SPEC does not parse.
    #[error(
        "openai: needs BASE_URL#MODEL, e.g. openai:http://localhost:11434/v1#llama3.2 (the {which} URL does not parse: {source})"
    )]
    BadUrl {
        /// Which URL: `base` (as given) or `endpoint` (the base with `/chat/completions`).
        which: &'static str,
        /// The URL parser's error.
        #[source]
        source: <Url as std::str::FromStr>::Err,
    },
    /// The HTTP client cannot be built.
    #[error("cannot build the HTTP client: {source}")]
    Client {
        /// The HTTP library's error, without any URL in it.
        #[source]
        source: reqwest::Error,
    },
}

/// Splits `BASE_URL#MODEL` (the part after `openai:`) and checks the URL.
pub fn parse_spec(rest: &str) -> Result<(String, String), OpenAiError> {
    let bad = |message: &str| OpenAiError::BadSpec {
        message: message.to_owned(),
    };
    let (base, model) = rest
        .split_once('#')
        .ok_or_else(|| bad("the #MODEL part is missing"))?;
    let (base, model) = (base.trim(), model.trim());
    if model.is_empty() {
        return Err(bad("the model after # is empty"));
    }
    let url = Url::parse(base).map_err(|source| OpenAiError::BadUrl {
        which: "base",
        source,
    })?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(bad("the base URL must start with http:// or https://"));
    }
    Ok((base.to_owned(), model.to_owned()))
}

/// The API key from `CASTLOG_API_KEY`, else `OPENAI_API_KEY` (empty values are ignored).
pub fn api_key_from_env() -> Option<String> {
    API_KEY_VARS
        .iter()
        .filter_map(|name| std::env::var(name).ok())
        .find(|value| !value.trim().is_empty())
}

/// Talks to an OpenAI-compatible chat-completions endpoint.
pub struct OpenAiAgent {
    endpoint: Url,
    model: String,
    api_key: Option<String>,
    timeout: Duration,
    retrier: Retrier,
    /// Transient failures in a row (what the next wait is computed from).
    failures: u32,
    /// The wait chosen after the last failure, slept before the next call.
    pending: Option<Duration>,
    /// Reads "now" for a `Retry-After` given as an HTTP date.
    clock: Box<dyn Clock>,
    cancel: Option<Arc<AtomicBool>>,
    client: Client,
    redactor: Redactor,
    /// Whether the handoff contract of a JSON socket goes along as a response format.
    structured: Structured,
}

/// What came back from one request, read on the thread that sent it.
struct Answer {
    status: StatusCode,
    retry_after: Option<String>,
    body: std::io::Result<Vec<u8>>,
}

impl fmt::Debug for OpenAiAgent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenAiAgent")
            .field("endpoint", &shown(&self.endpoint))
            .field("model", &self.model)
            .field("api_key", &self.api_key.as_ref().map(|_| "[redacted]"))
            .field("timeout", &self.timeout)
            .field("retry", self.retrier.policy())
            .field("failures", &self.failures)
            .field("structured", &self.structured)
            .finish()
    }
}

impl OpenAiAgent {
    /// An agent for `{base_url}/chat/completions` and `model`, with the key sent as a bearer
    /// token when given, and `timeout` for each whole request.
    pub fn new(
        base_url: &str,
        model: &str,
        api_key: Option<String>,
        timeout: Duration,
    ) -> Result<Self, OpenAiError> {
        let base = Url::parse(base_url.trim()).map_err(|source| OpenAiError::BadUrl {
            which: "base",
            source,
        })?;
        let endpoint = Url::parse(&format!(
            "{}/chat/completions",
            base.as_str().trim_end_matches('/')
        ))
        .map_err(|source| OpenAiError::BadUrl {
            which: "endpoint",
            source,
        })?;
        let mut builder = Client::builder().timeout(timeout);
        // A proxy cannot reach a server on this machine: talk to loopback directly.
        if is_loopback(&endpoint) {
            builder = builder.no_proxy();
        }
        let client = builder.build().map_err(|e| OpenAiError::Client {
            source: e.without_url(),
        })?;
        Ok(Self {
            endpoint,
            model: model.to_owned(),
            api_key: api_key.filter(|k| !k.is_empty()),
            timeout,
            retrier: Retrier::new(RetryPolicy::default(), 0),
            failures: 0,
            pending: None,
            clock: Box::new(crate::clock::SystemClock),
            cancel: None,
            client,
            redactor: Redactor::default(),
            structured: Structured::Off,
        })
    }

    /// Scrubs what it returns with `redactor` too (the key it sends is scrubbed by any).
    #[must_use]
    pub fn with_redactor(mut self, redactor: Redactor) -> Self {
        self.redactor = redactor;
        self
    }

    /// Retries under `retrier`'s policy, drawing its jitter from it.
    #[must_use]
    pub fn with_retries(mut self, retrier: Retrier) -> Self {
        self.retrier = retrier;
        self
    }

    /// Sets the first backoff of the default policy, without jitter (zero turns backoff off).
    #[must_use]
    pub fn with_backoff(self, backoff: Duration) -> Self {
        let policy = RetryPolicy {
            base: backoff,
            jitter: 0.0,
            ..RetryPolicy::default()
        };
        self.with_retries(Retrier::new(policy, 0))
    }

    /// Sends the handoff contract of a JSON socket as a response format as `structured` says
    /// (`--structured`; off by default).
    #[must_use]
    pub fn with_structured(mut self, structured: Structured) -> Self {
        self.structured = structured;
        self
    }

    /// Reads the time a `Retry-After` date is measured from on `clock`.
    #[must_use]
    pub fn with_clock(mut self, clock: Box<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// The URL requests go to.
    pub fn endpoint(&self) -> &Url {
        &self.endpoint
    }

    /// The model id sent in every request (`--model`, or the spec's).
    pub fn model(&self) -> &str {
        &self.model
    }

    /// Removes the API key, the redactor's secrets and URL userinfo from a text that may
    /// echo them.
    fn scrub(&self, text: &str) -> String {
        let text = match &self.api_key {
            Some(key) if text.contains(key.as_str()) => text.replace(key.as_str(), "[redacted]"),
            _ => text.to_owned(),
        };
        self.redactor.scrub(&text)
    }

    fn failed(&self, class: FailureClass, message: &str) -> AgentTurn {
        AgentTurn::Failed {
            class,
            message: self.scrub(message),
        }
    }

    /// One request: the turn, and the server's `Retry-After` when it sent one.
    fn call(&self, request: &TurnRequest<'_>) -> (AgentTurn, Option<Duration>) {
        let at = shown(&self.endpoint);
        // The materia's model wins over the spec's; its thinking level is passed on as the
        // reasoning effort, only where the config gives one.
        let mut body = json!({
            "model": request.model.unwrap_or(&self.model),
            "messages": wire_messages(request.messages),
            "stream": false,
        });
        if let Some(effort) = request.thinking {
            body["reasoning_effort"] = json!(effort);
        }
        if !request.tools.is_empty() {
            body["tools"] = Value::Array(crate::tools::schema::openai_tools(request.tools));
        }
        let schema = request
            .schema
            .filter(|_| self.structured != Structured::Off);
        if let Some(schema) = schema {
            body["response_format"] = structured::response_format(schema);
        }
        let mut request = self
            .client
            .post(self.endpoint.clone())
            .header(CONTENT_TYPE, "application/json")
            .body(body.to_string());
        if let Some(key) = &self.api_key {
            let Ok(mut value) = HeaderValue::from_str(&format!("Bearer {key}")) else {
                return (
                    self.failed(
                        FailureClass::Interruption,
                        "the API key is not a valid HTTP header value (check CASTLOG_API_KEY / OPENAI_API_KEY)",
                    ),
                    None,
                );
            };
            value.set_sensitive(true);
            request = request.header(AUTHORIZATION, value);
        }
        let answer = match self.send(request) {
            Ok(Ok(answer)) => answer,
            Ok(Err(err)) => return (self.transport_failure(&err, &at), None),
            Err(turn) => return (turn, None),
        };
        let status = answer.status;
        let bytes = match answer.body {
            Ok(bytes) => bytes,
            Err(err) => {
                let message = format!("reading the reply from {at} failed: {}", describe_io(&err));
                return (self.failed(FailureClass::Transient, &message), None);
            }
        };
        let text = String::from_utf8_lossy(&bytes);
        if status.as_u16() == 429 || status.is_server_error() {
            let message = format!("{at} answered HTTP {status}: {}", excerpt(&text));
            let after = answer
                .retry_after
                .and_then(|v| crate::retry::parse_retry_after(&v, self.clock.now_ms()));
            return (self.failed(FailureClass::Transient, &message), after);
        }
        if !status.is_success() {
            let message = format!("{at} answered HTTP {status}: {}", excerpt(&text));
            if schema.is_some()
                && self.structured == Structured::Auto
                && structured::refuses_response_format(status.as_u16(), &text)
            {
                let message = format!(
                    "{message}; structured output is off for the rest of the cast (--structured auto)"
                );
                return (
                    AgentTurn::StructuredRefused {
                        message: self.scrub(&message),
                    },
                    None,
                );
            }
            return (self.failed(FailureClass::Interruption, &message), None);
        }
        let turn = match tool_calls(&text) {
            Some((reply, usage, calls)) => AgentTurn::ToolCalls {
                text: self.scrub(&reply),
                usage,
                calls: calls
                    .into_iter()
                    .map(|mut c| {
                        if let Value::String(arguments) = &c.arguments {
                            c.arguments = Value::String(self.scrub(arguments));
                        }
                        c
                    })
                    .collect(),
            },
            None => match parse_reply(&text) {
                Ok((reply, usage)) => AgentTurn::Reply {
                    text: self.scrub(&reply),
                    usage,
                },
                Err(problem) => {
                    let message = format!(
                        "{at} answered HTTP {status} but {problem}; the body starts: {}",
                        excerpt(&text)
                    );
                    self.failed(FailureClass::Interruption, &message)
                }
            },
        };
        (turn, None)
    }

    /// Sends `request` on a thread of its own and reads the answer there, so the wait can end
    /// on the cancel flag: then the answer is dropped unread (`Err`, the cancelled turn) and
    /// the request with it when castlog exits.
    fn send(
        &self,
        request: reqwest::blocking::RequestBuilder,
    ) -> Result<Result<Answer, reqwest::Error>, AgentTurn> {
        let (tx, rx) = std::sync::mpsc::channel();
        let spawned = std::thread::Builder::new()
            .name("castlog-openai".into())
            .spawn(move || {
                let answer = request.send().map(|response| {
                    let status = response.status();
                    let retry_after = response
                        .headers()
                        .get(RETRY_AFTER)
                        .and_then(|v| v.to_str().ok())
                        .map(str::to_owned);
                    let cap = if status.is_success() {
                        BODY_CAP
                    } else {
                        ERROR_BODY_CAP
                    };
                    let mut bytes = Vec::new();
                    let body = response.take(cap).read_to_end(&mut bytes).map(|_| bytes);
                    Answer {
                        status,
                        retry_after,
                        body,
                    }
                });
                let _ = tx.send(answer);
            });
        if let Err(err) = spawned {
            let message = format!("cannot start the request: {err}");
            return Err(self.failed(FailureClass::Transient, &message));
        }
        loop {
            match rx.recv_timeout(CANCEL_POLL) {
                Ok(answer) => return Ok(answer),
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                    if self.cancelled() {
                        return Err(self.failed(FailureClass::Interruption, CANCELLED));
                    }
                }
                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                    return Err(self.failed(
                        FailureClass::Transient,
                        "the request ended without an answer",
                    ));
                }
            }
        }
    }

    fn cancelled(&self) -> bool {
        self.cancel
            .as_ref()
            .is_some_and(|c| c.load(Ordering::SeqCst))
    }

    fn transport_failure(&self, err: &reqwest::Error, at: &str) -> AgentTurn {
        let cause = describe(err);
        if err.is_timeout() {
            let message = format!(
                "the request to {at} timed out after {:?}: {cause}",
                self.timeout
            );
            return self.failed(FailureClass::Transient, &message);
        }
        if err.is_connect() || err.is_request() || err.is_body() {
            let message = format!("cannot reach {at}: {cause}");
            return self.failed(FailureClass::Transient, &message);
        }
        let message = format!("the request to {at} failed: {cause}");
        self.failed(FailureClass::Interruption, &message)
    }
}

impl Agent for OpenAiAgent {
    fn turn(&mut self, request: &TurnRequest<'_>) -> AgentTurn {
        if request.refinement {
            return AgentTurn::Exhausted(
                "the cast waits for a person: use `castlog refine` or `castlog continue`".into(),
            );
        }
        if let Some(delay) = self.pending.take()
            && !crate::retry::sleep(delay, self.cancel.as_deref())
        {
            return self.failed(FailureClass::Interruption, CANCELLED);
        }
        let (turn, retry_after) = self.call(request);
        let AgentTurn::Failed {
            class: FailureClass::Transient,
            message,
        } = turn
        else {
            self.failures = 0;
            return turn;
        };
        self.failures = self.failures.saturating_add(1);
        let attempts = self.attempts();
        if self.failures >= attempts {
            // The driver stops here; a later `resume` starts a fresh count.
            self.failures = 0;
            return AgentTurn::Failed {
                class: FailureClass::Transient,
                message,
            };
        }
        let wait = self.retrier.wait(self.failures, retry_after);
        self.pending = Some(wait.delay);
        AgentTurn::Failed {
            class: FailureClass::Transient,
            message: format!("{message}; {}", wait.describe(self.failures + 1, attempts)),
        }
    }

    fn attempts(&self) -> u32 {
        self.retrier.policy().attempts.max(1)
    }

    fn cancel_on(&mut self, flag: Arc<AtomicBool>) {
        self.cancel = Some(flag);
    }

    fn wants_schema(&self) -> bool {
        self.structured != Structured::Off
    }
}

/// The URL without credentials, query or fragment.
fn shown(url: &Url) -> String {
    let mut url = url.clone();
    let _ = url.set_username("");
    let _ = url.set_password(None);
    url.set_query(None);
    url.set_fragment(None);
    url.to_string()
}

fn is_loopback(url: &Url) -> bool {
    let Some(host) = url.host_str() else {
        return false;
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// A reqwest error and its causes, without the URL.
fn describe(err: &reqwest::Error) -> String {
    let mut out = String::new();
    let mut source: Option<&dyn std::error::Error> = Some(err);
    let mut depth = 0;
    while let Some(e) = source {
        let text = e.to_string();
        if !text.is_empty() && !out.contains(&text) {
            if !out.is_empty() {
                out.push_str(": ");
            }
            out.push_str(&text);
        }
        source = e.source();
        depth += 1;
        if depth > 8 {
            break;
        }
    }
    // reqwest's own line names the URL; strip it (the caller names the endpoint without
    // credentials).
    if let Some(url) = err.url() {
        out = out.replace(&format!(" for url ({url})"), "");
        out = out.replace(url.as_str(), &shown(url));
    }
    out
}

fn describe_io(err: &std::io::Error) -> String {
    match err.get_ref() {
        Some(inner) => {
            let mut out = inner.to_string();
            let mut source = inner.source();
            let mut depth = 0;
            while let Some(e) = source {
                out.push_str(": ");
                out.push_str(&e.to_string());
                source = e.source();
                depth += 1;
                if depth > 8 {
                    break;
                }
            }
            out
        }
        None => err.to_string(),
    }
}

/// At most [`EXCERPT_CHARS`] characters of a body, on one line.
fn excerpt(text: &str) -> String {
    let flat: String = text
        .trim()
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    let mut out: String = flat.chars().take(EXCERPT_CHARS).collect();
    if out.is_empty() {
        return "(empty body)".into();
    }
    if flat.chars().count() > EXCERPT_CHARS {
        out.push('…');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_need_a_model_and_an_http_url() {
        assert_eq!(
            parse_spec("http://localhost:11434/v1#llama3.2").unwrap(),
            ("http://localhost:11434/v1".into(), "llama3.2".into())
        );
        assert!(
            parse_spec("http://localhost:11434/v1")
                .unwrap_err()
                .to_string()
                .contains("BASE_URL#MODEL")
        );
        assert!(parse_spec("http://x#").is_err());
        assert!(parse_spec("ftp://x#m").is_err());
        assert!(parse_spec("not a url#m").is_err());
    }

    #[test]
    fn the_key_is_kept_out_of_debug_and_messages() {
        let agent = OpenAiAgent::new(
            "http://user:pw@127.0.0.1:9/v1/",
            "m",
            Some("sk-SECRET".into()),
            Duration::from_secs(1),
        )
        .unwrap();
        let debug = format!("{agent:?}");
        assert!(
            !debug.contains("sk-SECRET") && !debug.contains("pw"),
            "{debug}"
        );
        assert_eq!(
            agent.endpoint().as_str(),
            "http://user:pw@127.0.0.1:9/v1/chat/completions"
        );
        assert_eq!(
            agent.scrub("bad key sk-SECRET!"),
            "bad key [redacted]!".to_owned()
        );
        assert_eq!(excerpt(&"x".repeat(400)).chars().count(), EXCERPT_CHARS + 1);
        assert_eq!(excerpt("a\nb"), "a b");
    }
}
