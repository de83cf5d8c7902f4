//! `evolve`: applying one recorded event to the state. Total: never fails, never panics.

use serde_json::{Map, Value};

use super::{
    AllowanceState, CastState, Current, NoAdvance, Phase, Status, TranscriptLine, item_key,
};
use crate::event::{Event, Target};
use crate::id::{ItemKey, SocketId, Turn};
use crate::loadout::{EdgeTarget, ItemSource, Socket, SocketKind};
use crate::path::{self, Scope};

/// The item a socket start selects.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Selection {
    /// Cursor moved through the items (`workItemIndex`).
    pub cursor: String,
    /// 0-based position of the item in its list.
    pub index: u64,
    /// The item's JSON, exposed to templates under the iterator's `as` name.
    pub value: Value,
    /// `WI-<n>` or `<index>`.
    pub key: ItemKey,
    /// Title, name, or key.
    pub label: String,
    /// The iterator it came from.
    pub source: ItemSource,
}

impl CastState {
    /// The cast's placement policy: the recorded document, else the built-in one its name
    /// names (`start` refuses any other, so the default only serves a hand-made state).
    pub fn placement_policy(&self) -> &crate::prompt::Policy {
        match &self.policy_document {
            Some(policy) => policy,
            None => crate::prompt::Policy::named(&self.policy)
                .unwrap_or_else(crate::prompt::Policy::recommended),
        }
    }

    /// The iterator of `socket`: its `foreach`, or the iterator of the first loop containing it.
    pub(crate) fn iterator_of(&self, socket: &SocketId) -> Option<ItemSource> {
        let s = self.loadout.socket(socket)?;
        s.foreach.clone().or_else(|| {
            self.loadout
                .loops_of(socket)
                .find(|l| !l.itemless)
                .map(|l| l.iterator.clone())
        })
    }

