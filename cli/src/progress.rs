//! Watching a run: a live line on stderr, tracing output, and Ctrl-C.
//!
//! The progress line (socket, materia, item, attempt N/M of the prompt in flight, turn, tokens
//! of the whole cast, the budget warning once given, elapsed, with a spinner while the agent works) is drawn only when stderr is a terminal and neither `--json` nor `--quiet` is
//! given; it never writes to stdout. Tracing output is filtered by `RUST_LOG` (default `warn`),
//! with the span fields cast, socket, visit and turn; `NO_COLOR` turns colors off.
//!
//! Without `--json`, the cast's timeline is printed on stdout a line per event as each becomes
//! durable ([`Tail`]), the progress line stepping aside for it; what is left when the command
//! ends (events recorded before anyone watched, or by a command that drives nothing) is
//! printed then, so the lines are those of the whole command, in seq order, either way.

use std::cell::Cell;
use std::io::IsTerminal;
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use castlog_core::event::{Event, FailureClass};
use castlog_core::id::{CastId, Seq};
use castlog_events::{Database, EventLog, Recorded};
use castlog_projections::timeline::TimelineLine;
use castlog_replay::agent::Agent;
use castlog_replay::driver::Notice;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// Installs the tracing subscriber on stderr.
pub fn init_tracing() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let color = std::env::var_os("NO_COLOR").is_none() && std::io::stderr().is_terminal();
    // A second initialization (tests) is harmless: the first subscriber stays.
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(color)
        .try_init();
}

/// Sets a flag on the first Ctrl-C (the agent call in progress is cancelled, then the driver
/// records an abort); a second Ctrl-C exits at once (130).
///
/// The handler is installed before this returns: a Ctrl-C that comes at once (before the
/// watching thread first runs) is an abort, never castlog killed the default way with nothing
/// recorded. One signal stream serves both presses, so a second press that comes while the
/// first is being handled is not lost either.
pub fn interrupt_flag() -> Arc<AtomicBool> {
    let flag = Arc::new(AtomicBool::new(false));
    let Ok(rt) = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .build()
    else {
        return flag;
    };
    let interrupts = {
        let _runtime = rt.enter();
        tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())
    };
    let Ok(mut interrupts) = interrupts else {
        return flag;
    };
    let set = Arc::clone(&flag);
    let spawned = std::thread::Builder::new()
        .name("castlog-ctrl-c".into())
        .spawn(move || {
            rt.block_on(async move {
                if interrupts.recv().await.is_some() {
                    set.store(true, Ordering::SeqCst);
                    let _ = writeln_stderr(
                        "castlog: interrupted; cancelling the agent call and recording an abort (Ctrl-C again to quit now)",
                    );
                    if interrupts.recv().await.is_some() {
                        // Programs run in process groups of their own, out of the terminal's
                        // reach: stop them before leaving (the log keeps the prompt as sent and
                        // unanswered; `resume` sends it again).
                        castlog_replay::process::kill_running();
                        std::process::exit(130);
                    }
                }
            });
        });
    drop(spawned);
    flag
}

fn writeln_stderr(text: &str) -> std::io::Result<()> {
    use std::io::Write;
    writeln!(std::io::stderr(), "{text}")
}

/// The live progress line, kept from the driver's notices alone.
pub struct Progress {
    bar: Option<ProgressBar>,
    /// Tokens of the whole cast: what the log held when the drive began, plus every reply since.
    tokens: u64,
    /// Transient failures of the prompt in flight (from the recorded `agent_failed` events; a
    /// new dispatch or a reply starts again at 0).
    failures: u32,
    /// Attempts a prompt gets under the agent's retry policy.
    attempts: u32,
    /// What the line names (socket, label, item, turn) since the last wait began, so a count
    /// told later (a local agent's steps are told once durable) redraws it.
    shown: Option<(String, String, Option<String>, u32)>,
    /// The budget warning recorded while watching (`budget_warning`: percent used, budget),
    /// until a raise.
    warned: Option<(u64, u64)>,
    /// What the priced replies seen cost (millionths of a dollar), once one was priced.
    cost: Option<u64>,
    /// The cost warning recorded while watching: percent used, cost budget.
    cost_warned: Option<(u64, u64)>,
}

