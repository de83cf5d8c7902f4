//! Arguments of posting: `--post` and its sender, and `castlog claims`.

use clap::{Args, Subcommand};

/// Posting flags: without `--post` every post is a dry run and no sender is called.
#[derive(Debug, Clone, Default, Args)]
pub struct PostArgs {
    /// Send posts through --sender (claimed first; never retried). Without it: dry run.
    #[arg(long)]
    pub post: bool,
    /// Where posts go: cmd:PROGRAM ARGS... (body on stdin, id on stdout, the envelope in
    /// CASTLOG_ENVELOPE), file:DIR (DIR/<claim> and its envelope DIR/<claim>.json) or
    /// webhook:URL (the envelope as the JSON body; the id from the answer's `id`).
    #[arg(long)]
    pub sender: Option<String>,
}

/// `claims`.
#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct ClaimsArgs {
    /// Resolve a claim instead of listing.
    #[command(subcommand)]
    pub action: Option<ClaimsAction>,
    /// Only pending claims (the send outcome is unknown: a person must resolve them).
    #[arg(long)]
    pub pending: bool,
    /// Print one JSON document on stdout instead of text.
    #[arg(long)]
    pub json: bool,
}

/// `claims` subcommands.
#[derive(Debug, Subcommand)]
pub enum ClaimsAction {
    /// Record a person's resolution of a claim (an event on the claim's cast).
    ///
    /// A resolution moves the claim on: pending -> staged | abandoned, staged -> approved |
    /// declined, approved -> posted | declined. --answered / --ignored record instead how a
    /// post that went out (staged, approved or posted) was received; the status stays, and
    /// `engage` then names a reuse of an ignored thread `thread_previously_ignored`.
    ///
    /// Examples: castlog claims resolve clm-3f2a --staged 1234567890;
    ///   castlog claims resolve clm-3f2a --ignored
    Resolve(ResolveArgs),
}

/// `claims resolve`.
#[derive(Debug, Args)]
#[command(group(
    clap::ArgGroup::new("resolution")
        .required(true)
        .args(["staged", "abandoned", "approved", "posted", "declined", "answered", "ignored"])
))]
pub struct ResolveArgs {
    /// The claim id (or a unique prefix of it).
    pub claim: String,
    /// It was sent after all: the message id the destination shows.
    #[arg(long, value_name = "MSG_ID")]
    pub staged: Option<String>,
    /// It was not sent and will not be (releases the day).
    #[arg(long)]
    pub abandoned: bool,
    /// A staged post is approved for publishing.
    #[arg(long)]
    pub approved: bool,
    /// An approved post went out.
    #[arg(long)]
    pub posted: bool,
    /// A staged or approved post is declined (releases the day).
    #[arg(long)]
    pub declined: bool,
    /// The member answered the post (it went out: staged, approved or posted).
    #[arg(long)]
    pub answered: bool,
    /// The member ignored the post (it went out: staged, approved or posted).
    #[arg(long)]
    pub ignored: bool,
    /// Print one JSON document on stdout instead of text.
    #[arg(long)]
    pub json: bool,
}
