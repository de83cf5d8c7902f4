//! Command-line arguments. Parsing touches nothing; commands turn these into effects.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

mod bench;
mod budget;
mod config;
mod copy;
mod deliver;
mod drive;
mod engage;
mod placement;
mod posting;
mod queue;

pub use bench::*;
pub use budget::BudgetArgs;
pub use config::{ConfigAction, ConfigArgs, ConfigShowArgs};
pub use copy::CopyArgs;
pub use deliver::DeliverArgs;
pub use drive::{AgentOptions, DriveOptions, TraceOptions};
pub use engage::{EngageArgs, ScheduleArgs, ScorecardArgs};
pub use placement::*;
pub use posting::{ClaimsAction, ClaimsArgs, PostArgs, ResolveArgs};
pub use queue::{SubmitArgs, WorkerArgs};

/// castlog: an event-sourced runtime for LLM agent workflows.
///
/// Every cast (one run of a workflow) is an immutable, hash-chained log of events in a SQLite
/// file. State, timelines and exports are rebuilt from that log.
#[derive(Debug, Parser)]
#[command(name = "castlog", version, propagate_version = true)]
pub struct Cli {
    /// The castlog database: a SQLite file, or a PostgreSQL database as
    /// postgres://USER@HOST/DB[?schema=NAME] [default: ./castlog.db; `bench` uses a temporary
    /// one unless --db is given on its command line].
    #[arg(long, global = true, env = "CASTLOG_DB")]
    pub db: Option<PathBuf>,

    /// No progress line on stderr (it is also off with --json or when stderr is not a terminal).
    #[arg(long, global = true)]
    pub quiet: bool,

    /// An anchor file (see `castlog anchor --help`): `verify` reports every cast shorter than,
    /// or forked away from, the head it records; commands that write refuse to write on top of
    /// such a log, and afterwards move the anchor to every cast's new head.
    #[arg(long, global = true, env = "CASTLOG_ANCHOR", value_name = "FILE")]
    pub anchor: Option<PathBuf>,

    /// The options of commands that drive casts, given before the command (each such
    /// command takes them after its name too, and lists them in its own --help).
    #[command(flatten)]
    pub drive: DriveOptions,

