//! The working directory as git trees: checkpoints, their files back into a directory, and
//! the file changes between two of them.
//!
//! A checkpoint is made without touching the user's index, branch or HEAD: git runs with
//! `GIT_INDEX_FILE` naming a temporary index, which is filled from HEAD (when there is one),
//! brought up to the working directory with `git add -A -- .`, and written as a tree with
//! `git write-tree --prefix=<the working directory's path in the repository>/`, so the tree
//! holds the working directory's files at its root. Ignored files are not in it (as `git add`
//! leaves them). The objects go into the repository's object store unreferenced: `git gc`
//! keeps them for its prune period (two weeks by default).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};

/// Why git could not do what a checkpoint needs.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WorkspaceError {
    /// `git` could not be started.
    #[error("cannot run git in {dir}: {source}")]
    Spawn {
        /// Where it was run.
        dir: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A git command failed.
    #[error("`git {command}` failed in {dir}: {stderr}")]
    Git {
        /// The arguments.
        command: String,
        /// Where it was run.
        dir: PathBuf,
        /// What git said.
        stderr: String,
    },
    /// The directory to materialize into is not empty.
    #[error("{dir} is not empty: a checkpoint is materialized into a new or empty directory")]
    NotEmpty {
        /// The directory.
        dir: PathBuf,
    },
    /// The directory to materialize into cannot be made or read.
    #[error("cannot use {dir}: {source}")]
    Dir {
        /// The directory.
        dir: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

/// A working directory inside a git repository.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Workspace {
    dir: PathBuf,
}

/// A temporary index file, removed when dropped.
struct TempIndex(PathBuf);

impl TempIndex {
    fn new() -> Self {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        TempIndex(std::env::temp_dir().join(format!("castlog-index-{}-{n}", std::process::id())))
    }
}

impl Drop for TempIndex {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

impl Workspace {
    /// The workspace of `dir` when `git rev-parse --show-toplevel` works there; `None` when
    /// it is not in a repository (or git is missing).
    pub fn find(dir: &Path) -> Option<Workspace> {
        let ws = Workspace {
            dir: dir.to_path_buf(),
        };
        ws.git(&["rev-parse", "--show-toplevel"], None)
            .ok()
            .map(|_| ws)
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn git(&self, args: &[&str], index: Option<&TempIndex>) -> Result<String, WorkspaceError> {
        let mut command = Command::new("git");
        command
            .arg("-C")
            .arg(&self.dir)
            .args(args)
            .stdin(Stdio::null())
            .env_remove("GIT_DIR")
            .env_remove("GIT_WORK_TREE");
        match index {
            Some(index) => command.env("GIT_INDEX_FILE", &index.0),
            None => command.env_remove("GIT_INDEX_FILE"),
        };
        let out = command.output().map_err(|source| WorkspaceError::Spawn {
            dir: self.dir.clone(),
            source,
        })?;
        if !out.status.success() {
            return Err(WorkspaceError::Git {
                command: args.join(" "),
                dir: self.dir.clone(),
                stderr: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
            });
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// Writes the working directory's files as a tree object and returns its id.
    pub fn checkpoint(&self) -> Result<String, WorkspaceError> {
        let index = TempIndex::new();
        // A repository without a commit has no HEAD to start from: the index starts empty.
        if self
            .git(&["rev-parse", "--verify", "-q", "HEAD"], None)
            .is_ok()
        {
            self.git(&["read-tree", "HEAD"], Some(&index))?;
        }
        self.git(&["add", "-A", "--", "."], Some(&index))?;
        let prefix = self.git(&["rev-parse", "--show-prefix"], None)?;
        let prefix = prefix.trim();
        let tree = if prefix.is_empty() {
            self.git(&["write-tree"], Some(&index))?
        } else {
            self.git(&["write-tree", &format!("--prefix={prefix}")], Some(&index))?
        };
        Ok(tree.trim().to_owned())
    }

    /// Writes the files of `tree` into `into`, which must not exist or be empty.
    pub fn materialize(&self, tree: &str, into: &Path) -> Result<(), WorkspaceError> {
        let dir_error = |source| WorkspaceError::Dir {
            dir: into.to_path_buf(),
            source,
        };
        if into.exists() {
            if std::fs::read_dir(into).map_err(dir_error)?.next().is_some() {
                return Err(WorkspaceError::NotEmpty {
                    dir: into.to_path_buf(),
                });
            }
        } else {
            std::fs::create_dir_all(into).map_err(dir_error)?;
        }
        let into = into.canonicalize().map_err(dir_error)?;
        let index = TempIndex::new();
        self.git(&["read-tree", tree], Some(&index))?;
        let prefix = format!("--prefix={}/", into.display());
        self.git(&["checkout-index", "-a", "-f", &prefix], Some(&index))?;
        Ok(())
    }

    /// The file changes from tree `a` to tree `b`: `(status letter, path)` pairs, as `git
    /// diff --name-status` gives them.
    pub fn changes(&self, a: &str, b: &str) -> Result<Vec<(String, String)>, WorkspaceError> {
        let out = self.git(&["diff", "--name-status", "--no-renames", a, b], None)?;
        Ok(out
            .lines()
            .filter_map(|line| {
                let (status, path) = line.split_once('\t')?;
                Some((status.to_owned(), path.to_owned()))
            })
            .collect())
    }

    /// `git diff --stat` from tree `a` to tree `b`.
    pub fn stat(&self, a: &str, b: &str) -> Result<String, WorkspaceError> {
        self.git(&["diff", "--stat", a, b], None)
    }
}

/// The id of git's empty tree for the repository's hash (what a diff from "no checkpoint yet"
/// starts from).
pub fn empty_tree(ws: &Workspace) -> Result<String, WorkspaceError> {
    let index = TempIndex::new();
    Ok(ws.git(&["write-tree"], Some(&index))?.trim().to_owned())
}
