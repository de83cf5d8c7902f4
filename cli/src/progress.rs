//! Watching a run: a live line on stderr, tracing output, and Ctrl-C.
//!
//! The progress line (socket, materia, item, attempt, tokens, elapsed, with a spinner while the
//! agent works) is drawn only when stderr is a terminal and neither `--json` nor `--quiet` is
//! given; it never writes to stdout. Tracing output is filtered by `RUST_LOG` (default `warn`),
//! with the span fields cast, socket, visit and turn; `NO_COLOR` turns colors off.

use std::io::IsTerminal;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use castlog_core::event::Event;
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

/// Sets a flag on the first Ctrl-C; a second Ctrl-C exits at once (130).
///
/// The handler is installed before this returns: a Ctrl-C that comes at once (before the
/// watching thread first runs) is an abort recorded after the current step, never castlog
/// killed the default way with nothing recorded. One signal stream serves both presses, so a
/// second press that comes while the first is being handled is not lost either.
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
                        "castlog: interrupted; recording an abort after the current step (Ctrl-C again to quit now)",
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

/// The live progress line.
pub struct Progress {
    bar: Option<ProgressBar>,
    tokens: u64,
    socket: String,
}

impl Progress {
    /// A progress line, drawn only when it can be seen and is wanted.
    pub fn new(quiet: bool) -> Self {
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
            tokens: 0,
            socket: String::new(),
        }
    }

    /// Updates the line from a driver notice.
    pub fn notice(&mut self, notice: Notice<'_>) {
        let Some(bar) = &self.bar else { return };
        match notice {
            Notice::Waiting {
                socket,
                label,
                item,
                attempt,
                turn,
            } => {
                self.socket = socket.to_string();
                bar.set_message(format!(
                    "{socket} {label}{} · attempt {attempt} turn {turn} · {} tokens",
                    item.map(|i| format!(" · {i}")).unwrap_or_default(),
                    self.tokens
                ));
            }
            Notice::Recorded(Event::AgentReplied(e)) => {
                if let Some(u) = e.usage {
                    self.tokens += u.total();
                }
            }
            Notice::Recorded(_) => {}
        }
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

/// Attaches the progress line (unless `json` or `--quiet`) and Ctrl-C handling to a driver.
pub fn watch<L: castlog_events::EventLog + ?Sized>(
    driver: &mut castlog_replay::driver::Driver<'_, L>,
    json: bool,
) {
    let mut progress = Progress::new(json || QUIET.load(Ordering::Relaxed));
    driver.observe(Box::new(move |notice| progress.notice(notice)));
    driver.interrupt_on(interrupt_flag());
}
