//! A script given to a cast that is already under way must be the script that answered it so
//! far: the lines it skips (the answers the log holds) are checked against those answers, so
//! another file (or an edited one) is refused instead of having its first lines skipped
//! unread.
//!
//! The log does not name the script a cast was driven with (no event carries an agent's
//! identity, and adding one would change what every cast records); the answers themselves
//! are the record. A reply and a person's message must match the line's text, a `continue`
//! a `continue` line. A recorded failure stands for any line: it may be the driver's own (a
//! `cmd:` turn past `--agent-timeout`, a call cancelled by Ctrl-C) rather than a script's
//! error line, and still used up an answer. Lines after the skipped ones are free: appending
//! to a script, or fixing a line the cast refused, goes on as before.

use std::ops::ControlFlow;

use castlog_core::event::{Event, FailureClass};
use castlog_core::id::{CastId, Seq};
use castlog_events::EventLog;

use super::{AgentError, ScriptLine, ScriptedAgent};

/// An answer as the log records it, described for a message.
fn recorded(event: &Event) -> Option<(Answer<'_>, String)> {
    match event {
        Event::AgentReplied(e) if !e.tool_calls.is_empty() => Some((
            Answer::Calls(&e.tool_calls),
            format!("{} tool call(s)", e.tool_calls.len()),
        )),
        Event::AgentReplied(e) => Some((
            Answer::Reply(&e.text),
            format!("the reply {:?}", clip(&e.text)),
        )),
        Event::AgentFailed(e) => Some((
            Answer::Failed(e.class),
            format!("a {} failure", class_name(e.class)),
        )),
        Event::UserRefined(e) if e.origin.as_deref() == Some("script") => Some((
            Answer::User(&e.text),
            format!("the message {:?}", clip(&e.text)),
        )),
        Event::FinalizeRequested(e) if e.origin.as_deref() == Some("script") => {
            Some((Answer::Continue, "a continue".to_owned()))
        }
        _ => None,
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Answer<'e> {
    Reply(&'e str),
    Calls(&'e [castlog_core::event::ToolRequest]),
    Failed(FailureClass),
    User(&'e str),
    Continue,
}

fn class_name(class: FailureClass) -> &'static str {
    match class {
        FailureClass::Transient => "transient",
        FailureClass::Interruption => "interruption",
    }
}

/// The start of a text, for a message.
fn clip(text: &str) -> String {
    let mut clipped: String = text.chars().take(40).collect();
    if clipped.len() < text.len() {
        clipped.push('…');
    }
    clipped
}

fn described(line: &ScriptLine) -> String {
    match line {
        ScriptLine::Reply(text, _) => format!("the reply {:?}", clip(text)),
        ScriptLine::Calls(_, _, calls) => format!("{} tool call(s)", calls.len()),
        ScriptLine::Error(class, _) => format!("a {} failure", class_name(*class)),
        ScriptLine::User(text) => format!("the message {:?}", clip(text)),
        ScriptLine::Continue => "a continue".to_owned(),
    }
}

fn matches(line: &ScriptLine, answer: Answer<'_>) -> bool {
    match (line, answer) {
        (ScriptLine::Reply(text, _), Answer::Reply(recorded)) => text == recorded,
        // The machine names a call without an id: a line matches on tools and arguments.
        (ScriptLine::Calls(_, _, calls), Answer::Calls(recorded)) => {
            calls.len() == recorded.len()
                && calls
                    .iter()
                    .zip(recorded)
                    .all(|(a, b)| a.tool == b.tool && a.arguments == b.arguments)
        }
        (_, Answer::Failed(_)) => true,
        (ScriptLine::User(text), Answer::User(recorded)) => text == recorded,
        (ScriptLine::Continue, Answer::Continue) => true,
        _ => false,
    }
}

impl ScriptedAgent {
    /// Checks that the lines this agent skips are the answers `cast`'s own events hold (a
    /// recast's parent's answers are its parent's), in order: the first that is not is
    /// [`AgentError::ScriptChanged`], naming the line and the event.
    pub fn check_answered(
        &self,
        log: &(impl EventLog + ?Sized),
        cast: &CastId,
    ) -> Result<(), AgentError> {
        if self.next == 0 {
            return Ok(());
        }
        let mut index = 0;
        let mut found: Result<(), AgentError> = Ok(());
        let changed =
            |line: usize, seq: Seq, answer: String, instead: String| AgentError::ScriptChanged {
                path: self.path.display().to_string(),
                cast: cast.to_string(),
                line,
                seq: seq.get(),
                recorded: answer,
                found: instead,
            };
        let scanned = log.scan(cast, Seq::FIRST, &mut |record| {
            if index >= self.next {
                return ControlFlow::Break(());
            }
            let Ok(event) = record.event() else {
                return ControlFlow::Continue(());
            };
            let Some((answer, said)) = recorded(&event) else {
                return ControlFlow::Continue(());
            };
            let outcome = match self.lines.get(index) {
                Some((_, line)) if matches(line, answer) => Ok(()),
                Some((number, line)) => Err(changed(*number, record.seq, said, described(line))),
                None => Err(changed(
                    self.lines.last().map_or(0, |(n, _)| *n) + 1,
                    record.seq,
                    said,
                    "the end of the script".to_owned(),
                )),
            };
            index += 1;
            match outcome {
                Ok(()) => ControlFlow::Continue(()),
                Err(err) => {
                    found = Err(err);
                    ControlFlow::Break(())
                }
            }
        });
        // A log that cannot be read here is read again, and reported, by the driver.
        drop(scanned);
        found
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_stands_for_an_answer_of_its_kind_and_text() {
        let reply = ScriptLine::Reply("Hello.".into(), None);
        assert!(matches(&reply, Answer::Reply("Hello.")));
        assert!(!matches(&reply, Answer::Reply("Hello!")));
        assert!(!matches(&reply, Answer::User("Hello.")));
        // A failure may be a timeout or a Ctrl-C, not a line of the script.
        assert!(matches(&reply, Answer::Failed(FailureClass::Interruption)));
        let failed = ScriptLine::Error(FailureClass::Transient, "rate limited".into());
        assert!(!matches(&failed, Answer::Reply("rate limited")));
        assert!(matches(&ScriptLine::Continue, Answer::Continue));
        assert!(!matches(&ScriptLine::User("go".into()), Answer::Continue));
    }
}
