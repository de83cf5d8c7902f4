//! The given / when / then helper: a loadout from inline pi-materia JSON, a started cast, inputs
//! fed one at a time, and the events each input produced.

use castlog_core::env::Env;
use castlog_core::event::{Event, Usage};
use castlog_core::id::{CastId, Digest};
use castlog_core::input::Input;
use castlog_core::loadout::{Loadout, load_config};
use castlog_core::machine::decide::{self, Rejection, started_event};
use castlog_core::machine::{CastState, Next, Phase, Status};
use serde_json::{Value, json};

/// The request every test cast runs with.
pub const REQUEST: &str = "Add a greeting command";

/// The id every test cast gets.
pub const CAST: &str = "cast-1";

/// Collects the bodies of one event kind: `of!(events, EdgeTaken)` is a `Vec<&EdgeTaken>`.
macro_rules! of {
    ($events:expr, $kind:ident) => {
        $events
            .iter()
            .filter_map(|e| match e {
                castlog_core::event::Event::$kind(body) => Some(body),
                _ => None,
            })
            .collect::<Vec<_>>()
    };
}

/// A deterministic stand-in for the blob hash: the bytes folded into 32 bytes.
pub fn digest(bytes: &[u8]) -> Digest {
    let mut out = [0u8; 32];
    for (i, b) in bytes.iter().enumerate() {
        let slot = &mut out[i % 32];
        *slot = slot.wrapping_mul(31).wrapping_add(*b);
    }
    out[31] ^= (bytes.len() % 251) as u8;
    Digest(out)
}

/// The environment of every decision.
pub fn env() -> Env {
    Env::new(1_700_000_000_000, digest)
}

/// The materia the test loadouts place.
pub fn catalog() -> Value {
    json!({
        "Plan": { "type": "agent", "tools": "readOnly", "generator": true, "label": "Plan",
                  "prompt": "Plan work items for: {{request}}" },
        "Architect": { "type": "agent", "tools": "readOnly", "generator": true,
                       "label": "Auto-Architect", "prompt": "Refine the plan for: {{request}}" },
        "Interactive-Plan": { "type": "agent", "tools": "readOnly", "generator": true,
                              "multiTurn": true, "label": "Interactive-Plan",
                              "prompt": "Plan with the user: {{request}}" },
        "Chat": { "type": "agent", "tools": "none", "multiTurn": true, "label": "Chat",
                  "prompt": "Discuss: {{request}}" },
        "Build": { "type": "agent", "tools": "coding", "label": "Build",
                   "prompt": "Implement: {{item.title}}" },
        "Eval": { "type": "agent", "tools": "readOnly", "label": "Auto-Eval",
                  "prompt": "Check: {{item.title}}" },
        "Maintain": { "type": "agent", "tools": "coding", "label": "Maintain",
                      "prompt": "Checkpoint: {{item.title}}" },
        "Narrate": { "type": "agent", "tools": "readOnly", "label": "Narrate",
                     "prompt": "Summarize the cast for: {{request}}" },
        "Probe": { "type": "utility", "label": "Probe", "parse": "json",
                   "command": ["probe", "--check"] },
        "Echo": { "type": "utility", "label": "Echo", "command": ["echo", "hi"] }
    })
}

/// A full config around one loadout (named `Test`) and the test catalog.
pub fn config(loadout: Value) -> Value {
    let mut cfg = json!({ "activeLoadout": "Test", "loadouts": {}, "materia": catalog() });
    cfg["loadouts"]["Test"] = loadout;
    cfg
}

/// The standard build loop: Plan → loop { Build (text) → Auto-Eval (json; not_satisfied back
/// to Build, at most 2 per item) → Maintain (advance on satisfied) } → exit `always` → Narrate.
pub fn build_loop() -> Value {
    config(json!({
        "entry": "Socket-1",
        "sockets": {
            "Socket-1": { "materia": "Plan", "edges": [{ "when": "always", "to": "Socket-2" }] },
            "Socket-2": { "materia": "Build", "parse": "text",
                          "edges": [{ "when": "always", "to": "Socket-3" }] },
            "Socket-3": { "materia": "Eval", "parse": "json", "edges": [
                { "when": "satisfied", "to": "Socket-4" },
                { "when": "not_satisfied", "to": "Socket-2", "maxTraversals": 2 }
            ] },
            "Socket-4": { "materia": "Maintain", "parse": "json",
                          "advance": { "cursor": "workItemIndex", "items": "state.workItems",
                                       "when": "satisfied" },
                          "edges": [{ "when": "always", "to": "Socket-2" }] },
            "Socket-5": { "materia": "Narrate", "parse": "text" }
        },
        "loops": { "items": {
            "sockets": ["Socket-2", "Socket-3", "Socket-4"],
            "consumes": { "from": "Socket-1", "output": "workItems" },
            "exits": [{ "id": "exit:Socket-4:always", "from": "Socket-4",
                        "condition": "always", "targetSocketId": "Socket-5" }]
        } }
    }))
}

