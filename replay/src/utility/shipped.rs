//! pi-materia's own shipped scripts, run from a pi-materia install where castlog has no
//! built-in for one (`Exec::Shipped`).
//!
//! The install is the directory given with `--pi-materia DIR` (or `PI_MATERIA_HOME`): pi-materia's
//! package root, whose `config/utilities/NAME` holds the scripts (`utilities/NAME` and `NAME`
//! directly in DIR are looked at too, for a profile directory or a folder of scripts). A script
//! runs as `RUNTIME PATH` (`script.runtime`, default `node`) in the socket's directory with the
//! same JSON line on stdin as a `command`, and its stdout is read the same way.
//!
//! When a cast starts, [`resolve`] finds every shipped script its loadout runs and writes the
//! content hash of the script's bytes (castlog's blob hash) into the loadout, which `cast_started` freezes: the log
//! records which script the cast runs. Before each run, [`ready`] hashes the file again, and a
//! different script (edited, or another pi-materia version on this machine or a worker's) is
//! refused with nothing recorded, so one cast never mixes two versions of a script. The
//! pull-request scripts (`*-pr.mjs`) are never run this way: they act outside, and castlog sends
//! nothing outward but through its claim ledger.

use std::path::{Path, PathBuf};

use castlog_core::id::SocketId;
use castlog_core::loadout::{Exec, Loadout, SocketKind, UtilitySpec};

use crate::process::{self, Launcher};

/// Why a shipped script cannot run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ShippedError {
    /// No pi-materia install was given.
    #[error(
        "socket {socket} runs pi-materia's shipped script '{name}', which castlog has no built-in for: point --pi-materia DIR (or PI_MATERIA_HOME) at a pi-materia install to run it with its runtime, or give the materia a `command` instead"
    )]
    NoInstall {
        /// The socket that runs it.
        socket: SocketId,
        /// The script's name.
        name: String,
    },
    /// The install has no such script.
    #[error(
        "socket {socket} runs pi-materia's shipped script '{name}', which is not in the pi-materia install {home} (looked for {tried}); point --pi-materia at pi-materia's package directory, the one holding config/utilities"
    )]
    NotFound {
        /// The socket that runs it.
        socket: SocketId,
        /// The script's name.
        name: String,
        /// The install.
        home: PathBuf,
        /// The paths looked at.
        tried: String,
    },
    /// The runtime is not installed.
    #[error(
        "socket {socket} runs pi-materia's shipped script '{name}' with `{runtime}`, and {runtime} is not found on PATH: install {runtime}, or give the materia a `command` instead"
    )]
    NoRuntime {
        /// The socket that runs it.
        socket: SocketId,
        /// The script's name.
        name: String,
        /// The program that runs it.
        runtime: String,
    },
    /// The script cannot be read.
    #[error("pi-materia's shipped script {path} cannot be read: {reason}")]
    Unreadable {
        /// The script's path.
        path: PathBuf,
        /// What failed.
        reason: String,
    },
    /// The script is not the one the cast started with.
    #[error(
        "pi-materia's shipped script '{name}' at {path} is not the one this cast started with (hash {recorded}, now {now}), and nothing was run or recorded: a cast runs one version of a script from start to end; put that version back (or point --pi-materia at the install it came from), or recast from before the script's first socket"
    )]
    Changed {
        /// The script's name.
        name: String,
        /// Where it is now.
        path: PathBuf,
        /// The hash the cast recorded (its first 16 hex digits).
        recorded: String,
        /// The hash of the file now (its first 16 hex digits).
        now: String,
    },
}

/// Where a script `name` of the install `home` may be, in the order looked at.
fn candidates(home: &Path, name: &str) -> [PathBuf; 3] {
    [
        home.join("config").join("utilities").join(name),
        home.join("utilities").join(name),
        home.join(name),
    ]
}

/// The script's path in the launcher's install, and its content hash (hex; a blob hash).
fn find(
    socket: &SocketId,
    name: &str,
    runtime: &str,
    launcher: &Launcher,
) -> Result<(PathBuf, String), ShippedError> {
    let Some(home) = launcher.shipped_scripts() else {
        return Err(ShippedError::NoInstall {
            socket: socket.clone(),
            name: name.to_owned(),
        });
    };
    let tried = candidates(home, name);
    let Some(path) = tried.iter().find(|p| p.is_file()) else {
        return Err(ShippedError::NotFound {
            socket: socket.clone(),
            name: name.to_owned(),
            home: home.to_path_buf(),
            tried: tried
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", "),
        });
    };
    if process::locate(runtime, Path::new("/")).is_err() {
        return Err(ShippedError::NoRuntime {
            socket: socket.clone(),
            name: name.to_owned(),
            runtime: runtime.to_owned(),
        });
    }
    let bytes = std::fs::read(path).map_err(|e| ShippedError::Unreadable {
        path: path.clone(),
        reason: e.to_string(),
    })?;
    Ok((
        path.clone(),
        castlog_events::chain::blob_hash(&bytes).to_hex(),
    ))
}

/// Before a cast of `loadout` starts: finds every shipped script it runs in the launcher's
/// install and records each one's hash in the loadout (which the cast then freezes).
pub fn resolve(loadout: &mut Loadout, launcher: &Launcher) -> Result<(), ShippedError> {
    for (id, socket) in &mut loadout.sockets {
        let SocketKind::Utility(spec) = &mut socket.kind else {
            continue;
        };
        if let Exec::Shipped {
            name,
            runtime,
            hash,
        } = &mut spec.exec
        {
            let (_, found) = find(id, name, runtime, launcher)?;
            *hash = Some(found);
        }
    }
    Ok(())
}

/// Before a shipped script runs: the argv that runs it, after checking that the file is the
/// one the cast recorded. `None` for any other utility.
pub fn ready(
    socket: &SocketId,
    spec: &UtilitySpec,
    launcher: &Launcher,
) -> Result<Option<Vec<String>>, ShippedError> {
    let Exec::Shipped {
        name,
        runtime,
        hash,
    } = &spec.exec
    else {
        return Ok(None);
    };
    let (path, now) = find(socket, name, runtime, launcher)?;
    if let Some(recorded) = hash
        && *recorded != now
    {
        return Err(ShippedError::Changed {
            name: name.clone(),
            path,
            recorded: recorded.get(..16).unwrap_or(recorded).to_owned(),
            now: now.get(..16).unwrap_or(&now).to_owned(),
        });
    }
    Ok(Some(vec![runtime.clone(), path.display().to_string()]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_package_layout_is_looked_at_first() {
        let home = Path::new("/opt/pi-materia");
        let [first, second, third] = candidates(home, "scan.mjs");
        assert_eq!(
            first,
            Path::new("/opt/pi-materia/config/utilities/scan.mjs")
        );
        assert_eq!(second, Path::new("/opt/pi-materia/utilities/scan.mjs"));
        assert_eq!(third, Path::new("/opt/pi-materia/scan.mjs"));
    }
}
