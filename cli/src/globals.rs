//! The global options, turned into one value in `main` and handed down to every command that
//! needs them (no command reads them from anywhere else).

use std::time::Duration;

use castlog_replay::process::Launcher;

/// What the global flags say, for the commands that drive casts.
#[derive(Debug, Clone)]
pub struct Globals {
    /// Starts every program castlog runs (`cmd:` agents, utilities, senders, fetchers) with
    /// the environment less the deny list and `--pass-env`'s exceptions, and scrubs what they
    /// print.
    pub launcher: Launcher,
    /// `--agent-format json`: a `cmd:` agent gets the messages as JSON instead of text.
    pub agent_json: bool,
    /// `--agent-timeout`: each agent kind's own default when not given.
    pub agent_timeout: Option<Duration>,
    /// `--fallback SPEC`: the live agent a `recorded:` agent asks on a miss.
    pub fallback: Option<String>,
    /// `--structured`: whether an `openai:` agent sends the handoff contract as a response
    /// format.
    pub structured: castlog_replay::openai::Structured,
    /// `--exit-status`: a command that drives a cast exits 4 when it ends failed and 5 when it
    /// waits for an agent or a person.
    pub exit_status: bool,
    /// `--otel-content`: OpenTelemetry traces carry prompt and completion texts.
    pub otel_content: bool,
    /// `--otlp-endpoint URL`: where a driven cast's spans are sent as it proceeds.
    pub otlp_endpoint: Option<String>,
    /// The casts whose trace was sent as they were driven (the rest is sent at the end).
    pub streamed: crate::commands::otlp::Streamed,
    /// `--retries`, `--backoff`, `--jitter`: how agents retry a transient failure.
    pub retry: castlog_replay::retry::RetryPolicy,
    /// Seeds the retry jitter (from the clock: only the waits depend on it, and each is
    /// recorded with the failure it follows).
    pub retry_seed: u64,
}

impl Globals {
    /// `--agent-timeout`, or `default` when it was not given.
    pub fn agent_timeout_or(&self, default: Duration) -> Duration {
        self.agent_timeout.unwrap_or(default)
    }
}