    /// The command to run; the options above apply to every one.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands; each variant's doc is its one-line summary in `castlog --help`.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// List the casts in the database with their head seq and hash.
    ///
    /// The destinations' claim ledgers (`claims:<destination>` chains, one `day_claimed`
    /// event per day taken) are streams of the log too; `--all` lists them as well.
    ///
    /// Example: castlog casts --json
    Casts(CastsArgs),
    /// Print a cast's timeline, one line per event.
    ///
    /// Example: castlog show demo-1
    Show(ShowArgs),
    /// Check every hash chain (or one cast's): links, hashes, heads, fork parents, blobs.
    ///
    /// Exits 3 and names the exact cast and seq when anything is wrong.
    ///
    /// Example: castlog verify --all --json
    Verify(VerifyArgs),
    /// Write the casts' heads (cast, seq, hash) to an anchor file kept outside the database.
    ///
    /// The chain proves every event a cast still has is the one written, not that none was cut
    /// off its end: `verify --anchor FILE` reports a cast that is gone, shorter than its
    /// anchored head, or holds another event at the anchored seq (exit 3). An anchor proves
    /// nothing about events written after it was last moved, and is only as safe as the place
    /// it is kept. An existing FILE is moved forward; an entry whose cast no longer holds it
    /// is kept as it was (exit 3). Commands that write keep it current with --anchor FILE or
    /// CASTLOG_ANCHOR.
    ///
    /// Example: castlog anchor --all -o ~/backup/castlog.anchor
    Anchor(AnchorArgs),
    /// Write one cast (and the blobs it references) to a file, or its OpenTelemetry trace
    /// (`--format otlp-json`; prompts and replies only with --otel-content).
    ///
    /// Example: castlog export demo-1 --format jsonl -o demo-1.jsonl
    Export(ExportArgs),
    /// Rebuild every projection of a cast from its log (using checkpoints that still match
    /// the log) and print a summary.
    ///
    /// Example: castlog replay demo --json
    Replay(ReplayArgs),
    /// Read a cast from an export file; its chain is verified before anything is stored.
    ///
    /// Example: castlog --db other.db import demo-1.jsonl
    Import(ImportArgs),
    /// Copy casts from one database to another (SQLite or PostgreSQL, either way), each
    /// with its blobs and the same bytes and hashes; the copy is verified before it is stored.
    ///
    /// Example: castlog copy --from castlog.db --to postgres://castlog@db.example/castlog --all
    Copy(CopyArgs),
    /// Start a cast of a loadout and drive it until it ends or waits.
    ///
    /// Example: castlog run fixtures/loadouts/build-loop.json --task "add a greeting"
    ///   --agent scripted:fixtures/scripts/build-loop.jsonl
    Run(RunArgs),
    /// Queue a cast for a worker: its start is recorded, and it is driven by whichever
    /// `castlog worker` on any machine sharing the database takes it. Prints the cast id.
    ///
    /// Example: castlog submit fixtures/loadouts/build-loop.json --task "add a greeting"
    ///   --agent scripted:fixtures/scripts/build-loop.jsonl
    Submit(SubmitArgs),
    /// Drive queued casts under leases until stopped (or --once, --until-idle).
    ///
    /// A worker takes a queued cast (or one whose holder's lease expired: that holder died
    /// or stalled), renews its lease while it drives it, and releases it when the cast ends
    /// or waits for a person; `refine` or `continue` queues a paused cast again. An append
    /// under a lease another worker took over is refused, so a stalled worker cannot write
    /// into a cast it lost.
    ///
    /// Example: castlog --db postgres://castlog@db.example/castlog worker --concurrency 4
    Worker(WorkerArgs),
    /// Send a refinement message to a paused multi-turn socket.
    ///
    /// Every message (even "continue") is a refinement; only `castlog continue` finalizes.
    Refine(RefineArgs),
    /// Finalize a paused multi-turn socket.
    Continue(CastAgentArgs),
    /// Abort a cast (recorded as an event; `revive` continues it).
    Abort(AbortArgs),
    /// Revive a failed or aborted cast, extending exactly the allowance that ran out.
    Revive(CastAgentArgs),
    /// Pick a cast up again after a crash or an interruption and drive it on (--agent required:
    /// the unanswered prompt is sent again, recorded as a re-dispatch).
    Resume(CastAgentArgs),
    /// Add an operator steering note to a cast's next prompts.
    Steer(SteerArgs),
    /// Raise a cast's token budget (recorded as an event; a cast its budget stopped is then
    /// continued with `revive`).
    ///
    /// Example: castlog budget demo 2000000
    Budget(BudgetArgs),
    /// Look at the layered config: the bundled default, the user's, the project's and
    /// --config FILE, merged by pi-materia's rules.
    ///
    /// The user layer is materia.json in $PI_MATERIA_PROFILE_DIR, else
    /// $XDG_CONFIG_HOME/pi/pi-materia, else ~/.config/pi/pi-materia; the project layer is
    /// .pi/pi-materia.json in the working directory. `run` and `submit` use the layers when
    /// no CONFIG is given.
    ///
    /// Example: castlog config show
    Config(ConfigArgs),
    /// Deliver what a cast's webhook sinks (`eventing.sinks`) have not taken yet: its bus
    /// events are read from its log, each outcome recorded beside it.
    ///
    /// Example: castlog deliver demo --json
    Deliver(DeliverArgs),
    /// Print a cast's state (folded from its log).
    State(StateArgs),
    /// Print a recorded prompt: the rendered messages and where every entry went.
    ///
    /// Example: castlog prompt demo Socket-4:2 --turn 1
    Prompt(PromptArgs),
    /// Fork a cast at a decision boundary and drive the new cast from there.
    ///
    /// The new cast's first event names the parent, the seq and the parent's hash there.
    /// Example: castlog recast demo --at Socket-4:2 --agent scripted:other.jsonl --cast demo-b
    Recast(RecastArgs),
    /// Compare two casts: common prefix, first divergence, steps aligned by socket, item, visit.
    ///
    /// Example: castlog diff demo demo-b
    Diff(DiffArgs),
    /// Name a point of a cast, usable wherever --at takes a seq.
    ///
    /// Example: castlog mark demo before-rework --at 27
    Mark(MarkArgs),
    /// List every prompt's placements; with --lint, flag placement problems.
    ///
    /// Example: castlog audit demo --socket Socket-4 --lint --json
    Audit(AuditArgs),
    /// Render context entries given as data (another orchestrator's) under a placement
    /// policy, with no database: the messages and where every entry went, and why.
    ///
    /// With --compare A B, per entry where it lands under each policy and why, and each
    /// policy's lint findings; for a sequence of turns, whether each turn kept the previous
    /// turn's cached system prefix and which entry broke it.
    /// Example: castlog placement fixtures/placement/inventory.json --compare legacy recommended
    Placement(PlacementArgs),
    /// Measure castlog; prints figures as JSON.
    #[command(subcommand)]
    Bench(BenchCommand),
    /// List post claims (the claim-before-send ledger), or resolve one.
    ///
    /// Example: castlog claims --pending; castlog claims resolve clm-3f2a --staged 123456
    Claims(ClaimsArgs),
    /// Run the engagement pipeline on an INPUT.json: one checked follow-up question.
    ///
    /// Dry run unless --post is given (then --sender is required). Score the judge first with
    /// `engage-scorecard`; keep to one run a day with --schedule SEED (see `engage-schedule`).
    /// Example: castlog engage fixtures/engage/input.json --qualifier scripted:q.jsonl
    ///   --drafter scripted:d.jsonl --judge scripted:j.jsonl --fetcher file:sources --json
    Engage(EngageArgs),
    /// Score a fidelity judge on fixtures before trusting it with `engage`.
    ///
    /// Each fixture is a member's quote and a drafted question; the judge gets the prompt
    /// `engage` uses (the quote fenced as untrusted data) and its answer is read the same way.
    /// The built-in set has 40 fixtures: 23 faithful drafts, 17 that assert what the member
    /// never said, 4 of those (`quote_*`) with a quote that tries to talk the judge round.
    /// Exits 1 when an unfaithful draft is judged faithful (a false negative), an injection
    /// fixture gets through, or the judge fails to answer a fixture (no answer, or one that
    /// cannot be read as a verdict); a judge that answers and only loses good questions still
    /// passes.
    ///
    /// Example: castlog engage-scorecard --judge "cmd:ollama run llama3" --json
    #[command(name = "engage-scorecard")]
    EngageScorecard(ScorecardArgs),
    /// Preview the engagement schedule: one slot a day between 08:00 and 18:00 New York time.
    ///
    /// The slot of a day depends only on the seed and the day; daylight saving is followed
    /// (EDT/EST). Each day has the idempotency key engagement:YYYY-MM-DD, whatever the seed.
    /// `castlog engage INPUT.json --schedule SEED` runs only at or after that day's slot,
    /// before 18:00, and not after a post that day.
    ///
    /// Example: castlog engage-schedule --start 2026-03-06 --days 7 --seed team-a
    #[command(name = "engage-schedule")]
    EngageSchedule(ScheduleArgs),
    /// Write one self-contained HTML report of a cast: summary, loadout graph, timeline by
    /// visit, every prompt with its placements; with --diff, two casts aligned by step.
    ///
    /// The file needs no network (styles and script inline) and opens from disk.
    /// Example: castlog report demo --diff demo-b -o demo.html
    Report(ReportArgs),
    /// Serve the casts and their reports on a local web page, live while a cast runs.
    ///
    /// Read-only unless --allow-input (then a paused multi-turn socket can be refined or
    /// continued from the page). Binding beyond loopback needs --token, checked on every
    /// request (as `Authorization: Bearer T`, `?token=T` or the cookie the page sets).
    /// Example: castlog serve --bind 127.0.0.1:8080
    Serve(ServeArgs),
}

