//! Records of the programs running now for a cast, beside the database, so another castlog
//! can tell that a cast's agent or utility is still at work (`castlog resume` refuses then).
//!
//! A record is one file in `<db>-children/` (next to `castlog.db-wal`), named
//! `<cast>.<pid>` (the cast id with every byte but `A-Za-z0-9_-` written `%XX`), holding the
//! pid and what tells that process from a later one given the same pid: its start time in
//! clock ticks after boot (field 22 of `/proc/PID/stat`) and the boot id. It is written (to a
//! temporary name, then renamed, so a reader never sees half of one) right after the program
//! starts and removed when the program has been reaped. A record whose process is gone, a
//! zombie, or another process now holding the pid is stale (its castlog was killed, or the
//! machine restarted) and is removed by the next reader.
//!
//! Files, not rows of the database: a record costs a create and a rename, no fsync and no
//! turn of the single writer, and needs no schema; losing one in a power cut loses nothing,
//! since the processes it named died with the machine. Without `/proc` (not Linux) a record
//! holds the pid alone and counts as alive while signal 0 reaches it.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use castlog_core::id::CastId;

/// Where the children running for casts of `db` are recorded.
pub(super) fn dir_of(db: &Path) -> PathBuf {
    let mut name = db.file_name().unwrap_or(db.as_os_str()).to_owned();
    name.push("-children");
    db.with_file_name(name)
}

/// The file name prefix of `cast`'s records.
fn prefix_of(cast: &CastId) -> String {
    let mut out = String::new();
    for byte in cast.as_str().bytes() {
        if byte.is_ascii_alphanumeric() || byte == b'-' || byte == b'_' {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out.push('.');
    out
}

/// What tells process `pid` from a later one with the same pid; `None` when no live process
/// has it (gone, or a zombie waiting to be reaped).
fn identity(pid: u32) -> Option<String> {
    if !Path::new("/proc/self/stat").exists() {
        return Command::new("kill")
            .args(["-0", &pid.to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
            .then(|| "-".to_owned());
    }
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) is in parentheses and may hold spaces or parentheses itself.
    let (_, fields) = stat.rsplit_once(')')?;
    let fields: Vec<&str> = fields.split_whitespace().collect();
    if matches!(fields.first(), Some(&"Z" | &"X")) {
        return None;
    }
    let start = fields.get(19)?;
    let boot = fs::read_to_string("/proc/sys/kernel/random/boot_id").unwrap_or_default();
    Some(format!("{start}@{}", boot.trim()))
}

/// Where one cast's children are recorded.
#[derive(Debug, Clone)]
pub(super) struct Records {
    dir: PathBuf,
    prefix: String,
}

/// A program's record; dropping it removes the record.
#[derive(Debug)]
pub(super) struct Entry {
    path: PathBuf,
}

impl Drop for Entry {
    fn drop(&mut self) {
        let _ = fs::remove_file(&self.path);
        // The directory goes with its last record (this fails while another remains).
        if let Some(dir) = self.path.parent() {
            let _ = fs::remove_dir(dir);
        }
    }
}

impl Records {
    pub(super) fn new(db: &Path, cast: &CastId) -> Self {
        Self {
            dir: dir_of(db),
            prefix: prefix_of(cast),
        }
    }

    /// Records the running program `pid` (`program` names it for messages). Best effort: a
    /// record that cannot be written only leaves `resume` unwarned, so it is not an error.
    pub(super) fn enter(&self, pid: u32, program: &str) -> Option<Entry> {
        let identity = identity(pid)?;
        let name = format!("{}{pid}", self.prefix);
        let path = self.dir.join(&name);
        let partial = self.dir.join(format!(".{name}.partial"));
        let text = format!("{pid} {identity}\n{}\n", program.replace('\n', " "));
        // Twice: the directory may be removed (found empty by another castlog) between its
        // creation and the write.
        let written = (0..2)
            .any(|_| fs::create_dir_all(&self.dir).is_ok() && fs::write(&partial, &text).is_ok());
        if !written || fs::rename(&partial, &path).is_err() {
            let _ = fs::remove_file(&partial);
            return None;
        }
        Some(Entry { path })
    }
}

/// A program recorded for a cast and still running.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunningChild {
    /// Process id of the program, as recorded when it started.
    pub pid: u32,
    /// The program, as it was started.
    pub program: String,
}

/// The programs recorded for `cast` in `db`'s records that are still running; stale records
/// are removed on the way.
pub fn running_children(db: &Path, cast: &CastId) -> Vec<RunningChild> {
    let dir = dir_of(db);
    let prefix = prefix_of(cast);
    let Ok(entries) = fs::read_dir(&dir) else {
        return Vec::new();
    };
    let mut running = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix(&prefix))
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        let text = fs::read_to_string(entry.path()).unwrap_or_default();
        let mut lines = text.lines();
        let recorded = lines.next().and_then(|l| l.split_once(' '));
        let alive = recorded
            .is_some_and(|(p, id)| p == pid.to_string() && identity(pid).as_deref() == Some(id));
        if alive {
            running.push(RunningChild {
                pid,
                program: lines.next().unwrap_or("").to_owned(),
            });
        } else {
            let _ = fs::remove_file(entry.path());
        }
    }
    running.sort_by_key(|c| c.pid);
    // Gone once its last record is (this fails while any remains).
    let _ = fs::remove_dir(&dir);
    running
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_lives_while_its_process_does() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("castlog.db");
        let cast = CastId::new("cast a/b.c");
        let records = Records::new(&db, &cast);
        let mut child = Command::new("sleep").arg("30").spawn().unwrap();
        let entry = records.enter(child.id(), "sleep 30").unwrap();
        let listed = running_children(&db, &cast);
        assert_eq!(
            listed,
            vec![RunningChild {
                pid: child.id(),
                program: "sleep 30".into()
            }]
        );
        assert!(running_children(&db, &CastId::new("cast a")).is_empty());
        // Ended as castlog ends it: the record goes, and its directory with it.
        drop(entry);
        assert!(!dir_of(&db).exists());
        // Killed and reaped with its record left behind (its castlog was killed): stale.
        let left = records.enter(child.id(), "sleep 30").unwrap();
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(running_children(&db, &cast).is_empty());
        assert!(
            !dir_of(&db).exists(),
            "the stale record or its directory is left behind"
        );
        drop(left);
    }

    #[test]
    fn a_record_of_a_reused_pid_is_stale() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("castlog.db");
        let cast = CastId::new("c");
        fs::create_dir_all(dir_of(&db)).unwrap();
        let me = std::process::id();
        fs::write(
            dir_of(&db).join(format!("c.{me}")),
            format!("{me} 1@another-boot\nold\n"),
        )
        .unwrap();
        assert!(running_children(&db, &cast).is_empty());
        assert_eq!(prefix_of(&CastId::new("a.b%")), "a%2Eb%25.");
    }
}
