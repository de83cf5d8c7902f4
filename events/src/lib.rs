//! castlog's immutable, hash-chained event log.
//!
//! # Layout
//! - [`chain`]: the hash recipe (written out in prose, pinned by golden hashes).
//! - [`record`]: the `Recorded` envelope and the `Pending` event before it is sealed.
//! - [`decoder`]: `Decoder`, reading a cast's records in order with the earlier replies later
//!   events name instead of repeating.
//! - [`log`]: the `EventLog` seam and its error enum.
//! - [`stream`]: `StreamKind`, what a chain is (cast, claims ledger, engagement), kept as data.
//! - [`memory`]: `InMemoryLog`, the reference implementation.
//! - [`sqlite`]: `SqliteLog`, the durable default (WAL, one writer connection, group commit).
//! - [`postgres`]: `PostgresLog`, the log on a PostgreSQL database many machines share.
//! - [`database`]: `Database`, whichever of the two a `--db` value names.
//! - [`queue`]: the run queue (`RunQueue`, `InMemoryQueue`): casts taken by workers under
//!   leases whose epoch fences their appends.
//! - [`chunk`]: content-defined chunking, how `SqliteLog` stores large blobs once per piece.
//! - [`seal`]: the one seal of the caches kept beside the log (state snapshots, projection
//!   checkpoints), its recipe in prose.
//! - [`verify`]: chain verification that names the exact cast and seq of every problem.
//! - [`anchor`]: heads kept outside the database, so a truncated or rewritten log is caught.
//! - [`codec`]: export and import of a cast as JSONL (readable) or bincode (compact).
//!
//! # Example
//! ```
//! use castlog_core::event::{CastAborted, Event};
//! use castlog_core::id::{CastId, Seq};
//! use castlog_events::{EventLog, InMemoryLog, Pending};
//!
//! let log = InMemoryLog::new();
//! let cast = CastId::new("demo");
//! let event = Event::from(CastAborted { reason: "by hand".into() });
//! let sealed = log.append(&cast, Seq(1), &[Pending::new(0, &event)]).unwrap();
//! assert_eq!(sealed[0].event().unwrap(), event);
//! assert_eq!(log.head(&cast).unwrap().unwrap().hash, sealed[0].hash);
//! ```
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod anchor;
pub mod chain;
pub mod chunk;
pub mod codec;
pub mod database;
pub mod decoder;
pub mod deliveries;
pub mod log;
pub mod memory;
pub mod postgres;
pub mod queue;
pub mod record;
pub mod seal;
pub mod sqlite;
pub mod stream;
pub mod verify;

pub use self::postgres::PostgresLog;
pub use database::Database;
pub use decoder::Decoder;
pub use log::{Appending, CastHead, EventLog, ForkPoint, LogError, Snapshot};
pub use memory::InMemoryLog;
pub use queue::{Lease, LeasedLog, QueueEntry, QueueState, RunQueue, WorkerId};
pub use record::{Pending, Recorded};
pub use sqlite::{Durability, SqliteLog};
pub use stream::StreamKind;