/// `report`.
#[derive(Debug, Args)]
pub struct ReportArgs {
    /// The cast.
    pub cast: String,
    /// A second cast to compare it with (aligned by socket, item and visit).
    #[arg(long, value_name = "OTHER")]
    pub diff: Option<String>,
    /// The HTML file to write.
    #[arg(short = 'o', long = "output", value_name = "FILE.html")]
    pub output: std::path::PathBuf,
    /// Print one JSON document on stdout instead of text.
    #[arg(long)]
    pub json: bool,
}

/// `serve`.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// The address to listen on (port 0 picks a free one; the address is printed).
    #[arg(long, default_value = "127.0.0.1:8080")]
    pub bind: String,
    /// Let the page record a refinement or a continue for a paused multi-turn socket.
    #[arg(long)]
    pub allow_input: bool,
    /// The token every request must carry; required when binding beyond loopback.
    #[arg(long, env = "CASTLOG_SERVE_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
}

/// Just `--json`.
#[derive(Debug, Args)]
pub struct JsonFlag {
    /// Print one JSON document on stdout instead of text.
    #[arg(long)]
    pub json: bool,
}

/// `casts`.
#[derive(Debug, Args)]
pub struct CastsArgs {
    /// Also list the streams that are not casts (the destinations' claim ledgers).
    #[arg(long)]
    pub all: bool,
    /// Only the casts in this state: queued (waiting for a worker, or under an expired
    /// lease), running (held by a worker, or driven by a command), paused (waiting for a
    /// person or for `resume`), completed, failed or aborted.
    #[arg(long, value_parser = ["queued", "running", "paused", "completed", "failed", "aborted"])]
    pub status: Option<String>,
    /// Print one JSON document on stdout instead of text.
    #[arg(long)]
    pub json: bool,
}

