//! Completing a visit: handoff validation and repair, envelope and assignments, advance,
//! routing with allowances, rework capture, budgets; and revive.

use serde_json::Value;

use super::decide::{Decider, Rejection};
use super::{Phase, Status};
use crate::event::{
    Allowance, AllowanceExhausted, AllowanceExtended, CastRevived, CursorAdvanced, DataAssigned,
    EdgeTaken, MateriaEvent, OutputRejected, RefinementRecorded, ReworkCleared, ReworkRouted,
    ScopeActivated, SocketCompleted, Target, UtilityFinished, When,
};
use crate::handoff;
use crate::id::{SocketId, Turn};
use crate::loadout::{EdgeTarget, Parse, SocketKind};
use crate::path::{self, Scope};

/// How much of an output a rework reason or an error message quotes.
const REASON_LIMIT: usize = 900;

/// Collapses whitespace and cuts `text` to `limit` characters with `…`.
pub(crate) fn bounded(text: &str, limit: usize) -> String {
    let collapsed = super::reasons::collapse(text);
    match collapsed.char_indices().nth(limit) {
        None => collapsed.into_owned(),
        Some((at, _)) => {
            let mut cut = collapsed[..at].to_owned();
            cut.push('…');
            cut
        }
    }
}

fn target_of(to: &EdgeTarget) -> Target {
    match to {
        EdgeTarget::Socket(s) => Target::Socket(s.clone()),
        EdgeTarget::End => Target::End,
    }
}

impl Decider<'_, '_> {
    /// An agent reply to the prompt in flight.
    pub fn on_reply(&mut self, text: String, usage: Option<crate::event::Usage>) {
        let Some(current) = self.state.current.clone() else {
            return;
        };
        let cost = self.reply_cost(&current.socket, usage.as_ref());
        self.emit(crate::event::AgentReplied {
            socket: current.socket.clone(),
            visit: current.visit,
            turn: current.turn,
            text,
            usage,
            tool_calls: Vec::new(),
            cost,
        });
        if self.over_budget() {
            return;
        }
        self.process_pending();
    }

    /// Checks the token budget after a reply. A stop leaves the reply pending (recorded, not
    /// committed): no assignment, advance or routing happens until revive extends the budget.
    pub(super) fn over_budget(&mut self) -> bool {
        self.warn_budget();
        self.warn_cost();
        let limit = self.state.token_budget();
        let used = self.state.usage.total();
        if used < limit {
            return self.over_cost();
        }
        let socket = self.state.current.as_ref().map(|c| c.socket.clone());
        self.emit(AllowanceExhausted {
            allowance: Allowance::Tokens,
            count: used,
            limit,
        });
        self.fail(
            format!(
                "token budget reached: {used} tokens used of {limit}; revive to extend the budget"
            ),
            socket,
            Some(Allowance::Tokens),
        );
        true
    }

    /// Handles the recorded, uncommitted reply of the current visit.
    fn process_pending(&mut self) {
        let Some(current) = self.state.current.clone() else {
            return;
        };
        if !current.requested_calls.is_empty() {
            self.call_tools();
            return;
        }
        let Some(text) = current.pending_reply.clone() else {
            return;
        };
        let loadout = std::sync::Arc::clone(&self.state.loadout);
        let Some(socket) = loadout.socket(&current.socket) else {
            return;
        };
        if socket.is_multi_turn() && !current.finalizing {
            let key = format!(
                "{}#{}",
                super::item_key(current.socket.as_str(), current.item.as_ref()),
                current.visit
            );
            let turn = self.state.refinement_turns.get(&key).copied().unwrap_or(0) + 1;
            self.emit(RefinementRecorded {
                socket: current.socket,
                visit: current.visit,
                turn: Turn(turn),
                text,
            });
            return;
        }
        if socket.parse == Parse::Text {
            self.complete(&current.socket, &text, None);
            return;
        }
        let mut parsed = handoff::parse_lenient(&text);
        let conformance = self.state.conformance;
        let mut events = Vec::new();
        let issues = match &mut parsed {
            Ok(value) if conformance >= 1 => match handoff::take_events(value) {
                Ok(taken) => {
                    events = taken;
                    handoff::validate_under(socket, value, conformance)
                }
                Err(issues) => issues,
            },
            Ok(value) => handoff::validate(socket, value),
            Err(err) => vec![err.to_string()],
        };
        match parsed {
            Ok(value) if issues.is_empty() => {
                let output = self.report_events(events, &value, &text);
                self.complete(&current.socket, &output, Some(value));
            }
            _ => self.reject(&issues),
        }
    }

