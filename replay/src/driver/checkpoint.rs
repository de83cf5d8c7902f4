//! Workspace checkpoints: after every step that completes a socket visit, the driver records
//! the working directory's files as a git tree (`workspace_checkpointed`, see
//! [`crate::workspace`]). A cast has a workspace when it names a working directory (`run
//! --workdir`) or its materia are offered tools; a cast with neither touches no files of its
//! own and is not checkpointed. Outside a git repository nothing is recorded; for a working
//! directory the cast names, the driver says so once on stderr. A checkpoint git cannot make
//! is only logged.

use castlog_core::event::Event;
use castlog_core::input::Input;
use castlog_events::EventLog;

use super::{DriveError, Driver};
use crate::workspace::Workspace;

/// Whether the cast's working directory can be checkpointed, found out at the first
/// completion.
#[derive(Debug, Clone, Default)]
pub(super) enum Checkpoints {
    /// Not looked at yet.
    #[default]
    Unknown,
    /// A git repository: checkpoints are made.
    Git(Workspace),
    /// Not a repository (said once).
    Off,
}

impl<L: EventLog + ?Sized> Driver<'_, L> {
    /// Records the checkpoint of a cast's start: the files before its entry socket runs.
    pub(super) fn checkpoint_start(&mut self) -> Result<(), DriveError> {
        let Some(current) = &self.state.current else {
            return Ok(());
        };
        let at = vec![(current.socket.clone(), current.visit)];
        self.checkpoint(at, true, false)
    }

    /// Records a checkpoint after each socket completion among `events`.
    pub(super) fn checkpoint_after(
        &mut self,
        events: &[Event],
        begin: bool,
    ) -> Result<(), DriveError> {
        let completed: Vec<_> = events
            .iter()
            .filter_map(|e| match e {
                Event::SocketCompleted(c) => Some((c.socket.clone(), c.visit)),
                _ => None,
            })
            .collect();
        if completed.is_empty() {
            return Ok(());
        }
        self.checkpoint(completed, false, begin)
    }

    fn checkpoint(
        &mut self,
        at: Vec<(castlog_core::id::SocketId, castlog_core::id::Visit)>,
        start: bool,
        begin: bool,
    ) -> Result<(), DriveError> {
        if matches!(self.checkpoints, Checkpoints::Unknown)
            && self.state.workdir.is_none()
            && self.state.tool_scopes.is_empty()
        {
            self.checkpoints = Checkpoints::Off;
        }
        if matches!(self.checkpoints, Checkpoints::Unknown) {
            let dir = self
                .state
                .workdir
                .as_deref()
                .map_or_else(|| self.cwd.clone(), std::path::PathBuf::from);
            self.checkpoints = match Workspace::find(&dir) {
                Some(ws) => Checkpoints::Git(ws),
                // Said only for a working directory the cast names (`--workdir`): a cast in the
                // current directory outside git is not checkpointed, quietly.
                None if self.state.workdir.is_none() => Checkpoints::Off,
                None => {
                    tracing::warn!(
                        "{} is not in a git repository: cannot checkpoint its files (recast --workdir and diff --files need checkpoints)",
                        dir.display()
                    );
                    Checkpoints::Off
                }
            };
        }
        let Checkpoints::Git(ws) = &self.checkpoints else {
            return Ok(());
        };
        let tree = match ws.checkpoint() {
            Ok(tree) => tree,
            Err(err) => {
                tracing::warn!(%err, "workspace not checkpointed");
                return Ok(());
            }
        };
        for (socket, visit) in at {
            self.record(
                &Input::CheckpointWorkspace {
                    socket,
                    visit,
                    start,
                    tree: tree.clone(),
                },
                begin,
            )?;
        }
        Ok(())
    }
}
