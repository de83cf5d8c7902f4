//! The options of commands that drive casts (agents, retries, traces, exit status): each
//! command that takes them flattens them into its own arguments, so a command's `--help`
//! lists only the options it takes. They are accepted before the command too (`castlog
//! --retries 3 run ...`), as they always were; given in both places, the command's own wins.

use clap::Args;

use super::{parse_backoff, parse_jitter};

/// How agents are run and retried (commands that ask an agent).
#[derive(Debug, Clone, Default, Args)]
#[command(next_help_heading = "Agent options")]
pub struct AgentOptions {
    /// How a `cmd:` agent receives the prompt on stdin: `text` (each message as `### ROLE`, a
    /// blank line, its content) or `json` (`[{"role", "content"}, ...]`) [default: text].
    #[arg(long = "agent-format", value_parser = ["text", "json"])]
    pub agent_format: Option<String>,

    /// Seconds an agent may take: a `cmd:` agent for one turn before it is killed (default
    /// 600), an `openai:` agent for each request (default 120; a timed-out request is retried
    /// like any transient failure). Either way an interruption the cast can be resumed from.
    #[arg(long = "agent-timeout", value_parser = clap::value_parser!(u64).range(1..))]
    pub agent_timeout: Option<u64>,

    /// Retries of a prompt after a transient agent failure (HTTP 429 or 5xx, a dropped
    /// connection, a timed-out request, a script's transient line) before the cast waits for
    /// `castlog resume` [default: 2, so 3 attempts].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(0..=100))]
    pub retries: Option<u32>,

    /// The wait before a retry, in seconds: BASE after the first failure, doubled per failure
    /// in a row, at most MAX [default: 0.5..8]. A server's `Retry-After` (seconds or an HTTP
    /// date) is waited instead.
    #[arg(long, value_name = "BASE..MAX", value_parser = parse_backoff)]
    pub backoff: Option<(std::time::Duration, std::time::Duration)>,

    /// The share (0 to 1) of each backoff taken off at random, so clients that failed together
    /// do not retry together [default: 0.25]; 0 waits the backoff exactly.
    #[arg(long, value_name = "SHARE", value_parser = parse_jitter)]
    pub jitter: Option<f64>,

    /// Whether an `openai:` agent sends a JSON socket's handoff contract as a JSON Schema
    /// (`response_format: {type: "json_schema"}`): `on`, `off`, or `auto` (sent until the server
    /// answers HTTP 400 naming `response_format`, then off for the rest of the cast, which the
    /// log records) [default: off]. Output is validated either way; the repair turn stays.
    #[arg(long, value_name = "on|off|auto", value_parser = ["on", "off", "auto"])]
    pub structured: Option<String>,

    /// The live agent a `recorded:CAST` agent asks when the recording has no answer for a
    /// prompt (without it, a miss stops the cast as awaiting_agent, naming the prompt hash).
    #[arg(long)]
    pub fallback: Option<String>,

    /// Pass the deny-listed environment variable NAME (e.g. ANTHROPIC_API_KEY) on to the
    /// programs castlog starts: `cmd:` agents, utilities, `cmd:` senders and fetchers.
    /// Repeatable. Without it they get castlog's environment less the deny list (see the
    /// README); either way its value is scrubbed from everything recorded.
    #[arg(long = "pass-env", value_name = "NAME")]
    pub pass_env: Vec<String>,
}

/// OpenTelemetry traces of the casts a command moves.
#[derive(Debug, Clone, Default, Args)]
#[command(next_help_heading = "Trace options")]
pub struct TraceOptions {
    /// Send each cast the command moves as OpenTelemetry traces to URL/v1/traces (OTLP/HTTP
    /// protobuf), span by span in the background as the cast proceeds, the rest when the
    /// command ends. A collector that is down or slow is a warning, never a failure.
    #[arg(long = "otlp-endpoint", value_name = "URL")]
    pub otlp_endpoint: Option<String>,

    /// Include prompt and completion texts (and the other texts a model or a person wrote) in
    /// the traces --otlp-endpoint sends. Off by default.
    #[arg(long = "otel-content")]
    pub otel_content: bool,
}

/// Everything a command that drives a cast takes besides its own arguments.
#[derive(Debug, Clone, Default, Args)]
pub struct DriveOptions {
    /// Options of the agent that answers prompts (--retries, --backoff, ...).
    #[command(flatten)]
    pub agent: AgentOptions,

    /// Options of the traces a driven cast sends (--otlp-endpoint).
    #[command(flatten)]
    pub trace: TraceOptions,

    /// Exit 4 when the driven cast ends failed and 5 when it waits for an agent or a person
    /// (awaiting_agent, awaiting_refinement), instead of 0, so scripts can branch on it.
    #[arg(long = "exit-status", help_heading = "Agent options")]
    pub exit_status: bool,

    /// A pi-materia install (its package directory, holding config/utilities): a loadout's
    /// shipped script that castlog has no built-in for runs from there with its runtime
    /// (node), on the same JSON-on-stdin protocol as a `command`. The cast records each
    /// script's hash and refuses a different one later. Without it such a loadout is refused.
    #[arg(
        long = "pi-materia",
        env = "PI_MATERIA_HOME",
        value_name = "DIR",
        help_heading = "Agent options"
    )]
    pub pi_materia: Option<std::path::PathBuf>,
}

impl DriveOptions {
    /// These options (given before the command) overridden by `own` (given after it): a value
    /// given after wins, flags and `--pass-env` names add up.
    #[must_use]
    pub fn with(self, own: DriveOptions) -> DriveOptions {
        let (a, b) = (self.agent, own.agent);
        let mut pass_env = a.pass_env;
        pass_env.extend(b.pass_env);
        DriveOptions {
            agent: AgentOptions {
                agent_format: b.agent_format.or(a.agent_format),
                agent_timeout: b.agent_timeout.or(a.agent_timeout),
                retries: b.retries.or(a.retries),
                backoff: b.backoff.or(a.backoff),
                jitter: b.jitter.or(a.jitter),
                fallback: b.fallback.or(a.fallback),
                structured: b.structured.or(a.structured),
                pass_env,
            },
            trace: TraceOptions {
                otlp_endpoint: own.trace.otlp_endpoint.or(self.trace.otlp_endpoint),
                otel_content: self.trace.otel_content || own.trace.otel_content,
            },
            exit_status: self.exit_status || own.exit_status,
            pi_materia: own.pi_materia.or(self.pi_materia),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_option_after_the_command_wins_and_names_add_up() {
        let before = DriveOptions {
            agent: AgentOptions {
                retries: Some(1),
                jitter: Some(0.5),
                pass_env: vec!["A".into()],
                ..AgentOptions::default()
            },
            exit_status: true,
            ..DriveOptions::default()
        };
        let after = DriveOptions {
            agent: AgentOptions {
                retries: Some(4),
                pass_env: vec!["B".into()],
                ..AgentOptions::default()
            },
            ..DriveOptions::default()
        };
        let merged = before.with(after);
        assert_eq!(merged.agent.retries, Some(4));
        assert_eq!(merged.agent.jitter, Some(0.5));
        assert_eq!(merged.agent.pass_env, ["A", "B"]);
        assert!(merged.exit_status);
    }
}