/// `show`.
#[derive(Debug, Args)]
pub struct ShowArgs {
    /// Cast id, as `castlog casts` lists it.
    pub cast: String,
    /// Keep printing events as they are appended (from any machine sharing the database),
    /// until the cast completes, fails or is aborted. With --json the output is NDJSON: one
    /// JSON document per event, each on a line of its own (the fields of an element of `show
    /// --json`'s `events`), and no document around them.
    #[arg(long)]
    pub follow: bool,
    /// Print one JSON document on stdout instead of text (with --follow, one per event line).
    #[arg(long)]
    pub json: bool,
}

/// `verify`.
#[derive(Debug, Args)]
pub struct VerifyArgs {
    /// The cast to verify, with the casts it was recast from (default: all casts).
    #[arg(conflicts_with = "all")]
    pub cast: Option<String>,
    /// Verify every cast (the default when no cast is named).
    #[arg(long)]
    pub all: bool,
    /// Print one JSON document on stdout instead of text.
    #[arg(long)]
    pub json: bool,
}

/// `anchor`.
#[derive(Debug, Args)]
pub struct AnchorArgs {
    /// The cast to anchor, with the casts it was recast from (default: all casts).
    #[arg(conflicts_with = "all")]
    pub cast: Option<String>,
    /// Anchor every cast (the default when no cast is named).
    #[arg(long)]
    pub all: bool,
    /// The anchor file to write or move forward [default: the global --anchor or
    /// CASTLOG_ANCHOR].
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Print one JSON document on stdout instead of text.
    #[arg(long)]
    pub json: bool,
}

/// Export formats on the command line.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum FormatArg {
    /// One JSON object per line (readable).
    Jsonl,
    /// bincode (compact).
    Bincode,
    /// The cast as OpenTelemetry traces, OTLP/JSON (GenAI semantic conventions).
    OtlpJson,
}

