//! Loadouts: the resolved workflow graph a cast runs.
//!
//! A loadout is read from pi-materia's config format ([`load`]) and resolved into the types
//! below: every socket carries its materia's effective settings (parse mode, assignments,
//! executable), every load-time derivation of the reference is already applied (generator ⇒
//! json + `workItems` assign; loop `consumes.from` from topology; legacy loop `exit` materialized
//! into parse/advance/exit routes; loop iterators derived). The resolved loadout is what a cast
//! freezes in its `cast_started` event (as JSON, see [`Loadout::to_json`]), so a later edit of
//! the config file never changes a running or recorded cast.

pub mod load;

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::event::When;
use crate::id::{MateriaName, SocketId};

pub use load::layers::{Layer, LayerError, LayerKind, Layered, load_layers};
pub use load::{Config, LoadError, load_config};

/// How a socket's output is parsed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Parse {
    /// Raw text; `satisfied` is never read from it.
    #[default]
    Text,
    /// One JSON object, validated against the handoff contract.
    Json,
}

/// A graph edge target.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EdgeTarget {
    /// Continue at a socket.
    Socket(SocketId),
    /// End the cast.
    End,
}

/// One ordered route out of a socket.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Edge {
    /// Outcome the edge is taken on; edges are tried in order, the first match wins.
    pub when: When,
    /// Where it goes.
    pub to: EdgeTarget,
    /// Per-edge, per-item traversal allowance.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_traversals: Option<u32>,
}

/// A cursor advance after a socket completes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Advance {
    /// The cursor name (`workItemIndex`).
    pub cursor: String,
    /// The items path (`state.workItems`).
    pub items: String,
    /// The condition (`satisfied`, `exists(path)`, `a == b`, ...); `None` = always.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub when: Option<String>,
}

/// How a loop (or a `foreach` socket) picks its current item.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ItemSource {
    /// Path of the list iterated (`state.workItems`).
    pub items: String,
    /// The name the item is also exposed under in `state.data`.
    #[serde(rename = "as")]
    pub as_name: String,
    /// Cursor holding the current index (`workItemIndex`), kept in the cast's cursors.
    pub cursor: String,
}

/// A canonical post-exhaustion route of a loop.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExitRoute {
    /// Unique id (`exit:Socket-6:always`).
    pub id: String,
    /// The member socket whose advance exhausted the list.
    pub from: SocketId,
    /// Which outcome it matches.
    pub condition: When,
    /// Where the cast continues.
    pub target: EdgeTarget,
}

/// A loop region.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LoopRegion {
    /// The loop's id in the config.
    pub id: String,
    /// Member sockets of the loop, each run once per item.
    pub sockets: Vec<SocketId>,
    /// The generator socket whose list is iterated, derived from topology.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub consumes_from: Option<SocketId>,
    /// Where the loop reads its items and which cursor it moves.
    pub iterator: ItemSource,
    /// Exit routes, in declaration order.
    #[serde(default)]
    pub exits: Vec<ExitRoute>,
    /// The loop walks no items (neither `consumes` nor `iterator`, no generator feeding it):
    /// its sockets run without an item. Absent in loadouts frozen before, which walked
    /// `state.workItems`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub itemless: bool,
    /// `parallel.maxConcurrency`: how many lanes of a parallel generator feeding this loop
    /// run at once (overrides the config's `parallelism.maxConcurrency`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_concurrency: Option<u32>,
}

/// What runs a utility socket.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "exec", rename_all = "snake_case")]
pub enum Exec {
    /// An argv spawned without a shell.
    Command {
        /// Program and arguments.
        argv: Vec<String>,
    },
    /// A fixed output (`params.output`), no process.
    Output {
        /// The output (a string is used verbatim, anything else as compact JSON).
        output: Value,
    },
    /// One of castlog's built-in equivalents of pi-materia's shipped scripts.
    Builtin {
        /// `ensure-ignored`, `detect-vcs`, `commit-sigil`, `mime-bootstrap`, `mime-maintain`,
        /// `blackbelt-bootstrap`, `blackbelt-maintain`, `echo`, `noop`, or a scope utility (`spawn-git-worktree`, `integrate-git-worktrees`,
        /// `spawn-jj-workspace`, `integrate-jj-workspaces`, `finalize-jj-workspace`).
        name: String,
    },
    /// One of pi-materia's own shipped scripts, which castlog has no built-in for, run from a
    /// pi-materia install (`--pi-materia DIR` or `PI_MATERIA_HOME`) with its runtime, on the
    /// same JSON-on-stdin protocol as a `command`.
    Shipped {
        /// The script's file name (`scan-repo.mjs`), as the config names it.
        name: String,
        /// The program that runs it (`script.runtime`, default `node`).
        runtime: String,
        /// The content hash (hex, castlog's blob hash) of the script's bytes, set when a cast starts, so the frozen
        /// loadout records which script the cast runs and a different one later is refused.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        hash: Option<String>,
    },
}