/// Item 14's loadout: Plan → loop { Build → Auto-Eval (satisfied → Maintain, not_satisfied
/// back to Build, with `maxTraversals` if given) → Maintain (advance on satisfied) → Build },
/// no exits, with `limits.maxNoAdvanceCycles` set.
pub fn guarded_loop(max_no_advance: u32, max_traversals: Option<u32>) -> Value {
    let mut back = json!({ "when": "not_satisfied", "to": "Socket-2" });
    if let Some(max) = max_traversals {
        back["maxTraversals"] = json!(max);
    }
    let mut cfg = config(json!({
        "entry": "Socket-1",
        "sockets": {
            "Socket-1": { "materia": "Plan", "edges": [{ "when": "always", "to": "Socket-2" }] },
            "Socket-2": { "materia": "Build", "parse": "text",
                          "edges": [{ "when": "always", "to": "Socket-3" }] },
            "Socket-3": { "materia": "Eval", "parse": "json",
                          "edges": [{ "when": "satisfied", "to": "Socket-4" }, back] },
            "Socket-4": { "materia": "Maintain", "parse": "json",
                          "advance": { "cursor": "workItemIndex", "items": "state.workItems",
                                       "when": "satisfied" },
                          "edges": [{ "when": "always", "to": "Socket-2" }] }
        },
        "loops": { "items": { "sockets": ["Socket-2", "Socket-3", "Socket-4"],
                              "consumes": { "from": "Socket-1" } } }
    }));
    cfg["limits"] = json!({ "maxNoAdvanceCycles": max_no_advance });
    cfg
}

/// A generator output with one `{title, context}` item per title.
pub fn plan(titles: &[&str]) -> Value {
    let items: Vec<Value> = titles
        .iter()
        .map(|t| json!({ "title": t, "context": format!("Do {t} carefully.") }))
        .collect();
    json!({ "workItems": items, "context": "The plan." })
}

/// Resolves the active loadout of an inline config.
pub fn loadout(config: &Value) -> Loadout {
    let config = load_config(&config.to_string()).expect("the test config loads");
    config.resolve(None).expect("the active loadout resolves")
}

/// Folds a log the way a reader does: `cast_started`, then every later event.
pub fn fold(events: &[Event]) -> CastState {
    let Some((Event::CastStarted(started), rest)) = events.split_first() else {
        panic!("a log starts with cast_started");
    };
    let mut state = CastState::started(started).expect("the frozen loadout decodes");
    for event in rest {
        state.evolve(event);
    }
    state
}

/// The kind strings of events, in order.
pub fn kinds(events: &[Event]) -> Vec<&'static str> {
    events.iter().map(Event::kind).collect()
}

/// A running test cast: its state (events applied one by one) and its whole log.
#[derive(Debug)]
pub struct Cast {
    /// The state after every recorded event.
    pub state: CastState,
    /// Every event recorded so far, `cast_started` first.
    pub log: Vec<Event>,
    /// What `decide::start` emitted.
    pub first: Vec<Event>,
}

/// Given a config: starts a cast of its active loadout.
pub fn given(config: &Value) -> Cast {
    given_loadout(&loadout(config))
}

/// Given a resolved loadout (say, one frozen by an older build): starts a cast of it.
pub fn given_loadout(loadout: &Loadout) -> Cast {
    let hash = digest(loadout.to_json().to_string().as_bytes());
    let started = started_event(
        CastId::new(CAST),
        loadout,
        hash,
        REQUEST.to_owned(),
        "recommended".to_owned(),
        None,
    );
    let (state, decision) = decide::start(started, &env()).expect("the cast starts");
    Cast {
        state,
        log: decision.events.clone(),
        first: decision.events,
    }
}

// Inputs are built inline at the call sites, so the API takes them by value.
#[allow(clippy::needless_pass_by_value)]
impl Cast {
    /// When `input` arrives: decides, records and applies; returns the new events.
    pub fn when(&mut self, input: Input) -> Vec<Event> {
        match self.try_when(input.clone()) {
            Ok(events) => events,
            Err(rejection) => panic!("{input:?} was rejected: {rejection}"),
        }
    }

