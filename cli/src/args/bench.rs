//! The arguments of `castlog bench` and its workloads.

use clap::{Args, Subcommand, ValueEnum};

/// Durability on the command line.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum DurabilityArg {
    /// fsync every commit before anything acts on it: survives a power cut.
    Full,
    /// WAL synchronous=NORMAL: survives a process crash, not a power cut.
    Normal,
}

/// `bench` workloads.
#[derive(Debug, Subcommand)]
pub enum BenchCommand {
    /// Append N events of B payload bytes in batches of K, then verify the chain.
    ///
    /// Without --db the run uses a fresh temporary database that is removed afterwards.
    ///
    /// Example: castlog bench append --events 20000 --payload-bytes 512 --batch 64 --baseline raw --json
    Append(BenchAppendArgs),
    /// The LangGraph peer's workload through the real machine, driver and log.
    ///
    /// A plan socket emits W work items; per item a build and an eval socket run R times (eval is
    /// not satisfied R-1 times, then satisfied); every reply is S bytes. Prints run figures and
    /// time travel (history, state at the middle seq, fork), the transactions the run committed
    /// (the agent is local, like a script: its steps are held and written up to 16 in one; one
    /// per step with --no-pipeline), `commit_floor_ms`, the time of one commit of a single
    /// small row on the same disk at the same durability, and the disk's ceiling measured after
    /// the run: the same bytes per step written by plain rusqlite (in 16 KiB pages, as a file
    /// castlog makes), 16 steps to a commit and one commit per step, with the run's fraction of
    /// each. On PostgreSQL (`--db postgres://...`)
    /// the ceiling is raw inserts of the rows the run stored, each step's event and blob rows
    /// byte for byte, through the same client (synchronous_commit on), one statement and one
    /// transaction per step (or per 16), into tables of the same columns and keys in a scratch
    /// schema dropped afterwards; the log appends one transaction per step there, so
    /// `of_ceiling_per_step` is its append/raw-insert ratio. The casts run in an empty scratch
    /// directory outside git (the synthetic agent touches no files, so no workspace is
    /// checkpointed). Without --db the run uses a fresh temporary database that is removed
    /// afterwards.
    ///
    /// Example: castlog bench synth --items 200 --rework 3 --output-bytes 2000 --json
    Synth(BenchSynthArgs),
    /// Replay workloads on one long synthetic cast: fold and verify throughput, `state --at` the
    /// middle seq, and `diff` between the cast and a recast forked at its middle.
    ///
    /// The default (2,300 items, 3 tries) makes a cast of about 100,000 events.
    /// Example: castlog bench replay --items 2300 --json
    Replay(BenchSynthArgs),
    /// The peak memory (RSS) of every read command on one long cast: show, export (both
    /// formats), state (head and --at the middle seq), replay, verify, diff (of the cast with
    /// itself), audit (and --lint), prompt (the last one), casts.
    ///
    /// Each command runs as a child process with its output thrown away; the figure is the
    /// child's own peak RSS when it exits, with its time and exit code, and verify's events
    /// per second of its wall time (`verify_events_per_s`). Without --cast the
    /// bench first makes the synthetic cast of `bench synth` (the default, 2,330 items with 3
    /// tries, is about 100,000 events) in --db or a fresh temporary database.
    ///
    /// Example: castlog bench reads --json; castlog --db big.db bench reads --cast CAST --json
    Reads(BenchReadsArgs),
    /// The time to write the HTML report (`castlog report`) of one long synthetic cast, and
    /// for a headless Chromium (when installed) to load it.
    ///
    /// Without --cast the bench first makes the `bench synth` cast (the default, 1,160 items
    /// with 3 tries, is about 50,000 events) in --db or a fresh temporary database.
    ///
    /// Example: castlog bench report --json
    Report(BenchReportArgs),
    /// Post steps per second with few and with many casts in the database.
    ///
    /// Per --casts size N, a fresh database (temporary, or DB.casts-N kept beside --db) gets N casts of the `bench synth`
    /// workflow (one item, two tries, no post), then P casts of a post workflow (draft, a
    /// dry-run post, confirm) are driven and each post step is timed, from the draft's reply
    /// to the confirm prompt. A post step reads every claim in the database, never the other
    /// events of other casts, so its rate should not fall with N.
    ///
    /// Example: castlog bench posts --casts 10,10000 --posts 200 --json
    Posts(BenchPostsArgs),
    /// Casts per second through the run queue with 1, 2, 4, ... worker processes.
    ///
    /// Per --workers count W, C casts of a one-socket loadout are submitted, then W `castlog
    /// worker --until-idle` processes (one cast at a time each) drive them with a `cmd:` agent
    /// that sleeps --sleep-ms per call; the figure is C over the time from the first worker's
    /// start to the last one's end, and `scaling`, that rate over W times the rate of one
    /// worker (1.0 is linear). Without --db the run uses a fresh temporary database.
    ///
    /// Example: castlog bench workers --workers 1,2,4 --casts 40 --json
    Workers(BenchWorkersArgs),
    /// Recorded tool calls per second, and the bytes each adds to the database.
    ///
    /// A fake model asks a one-socket `coding` cast for one `read` call per turn, --per-visit
    /// calls per cast (its limits.maxToolCalls), through the real machine, driver, tools and
    /// log, until --calls calls are recorded; each call is durable before the next runs. The
    /// calls are timed in slices of 1,000: a cost that grew with the database would show as a
    /// falling rate. Without --db the run uses a fresh temporary database.
    ///
    /// Example: castlog bench tools --calls 10000 --durability full --json
    Tools(BenchToolsArgs),
    /// The wall time of one parallel cast with its lanes run side by side, and the same cast
    /// with `maxConcurrency: 1`.
    ///
    /// The lanes fixture's loadout (a parallel plan, a prelude utility, a build/eval loop, a
    /// narrator) runs with a `cmd:` agent that sleeps --sleep-ms per call and plans 8 work
    /// items in 4 lanes; once with 4 lanes at a time, once with 1. The figure is each wall
    /// time and their ratio (`parallel_vs_serial`, under 0.4 when the lanes overlap). Without
    /// --db the runs use a fresh temporary database.
    ///
    /// Example: castlog bench lanes --json
    Lanes(BenchLanesArgs),
}