/// An agent socket's settings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentSpec {
    /// Template of the socket's task text, rendered against the cast's data each turn.
    pub prompt: String,
    /// Pauses for refinement until `continue`.
    #[serde(default)]
    pub multi_turn: bool,
    /// Model id, if set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Thinking level, if set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thinking: Option<String>,
    /// The materia's tool scope as configured (`readOnly`, `coding`, `{type: custom, ...}`);
    /// absent for `none`. Not part of the frozen loadout (whose bytes and hash stay what older
    /// builds recorded for the same config): `cast_started` records the scopes beside it.
    #[serde(skip)]
    pub tools: Option<Value>,
}

/// A utility socket's settings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UtilitySpec {
    /// An argv (no shell), a fixed output or a built-in.
    #[serde(flatten)]
    pub exec: Exec,
    /// `params` passed on stdin.
    #[serde(default)]
    pub params: Value,
    /// Timeout in milliseconds.
    pub timeout_ms: u64,
}

/// A post socket's settings: an outward message sent at most once through the claims ledger.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PostSpec {
    /// Where the post goes (a channel, a list, a name the sender understands).
    pub destination: String,
    /// The body: a path (`$.message` reads the last JSON output; `state.x`, `lastOutput`, ...)
    /// or a template with `{{…}}` keys.
    pub body: String,
    /// The zone claim days are counted in (`America/New_York` unless configured).
    pub zone: String,
}

/// Agent, utility or post.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum SocketKind {
    /// Run by a model.
    Agent(AgentSpec),
    /// Run by a program.
    Utility(UtilitySpec),
    /// An outward post, claimed before it is sent (see [`crate::claims`]).
    Post(PostSpec),
}

/// One resolved socket.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Socket {
    /// Its materia's id.
    pub materia: MateriaName,
    /// The materia's label (or id).
    pub label: String,
    /// Agent or utility, with settings.
    #[serde(flatten)]
    pub kind: SocketKind,
    /// Whether the materia is a generator (emits `workItems`).
    #[serde(default)]
    pub generator: bool,
    /// Whether the generator is parallel: it also emits a `parallelSchedule` and its items
    /// run in lanes (see [`Lanes`]).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub parallel: bool,
    /// Effective parse mode.
    pub parse: Parse,
    /// Effective assignments `(target, source)`, in order.
    #[serde(default)]
    pub assign: Vec<(String, String)>,
    /// Routes out of the socket, in config order (the first that matches is taken).
    #[serde(default)]
    pub edges: Vec<Edge>,
    /// The loop cursor this socket moves on completion, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub advance: Option<Advance>,
    /// Legacy per-socket iteration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub foreach: Option<ItemSource>,
}

impl Socket {
    /// Whether an agent runs this socket.
    pub fn is_agent(&self) -> bool {
        matches!(self.kind, SocketKind::Agent(_))
    }

    /// Whether this is a post socket.
    pub fn is_post(&self) -> bool {
        matches!(self.kind, SocketKind::Post(_))
    }

    /// Whether this is a multi-turn agent socket.
    pub fn is_multi_turn(&self) -> bool {
        matches!(&self.kind, SocketKind::Agent(a) if a.multi_turn)
    }
}

/// Cast-wide limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Limits {
    /// `limits.maxNoAdvanceCycles` (default 3).
    pub max_no_advance_cycles: u32,
}

/// The cast's token allowance (`budget` in the config).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Budget {
    /// `budget.maxTokens` (default 10 000 000).
    pub max_tokens: u64,
    /// `budget.warnAtPercent` (default 75).
    pub warn_at_percent: f64,
    /// `budget.maxCostUsd`, kept only when the config has a price table (`prices`): without
    /// prices no cost is known, and the value is dropped as the reference drops it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_cost_usd: Option<f64>,
}

/// One model's price (`prices.<model>` in the config), in US dollars per million tokens.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Price {
    /// `inputUsdPerMillion`: what a million prompt tokens cost.
    pub input_usd_per_million: f64,
    /// `outputUsdPerMillion`: what a million completion tokens cost.
    pub output_usd_per_million: f64,
}

impl Price {
    /// What `usage` costs, in millionths of a dollar (rounded to the nearest).
    pub fn micros(&self, usage: &crate::event::Usage) -> u64 {
        // tokens × dollars per million tokens = millionths of a dollar.
        let micros = usage.input as f64 * self.input_usd_per_million
            + usage.output as f64 * self.output_usd_per_million;
        if micros.is_finite() && micros > 0.0 {
            micros.round() as u64
        } else {
            0
        }
    }
}