impl Progress {
    /// A progress line, drawn only when it can be seen and is wanted, starting from `tokens`
    /// used, for an agent that gives a prompt `attempts`.
    pub fn new(quiet: bool, tokens: u64, attempts: u32) -> Self {
        let visible = !quiet && std::io::stderr().is_terminal();
        let bar = visible.then(|| {
            let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
            let style = ProgressStyle::with_template("{spinner} {msg} · {elapsed}")
                .unwrap_or_else(|_| ProgressStyle::default_spinner());
            bar.set_style(style);
            bar.enable_steady_tick(Duration::from_millis(120));
            bar
        });
        Self {
            bar,
            tokens,
            failures: 0,
            attempts,
            shown: None,
            warned: None,
            cost: None,
            cost_warned: None,
        }
    }

    /// The line for what it shows now, if a wait began.
    fn current_line(&self) -> Option<String> {
        let (socket, label, item, turn) = self.shown.as_ref()?;
        Some(self.line(socket, label, item.as_deref(), *turn))
    }

    /// The line's text while an agent or utility works.
    fn line(&self, socket: &str, label: &str, item: Option<&str>, turn: u32) -> String {
        format!(
            "{socket} {label}{} · attempt {}/{} turn {turn} · {} tokens{}{}{}",
            item.map(|i| format!(" · {i}")).unwrap_or_default(),
            self.failures + 1,
            self.attempts,
            self.tokens,
            self.warned
                .map(|(percent, limit)| format!(" · budget warning: {percent}% of {limit}"))
                .unwrap_or_default(),
            self.cost
                .map(|c| format!(" · {}", castlog_core::event::dollars(c)))
                .unwrap_or_default(),
            self.cost_warned
                .map(|(percent, limit)| format!(
                    " · cost warning: {percent}% of {}",
                    castlog_core::event::dollars(limit)
                ))
                .unwrap_or_default()
        )
    }

    /// Counts what a recorded event changes on the line.
    fn count(&mut self, event: &Event) {
        match event {
            Event::AgentReplied(e) => {
                self.failures = 0;
                if let Some(u) = e.usage {
                    self.tokens += u.total();
                }
                if let Some(c) = &e.cost {
                    self.cost = Some(self.cost.unwrap_or(0) + c.micros);
                }
            }
            // A refused response format is asked again at once: no attempt of the prompt.
            Event::AgentFailed(e) if e.class == FailureClass::Transient && !e.structured_off => {
                self.failures = e.attempt;
            }
            Event::PromptDispatched(_) => self.failures = 0,
            Event::BudgetWarning(e) if e.cost.is_some() => {
                self.cost_warned = e.cost.map(|c| (e.percent, c.limit_micros));
            }
            Event::BudgetWarning(e) => self.warned = Some((e.percent, e.limit)),
            Event::BudgetRaised(_) => self.warned = None,
            _ => {}
        }
    }

    /// Updates the line from a driver notice.
    pub fn notice(&mut self, notice: Notice<'_>) {
        if self.bar.is_none() {
            return;
        }
        match notice {
            Notice::Waiting {
                socket,
                label,
                item,
                turn,
                ..
            } => {
                self.shown = Some((
                    socket.as_str().to_owned(),
                    label.to_owned(),
                    item.map(str::to_owned),
                    turn,
                ));
            }
            Notice::Recorded { event, .. } => {
                let before = (self.tokens, self.failures, self.warned);
                self.count(event);
                if before == (self.tokens, self.failures, self.warned) {
                    return;
                }
            }
        }
        if let (Some(bar), Some(line)) = (&self.bar, self.current_line()) {
            bar.set_message(line);
        }
    }
}

impl Progress {
    /// Runs `print` with the progress line out of the way (stdout and stderr may be one
    /// terminal).
    fn aside(&self, print: impl FnOnce()) {
        match &self.bar {
            Some(bar) => bar.suspend(print),
            None => print(),
        }
    }
}

/// The timeline of one cast on stdout from a seq on: each line printed once, in seq order.
#[derive(Debug)]
pub struct Tail<'a> {
    log: &'a Database,
    cast: CastId,
    /// Seq of the first event not printed yet.
    next: Cell<Seq>,
    /// Reads the lines in order: a completion names the reply its output is.
    decoder: std::cell::RefCell<castlog_events::Decoder>,
}

impl<'a> Tail<'a> {
    /// A timeline of `cast` whose first line will be `from`'s.
    pub fn new(log: &'a Database, cast: &CastId, from: Seq) -> Self {
        Self {
            log,
            cast: cast.clone(),
            next: Cell::new(from),
            decoder: std::cell::RefCell::default(),
        }
    }

