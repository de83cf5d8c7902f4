//! What every bench workload measures with: its database (a scratch one unless one is
//! named), the durability asked for, rates, file sizes and the process's peak memory.

use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use castlog_events::Durability;

use crate::args::DurabilityArg;
use crate::error::CliError;

/// A scratch directory removed on drop (kept when the user named a database).
pub(super) struct Scratch(Option<PathBuf>);

impl Scratch {
    pub(super) fn new() -> Result<Self, CliError> {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let dir =
            std::env::temp_dir().join(format!("castlog-bench-{}-{nanos}", std::process::id()));
        std::fs::create_dir_all(&dir)
            .map_err(|e| CliError::user(format!("cannot create {}: {e}", dir.display())))?;
        Ok(Self(Some(dir)))
    }

    pub(super) fn file(&self, name: &str) -> PathBuf {
        self.0
            .as_ref()
            .map_or_else(|| PathBuf::from(name), |d| d.join(name))
    }

    /// The directory [`Scratch::file`] names files in (the current one for no scratch).
    pub(super) fn dir(&self) -> &Path {
        self.0.as_deref().unwrap_or(Path::new("."))
    }
}

/// This process's peak resident set size (VmHWM) in kB, if /proc tells it.
pub(super) fn peak_rss_kb() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find_map(|l| l.strip_prefix("VmHWM:"))?;
    line.trim().trim_end_matches("kB").trim().parse().ok()
}

/// The database a bench runs in: the one named, or a fresh temporary one removed when the
/// returned scratch directory is dropped.
pub(super) fn database(db: Option<&Path>) -> Result<(Scratch, PathBuf), CliError> {
    let scratch = if db.is_some() {
        Scratch(None)
    } else {
        Scratch::new()?
    };
    let path = db.map_or_else(|| scratch.file("castlog.db"), Path::to_path_buf);
    Ok((scratch, path))
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if let Some(dir) = self.0.take() {
            // Best effort: a leftover temp dir is harmless.
            drop(std::fs::remove_dir_all(dir));
        }
    }
}

/// The log's durability for a `--durability` argument.
pub(super) fn durability(arg: DurabilityArg) -> Durability {
    match arg {
        DurabilityArg::Full => Durability::Full,
        DurabilityArg::Normal => Durability::Normal,
    }
}

/// `count` per second of `secs` (0 for no time).
pub(super) fn rate(count: u64, secs: f64) -> f64 {
    if secs > 0.0 { count as f64 / secs } else { 0.0 }
}

/// The bytes of the database file with its `-wal` and `-shm`.
pub(super) fn db_bytes(path: &Path) -> u64 {
    ["", "-wal", "-shm"]
        .iter()
        .filter_map(|suffix| {
            let mut name = path.as_os_str().to_owned();
            name.push(suffix);
            std::fs::metadata(PathBuf::from(name)).ok()
        })
        .map(|m| m.len())
        .sum()
}