    /// Records the events an output's side-channel reported (pi-materia's `event`), and
    /// returns the output as routing sees it: the re-written JSON without `event` when it had
    /// one, else `text` as it came.
    fn report_events(&mut self, events: Vec<Value>, stripped: &Value, text: &str) -> String {
        if events.is_empty() {
            return text.to_owned();
        }
        let Some(current) = self.state.current.clone() else {
            return text.to_owned();
        };
        for event in events {
            self.emit(MateriaEvent {
                socket: current.socket.clone(),
                visit: current.visit,
                item: current.item.clone(),
                event,
            });
        }
        stripped.to_string()
    }

    /// An agent output broke the contract: one same-socket repair turn, then failure.
    fn reject(&mut self, issues: &[String]) {
        let Some(current) = self.state.current.clone() else {
            return;
        };
        let allowance = Allowance::Repair {
            socket: current.socket.clone(),
            item: current.item.clone(),
            visit: Some(current.visit),
        };
        let limit = self.state.limit(&allowance, 1);
        let repair = u64::from(current.repairs) < limit;
        self.emit(OutputRejected {
            socket: current.socket.clone(),
            visit: current.visit,
            turn: current.turn,
            issues: issues.to_vec(),
            repair,
        });
        if repair {
            self.dispatch(current.turn.next(), false);
            return;
        }
        self.emit(AllowanceExhausted {
            allowance: allowance.clone(),
            count: u64::from(current.repairs) + 1,
            limit,
        });
        self.fail(
            format!(
                "{} gave invalid output after {} repair turn(s): {}; revive to allow another repair",
                current.socket,
                current.repairs,
                bounded(&issues.join("; "), 400)
            ),
            Some(current.socket),
            Some(allowance),
        );
    }

