//! The arguments of the run queue's commands: `submit` and `worker`.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use super::DriveOptions;

/// `submit`.
#[derive(Debug, Args)]
pub struct SubmitArgs {
    /// The config file (pi-materia's JSON format), the whole config: no layer is read
    /// [default: the layers, see `castlog config --help`].
    pub config: Option<PathBuf>,
    /// The explicit config layer, over the bundled default, the user's and the project's
    /// (instead of a CONFIG).
    #[arg(long = "config", value_name = "FILE", conflicts_with = "config")]
    pub layer: Option<PathBuf>,
    /// The loadout to run [default: the config's activeLoadout].
    #[arg(long)]
    pub loadout: Option<String>,
    /// The request the cast works on.
    #[arg(long)]
    pub task: String,
    /// Who answers its prompts, on whichever machine's worker takes it (as `run --agent`:
    /// scripted:FILE, cmd:PROGRAM ARGS..., openai:BASE_URL#MODEL; a path is the worker's).
    #[arg(long)]
    pub agent: String,
    /// The cast id [default: cast-<time>].
    #[arg(long)]
    pub cast: Option<String>,
    /// Print one JSON document on stdout instead of text.
    #[arg(long)]
    pub json: bool,
}

/// `worker`.
#[derive(Debug, Args)]
pub struct WorkerArgs {
    /// How many casts this worker drives at once.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=256))]
    pub concurrency: u32,
    /// How long a lease lasts without renewal (renewed every third of it while the cast is
    /// driven): 30s, 2s, 500ms.
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    pub lease: Duration,
    /// How often an idle worker looks for work.
    #[arg(long, default_value = "500ms", value_parser = parse_duration)]
    pub poll: Duration,
    /// Take at most one cast per slot (--concurrency) and stop when it is released; stop at
    /// once if none is queued.
    #[arg(long, conflicts_with = "until_idle")]
    pub once: bool,
    /// Stop when no cast is queued or running (held by any worker, or under an expired lease).
    #[arg(long)]
    pub until_idle: bool,
    /// At most N requests at once to the agent SPEC across every worker of the database
    /// (slots kept in the database, each under a lease). Repeatable.
    #[arg(long = "max-inflight", value_name = "SPEC=N", value_parser = parse_limit)]
    pub max_inflight: Vec<(String, u32)>,
    /// The worker's name as holder [default: worker-PID@HOST].
    #[arg(long)]
    pub id: Option<String>,
    /// Print one JSON document on stdout when the worker stops.
    #[arg(long)]
    pub json: bool,
    /// How the casts are driven: agents, retries.
    #[command(flatten)]
    pub drive: DriveOptions,
}

/// `30s`, `2s`, `500ms`, `1m`.
pub(crate) fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let (number, unit) = text
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .map_or((text, "s"), |i| text.split_at(i));
    let value: f64 = number
        .parse()
        .map_err(|_| format!("{text:?} is not a duration: give e.g. 30s, 2s or 500ms"))?;
    let seconds = match unit {
        "ms" => value / 1000.0,
        "s" => value,
        "m" => value * 60.0,
        other => {
            return Err(format!(
                "unknown unit {other:?} in {text:?}: use ms, s or m (e.g. 30s)"
            ));
        }
    };
    if !(seconds > 0.0 && seconds < 86_400.0) {
        return Err(format!("{text:?} must be more than 0 and less than a day"));
    }
    Ok(Duration::from_secs_f64(seconds))
}

/// `SPEC=N`: the last `=` splits (a SPEC may hold `=` itself, an URL's query).
fn parse_limit(text: &str) -> Result<(String, u32), String> {
    let (spec, n) = text
        .rsplit_once('=')
        .ok_or_else(|| format!("{text:?}: give SPEC=N, e.g. openai:http://gpu1:8000/v1#llama=4"))?;
    let n: u32 = n
        .parse()
        .ok()
        .filter(|n| *n >= 1)
        .ok_or_else(|| format!("{text:?}: N must be a whole number of at least 1"))?;
    if spec.trim().is_empty() {
        return Err(format!("{text:?}: SPEC is empty"));
    }
    Ok((spec.to_owned(), n))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_and_limits_parse() {
        assert_eq!(parse_duration("30s").unwrap(), Duration::from_secs(30));
        assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_duration("2").unwrap(), Duration::from_secs(2));
        assert!(parse_duration("0s").is_err());
        assert!(parse_duration("3h").is_err());
        assert_eq!(
            parse_limit("cmd:a b=c=2").unwrap(),
            ("cmd:a b=c".to_owned(), 2)
        );
        assert!(parse_limit("cmd:x=0").is_err());
    }
}
