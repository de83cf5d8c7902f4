//! The working directory a cast's tools act in, and the rule that keeps paths inside it.

use std::path::{Component, Path, PathBuf};

use super::ToolError;

/// A canonical directory every tool path resolves in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Workdir {
    root: PathBuf,
}

/// Why a working directory cannot be used.
#[derive(Debug, thiserror::Error)]
#[error("working directory {path}: {source}")]
pub struct WorkdirError {
    /// The directory as given (`--workdir`), before canonicalizing.
    pub path: PathBuf,
    /// The operating system's error.
    #[source]
    pub source: std::io::Error,
}

impl Workdir {
    /// Opens `path` (it must exist and be a directory).
    pub fn open(path: &Path) -> Result<Workdir, WorkdirError> {
        let wrap = |source| WorkdirError {
            path: path.to_owned(),
            source,
        };
        let root = path.canonicalize().map_err(wrap)?;
        if !root.is_dir() {
            return Err(wrap(std::io::Error::other("not a directory")));
        }
        Ok(Workdir { root })
    }

    /// The directory canonicalized when opened; tools are confined to it.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Resolves a relative `path` inside the directory. Absolute paths and `..` are refused;
    /// so is a path whose existing part leads, through a symlink, outside the directory.
    pub fn resolve(&self, path: &str) -> Result<PathBuf, ToolError> {
        let relative = Path::new(path);
        let mut joined = self.root.clone();
        for component in relative.components() {
            match component {
                Component::Normal(part) => joined.push(part),
                Component::CurDir => {}
                Component::ParentDir => {
                    return Err(ToolError::ParentDir {
                        path: path.to_owned(),
                    });
                }
                Component::RootDir | Component::Prefix(_) => {
                    return Err(ToolError::Absolute {
                        path: path.to_owned(),
                    });
                }
            }
        }
        // The longest existing prefix, canonicalized, must stay inside (symlinks followed).
        let mut existing = joined.as_path();
        let mut rest = Vec::new();
        loop {
            if existing.symlink_metadata().is_ok() {
                break;
            }
            match (existing.parent(), existing.file_name()) {
                (Some(parent), Some(name)) => {
                    rest.push(name.to_owned());
                    existing = parent;
                }
                _ => break,
            }
        }
        let canonical = existing
            .canonicalize()
            .map_err(|source| ToolError::Unresolvable {
                path: path.to_owned(),
                source,
            })?;
        if !canonical.starts_with(&self.root) {
            return Err(ToolError::Outside {
                path: path.to_owned(),
            });
        }
        let mut resolved = canonical;
        resolved.extend(rest.iter().rev());
        Ok(resolved)
    }

    /// `path` relative to the directory, for results.
    pub fn show(&self, path: &Path) -> String {
        path.strip_prefix(&self.root)
            .unwrap_or(path)
            .to_string_lossy()
            .into_owned()
    }
}
