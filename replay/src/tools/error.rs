//! Why a tool call produced no result: the error an agent is shown as the call's outcome
//! (`Outcome::error`, its `Display` word for word), with the operating system's or the
//! decoder's error kept as its source.

use crate::process::SpawnError;

/// Why one tool call failed. None of these stops a cast: [`super::run`] turns each into an
/// error result for the agent.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ToolError {
    /// The call names none of the seven tools.
    #[error("unknown tool {tool:?}; the tools are {:?}", super::ALL)]
    UnknownTool {
        /// The tool's name as the agent gave it.
        tool: String,
    },
    /// The materia's scope does not offer the tool.
    #[error("tool {tool:?} is not allowed for this step; allowed: {allowed:?}")]
    NotAllowed {
        /// The tool's name as the agent gave it.
        tool: String,
        /// The tools the scope offers, in `ALL` order.
        allowed: Vec<&'static str>,
    },
    /// The arguments came as a string that does not parse as JSON.
    #[error("arguments are not JSON: {source}")]
    ArgumentsNotJson {
        /// The decoder's error.
        #[source]
        source: serde_json::Error,
    },
    /// A string argument the tool needs is absent (or not a string).
    #[error("argument {name:?} (a string) is missing")]
    MissingArgument {
        /// The argument's name (`path`, `oldText`, ...).
        name: String,
    },
    /// `edits` is given but is not a list.
    #[error("argument \"edits\" must be a list of {{oldText, newText}}")]
    EditsNotAList,
    /// `edits` is an empty list.
    #[error("no edits given")]
    NoEdits,
    /// An edit replaces nothing.
    #[error("edit {edit}: oldText is empty")]
    EmptyOldText {
        /// The edit's 1-based place in the list.
        edit: usize,
    },
    /// An edit's `oldText` is not in the file.
    #[error("edit {edit}: oldText not found in {path}")]
    OldTextNotFound {
        /// The edit's 1-based place in the list.
        edit: usize,
        /// The file as the agent named it.
        path: String,
    },
    /// An edit's `oldText` is in the file more than once.
    #[error("edit {edit}: oldText occurs more than once in {path}; give more context")]
    OldTextRepeated {
        /// The edit's 1-based place in the list.
        edit: usize,
        /// The file as the agent named it.
        path: String,
    },
    /// Two edits touch the same text.
    #[error("edits {first} and {second} overlap")]
    Overlap {
        /// The 1-based place of the edit whose span starts first.
        first: usize,
        /// The 1-based place of the edit that starts inside it.
        second: usize,
    },
    /// A path with a `..` component.
    #[error("path {path:?} uses `..`; paths stay inside the working directory")]
    ParentDir {
        /// The path as the agent gave it.
        path: String,
    },
    /// An absolute path.
    #[error("path {path:?} is absolute; give a path relative to the working directory")]
    Absolute {
        /// The path as the agent gave it.
        path: String,
    },
    /// The existing part of a path cannot be canonicalized.
    #[error("path {path:?}: {source}")]
    Unresolvable {
        /// The path as the agent gave it.
        path: String,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// A path that a symlink leads out of the working directory.
    #[error("path {path:?} leads outside the working directory through a symlink")]
    Outside {
        /// The path as the agent gave it.
        path: String,
    },
    /// A file cannot be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file as the agent named it (`read`: resolved, relative to the working directory).
        path: String,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// A file cannot be written.
    #[error("cannot write {path}: {source}")]
    Write {
        /// The file as the agent named it.
        path: String,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// The directories of a file to write cannot be created.
    #[error("cannot create {path}'s directory: {source}")]
    CreateDir {
        /// The file as the agent named it.
        path: String,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// A directory cannot be listed.
    #[error("cannot list {path}: {source}")]
    List {
        /// The directory, relative to the working directory.
        path: String,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// `bash` could not be started.
    #[error(transparent)]
    Spawn(#[from] SpawnError),
}