    /// Like [`Cast::when`], but hands back a rejection.
    pub fn try_when(&mut self, input: Input) -> Result<Vec<Event>, Rejection> {
        let decision = self.state.decide(&input, &env())?;
        for event in &decision.events {
            self.state.evolve(event);
        }
        self.log.extend(decision.events.iter().cloned());
        // Every state a decision leaves says what it needs next: the driver never meets one
        // it cannot act on.
        if let Err(inconsistent) = self.state.next() {
            panic!("{input:?} left a state with no next effect: {inconsistent}");
        }
        Ok(decision.events)
    }

    /// Then `input` is refused, and nothing is recorded.
    pub fn rejects(&mut self, input: Input) -> Rejection {
        let head = self.state.head;
        let len = self.log.len();
        let before = serde_json::to_value(&self.state).expect("state serializes");
        let rejection = match self.try_when(input.clone()) {
            Ok(events) => panic!("{input:?} was accepted: {:?}", kinds(&events)),
            Err(rejection) => rejection,
        };
        assert_eq!(self.state.head, head, "a rejection records nothing");
        assert_eq!(self.log.len(), len, "a rejection records nothing");
        assert_eq!(serde_json::to_value(&self.state).expect("state"), before);
        rejection
    }

    /// Fires the scheduled dispatch, if one waits.
    pub fn settle(&mut self) -> Vec<Event> {
        match self.next() {
            Next::Dispatch { key } => self.when(Input::DispatchDue { key }),
            _ => Vec::new(),
        }
    }

    /// The agent answers the current prompt (a due dispatch is fired first).
    pub fn reply(&mut self, text: &str) -> Vec<Event> {
        self.settle();
        self.when(Input::AgentReplied {
            text: text.to_owned(),
            usage: None,
        })
    }

    /// The agent answers with reported token usage.
    pub fn reply_using(&mut self, text: &str, input: u64, output: u64) -> Vec<Event> {
        self.settle();
        self.when(Input::AgentReplied {
            text: text.to_owned(),
            usage: Some(Usage { input, output }),
        })
    }

    /// The agent answers with a JSON value.
    pub fn json(&mut self, value: &Value) -> Vec<Event> {
        self.reply(&value.to_string())
    }

    /// The running utility exits 0 with `stdout`.
    pub fn utility(&mut self, stdout: &str) -> Vec<Event> {
        self.utility_exit(Some(0), false, stdout, "")
    }

    /// The running utility ends.
    pub fn utility_exit(
        &mut self,
        code: Option<i32>,
        timed_out: bool,
        stdout: &str,
        stderr: &str,
    ) -> Vec<Event> {
        self.when(Input::UtilityFinished {
            code,
            timed_out,
            stdout: stdout.to_owned(),
            stderr: stderr.to_owned(),
            truncated: false,
        })
    }

    /// The current socket's id.
    pub fn socket(&self) -> String {
        self.state
            .current
            .as_ref()
            .map(|c| c.socket.to_string())
            .unwrap_or_default()
    }

    /// The current item's key.
    pub fn item(&self) -> Option<String> {
        self.state
            .current
            .as_ref()
            .and_then(|c| c.item.as_ref().map(ToString::to_string))
    }

    /// Then the cast needs this next (what the driver would do).
    pub fn next(&self) -> Next {
        self.state
            .next()
            .expect("the state says what it needs next")
    }

    /// What the current visit waits for.
    pub fn phase(&self) -> Option<Phase> {
        self.state.current.as_ref().map(|c| c.phase)
    }

    /// The cast's status.
    pub fn status(&self) -> Status {
        self.state.status
    }

    /// `state.data`.
    pub fn data(&self) -> &Value {
        &self.state.data
    }

    /// The text of one context entry of the current prompt, by id.
    pub fn entry(&self, id: &str) -> Option<String> {
        self.state
            .entries()
            .into_iter()
            .find(|e| e.id == id)
            .map(|e| e.text)
    }

    /// The ids of the current prompt's context entries.
    pub fn entry_ids(&self) -> Vec<String> {
        self.state.entries().into_iter().map(|e| e.id).collect()
    }

    /// Every context entry of the current prompt, joined.
    pub fn prompt(&self) -> String {
        self.state
            .entries()
            .into_iter()
            .map(|e| e.text)
            .collect::<Vec<_>>()
            .join("\n\n")
    }

    /// Runs the standard build loop's planner with `titles`.
    pub fn planned(mut self, titles: &[&str]) -> Self {
        self.json(&plan(titles));
        self
    }
}