/// A resolved loadout.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Loadout {
    /// Its name in the config.
    pub name: String,
    /// Socket the cast starts at (`entry` in the config).
    pub entry: SocketId,
    /// Sockets by id.
    pub sockets: BTreeMap<SocketId, Socket>,
    /// Loop regions, in config order.
    #[serde(default)]
    pub loops: Vec<LoopRegion>,
    /// `limits` in the config, with defaults filled in.
    pub limits: Limits,
    /// `budget` in the config, with defaults filled in.
    pub budget: Budget,
    /// How often sockets outside loops (which have no work item) may go around a cycle without
    /// advancing (`limits.maxCyclesOutsideLoops`, castlog's own; the reference counts no such
    /// cycle). `None` in loadouts frozen before castlog counted them, so their casts re-decide
    /// as they were recorded. Kept beside [`Limits`], whose frozen form is pi-materia's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_cycles_outside_loops: Option<u32>,
    /// `limits.maxToolCalls`: tool calls one socket visit may make before the cast stops
    /// (`allowance_exhausted`; revive grants as many again). `None` when not configured:
    /// [`DEFAULT_MAX_TOOL_CALLS`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tool_calls: Option<u32>,
    /// The price table (`prices` in the config, castlog's own): model id (a materia's `model`,
    /// or `*` for any other) to its price. Empty when not configured: no cost is computed.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub prices: BTreeMap<String, Price>,
    /// The parallel region, when a parallel generator places its items in lanes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lanes: Option<Lanes>,
    /// `limits.loopBreakAfter`: how often the same failing tool call (tool, arguments and
    /// error alike) is made in one visit before the prompt carries a recovery ticket about it
    /// (the loop-break gate). `None` when not configured: [`DEFAULT_LOOP_BREAK_AFTER`]. Kept in
    /// the frozen loadout, so a cast re-decides with the threshold it ran with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loop_break_after: Option<u32>,
}

/// The parallel region of a loadout: a parallel generator's items run in lanes, each a child
/// cast that runs the prelude (the sockets between the generator and the loop) once and then
/// the loop over its own items; the parent joins them and follows the loop's exit route.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lanes {
    /// The parallel generator.
    pub generator: SocketId,
    /// The socket every lane starts at (the first of the prelude, else the loop's first).
    pub entry: SocketId,
    /// The prelude: sockets between the generator and the loop, run once per lane.
    #[serde(default)]
    pub prelude: Vec<SocketId>,
    /// The id of the loop each lane walks.
    pub loop_id: String,
    /// Lanes that run at once: the loop's `parallel.maxConcurrency`, else the config's
    /// `parallelism.maxConcurrency`, else 2.
    pub max_concurrency: u32,
}

impl Lanes {
    /// Whether `socket` runs inside the lanes (prelude or loop member).
    pub fn contains(&self, loadout: &Loadout, socket: &SocketId) -> bool {
        self.prelude.contains(socket)
            || loadout
                .loops
                .iter()
                .any(|l| l.id == self.loop_id && l.sockets.contains(socket))
    }
}

/// Tool calls a visit may make when `limits.maxToolCalls` is not configured.
pub const DEFAULT_MAX_TOOL_CALLS: u32 = 50;

/// Identical failing tool calls that raise the loop-break ticket when `limits.loopBreakAfter`
/// is not configured.
pub const DEFAULT_LOOP_BREAK_AFTER: u32 = 3;

impl Loadout {
    /// The price of a reply at `socket`: its materia's `model`'s, else the `*` entry's; with
    /// the name of the entry used.
    pub fn price_at(&self, socket: &SocketId) -> Option<(&str, Price)> {
        let model = match self.socket(socket).map(|s| &s.kind) {
            Some(SocketKind::Agent(agent)) => agent.model.as_deref(),
            _ => None,
        };
        model
            .and_then(|m| self.prices.get_key_value(m))
            .or_else(|| self.prices.get_key_value("*"))
            .map(|(k, p)| (k.as_str(), *p))
    }

    /// A socket by id.
    pub fn socket(&self, id: &SocketId) -> Option<&Socket> {
        self.sockets.get(id)
    }

    /// The loops containing `socket`, in config order.
    pub fn loops_of<'a>(
        &'a self,
        socket: &'a SocketId,
    ) -> impl Iterator<Item = &'a LoopRegion> + 'a {
        self.loops
            .iter()
            .filter(move |l| l.sockets.contains(socket))
    }

    /// The frozen JSON form stored in `cast_started` (compact, keys in a fixed order).
    pub fn to_json(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }

    /// Reads a frozen loadout back from a `cast_started` event.
    pub fn from_json(value: &Value) -> Result<Loadout, FrozenLoadoutError> {
        serde_json::from_value(value.clone()).map_err(|e| FrozenLoadoutError(Arc::new(e)))
    }
}

/// A frozen loadout (in `cast_started` or `cast_forked`) that does not decode: the decoder's
/// error, in words. Shared, so that the rejections and fold errors holding it stay `Clone`;
/// two are equal when they say the same.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{}", crate::syntax::json_error(.0))]
pub struct FrozenLoadoutError(#[source] pub Arc<serde_json::Error>);

impl PartialEq for FrozenLoadoutError {
    fn eq(&self, other: &Self) -> bool {
        self.0.to_string() == other.0.to_string()
    }
}

impl Eq for FrozenLoadoutError {}
