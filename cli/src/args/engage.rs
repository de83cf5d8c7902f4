//! Arguments of the engagement commands: `engage`, `engage-scorecard`, `engage-schedule`.

use std::path::PathBuf;

use clap::Args;

use super::{AgentOptions, PostArgs, TraceOptions};

/// `engage-scorecard`.
#[derive(Debug, Args)]
pub struct ScorecardArgs {
    /// The judge to score (agent SPEC: scripted:FILE, cmd:PROGRAM ARGS... or
    /// openai:BASE_URL#MODEL); it answers {"asserts", "presupposes", "reason"}.
    #[arg(long)]
    pub judge: String,
    /// A fixture file: a JSON array of {"name", "quote", "draft", "expected_faithful"}
    /// [default: the built-in 40, fixtures/engage/fidelity.json].
    #[arg(long)]
    pub fixtures: Option<PathBuf>,
    /// Print one JSON document (the card) on stdout instead of text.
    #[arg(long)]
    pub json: bool,
    /// How the judge runs.
    #[command(flatten)]
    pub agents: AgentOptions,
}

/// `engage`.
#[derive(Debug, Args)]
pub struct EngageArgs {
    /// The input: results, sources, senders, allowlist and settings (see fixtures/engage/).
    pub input: PathBuf,
    /// Posting: dry run unless --post.
    #[command(flatten)]
    pub posting: PostArgs,
    /// The hook detector (agent SPEC): answers {"kind", "evidence", "reason"}.
    #[arg(long)]
    pub qualifier: Option<String>,
    /// The drafter (agent SPEC): answers {"question", "delivery_body"?} or {"error"}.
    #[arg(long)]
    pub drafter: Option<String>,
    /// The fidelity judge (agent SPEC): answers {"asserts", "presupposes", "reason"}.
    #[arg(long)]
    pub judge: Option<String>,
    /// The live source fetcher: cmd:PROGRAM ARGS... or file:DIR.
    #[arg(long)]
    pub fetcher: Option<String>,
    /// The engage cast id [default: engage-<time>].
    #[arg(long)]
    pub cast: Option<String>,
    /// Run only on schedule: at or after this seed's slot of the day (08:00-18:00 New York,
    /// see `engage-schedule`) and not after an engagement post that day, judged at the run's
    /// time (INPUT.json's `now`, else the clock); otherwise record a named skip (before_slot,
    /// outside_window, already_posted_today) and ask no agent.
    #[arg(long, value_name = "SEED")]
    pub schedule: Option<String>,
    /// Print one JSON document (the report) on stdout instead of text.
    #[arg(long)]
    pub json: bool,
    /// How the roles' agents run.
    #[command(flatten)]
    pub agents: AgentOptions,
    /// Traces of the engage cast.
    #[command(flatten)]
    pub trace: TraceOptions,
}

/// `engage-schedule`.
#[derive(Debug, Args)]
pub struct ScheduleArgs {
    /// The seed of the schedule (the same seed gives the same slots).
    #[arg(long)]
    pub seed: String,
    /// The first day, YYYY-MM-DD [default: today in New York].
    #[arg(long)]
    pub start: Option<String>,
    /// How many days.
    #[arg(long, default_value_t = 7, value_parser = clap::value_parser!(u32).range(1..=3660))]
    pub days: u32,
    /// Print one JSON document on stdout instead of text.
    #[arg(long)]
    pub json: bool,
}