    /// What templates (materia prompts, post bodies) read of this state.
    pub(crate) fn template_scope(&self) -> crate::template::TemplateScope<'_> {
        crate::template::TemplateScope {
            request: &self.request,
            data: &self.data,
            last_json: self.last_json.as_ref(),
            last_output: self.last_output.as_deref(),
            cursors: &self.cursors,
        }
    }

    fn scope(&self) -> Scope<'_> {
        Scope {
            output: None,
            data: &self.data,
            last_json: self.last_json.as_ref(),
            last_output: self.last_output.as_deref(),
        }
    }

    /// The items an iterator walks (borrowed: the list can be long and this runs every step).
    pub(crate) fn items_of(&self, source: &ItemSource) -> &[Value] {
        match path::resolve_ref(&self.scope(), &source.items) {
            Some(Value::Array(items)) => items,
            _ => &[],
        }
    }

    /// The item a start of `socket` would select (`None` outside loops or past the end).
    pub(crate) fn select_item(&self, socket: &SocketId) -> Option<Selection> {
        let source = self.iterator_of(socket)?;
        let index = self.cursors.get(&source.cursor).copied().unwrap_or(0);
        let items = self.items_of(&source);
        let value = items.get(usize::try_from(index).ok()?)?.clone();
        let key = if source.items.contains("workItems") {
            // A lane's items are its parent's: keyed by their place in the parent's list.
            let global = self
                .lane
                .as_ref()
                .and_then(|l| l.items.get(usize::try_from(index).ok()?).copied())
                .unwrap_or(index);
            ItemKey::new(format!("WI-{}", global + 1))
        } else {
            ItemKey::new(index.to_string())
        };
        let label = value
            .get("title")
            .or_else(|| value.get("name"))
            .and_then(Value::as_str)
            .map_or_else(|| key.to_string(), str::to_owned);
        Some(Selection {
            cursor: source.cursor.clone(),
            index,
            value,
            key,
            label,
            source,
        })
    }

    /// The no-advance tracker after a start of `socket` for `item`, and whether that start
    /// closes a counted cycle.
    ///
    /// A start with an item begins tracking that item when no item is tracked yet, as in the
    /// reference. Every other start joins the tracker in force until an advance resets it: one
    /// without an item (a socket outside loops) tracks the cycles of the cast before any item,
    /// or counts for the item whose loop it left; one with another loop's item counts for the
    /// item tracked first. So every kind of socket counts, and no cycle escapes by passing
    /// through loops or the sockets between them. Loadouts frozen before castlog counted those
    /// starts keep the reference's rule (no item, nothing tracked; another item, a fresh
    /// tracker), so their casts re-decide as they were recorded.
    pub(crate) fn next_tracker(
        &self,
        socket: &SocketId,
        item: Option<&ItemKey>,
    ) -> (NoAdvance, bool) {
        let recorded_rule = self.loadout.max_cycles_outside_loops.is_none();
        let mut tracker = match item {
            None if recorded_rule => return (NoAdvance::default(), false),
            Some(item)
                if self.no_advance.item.as_ref() != Some(item)
                    && (recorded_rule || self.no_advance.item.is_none()) =>
            {
                return (
                    NoAdvance {
                        item: Some(item.clone()),
                        count: 0,
                        path: vec![socket.clone()],
                    },
                    false,
                );
            }
            _ => self.no_advance.clone(),
        };
        if !tracker.path.contains(socket) {
            tracker.path.push(socket.clone());
            return (tracker, false);
        }
        tracker.path = vec![socket.clone()];
        if self.last_edge_budgeted {
            return (tracker, false);
        }
        tracker.count += 1;
        (tracker, true)
    }

    fn refinement_key(current: &Current) -> String {
        format!(
            "{}#{}",
            item_key(current.socket.as_str(), current.item.as_ref()),
            current.visit
        )
    }

    /// Applies one recorded event.
    pub fn evolve(&mut self, event: &Event) {
        self.head = self.head.next();
        match event {
            // A checkpoint is a record of the files; nothing routes on it.
            Event::CastStarted(_) | Event::WorkspaceCheckpointed(_) => {}
            // A reply before the fork is the parent's event, not one of this cast's.
            Event::CastForked(_) => {
                if let Some(c) = &mut self.current {
                    c.pending_reply_at = None;
                }
                self.last_json_at = None;
            }
            Event::CastCompleted(_) => {
                self.status = Status::Completed;
                if let Some(c) = &mut self.current {
                    c.phase = Phase::Done;
                }
            }
            Event::CastFailed(e) => {
                self.status = Status::Failed;
                self.failure = Some(e.clone());
            }
            Event::CastAborted(_) => self.status = Status::Aborted,
            Event::CastRevived(_) => {
                self.failure = None;
                self.status = Status::Running;
                if let (Some(lanes), Some(c)) = (&mut self.lanes, &self.current)
                    && c.phase == Phase::RunningLanes
                {
                    lanes.revive = true;
                }
                if let Some(c) = &mut self.current {
                    // A held prompt was never sent: it goes out as it was recorded.
                    c.recovering = if c.held { held_note(c) } else { true };
                    c.held = false;
                    // A revived pause still waits for the person.
                    if c.phase == Phase::AwaitingRefinement {
                        self.status = Status::AwaitingRefinement;
                    }
                }
            }
            Event::CastResumed(e) => {
                if let Some(c) = &mut self.current {
                    // A held prompt was never sent, and a fork sends the prompt in flight at
                    // its fork point again: either goes out as it was recorded (with the
                    // recovery note only if it carried one, or if the fork itself recovers a
                    // stopped cast). A resume after a crash adds the note.
                    c.recovering = if c.held {
                        held_note(c)
                    } else if e.after_fork {
                        c.recovering || held_note(c)
                    } else {
                        c.recovering || e.redispatch
                    };
                    c.held = false;
                }
            }
            Event::PromptHeld(_) => {
                if let Some(c) = &mut self.current {
                    c.held = true;
                }
            }
            Event::SocketStarted(e) => self.start_socket(e),
            Event::PromptDispatched(e) => {
                if let Some(key) = self.scheduled.take() {
                    self.dispatched.push_back(key);
                    if self.dispatched.len() > super::DISPATCH_MEMORY {
                        self.dispatched.pop_front();
                    }
                }
                if let Some(c) = &mut self.current {
                    c.turn = e.turn;
                    c.phase = Phase::AwaitingReply;
                    c.prompt = Some(e.prompt_hash);
                    c.placements = std::sync::Arc::new(e.placements.clone());
                    c.transient_failures = 0;
                    c.interrupted = false;
                    c.recovering = false;
                    c.held = false;
                }
                self.status = Status::AwaitingAgent;
            }
            Event::AgentReplied(e) => {
                if let Some(cost) = &e.cost {
                    self.cost_micros = self.cost_micros.saturating_add(cost.micros);
                }
                if let Some(usage) = e.usage {
                    self.usage.input = self.usage.input.saturating_add(usage.input);
                    self.usage.output = self.usage.output.saturating_add(usage.output);
                }
                if let Some(c) = &mut self.current {
                    if e.tool_calls.is_empty() {
                        c.pending_reply = Some(e.text.clone());
                        c.pending_reply_at = Some(self.head);
                    } else {
                        c.requested_calls = e.tool_calls.clone();
                    }
                    c.phase = Phase::Done;
                }
                self.status = Status::Running;
            }
            Event::ToolCalled(e) => {
                if let Some(c) = &mut self.current {
                    if let Some(at) = c.requested_calls.iter().position(|r| r.call == e.call) {
                        c.requested_calls.remove(at);
                    }
                    c.tool_calls.push(super::ToolCallState {
                        request: crate::event::ToolRequest {
                            call: e.call.clone(),
                            tool: e.tool.clone(),
                            arguments: e.arguments.clone(),
                        },
                        turn: e.turn,
                        outcome: None,
                    });
                    c.phase = Phase::RunningTools;
                }
                self.status = Status::Running;
            }
            Event::ToolFinished(e) => self.tool_outcome(
                &e.call,
                super::ToolOutcome::Finished {
                    output: e.output.clone(),
                    error: e.error,
                },
            ),
            Event::ToolInterrupted(e) => {
                self.tool_outcome(&e.call, super::ToolOutcome::Interrupted);
            }
            // The server refused the response format: the prompt is asked again at once
            // without it, and this counts as no failure of the prompt.
            Event::AgentFailed(e) if e.structured_off => self.structured_off = true,
            Event::AgentFailed(e) => {
                if let Some(c) = &mut self.current {
                    match e.class {
                        crate::event::FailureClass::Transient => c.transient_failures += 1,
                        crate::event::FailureClass::Interruption => c.interrupted = true,
                    }
                }
            }
            Event::UtilityFinished(_) => {
                if let Some(c) = &mut self.current {
                    c.phase = Phase::Done;
                }
            }
            Event::RefinementRecorded(e) => {
                if let Some(c) = &mut self.current {
                    c.transcript.push(TranscriptLine {
                        role: crate::prompt::Role::Assistant,
                        text: e.text.clone(),
                    });
                    c.pending_reply = None;
                    c.pending_reply_at = None;
                    c.phase = Phase::AwaitingRefinement;
                    let key = Self::refinement_key(c);
                    self.refinement_turns.insert(key, e.turn.get());
                }
                self.status = Status::AwaitingRefinement;
            }
            Event::UserRefined(e) => {
                if let Some(c) = &mut self.current {
                    c.transcript.push(TranscriptLine {
                        role: crate::prompt::Role::User,
                        text: e.text.clone(),
                    });
                    c.phase = Phase::Done;
                }
                self.status = Status::Running;
            }
            Event::FinalizeRequested(_) => {
                if let Some(c) = &mut self.current {
                    c.finalizing = true;
                    c.phase = Phase::Done;
                }
                self.status = Status::Running;
            }
            Event::OutputRejected(e) => {
                if let Some(c) = &mut self.current {
                    if e.repair {
                        c.repairs += 1;
                    }
                    let bad = c.pending_reply.take().unwrap_or_default();
                    c.pending_reply_at = None;
                    c.repair_feedback = Some(repair_text(&e.issues, &bad));
                }
            }
            Event::SocketCompleted(e) => {
                let loadout = std::sync::Arc::clone(&self.loadout);
                let socket = loadout.socket(&e.socket);
                if let Some(c) = &mut self.current {
                    c.pending_reply = None;
                    c.pending_reply_at = None;
                    c.repair_feedback = None;
                    c.phase = Phase::Done;
                }
                self.last_output = Some(e.output.clone());
                self.last_source = Some((e.socket.clone(), e.visit));
                self.last_satisfied = e.satisfied;
                if let Some(parsed) = &e.parsed {
                    self.last_json = Some(parsed.clone());
                    self.last_json_at = Some((self.head, e.socket.clone()));
                    if let Some(socket) = socket {
                        self.apply_envelope(&e.socket, socket, parsed);
                    }
                }
            }
            Event::DataAssigned(e) => path::assign(&mut self.data, &e.path, Some(e.value.clone())),
            Event::CursorAdvanced(e) => {
                self.cursors.insert(e.cursor.clone(), e.to);
                self.no_advance = NoAdvance::default();
            }
            Event::EdgeTaken(e) => {
                let to = match &e.to {
                    Target::Socket(s) => EdgeTarget::Socket(s.clone()),
                    Target::End => EdgeTarget::End,
                };
                let budget = self
                    .loadout
                    .socket(&e.from)
                    .and_then(|s| {
                        s.edges
                            .iter()
                            .find(|edge| edge.to == to && edge.when == e.when)
                    })
                    .and_then(|edge| edge.max_traversals);
                self.last_edge_budgeted = budget.is_some();
                let key = edge_key(&e.from, &e.to, e.item.as_ref());
                self.traversals.insert(key.clone(), e.traversal);
                if let Some(limit) = budget {
                    self.allowances
                        .entry(format!("edge:{key}"))
                        .or_insert(AllowanceState {
                            original: u64::from(limit),
                            effective: u64::from(limit),
                            revives: 0,
                        });
                }
            }
            Event::ReworkRouted(e) => self.rework.push(e.clone()),
            Event::ReworkCleared(e) => {
                if self.handoff >= 1 {
                    let cleared = self.rework.iter().filter(|r| r.item == e.item).cloned();
                    self.settled_rework.extend(cleared);
                    let excess = self.settled_rework.len().saturating_sub(CONTEXT_KEPT);
                    self.settled_rework.drain(..excess);
                }
                self.rework.retain(|r| r.item != e.item);
            }
            Event::DispatchScheduled(e) => {
                self.scheduled = Some(e.key.clone());
                if let Some(c) = &mut self.current {
                    c.phase = Phase::AwaitingDispatch;
                }
                self.status = Status::Running;
            }
            Event::DispatchSkipped(e) if self.scheduled.as_ref() == Some(&e.key) => {
                self.scheduled = None;
            }
            Event::AllowanceExhausted(e) => {
                self.allowances
                    .entry(super::allowance_key(&e.allowance))
                    .or_insert(AllowanceState {
                        original: e.limit,
                        effective: e.limit,
                        revives: 0,
                    });
            }
            Event::AllowanceExtended(e) => {
                let entry = self
                    .allowances
                    .entry(super::allowance_key(&e.allowance))
                    .or_insert(AllowanceState {
                        original: e.limit,
                        effective: e.limit,
                        revives: 0,
                    });
                entry.effective = e.limit;
                entry.revives += 1;
            }
            Event::BudgetWarning(e) if e.cost.is_some() => self.cost_warned = true,
            Event::BudgetWarning(_) => self.budget_warned = true,
            Event::ScopeActivated(e) => self.scope = e.scope.clone(),
            Event::BudgetRaised(e) => {
                let configured = self.loadout.budget.max_tokens;
                let entry = self
                    .allowances
                    .entry(super::allowance_key(&crate::event::Allowance::Tokens))
                    .or_insert(AllowanceState {
                        original: configured,
                        effective: configured,
                        revives: 0,
                    });
                entry.effective = e.tokens;
                if !super::budget::at_threshold(
                    e.used,
                    e.tokens,
                    self.loadout.budget.warn_at_percent,
                ) {
                    self.budget_warned = false;
                }
            }
            Event::SteeringNoted(e) => self.steering.push((e.text.clone(), e.locked)),
            Event::LanesPlanned(e) => {
                self.lanes = Some(super::LaneSet {
                    socket: e.socket.clone(),
                    plan: e.lanes.clone(),
                    planned_at: self.head,
                    max_concurrency: e.max_concurrency,
                    revive: false,
                    joined: None,
                });
                if let Some(c) = &mut self.current {
                    c.phase = Phase::RunningLanes;
                }
                self.status = Status::Running;
            }
            Event::LanesJoined(e) => {
                if let Some(lanes) = &mut self.lanes {
                    // The lanes' tokens count for the parent: what each used since it was
                    // last joined (a revived lane's total includes its earlier use).
                    for lane in &e.lanes {
                        let before = lanes
                            .joined
                            .as_ref()
                            .and_then(|j| j.iter().find(|o| o.cast == lane.cast))
                            .map(|o| o.usage)
                            .unwrap_or_default();
                        self.usage.input = self
                            .usage
                            .input
                            .saturating_add(lane.usage.input.saturating_sub(before.input));
                        self.usage.output = self
                            .usage
                            .output
                            .saturating_add(lane.usage.output.saturating_sub(before.output));
                    }
                    lanes.joined = Some(e.lanes.clone());
                    lanes.revive = false;
                }
            }
            Event::PostClaimed(_)
            | Event::PostStaged(_)
            | Event::PostRefused(_)
            | Event::PostOutcomeUnknown(_)
            | Event::PostResolved(_)
            | Event::PostResponseRecorded(_)
            | Event::PostResolutionInherited(_) => self.apply_claim_event(event),
            _ => {}
        }
    }

    /// Records the outcome of the first call named `call` that has none.
    fn tool_outcome(&mut self, call: &str, outcome: super::ToolOutcome) {
        if let Some(c) = &mut self.current
            && let Some(pending) = c
                .tool_calls
                .iter_mut()
                .find(|t| t.outcome.is_none() && t.request.call == call)
        {
            pending.outcome = Some(outcome);
        }
    }

    fn start_socket(&mut self, e: &crate::event::SocketStarted) {
        let selection = self.select_item(&e.socket);
        let (tracker, _) = self.next_tracker(&e.socket, e.item.as_ref());
        self.no_advance = tracker;
        self.last_edge_budgeted = false;
        self.visits.insert(e.socket.clone(), e.visit.get());
        self.attempts
            .insert(item_key(e.socket.as_str(), e.item.as_ref()), e.attempt);
        if let Value::Object(data) = &mut self.data {
            match &selection {
                Some(sel) => {
                    self.cursors.insert(sel.cursor.clone(), sel.index);
                    data.insert("item".into(), sel.value.clone());
                    data.insert("currentWorkItem".into(), sel.value.clone());
                    if sel.source.as_name != "item" {
                        data.insert(sel.source.as_name.clone(), sel.value.clone());
                    }
                    if sel.source.as_name == "workItem" || sel.source.items.contains("workItems") {
                        data.insert("workItem".into(), sel.value.clone());
                    }
                }
                None => {
                    // Outside loops the item is not stale data from the last loop (the
                    // reference leaves it behind).
                    data.remove("item");
                    data.remove("currentWorkItem");
                    data.remove("workItem");
                }
            }
        }
        let kind = self.loadout.socket(&e.socket).map(|s| s.kind.clone());
        // A post step whose claim is still pending waits on it: nothing is claimed or sent
        // again until a person resolves it.
        let waiting = match &kind {
            Some(SocketKind::Post(spec)) => {
                let step = item_key(e.socket.as_str(), e.item.as_ref());
                self.claims
                    .values()
                    .find(|c| {
                        c.step == step
                            && c.destination == spec.destination
                            && c.status == crate::claims::ClaimStatus::Pending
                            && !c.dry_run
                    })
                    .map(|c| c.claim.clone())
            }
            _ => None,
        };
        let phase = match (&kind, &waiting) {
            (Some(SocketKind::Utility(_)), _) => Phase::RunningUtility,
            (Some(SocketKind::Post(_)), Some(_)) => Phase::AwaitingPostOutcome,
            (Some(SocketKind::Post(_)), None) => Phase::AwaitingPost,
            _ => Phase::AwaitingDispatch,
        };
        self.current = Some(Current {
            socket: e.socket.clone(),
            visit: e.visit,
            item: e.item.clone(),
            item_label: e.item_label.clone(),
            attempt: e.attempt,
            turn: Turn(0),
            phase,
            prompt: None,
            placements: std::sync::Arc::default(),
            transcript: Vec::new(),
            repairs: 0,
            repair_feedback: None,
            finalizing: false,
            pending_reply: None,
            pending_reply_at: None,
            transient_failures: 0,
            interrupted: false,
            recovering: false,
            held: false,
            claim: waiting.clone(),
            tool_calls: Vec::new(),
            requested_calls: Vec::new(),
        });
        self.status = if waiting.is_some() {
            Status::AwaitingAgent
        } else {
            Status::Running
        };
    }

    /// The generic handoff envelope of a JSON object output.
    fn apply_envelope(&mut self, socket_id: &SocketId, socket: &Socket, parsed: &Value) {
        let Value::Object(output) = parsed else {
            return;
        };
        let Value::Object(data) = &mut self.data else {
            return;
        };
        if !socket.is_agent()
            && let Some(Value::Object(patch)) = output.get("state")
        {
            for (k, v) in patch {
                if k != "workItems" && k != "satisfied" {
                    data.insert(k.clone(), v.clone());
                }
            }
        }
        // Updated in place: copying the previous envelope (which carries the work-item list)
        // on every completion made each step cost more the longer the list.
        let envelope = data
            .entry("envelope")
            .or_insert_with(|| Value::Object(Map::new()));
        if !envelope.is_object() {
            *envelope = Value::Object(Map::new());
        }
        if let Value::Object(envelope) = envelope {
            for key in ["workItems", "satisfied", "context"] {
                if let Some(v) = output.get(key) {
                    envelope.insert(key.into(), v.clone());
                }
            }
        }
        if let Some(items @ Value::Array(_)) = output.get("workItems") {
            let live =
                matches!(data.get("workItems"), Some(Value::Array(list)) if !list.is_empty());
            if !live || socket.generator {
                data.insert("workItems".into(), items.clone());
            }
        }
        if let Some(Value::String(context)) = output.get("context")
            && !context.trim().is_empty()
        {
            let line = format!("[{socket_id} {}] {}", socket.label, context.trim());
            // Kept bounded (the most recent paragraphs): the reference let it grow with every
            // completion, so every prompt and every state copy grew with the cast.
            let joined = match data.get("context") {
                Some(Value::String(previous)) if !previous.is_empty() => {
                    let mut paragraphs: Vec<&str> = super::turn::paragraphs(previous).collect();
                    let excess = (paragraphs.len() + 1).saturating_sub(CONTEXT_KEPT);
                    paragraphs.drain(..excess);
                    paragraphs.push(&line);
                    paragraphs.join("\n\n")
                }
                _ => line,
            };
            data.insert("context".into(), Value::String(joined));
        }
    }
}