/// `bench lanes`.
#[derive(Debug, Args)]
pub struct BenchLanesArgs {
    /// How long the agent takes per call, in milliseconds.
    #[arg(long, default_value_t = 500)]
    pub sleep_ms: u64,
    /// Print one JSON document on stdout (the figures are JSON either way).
    #[arg(long)]
    pub json: bool,
}

/// `bench workers`.
#[derive(Debug, Args)]
pub struct BenchWorkersArgs {
    /// Worker process counts to measure (comma-separated).
    #[arg(long, value_delimiter = ',', default_value = "1,2,4")]
    pub workers: Vec<u32>,
    /// Casts submitted per count.
    #[arg(long, default_value_t = 40)]
    pub casts: u64,
    /// How long the synthetic agent takes per call, in milliseconds.
    #[arg(long, default_value_t = 200)]
    pub sleep_ms: u64,
    /// Print one JSON document on stdout (the figures are JSON either way).
    #[arg(long)]
    pub json: bool,
}

/// `bench tools`.
#[derive(Debug, Args)]
pub struct BenchToolsArgs {
    /// Tool calls to record in all.
    #[arg(long, default_value_t = 10_000)]
    pub calls: u64,
    /// Calls per socket visit (one cast each).
    #[arg(long, default_value_t = 50)]
    pub per_visit: u32,
    /// Commit durability.
    #[arg(long, value_enum, default_value = "full")]
    pub durability: DurabilityArg,
    /// Print one JSON document on stdout (the figures are JSON either way).
    #[arg(long)]
    pub json: bool,
}

/// `bench posts`.
#[derive(Debug, Args)]
pub struct BenchPostsArgs {
    /// Database sizes to measure, in casts (comma-separated).
    #[arg(long, value_delimiter = ',', default_value = "10,10000")]
    pub casts: Vec<u64>,
    /// Post casts P driven in each database.
    #[arg(long, default_value_t = 200)]
    pub posts: u64,
    /// Commit durability.
    #[arg(long, value_enum, default_value = "normal")]
    pub durability: DurabilityArg,
    /// Print one JSON document on stdout (the figures are JSON either way).
    #[arg(long)]
    pub json: bool,
}