/// `export`.
#[derive(Debug, Args)]
pub struct ExportArgs {
    /// Cast id, as `castlog casts` lists it.
    pub cast: String,
    /// What to write: jsonl or bincode (both re-importable), or otlp-json.
    #[arg(long, value_enum, default_value = "jsonl")]
    pub format: FormatArg,
    /// The output file (`-` for stdout, JSONL only).
    #[arg(short = 'o', long = "output", required_unless_present = "artifacts")]
    pub output: Option<PathBuf>,
    /// Write the manifest's artifact tree (sockets/, contexts/, manifest.json) into DIR instead.
    #[arg(long, conflicts_with = "output")]
    pub artifacts: Option<PathBuf>,
    /// With --format otlp-json: include prompt and completion texts (and the other texts a
    /// model or a person wrote). Off by default.
    #[arg(long = "otel-content")]
    pub otel_content: bool,
    /// Print one JSON document on stdout instead of text.
    #[arg(long)]
    pub json: bool,
}

/// `replay`.
#[derive(Debug, Args)]
pub struct ReplayArgs {
    /// Cast id, as `castlog casts` lists it.
    pub cast: String,
    /// Print one JSON document on stdout instead of text.
    #[arg(long)]
    pub json: bool,
}

/// `import`.
#[derive(Debug, Args)]
pub struct ImportArgs {
    /// The export file (JSONL or bincode; detected from its content).
    pub file: PathBuf,
    /// Print one JSON document on stdout instead of text.
    #[arg(long)]
    pub json: bool,
}

/// `run`.
#[derive(Debug, Args)]
pub struct RunArgs {
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
    /// The request the cast works on (the templates' {{request}}).
    #[arg(long)]
    pub task: String,
    /// Who answers prompts: scripted:FILE (JSONL answers), cmd:PROGRAM ARGS... (prompt on
    /// stdin, reply on stdout; split on whitespace, no shell quoting), openai:BASE_URL#MODEL
    /// (any OpenAI-compatible endpoint; key from CASTLOG_API_KEY or OPENAI_API_KEY) or
    /// recorded:CAST (answers from a cast's log by prompt hash; see --fallback).
    ///
    /// A script's lines are used in order across the commands that drive one cast; refine,
    /// continue, revive and resume check the lines the cast already used against the
    /// answers in its log and refuse another script file (exit 1; lines may be added after
    /// the used ones).
    #[arg(long)]
    pub agent: String,
    /// The cast id [default: cast-<time>].
    #[arg(long)]
    pub cast: Option<String>,
    /// The prompt placement policy: recommended, legacy or a policy file (recorded in the
    /// cast) [default: the config's placementPolicy, else recommended].
    #[arg(long, value_name = "NAME|FILE")]
    pub policy: Option<String>,
    /// The directory tool calls act in (recorded in the cast) [default: the current directory].
    #[arg(long, value_name = "DIR")]
    pub workdir: Option<PathBuf>,
    /// Posting: dry run unless --post.
    #[command(flatten)]
    pub posting: PostArgs,
    /// Print one JSON document on stdout instead of text.
    #[arg(long)]
    pub json: bool,
    /// How the cast is driven: agents, retries, traces, exit status.
    #[command(flatten)]
    pub drive: DriveOptions,
}

