//! Running a child process without a shell: stdin in, capped stdout and stderr out, a timeout.

use std::io::{Read, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Each captured stream keeps at most this many bytes.
pub const OUTPUT_CAP: usize = 1 << 20;

/// How a process ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finished {
    /// Exit code, if it exited.
    pub code: Option<i32>,
    /// Killed at the timeout.
    pub timed_out: bool,
    /// Captured stdout (lossy UTF-8, capped).
    pub stdout: String,
    /// Captured stderr (lossy UTF-8, capped).
    pub stderr: String,
    /// Whether a stream was cut at the cap.
    pub truncated: bool,
}

fn capture(mut stream: impl Read) -> (Vec<u8>, bool) {
    let mut kept = Vec::new();
    let mut truncated = false;
    let mut buf = [0u8; 8192];
    loop {
        match stream.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                let room = OUTPUT_CAP.saturating_sub(kept.len());
                if n > room {
                    truncated = true;
                }
                kept.extend_from_slice(&buf[..n.min(room)]);
            }
        }
    }
    (kept, truncated)
}

/// Runs `argv` in `cwd` with `input` on stdin. Spawn failures are reported as `Err`.
pub fn run(
    argv: &[String],
    cwd: &Path,
    input: &[u8],
    timeout: Duration,
) -> Result<Finished, String> {
    let (program, args) = argv
        .split_first()
        .ok_or_else(|| "the command is empty".to_owned())?;
    let mut child = Command::new(program)
        .args(args)
        .current_dir(cwd)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start {program}: {e}"))?;
    let stdin = child.stdin.take();
    let input = input.to_vec();
    // Feed stdin on its own thread so a child that does not read cannot block us.
    let feeder = std::thread::spawn(move || {
        if let Some(mut stdin) = stdin {
            let _ = stdin.write_all(&input);
        }
    });
    let stdout = child.stdout.take();
    let stderr = child.stderr.take();
    let out_reader = std::thread::spawn(move || stdout.map(capture).unwrap_or_default());
    let err_reader = std::thread::spawn(move || stderr.map(capture).unwrap_or_default());
    let started = Instant::now();
    let mut timed_out = false;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Some(status),
            Ok(None) if started.elapsed() >= timeout => {
                timed_out = true;
                let _ = child.kill();
                break child.wait().ok();
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(5)),
            Err(_) => break None,
        }
    };
    let _ = feeder.join();
    let (out, out_cut) = out_reader.join().unwrap_or_default();
    let (err, err_cut) = err_reader.join().unwrap_or_default();
    Ok(Finished {
        code: if timed_out {
            None
        } else {
            status.and_then(|s| s.code())
        },
        timed_out,
        stdout: String::from_utf8_lossy(&out).into_owned(),
        stderr: String::from_utf8_lossy(&err).into_owned(),
        truncated: out_cut || err_cut,
    })
}