    /// A utility process ended.
    pub fn on_utility(
        &mut self,
        code: Option<i32>,
        timed_out: bool,
        stdout: &str,
        stderr: &str,
        truncated: bool,
    ) {
        let Some(current) = self.state.current.clone() else {
            return;
        };
        let loadout = std::sync::Arc::clone(&self.state.loadout);
        let Some(socket) = loadout.socket(&current.socket) else {
            return;
        };
        self.emit(UtilityFinished {
            socket: current.socket.clone(),
            visit: current.visit,
            code,
            timed_out,
            stdout: stdout.to_owned(),
            stderr: stderr.to_owned(),
            truncated,
        });
        let argv = match &socket.kind {
            SocketKind::Utility(u) => match &u.exec {
                crate::loadout::Exec::Command { argv } => argv.join(" "),
                crate::loadout::Exec::Builtin { name } => format!("builtin {name}"),
                crate::loadout::Exec::Output { .. } => "params.output".into(),
                crate::loadout::Exec::Shipped { name, runtime, .. } => {
                    format!("{runtime} {name} (shipped)")
                }
            },
            SocketKind::Agent(_) | SocketKind::Post(_) => String::new(),
        };
        if timed_out || code != Some(0) {
            let how = if timed_out {
                "timed out and was killed".to_owned()
            } else {
                code.map_or_else(
                    || "was killed by a signal".into(),
                    |c| format!("exited with code {c}"),
                )
            };
            let stderr = bounded(stderr, 800);
            let said = if stderr.is_empty() {
                " (nothing on stderr)".to_owned()
            } else {
                format!(": {stderr}")
            };
            self.fail(
                format!("utility {} ({argv}) {how}{said}", current.socket),
                Some(current.socket),
                None,
            );
            return;
        }
        if socket.parse == Parse::Text {
            self.complete(&current.socket, stdout, None);
            return;
        }
        let mut parsed = match handoff::parse_lenient(stdout) {
            Ok(value) => value,
            Err(err) => {
                self.fail(
                    format!(
                        "utility {} ({argv}) printed invalid JSON: {err}",
                        current.socket
                    ),
                    Some(current.socket),
                    None,
                );
                return;
            }
        };
        let conformance = self.state.conformance;
        let transition = if conformance >= 3 {
            match handoff::take_scope(&mut parsed) {
                Ok(transition) => transition,
                Err(issues) => {
                    self.fail(
                        format!(
                            "utility {} ({argv}) gave a bad scopeTransition: {}",
                            current.socket,
                            issues.join("; ")
                        ),
                        Some(current.socket),
                        None,
                    );
                    return;
                }
            }
        } else {
            None
        };
        let (events, issues) = if conformance >= 1 {
            match handoff::take_events(&mut parsed) {
                Ok(events) => (
                    events,
                    handoff::validate_under(socket, &parsed, conformance),
                ),
                Err(issues) => (Vec::new(), issues),
            }
        } else {
            (Vec::new(), handoff::validate(socket, &parsed))
        };
        if !issues.is_empty() {
            self.fail(
                format!(
                    "utility {} ({argv}) broke the handoff contract: {}",
                    current.socket,
                    issues.join("; ")
                ),
                Some(current.socket),
                None,
            );
            return;
        }
        let mut output = self.report_events(events, &parsed, stdout);
        if let Some(transition) = transition {
            self.emit(ScopeActivated {
                socket: current.socket.clone(),
                visit: current.visit,
                item: current.item.clone(),
                previous: self.state.scope.as_ref().map(|s| s.id.clone()),
                scope: match transition {
                    handoff::ScopeTransition::Replace(scope) => Some(scope),
                    handoff::ScopeTransition::Base => None,
                },
            });
            output = parsed.to_string();
        }
        self.complete(&current.socket, &output, Some(parsed));
    }