/// `bench reads`.
#[derive(Debug, Args)]
pub struct BenchReadsArgs {
    /// Measure this cast of --db instead of making one.
    #[arg(long)]
    pub cast: Option<String>,
    /// Work items W of the synthetic cast.
    #[arg(long, default_value_t = 2330)]
    pub items: u64,
    /// Tries R per item.
    #[arg(long, default_value_t = 3)]
    pub rework: u32,
    /// Bytes S of every agent reply.
    #[arg(long, default_value_t = 2000)]
    pub output_bytes: usize,
    /// Commit durability while the synthetic cast is made (the reads do not write, except
    /// replay's checkpoints).
    #[arg(long, value_enum, default_value = "normal")]
    pub durability: DurabilityArg,
    /// Print one JSON document on stdout (the figures are JSON either way).
    #[arg(long)]
    pub json: bool,
}

/// `bench report`.
#[derive(Debug, Args)]
pub struct BenchReportArgs {
    /// Measure this cast of --db instead of making one.
    #[arg(long)]
    pub cast: Option<String>,
    /// Work items W of the synthetic cast.
    #[arg(long, default_value_t = 1160)]
    pub items: u64,
    /// Tries R per item.
    #[arg(long, default_value_t = 3)]
    pub rework: u32,
    /// Bytes S of every agent reply.
    #[arg(long, default_value_t = 2000)]
    pub output_bytes: usize,
    /// Commit durability while the synthetic cast is made.
    #[arg(long, value_enum, default_value = "normal")]
    pub durability: DurabilityArg,
    /// Print one JSON document on stdout (the figures are JSON either way).
    #[arg(long)]
    pub json: bool,
}

/// `bench synth`.
#[derive(Debug, Args)]
pub struct BenchSynthArgs {
    /// Work items W the plan socket emits.
    #[arg(long, default_value_t = 50)]
    pub items: u64,
    /// Tries R per item (eval is satisfied on the R-th).
    #[arg(long, default_value_t = 3)]
    pub rework: u32,
    /// Bytes S of every agent reply.
    #[arg(long, default_value_t = 2000)]
    pub output_bytes: usize,
    /// Commit durability.
    #[arg(long, value_enum, default_value = "full")]
    pub durability: DurabilityArg,
    /// Ask the synthetic agent only once every step is durable, as the driver asks a live
    /// model (and as LangGraph's durability `sync` persists a step before the next starts). By
    /// default the agent, a function of the prompt like a script, is local: it is asked while
    /// the last steps (at most 32, up to 16 to a transaction) are written and, with full
    /// durability, fsynced.
    #[arg(long)]
    pub no_pipeline: bool,
    /// What the replies are made of: `words` from the peer's vocabulary of 64 (prose-like,
    /// packs to about a third), or `random` letters and digits (about 6 bits a character:
    /// packing saves little).
    #[arg(long, value_enum, default_value = "words")]
    pub text: ReplyTextArg,
    /// Store every value as it is given, without packing (zstd) the large ones, to measure
    /// what packing saves and costs.
    #[arg(long)]
    pub no_pack: bool,
    /// Print one JSON document on stdout (the figures are JSON either way).
    #[arg(long)]
    pub json: bool,
}

/// What `bench synth`'s replies are made of.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ReplyTextArg {
    /// Words of the peer's vocabulary.
    Words,
    /// Letters and digits drawn uniformly.
    Random,
}

impl ReplyTextArg {
    /// Its name on the command line and in the figures.
    pub fn as_str(self) -> &'static str {
        match self {
            ReplyTextArg::Words => "words",
            ReplyTextArg::Random => "random",
        }
    }
}

/// `bench append`.
#[derive(Debug, Args)]
pub struct BenchAppendArgs {
    /// Number of events to append.
    #[arg(long, default_value_t = 10_000)]
    pub events: u64,
    /// Payload bytes per event.
    #[arg(long, default_value_t = 256)]
    pub payload_bytes: usize,
    /// Events per append call (one transaction each).
    #[arg(long, default_value_t = 1)]
    pub batch: u64,
    /// Also measure plain rusqlite inserts of the same bytes in the same transactions.
    #[arg(long, value_enum)]
    pub baseline: Option<BaselineArg>,
    /// Commit durability.
    #[arg(long, value_enum, default_value = "full")]
    pub durability: DurabilityArg,
    /// The cast to append to (continued from its head if it exists).
    #[arg(long, default_value = "bench-append")]
    pub cast: String,
    /// Print `acked SEQ` on stderr after every acknowledged append.
    #[arg(long)]
    pub acks: bool,
    /// Print one JSON document on stdout (the figures are JSON either way).
    #[arg(long)]
    pub json: bool,
}

/// Baselines for `bench append`.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum BaselineArg {
    /// Plain rusqlite inserts.
    Raw,
}