    fn line(&self, record: &Recorded) {
        let decoded = self.decoder.borrow_mut().event_in(self.log, record);
        let line = TimelineLine::of(record, decoded.as_ref(), crate::commands::CONTEXTS);
        crate::say!("{:>5}  {:<22} {}", line.seq, line.kind, line.summary);
    }

    /// Prints `record` (durable), and first any line before it not printed yet: the events
    /// before a durable one are durable too, and read back from the log.
    fn heard(&self, record: &Recorded) {
        if record.cast != self.cast || record.seq < self.next.get() {
            return;
        }
        if record.seq > self.next.get()
            && let Ok(earlier) =
                self.log
                    .read(&self.cast, self.next.get(), Some(Seq(record.seq.get() - 1)))
        {
            earlier.iter().for_each(|r| self.line(r));
        }
        self.line(record);
        self.next.set(record.seq.next());
    }

    /// Prints every line from the first not printed yet to the cast's head.
    pub fn finish(&self) -> Result<(), crate::error::CliError> {
        for record in self.log.read(&self.cast, self.next.get(), None)? {
            self.line(&record);
            self.next.set(record.seq.next());
        }
        Ok(())
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        if let Some(bar) = self.bar.take() {
            bar.finish_and_clear();
        }
    }
}

/// `--quiet`: no progress line.
static QUIET: AtomicBool = AtomicBool::new(false);

/// Records the global `--quiet` flag.
pub fn set_quiet(quiet: bool) {
    QUIET.store(quiet, Ordering::Relaxed);
}

/// Attaches the progress line (unless `json` or `--quiet`), the live timeline (`tail`, given
/// without `--json`), the live trace (`stream`, with `--otlp-endpoint`), the event bus's delivery thread (`hooks`, woken by each durable record) and Ctrl-C handling to a driver and the agent it drives with: Ctrl-C
/// cancels the agent's call, then the driver records an abort.
pub fn watch<'a, L: EventLog + ?Sized>(
    driver: &mut castlog_replay::driver::Driver<'a, L>,
    agent: &mut dyn Agent,
    json: bool,
    tail: Option<Rc<Tail<'a>>>,
    stream: Option<crate::commands::otlp::Stream>,
    hooks: Option<crate::commands::eventing::Waker>,
) {
    let mut progress = Progress::new(
        json || QUIET.load(Ordering::Relaxed),
        driver.state.usage.total(),
        agent.attempts(),
    );
    let utilities_in = driver.cwd().to_path_buf();
    driver.observe(Box::new(move |notice| {
        progress.notice(notice);
        if let Notice::Recorded { record, event } = notice {
            if let Some(said) = ignore_notice(event, &utilities_in) {
                progress.aside(|| crate::output::to_stderr(format_args!("{said}")));
            }
            if let Some(stream) = &stream {
                stream.recorded(record);
            }
            if let Some(hooks) = &hooks {
                hooks.recorded();
            }
            if let Some(tail) = &tail {
                progress.aside(|| tail.heard(record));
            }
        }
    }));
    let flag = interrupt_flag();
    agent.cancel_on(Arc::clone(&flag));
    driver.interrupt_on(flag);
}

/// A line per lane event that says where a lane is: each socket start (socket, visit,
/// materia, item) and how the lane ended, on stderr (`castlog: lane a: ...`).
pub fn watch_lanes<L: EventLog + ?Sized>(
    driver: &mut castlog_replay::driver::Driver<'_, L>,
    json: bool,
) {
    if json || QUIET.load(Ordering::Relaxed) {
        return;
    }
    driver.observe_lanes(Box::new(|lane, notice| {
        let Notice::Recorded { event, .. } = notice else {
            return;
        };
        let said = match event {
            Event::SocketStarted(e) => format!(
                "{}:{} {}{}",
                e.socket,
                e.visit,
                e.materia_label,
                e.item.as_ref().map(|i| format!(" {i}")).unwrap_or_default()
            ),
            Event::CastCompleted(_) => "completed".to_owned(),
            Event::CastFailed(e) => format!("failed: {}", e.reason),
            Event::CastAborted(e) => format!("aborted: {}", e.reason),
            _ => return,
        };
        crate::output::to_stderr(format_args!("lane {}: {said}", lane.name));
    }));
}