    /// Commits an accepted output and routes.
    pub fn complete(&mut self, socket_id: &SocketId, output: &str, parsed: Option<Value>) {
        let Some(current) = self.state.current.clone() else {
            return;
        };
        let loadout = std::sync::Arc::clone(&self.state.loadout);
        let Some(socket) = loadout.socket(socket_id) else {
            return;
        };
        let satisfied = parsed
            .as_ref()
            .and_then(|p| p.get("satisfied"))
            .and_then(Value::as_bool);
        let output_of = current
            .pending_reply_at
            .filter(|_| current.pending_reply.as_deref() == Some(output));
        self.emit(SocketCompleted {
            socket: socket_id.clone(),
            visit: current.visit,
            item: current.item.clone(),
            output: output.to_owned(),
            output_of,
            parsed: parsed.clone(),
            satisfied,
            finalized: current.finalizing,
        });
        // The seq of the completion just recorded, which the assignments from `$` name.
        let completed_at = self.state.head;
        // `$` of assignments and advance conditions: the parsed JSON, or the raw text.
        let whole = parsed.unwrap_or_else(|| Value::String(output.to_owned()));
        // A utility reporting satisfied:false with a failed state namespace is an
        // infrastructure failure, not a rework request.
        if !socket.is_agent()
            && satisfied == Some(false)
            && let Some(Value::Object(patch)) = whole.get("state")
            && let Some((ns, _)) = patch
                .iter()
                .find(|(_, v)| v.get("ok") == Some(&Value::Bool(false)))
        {
            let context = whole
                .get("context")
                .and_then(Value::as_str)
                .map(str::trim)
                .filter(|c| !c.is_empty() && self.state.conformance >= 1);
            let reason = match context {
                Some(context) => format!("utility {socket_id} failed: {context}"),
                None => format!("utility {socket_id} reported a failure in state.{ns} (ok: false)"),
            };
            self.fail(reason, Some(socket_id.clone()), None);
            return;
        }
        for (target, source) in &socket.assign {
            let scope = Scope {
                output: Some(&whole),
                data: &self.state.data,
                last_json: self.state.last_json.as_ref(),
                last_output: self.state.last_output.as_deref(),
            };
            let resolved = path::resolve(&scope, source);
            // A value read from the output alone is named, not repeated.
            let from = (resolved.is_some() && crate::event::is_output_source(source)).then(|| {
                crate::event::ValueFrom {
                    seq: completed_at,
                    source: source.clone(),
                }
            });
            self.emit(DataAssigned {
                socket: socket_id.clone(),
                path: target.clone(),
                value: resolved.unwrap_or(Value::Null),
                from,
            });
        }
        if satisfied == Some(true) && self.state.rework.iter().any(|r| r.item == current.item) {
            self.emit(ReworkCleared {
                item: current.item,
                by: socket_id.clone(),
            });
        }
        if socket.parallel
            && loadout
                .lanes
                .as_ref()
                .is_some_and(|l| &l.generator == socket_id)
        {
            self.plan_lanes(socket_id, &whole);
            return;
        }
        let mut exhausted = false;
        if let Some(advance) = &socket.advance {
            let scope = Scope {
                output: Some(&whole),
                data: &self.state.data,
                last_json: self.state.last_json.as_ref(),
                last_output: self.state.last_output.as_deref(),
            };
            let holds = advance
                .when
                .as_deref()
                .is_none_or(|w| path::condition(&scope, satisfied, w));
            if holds {
                let from = self
                    .state
                    .cursors
                    .get(&advance.cursor)
                    .copied()
                    .unwrap_or(0);
                // Borrowed: only the length is needed, and the list can be long.
                let len = match path::resolve_ref(&scope, &advance.items) {
                    Some(Value::Array(items)) => items.len() as u64,
                    _ => 0,
                };
                self.emit(CursorAdvanced {
                    cursor: advance.cursor.clone(),
                    from,
                    to: from + 1,
                });
                exhausted = from + 1 >= len;
            }
        }
        self.route(socket_id, satisfied, exhausted);
    }