/// How many labelled paragraphs `state.data.context` keeps (the most recent).
const CONTEXT_KEPT: usize = 16;

/// The scoped key of an edge: `from->to@item` (or `from->to`).
pub(crate) fn edge_key(from: &SocketId, to: &Target, item: Option<&ItemKey>) -> String {
    let to = match to {
        Target::Socket(s) => s.to_string(),
        Target::End => "end".into(),
    };
    item_key(&format!("{from}->{to}"), item)
}

/// The repair mandate: the issues, then a bounded excerpt of the rejected output.
fn repair_text(issues: &[String], bad: &str) -> String {
    let mut text = String::from(
        "Your previous output could not be accepted. Fix these issues and answer again with the complete output:\n",
    );
    for issue in issues {
        text.push_str("- ");
        text.push_str(issue);
        text.push('\n');
    }
    let excerpt: String = bad.chars().take(600).collect();
    if !excerpt.trim().is_empty() {
        text.push_str("\nThe rejected output began:\n");
        text.push_str(&excerpt);
        if bad.chars().count() > 600 {
            text.push('…');
        }
    }
    text
}

/// Whether the prompt in flight carried the recovery note (its placements name it).
fn held_note(current: &super::Current) -> bool {
    current
        .placements
        .iter()
        .any(|p| p.source_type == "recoveryTicket")
}