impl Command {
    /// The drive options given after the command's name (none for a command without them).
    pub fn drive_options(&self) -> DriveOptions {
        match self {
            Command::Run(RunArgs { drive, .. })
            | Command::Continue(CastAgentArgs { drive, .. })
            | Command::Revive(CastAgentArgs { drive, .. })
            | Command::Resume(CastAgentArgs { drive, .. })
            | Command::Refine(RefineArgs { drive, .. })
            | Command::Recast(RecastArgs { drive, .. })
            | Command::Worker(WorkerArgs { drive, .. }) => drive.clone(),
            Command::Steer(args) => DriveOptions {
                trace: args.trace.clone(),
                exit_status: args.exit_status,
                ..DriveOptions::default()
            },
            Command::Engage(args) => DriveOptions {
                agent: args.agents.clone(),
                trace: args.trace.clone(),
                ..DriveOptions::default()
            },
            Command::EngageScorecard(args) => DriveOptions {
                agent: args.agents.clone(),
                ..DriveOptions::default()
            },
            Command::Export(args) => DriveOptions {
                trace: TraceOptions {
                    otlp_endpoint: None,
                    otel_content: args.otel_content,
                },
                ..DriveOptions::default()
            },
            _ => DriveOptions::default(),
        }
    }
}

/// A cast and an optional agent to drive it on with.
#[derive(Debug, Args)]
pub struct CastAgentArgs {
    /// Cast id, as `castlog casts` lists it.
    pub cast: String,
    /// Who answers the next prompts, as for `run --agent` (without it the cast is left waiting
    /// for an agent). A scripted:FILE must be the script the cast was driven with: the lines
    /// it already used are checked against the log, another file is refused (exit 1).
    #[arg(long)]
    pub agent: Option<String>,
    /// Posting: dry run unless --post.
    #[command(flatten)]
    pub posting: PostArgs,
    /// Print one JSON document on stdout instead of text.
    #[arg(long)]
    pub json: bool,
    /// How the cast is driven: agents, retries, traces, exit status.
    #[command(flatten)]
    pub drive: DriveOptions,
}

/// `refine`.
#[derive(Debug, Args)]
pub struct RefineArgs {
    /// Cast id, as `castlog casts` lists it.
    pub cast: String,
    /// The person's message to the paused socket, recorded verbatim.
    pub text: String,
    /// Who answers the next prompts, as for `run --agent`. A scripted:FILE must be the script
    /// the cast was driven with: the lines it already used are checked against the log,
    /// another file is refused (exit 1).
    #[arg(long)]
    pub agent: Option<String>,
    /// Print one JSON document on stdout instead of text.
    #[arg(long)]
    pub json: bool,
    /// How the cast is driven: agents, retries, traces, exit status.
    #[command(flatten)]
    pub drive: DriveOptions,
}

/// `abort`.
#[derive(Debug, Args)]
pub struct AbortArgs {
    /// Cast id, as `castlog casts` lists it.
    pub cast: String,
    /// Why, recorded in the cast's cast_aborted event.
    #[arg(long, default_value = "aborted by user")]
    pub reason: String,
    /// Print one JSON document on stdout instead of text.
    #[arg(long)]
    pub json: bool,
}

/// `steer`.
#[derive(Debug, Args)]
pub struct SteerArgs {
    /// Cast id, as `castlog casts` lists it.
    pub cast: String,
    /// The note's text; every later prompt of the cast shows it.
    pub text: String,
    /// Lock the note into the system prefix (with a trailing reminder).
    #[arg(long)]
    pub locked: bool,
    /// Exit 4 when the cast ends failed and 5 when it waits for an agent or a person
    /// (awaiting_agent, awaiting_refinement), instead of 0, so scripts can branch on it.
    #[arg(long = "exit-status")]
    pub exit_status: bool,
    /// Print one JSON document on stdout instead of text.
    #[arg(long)]
    pub json: bool,
    /// Traces of the cast.
    #[command(flatten)]
    pub trace: TraceOptions,
}

/// `state`.
#[derive(Debug, Args)]
pub struct StateArgs {
    /// Cast id, as `castlog casts` lists it.
    pub cast: String,
    /// Show the state as it was right after this point: a seq, SOCKET:VISIT (right after that
    /// visit started) or a waypoint name.
    #[arg(long)]
    pub at: Option<String>,
    /// Print one JSON document on stdout instead of text.
    #[arg(long)]
    pub json: bool,
}