    /// Picks the route out of a completed socket and takes it.
    pub fn route(&mut self, socket_id: &SocketId, satisfied: Option<bool>, exhausted: bool) {
        let loadout = std::sync::Arc::clone(&self.state.loadout);
        let Some(socket) = loadout.socket(socket_id) else {
            return;
        };
        if exhausted {
            let order: &[When] = match satisfied {
                Some(true) => &[When::Satisfied, When::Always],
                Some(false) => &[When::NotSatisfied, When::Always],
                None => &[When::Always],
            };
            let route = self
                .state
                .loadout
                .loops
                .iter()
                .filter(|l| {
                    l.sockets.contains(socket_id) || l.exits.iter().any(|e| &e.from == socket_id)
                })
                .find_map(|l| {
                    order.iter().find_map(|when| {
                        l.exits
                            .iter()
                            .find(|e| &e.from == socket_id && e.condition == *when)
                    })
                })
                .cloned();
            let (to, when) = route.map_or((Target::End, When::Always), |r| {
                (target_of(&r.target), r.condition)
            });
            // A lane ends where its loop exits: the exit route is the parent's, after the
            // barrier.
            let to = if self.state.lane.is_some() {
                Target::End
            } else {
                to
            };
            self.emit(EdgeTaken {
                from: socket_id.clone(),
                to: to.clone(),
                when,
                item: None,
                traversal: 1,
            });
            return self.go(to);
        }
        let matches = |when: When| match when {
            When::Always => true,
            When::Satisfied => satisfied == Some(true),
            When::NotSatisfied => satisfied == Some(false),
        };
        let Some(edge) = socket.edges.iter().find(|e| matches(e.when)).cloned() else {
            return self.finish();
        };
        let item = self.state.current.as_ref().and_then(|c| c.item.clone());
        let to = target_of(&edge.to);
        let key = super::evolve::edge_key(socket_id, &to, item.as_ref());
        let count = self.state.traversals.get(&key).copied().unwrap_or(0) + 1;
        if let Some(max) = edge.max_traversals {
            let allowance = Allowance::Edge {
                from: socket_id.clone(),
                to: to.clone(),
                item: item.clone(),
            };
            let limit = self.state.limit(&allowance, u64::from(max));
            if u64::from(count) > limit {
                self.emit(AllowanceExhausted {
                    allowance: allowance.clone(),
                    count: u64::from(count),
                    limit,
                });
                let item_text = item
                    .as_ref()
                    .map_or_else(|| "no item".to_owned(), |i| format!("item {i}"));
                self.fail(
                    format!(
                        "edge {key} exhausted its allowance of {limit} traversals for {item_text}; revive to allow {max} more",
                    ),
                    Some(socket_id.clone()),
                    Some(allowance),
                );
                return;
            }
        }
        self.emit(EdgeTaken {
            from: socket_id.clone(),
            to: to.clone(),
            when: edge.when,
            item: item.clone(),
            traversal: count,
        });
        if edge.when == When::NotSatisfied
            && let Target::Socket(target) = &to
        {
            let (reason, quoted) = self.rework_reason();
            let reason_of = quoted.then(|| self.json_completion_of(socket_id)).flatten();
            self.emit(ReworkRouted {
                source: socket_id.clone(),
                materia_label: socket.label.clone(),
                target: target.clone(),
                item,
                reason,
                reason_of,
            });
        }
        self.go(to);
    }

    fn go(&mut self, to: Target) {
        match to {
            Target::End => self.finish(),
            Target::Socket(next) => self.enter(&next, true),
        }
    }

    /// The seq of this cast's completion of `socket` that committed `last_json`, if it is one.
    fn json_completion_of(&self, socket: &SocketId) -> Option<crate::id::Seq> {
        let (at, by) = self.state.last_json_at.as_ref()?;
        (by == socket).then_some(*at)
    }

    /// The rework reason: the output's `context`, else a bounded excerpt without `text`; and
    /// whether it quotes that `context` (as a version 2 `rework_routed` names it: quoted by
    /// the layout's own [`crate::event::quoted_reason`], so a reader derives the same text).
    fn rework_reason(&self) -> (String, bool) {
        const PREFIX: &str = "No top-level context was provided; bounded previous output excerpt: ";
        match &self.state.last_json {
            Some(Value::Object(map)) => {
                if let Some(Value::String(context)) = map.get("context")
                    && !context.trim().is_empty()
                {
                    return (crate::event::quoted_reason(context), true);
                }
                let mut stripped = map.clone();
                stripped.remove("text");
                if stripped.is_empty() && map.contains_key("text") {
                    return ("The output carried only renderable text and no reason; re-check the work item against its context.".into(), false);
                }
                let json = serde_json::to_string(&stripped).unwrap_or_default();
                (format!("{PREFIX}{}", bounded(&json, REASON_LIMIT)), false)
            }
            _ => match self.state.last_output.as_deref() {
                Some(text) if !text.trim().is_empty() => {
                    (format!("{PREFIX}{}", bounded(text, REASON_LIMIT)), false)
                }
                _ => (
                    "The previous socket gave no context or output; re-check the work item.".into(),
                    false,
                ),
            },
        }
    }