/// What the built-in Ignore-Artifacts did to which file, from its recorded output: a cast must
/// not change a file unnoticed.
fn ignore_notice(event: &Event, dir: &std::path::Path) -> Option<String> {
    let Event::UtilityFinished(done) = event else {
        return None;
    };
    let output: serde_json::Value = serde_json::from_str(&done.stdout).ok()?;
    let ignore = output.pointer("/state/artifactIgnore")?;
    let path = dir.join(ignore.get("file")?.as_str()?);
    let path = path.display();
    let list = |key: &str| -> Vec<String> {
        ignore
            .get(key)
            .and_then(serde_json::Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(serde_json::Value::as_str)
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default()
    };
    let added = list("added");
    Some(if added.is_empty() {
        format!(
            "note: {} found {} in {path} already",
            done.socket,
            list("patterns").join(", ")
        )
    } else {
        format!("note: {} added {} to {path}", done.socket, added.join(", "))
    })
}

#[cfg(test)]
mod tests {
    use castlog_core::event::{AgentFailed, AgentReplied, Usage};
    use castlog_core::id::{SocketId, Turn, Visit};

    use super::*;

    fn failed(attempt: u32, class: FailureClass) -> Event {
        Event::AgentFailed(AgentFailed {
            socket: SocketId::new("s"),
            visit: Visit(1),
            turn: Turn(1),
            class,
            message: String::new(),
            attempt,
            structured_off: false,
        })
    }

    #[test]
    fn the_line_counts_attempts_of_the_prompt_and_tokens_of_the_cast() {
        let mut p = Progress::new(true, 40, 5);
        assert!(
            p.line("s", "L", None, 1)
                .contains("attempt 1/5 turn 1 · 40 tokens")
        );
        p.count(&failed(1, FailureClass::Transient));
        p.count(&failed(2, FailureClass::Transient));
        assert!(
            p.line("s", "L", Some("i"), 1)
                .contains("s L · i · attempt 3/5")
        );
        p.count(&failed(1, FailureClass::Interruption));
        assert!(p.line("s", "L", None, 1).contains("attempt 3/5"));
        // A refused response format is no attempt of the prompt.
        let Event::AgentFailed(mut refused) = failed(9, FailureClass::Transient) else {
            unreachable!()
        };
        refused.structured_off = true;
        p.count(&Event::AgentFailed(refused));
        assert!(p.line("s", "L", None, 1).contains("attempt 3/5"));
        p.count(&Event::AgentReplied(AgentReplied {
            socket: SocketId::new("s"),
            visit: Visit(1),
            turn: Turn(1),
            text: String::new(),
            usage: Some(Usage {
                input: 2,
                output: 3,
            }),
            tool_calls: Vec::new(),
            cost: None,
        }));
        assert!(
            p.line("s", "L", None, 2)
                .contains("attempt 1/5 turn 2 · 45 tokens")
        );
    }

    #[test]
    fn a_reply_told_after_the_next_wait_began_still_counts_on_the_line() {
        let mut p = Progress::new(true, 0, 3);
        assert_eq!(p.current_line(), None);
        p.shown = Some(("s".into(), "L".into(), None, 1));
        p.count(&Event::AgentReplied(AgentReplied {
            socket: SocketId::new("r"),
            visit: Visit(1),
            turn: Turn(1),
            text: String::new(),
            usage: Some(Usage {
                input: 7,
                output: 1,
            }),
            tool_calls: Vec::new(),
            cost: None,
        }));
        let line = p.current_line().unwrap();
        assert!(
            line.contains("s L · attempt 1/3 turn 1 · 8 tokens"),
            "{line}"
        );
    }

    #[test]
    fn a_budget_warning_stays_on_the_line_until_a_raise() {
        use castlog_core::event::{BudgetRaised, BudgetWarning};
        let mut p = Progress::new(true, 800, 3);
        p.count(&Event::BudgetWarning(BudgetWarning {
            used: 800,
            limit: 1000,
            percent: 80,
            threshold: 75.0,
            cost: None,
        }));
        let line = p.line("s", "L", None, 1);
        assert!(
            line.ends_with("800 tokens · budget warning: 80% of 1000"),
            "{line}"
        );
        p.count(&Event::BudgetRaised(BudgetRaised {
            tokens: 5000,
            previous: 1000,
            used: 800,
        }));
        assert!(p.line("s", "L", None, 1).ends_with("800 tokens"));
    }
}