/// `recast`.
#[derive(Debug, Args)]
pub struct RecastArgs {
    /// Cast id of the parent, as `castlog casts` lists it; the parent is left as it is.
    pub cast: String,
    /// Where: a seq (a decision boundary), SOCKET:VISIT, or a waypoint name.
    #[arg(long)]
    pub at: String,
    /// Who answers the new cast's prompts (without it the new cast waits for an agent).
    #[arg(long)]
    pub agent: Option<String>,
    /// Run the new cast with this config's loadout (same name as the parent's), e.g. an
    /// edited prompt; the new loadout hash is recorded.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Parent seqs of later refinements, continues and steering notes to re-apply
    /// (comma-separated).
    #[arg(long = "keep-inputs", value_delimiter = ',')]
    pub keep_inputs: Vec<u64>,
    /// The new cast's id [default: <parent>-recast-N].
    #[arg(long = "cast")]
    pub child: Option<String>,
    /// Write the files of the last workspace checkpoint at or before the fork point into
    /// this new (or empty) directory, and run the new cast's tools there.
    #[arg(long)]
    pub workdir: Option<PathBuf>,
    /// Posting: dry run unless --post (claims the parent made are never posted again).
    #[command(flatten)]
    pub posting: PostArgs,
    /// Print one JSON document on stdout instead of text.
    #[arg(long)]
    pub json: bool,
    /// How the cast is driven: agents, retries, traces, exit status.
    #[command(flatten)]
    pub drive: DriveOptions,
}

/// `diff`.
#[derive(Debug, Args)]
pub struct DiffArgs {
    /// Cast id of the first (left) side.
    pub a: String,
    /// Cast id of the second (right) side (optional with --files).
    #[arg(required_unless_present = "files")]
    pub b: Option<String>,
    /// Compare the files instead: the changes between consecutive workspace checkpoints of
    /// each cast, step by step.
    #[arg(long)]
    pub files: bool,
    /// Print one JSON document on stdout instead of text.
    #[arg(long)]
    pub json: bool,
}

/// `mark`.
#[derive(Debug, Args)]
pub struct MarkArgs {
    /// Cast id, as `castlog casts` lists it.
    pub cast: String,
    /// The waypoint's name.
    pub name: String,
    /// The seq it names [default: the cast's head].
    #[arg(long)]
    pub at: Option<u64>,
    /// Print one JSON document on stdout instead of text.
    #[arg(long)]
    pub json: bool,
}

/// `prompt`.
#[derive(Debug, Args)]
pub struct PromptArgs {
    /// Cast id, as `castlog casts` lists it.
    pub cast: String,
    /// SOCKET or SOCKET:VISIT (default: the socket's last visit).
    pub at: String,
    /// The turn within the visit (default: the last).
    #[arg(long)]
    pub turn: Option<u32>,
    /// Print one JSON document on stdout instead of text.
    #[arg(long)]
    pub json: bool,
}

/// `audit`.
#[derive(Debug, Args)]
pub struct AuditArgs {
    /// Cast id, as `castlog casts` lists it.
    pub cast: String,
    /// Only prompts of this socket.
    #[arg(long)]
    pub socket: Option<String>,
    /// Only placements of this source type.
    #[arg(long = "source-type")]
    pub source_type: Option<String>,
    /// Add lint findings: escalation-in-system-fold, mutable-in-cached-prefix, stacked-mandates,
    /// duplicated-reason, dropped-entry.
    #[arg(long)]
    pub lint: bool,
    /// Print one JSON document on stdout instead of text.
    #[arg(long)]
    pub json: bool,
}

fn parse_backoff(text: &str) -> Result<(std::time::Duration, std::time::Duration), String> {
    castlog_replay::retry::parse_backoff(text).map_err(|e| e.to_string())
}

fn parse_jitter(text: &str) -> Result<f64, String> {
    castlog_replay::retry::parse_jitter(text).map_err(|e| e.to_string())
}