    /// `revive`: extend exactly the exhausted allowance and continue where the cast stopped.
    pub fn revive(&mut self) -> Result<(), Rejection> {
        let state = &self.state;
        if !matches!(state.status, Status::Failed | Status::Aborted) {
            return Err(Rejection::NotNow {
                cast: state.cast.clone(),
                input: "revive",
                reason: format!("it is {}, not failed or aborted", state.status.as_str()),
            });
        }
        let failure = state.failure.clone();
        let allowance = failure.as_ref().and_then(|f| f.allowance.clone());
        let current = state.current.clone();
        let socket = failure
            .as_ref()
            .and_then(|f| f.socket.clone())
            .or_else(|| current.as_ref().map(|c| c.socket.clone()))
            .unwrap_or_else(|| state.loadout.entry.clone());
        // A budget raised above the tokens used since the stop has room already.
        let raised =
            allowance == Some(Allowance::Tokens) && state.usage.total() < state.token_budget();
        // What the exhausted allowance counted: a zero-sized one grows to just past it.
        let counted = if allowance == Some(Allowance::Cost) {
            state.cost_micros
        } else {
            state.usage.total()
        };
        if let Some(allowance) = allowance.as_ref().filter(|_| !raised) {
            let key = super::allowance_key(allowance);
            let grown = state.allowances.get(&key).map_or(1, |a| {
                if a.original > 0 {
                    // Linear growth by the configured size, only for this key.
                    a.effective + a.original
                } else {
                    // A zero-sized allowance (`maxTokens: 0`) has no size to grow by: grant
                    // exactly what commits the pending reply.
                    a.effective.max(counted) + 1
                }
            });
            self.emit(AllowanceExtended {
                allowance: allowance.clone(),
                limit: grown,
            });
        }
        self.emit(CastRevived {
            socket: socket.clone(),
            allowance: allowance.clone(),
        });
        match allowance {
            Some(Allowance::Edge { from, .. }) => {
                let satisfied = self.state.last_satisfied;
                self.route(&from, satisfied, false);
            }
            Some(Allowance::NoAdvance { .. }) => self.enter(&socket, false),
            Some(Allowance::Repair { .. }) => {
                let turn = current.map_or(Turn(1), |c| c.turn.next());
                self.dispatch(turn, false);
            }
            Some(Allowance::Tokens | Allowance::Cost) => {
                if !self.over_budget() {
                    self.process_pending();
                }
            }
            Some(Allowance::ToolCalls { .. }) => self.call_tools(),
            None => match current.as_ref().map(|c| c.phase) {
                Some(Phase::AwaitingReply) => {
                    let turn = current.map_or(Turn(1), |c| c.turn);
                    self.dispatch(turn, true);
                }
                Some(Phase::AwaitingRefinement) => {}
                Some(Phase::AwaitingDispatch) => self.dispatch(Turn(1), false),
                Some(Phase::RunningTools) => self.recover_tools(),
                // The lanes run again: the failed and aborted ones are revived.
                Some(Phase::RunningLanes) => {}
                _ => self.enter(&socket, false),
            },
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::bounded;

    /// The plain definition the fast one must keep.
    fn bounded_slowly(text: &str, limit: usize) -> String {
        let collapsed = text.split_whitespace().collect::<Vec<_>>().join(" ");
        if collapsed.chars().count() <= limit {
            collapsed
        } else {
            let mut cut: String = collapsed.chars().take(limit).collect();
            cut.push('…');
            cut
        }
    }

    #[test]
    fn bounded_collapses_and_cuts_like_the_plain_definition() {
        for text in [
            "",
            "   ",
            "one",
            "plain words here",
            "  lead and trail  ",
            "tab\there\nand\u{b}there",
            "é accents é and more é",
            "exactly ten",
            "a b c d e f g h i j k l m n o p",
        ] {
            for limit in [0, 1, 3, 10, 11, 12, 100] {
                assert_eq!(
                    bounded(text, limit),
                    bounded_slowly(text, limit),
                    "{text:?} {limit}"
                );
            }
        }
    }
}
