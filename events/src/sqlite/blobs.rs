//! Content-addressed blobs in SQLite: how they are stored, deduped, indexed and read back.
//!
//! # Layout (schema v5)
//! - `blobs(id, hash, bytes, chunked)`: one row per distinct content. A blob smaller than
//!   [`chunk::CHUNKED_FROM`] keeps its bytes (`chunked = 0`); a larger one is cut into
//!   content-defined chunks (`chunk.rs`) and its row lists the chunks' row ids, in order
//!   (`chunked` 1 or 2 names the list's form, see [`chunk_list`]).
//! - `chunks(id, hash, bytes, packed)`: one row per distinct chunk. No hash index: the writer
//!   dedupes chunks through an in-memory map of those it stored ([`RowIndex`], bounded). From
//!   schema v11 on `hash` is written empty (nothing reads it; a blob is checked whole).
//! - `blob_index(hash, id)`: the address of every blob row at or below `blob_index_upto.upto`.
//!   Rows above `upto` (the *tail*) are not indexed yet: when the tail reaches [`MERGE_AT`]
//!   rows, the commit that reaches it indexes all of them in one sorted insert and moves `upto`
//!   to the last. A hash index written row by row dirties a random page in every commit; in
//!   batches, one page takes many entries at once.
//!
//! # Reading
//! A hash is looked up in `blob_index`, then among the tail, in one statement (one snapshot,
//! so a merge committed meanwhile cannot hide a row).
//!
//! # Writing
//! Inside the writer's transaction a blob is known when the in-memory tail map holds it or
//! `blob_index` does; otherwise it is stored. The tail map is the tail: it is read again
//! whenever another connection has committed since this writer's last transaction (`PRAGMA
//! data_version`), and what a rolled-back command or transaction stored is forgotten. So a
//! content is stored once even with several writers on one file.

use std::collections::HashMap;

use castlog_core::id::Digest;
use rusqlite::{Connection, OptionalExtension, params};

use crate::chain::blob_hash;
use crate::chunk;
use crate::log::LogError;
use crate::sqlite::{chunk_list, map_err, pack, payload};

/// Tail rows that trigger indexing them (about 150 steps of a typical cast).
pub(crate) const MERGE_AT: usize = 512;

/// Row ids by content hash, for rows stored through this writer, with an undo list for the
/// open transaction: a rolled-back command's (or transaction's) rows are gone, so their ids
/// are handed out again and must be forgotten.
#[derive(Debug, Default)]
pub(crate) struct RowIndex {
    /// Every row known, including those stored in the open transaction.
    known: HashMap<Digest, i64>,
    /// The rows stored in the open transaction, in order.
    learnt: Vec<Digest>,
}

impl RowIndex {
    fn get(&self, hash: &Digest) -> Option<i64> {
        self.known.get(hash).copied()
    }

    /// Learns a row stored in the open transaction.
    fn stage(&mut self, hash: Digest, id: i64) {
        self.known.insert(hash, id);
        self.learnt.push(hash);
    }

    fn forget_since(&mut self, mark: usize) {
        for hash in self.learnt.drain(mark..) {
            self.known.remove(&hash);
        }
    }

    fn len(&self) -> usize {
        self.known.len()
    }
}

/// Where a command started storing, to forget what it stored if it is rolled back.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Mark {
    chunks: usize,
    tail: usize,
}

/// The writer's side of blob storage: chunk dedupe, the tail map and the batched index.
#[derive(Debug, Default)]
pub(crate) struct BlobStore {
    chunks: RowIndex,
    /// The blob rows above `upto`, by hash.
    tail: RowIndex,
    upto: i64,
    /// `PRAGMA data_version` when the tail was last known to be current (None: never read).
    seen: Option<i64>,
    /// The `upto` a merge in the open transaction moved to (applied once it is committed).
    merged_to: Option<i64>,
}

impl BlobStore {
    /// Past this many chunks the chunk map starts over, which only costs sharing with older
    /// chunks, never correctness. Another process's chunks are not known here; they are
    /// stored again, once.
    const CHUNK_LIMIT: usize = 1 << 16;

    /// Called at the start of every write transaction: reads the tail again if another
    /// connection has committed since this writer last looked.
    pub(crate) fn begin(&mut self, conn: &Connection) -> Result<(), LogError> {
        let read = |e: rusqlite::Error| map_err("reading the blob index", e);
        let version: i64 = conn
            .query_row("PRAGMA data_version", [], |r| r.get(0))
            .map_err(read)?;
        if self.seen == Some(version) {
            return Ok(());
        }
        let upto: i64 = conn
            .query_row("SELECT upto FROM blob_index_upto", [], |r| r.get(0))
            .map_err(read)?;
        let mut stmt = conn
            .prepare_cached("SELECT hash, id FROM blobs WHERE id > ?1")
            .map_err(read)?;
        let rows = stmt
            .query_map([upto], |r| {
                Ok((r.get::<_, Vec<u8>>(0)?, r.get::<_, i64>(1)?))
            })
            .map_err(read)?;
        let mut tail = HashMap::new();
        for row in rows {
            let (hash, id) = row.map_err(read)?;
            // A malformed hash cannot be asked for; it is named by `verify`, not here.
            if let Ok(hash) = <[u8; 32]>::try_from(hash.as_slice()) {
                tail.insert(Digest(hash), id);
            }
        }
        self.tail = RowIndex {
            known: tail,
            learnt: Vec::new(),
        };
        self.upto = upto;
        self.seen = Some(version);
        Ok(())
    }

    pub(crate) fn mark(&self) -> Mark {
        Mark {
            chunks: self.chunks.learnt.len(),
            tail: self.tail.learnt.len(),
        }
    }

    /// Forgets what was stored since `mark` (that command's savepoint was rolled back).
    pub(crate) fn forget_since(&mut self, mark: Mark) {
        self.chunks.forget_since(mark.chunks);
        self.tail.forget_since(mark.tail);
    }

    /// Stores `bytes` once and returns its address.
    pub(crate) fn put(&mut self, conn: &Connection, bytes: &[u8]) -> Result<Digest, LogError> {
        self.put_prepared(conn, bytes, None)
    }

    /// Stores `bytes` once and returns its address, with its address and chunks as `prepared`
    /// worked them out when given (by [`prepare`], for the same bytes).
    pub(crate) fn put_prepared(
        &mut self,
        conn: &Connection,
        bytes: &[u8],
        prepared: Option<&PreparedBlob>,
    ) -> Result<Digest, LogError> {
        let store = |e: rusqlite::Error| map_err("storing a blob", e);
        let hash = prepared.map_or_else(|| blob_hash(bytes), |p| p.hash);
        if self.tail.get(&hash).is_some() {
            return Ok(hash);
        }
        let indexed = conn
            .prepare_cached("SELECT 1 FROM blob_index WHERE hash = ?1")
            .and_then(|mut stmt| stmt.exists([hash.0.as_slice()]))
            .map_err(store)?;
        if indexed {
            return Ok(hash);
        }
        if bytes.len() < chunk::CHUNKED_FROM {
            conn.prepare_cached("INSERT INTO blobs (hash, bytes) VALUES (?1, ?2)")
                .and_then(|mut stmt| stmt.execute(params![hash.0.as_slice(), bytes]))
                .map_err(store)?;
        } else {
            let list = self.put_chunks(conn, bytes, prepared.map(|p| p.chunks.as_slice()))?;
            conn.prepare_cached("INSERT INTO blobs (hash, bytes, chunked) VALUES (?1, ?2, ?3)")
                .and_then(|mut stmt| {
                    stmt.execute(params![
                        hash.0.as_slice(),
                        chunk_list::encode(&list),
                        chunk_list::DELTAS
                    ])
                })
                .map_err(store)?;
        }
        self.tail.stage(hash, conn.last_insert_rowid());
        Ok(hash)
    }

    /// Stores the chunks of `bytes` not stored yet (as `prepared` cut, hashed and packed them,
    /// when given); returns the row ids of its chunks, in order.
    pub(super) fn put_chunks(
        &mut self,
        conn: &Connection,
        bytes: &[u8],
        prepared: Option<&[PreparedChunk]>,
    ) -> Result<Vec<i64>, LogError> {
        let store = |e: rusqlite::Error| map_err("storing a blob", e);
        // A chunk's own hash is not stored (from schema v11): nothing reads it, and the blob
        // that holds the chunk is checked by the hash of its whole content.
        let mut insert = conn
            .prepare_cached("INSERT INTO chunks (hash, bytes, packed) VALUES (X'', ?1, ?2)")
            .map_err(store)?;
        let cut;
        let chunks = match prepared {
            Some(chunks) if chunks.last().is_some_and(|c| c.end == bytes.len()) => chunks,
            _ => {
                cut = cut_chunks(bytes, false);
                cut.as_slice()
            }
        };
        let mut list = Vec::with_capacity(chunks.len());
        let mut start = 0;
        for chunk in chunks {
            let piece = &bytes[start..chunk.end];
            start = chunk.end;
            let id = match self.chunks.get(&chunk.key) {
                Some(id) => id,
                None => {
                    let (stored, packed) = match &chunk.packing {
                        ChunkPacking::Packed(packed) => {
                            (std::borrow::Cow::Borrowed(packed.as_slice()), 1)
                        }
                        ChunkPacking::AsGiven => (std::borrow::Cow::Borrowed(piece), 0),
                        ChunkPacking::AtInsert => pack::value_to_store(piece),
                    };
                    insert
                        .execute(params![stored.as_ref(), packed])
                        .map_err(store)?;
                    let id = conn.last_insert_rowid();
                    self.chunks.stage(chunk.key, id);
                    id
                }
            };
            list.push(id);
        }
        Ok(list)
    }

    /// Called before the commit of a transaction that stored something: indexes the tail once
    /// it is [`MERGE_AT`] rows long. A failure leaves the tail for a later commit (in a
    /// savepoint, so the transaction's own writes are untouched).
    pub(crate) fn before_commit(&mut self, conn: &Connection) {
        if self.tail.len() < MERGE_AT {
            return;
        }
        let merge = || -> rusqlite::Result<i64> {
            conn.prepare_cached(
                "INSERT OR IGNORE INTO blob_index (hash, id)
                 SELECT hash, id FROM blobs WHERE id > ?1 ORDER BY hash",
            )?
            .execute([self.upto])?;
            let last: i64 = conn.query_row(
                "SELECT coalesce(max(id), ?1) FROM blobs",
                [self.upto],
                |r| r.get(0),
            )?;
            conn.execute("UPDATE blob_index_upto SET upto = ?1", [last])?;
            Ok(last)
        };
        if conn.execute_batch("SAVEPOINT merge_blob_index").is_err() {
            return;
        }
        match merge() {
            Ok(last) if conn.execute_batch("RELEASE merge_blob_index").is_ok() => {
                self.merged_to = Some(last);
            }
            _ => {
                let _ =
                    conn.execute_batch("ROLLBACK TO merge_blob_index; RELEASE merge_blob_index");
            }
        }
    }

    /// The transaction committed: what it stored is trusted, and a merge it made applies.
    pub(crate) fn committed(&mut self) {
        self.chunks.learnt.clear();
        self.tail.learnt.clear();
        if self.chunks.len() > Self::CHUNK_LIMIT {
            self.chunks.known.clear();
        }
        if let Some(upto) = self.merged_to.take() {
            self.upto = upto;
            self.tail.known.clear();
        }
    }

    /// The transaction was rolled back: what it stored is gone.
    pub(crate) fn rolled_back(&mut self) {
        self.chunks.forget_since(0);
        self.tail.forget_since(0);
        self.merged_to = None;
    }
}

/// Blobs read lately, kept by address so that a body placed in every prompt (a materia's
/// instructions, the output contract, the task) is read from its chunks and unpacked once, not
/// once per prompt rebuilt (`verify`, `diff`, an OTLP export, the viewer). An address names its
/// bytes, so what is kept is never stale. It holds at most [`ReadBlobs::BUDGET`] bytes; when a
/// blob would pass that, it starts over, which only costs reading blobs again.
#[derive(Debug, Default)]
pub(crate) struct ReadBlobs {
    kept: HashMap<Digest, Vec<u8>>,
    bytes: usize,
}

impl ReadBlobs {
    /// The most bytes kept.
    const BUDGET: usize = 8 << 20;

    pub(crate) fn get(&self, hash: &Digest) -> Option<Vec<u8>> {
        self.kept.get(hash).cloned()
    }

    pub(crate) fn keep(&mut self, hash: Digest, bytes: &[u8]) {
        if bytes.len() > Self::BUDGET / 8 {
            return;
        }
        if self.bytes + bytes.len() > Self::BUDGET {
            self.kept.clear();
            self.bytes = 0;
        }
        if self.kept.insert(hash, bytes.to_vec()).is_none() {
            self.bytes += bytes.len();
        }
    }
}

/// A blob's address and chunks, worked out before it is written (on the packer's thread, see
/// [`pack::Packer`]) so that the writer only looks them up and inserts them.
#[derive(Debug)]
pub(crate) struct PreparedBlob {
    hash: Digest,
    /// Empty for a blob stored whole (shorter than [`chunk::CHUNKED_FROM`]).
    chunks: Vec<PreparedChunk>,
}

/// One chunk of a prepared blob: its address, where it ends in the blob, and how it is stored.
#[derive(Debug)]
pub(crate) struct PreparedChunk {
    key: Digest,
    end: usize,
    packing: ChunkPacking,
}

/// How a prepared chunk is stored, should it be new.
#[derive(Debug)]
enum ChunkPacking {
    /// As these packed bytes.
    Packed(Vec<u8>),
    /// As it is (packing would not make it shorter, or packing is off).
    AsGiven,
    /// Packed where it is inserted: it was not packed beforehand, most likely because this
    /// thread packed it lately, so it is stored already and only its row id is needed.
    AtInsert,
}

/// Past this many chunk addresses, the memory of chunks packed lately starts over.
const RECENT_LIMIT: usize = 1 << 16;

thread_local! {
    /// The addresses of the chunks this thread packed lately: a chunk that is one of them is
    /// almost surely stored already (a reply's text and every entry body that quotes it share
    /// chunks), so packing it again would be thrown away.
    static PACKED_LATELY: std::cell::RefCell<std::collections::HashSet<Digest>> =
        std::cell::RefCell::new(std::collections::HashSet::new());
}

/// `bytes`'s address, and its chunks cut, hashed and packed.
pub(crate) fn prepare(bytes: &[u8]) -> PreparedBlob {
    PreparedBlob {
        hash: blob_hash(bytes),
        chunks: if bytes.len() < chunk::CHUNKED_FROM {
            Vec::new()
        } else {
            cut_chunks(bytes, true)
        },
    }
}

/// The chunks of `bytes`, packed when `packed` unless this thread packed them lately (else
/// packing is left to their insert).
pub(super) fn cut_chunks(bytes: &[u8], packed: bool) -> Vec<PreparedChunk> {
    let mut end = 0;
    chunk::split(bytes)
        .into_iter()
        .map(|piece| {
            end += piece.len();
            let key = blob_hash(piece);
            let packing = if !packed || !PACKED_LATELY.with(|lately| remember(lately, key)) {
                ChunkPacking::AtInsert
            } else {
                match pack::pack(piece) {
                    Some(bytes) => ChunkPacking::Packed(bytes),
                    None => ChunkPacking::AsGiven,
                }
            };
            PreparedChunk { key, end, packing }
        })
        .collect()
}

/// A blob's bytes, reassembled from its chunks when it was stored chunked; `packed_sql` reads
/// a chunk's `packed` column ([`pack::packed_column`]).
pub(crate) fn read_blob(
    conn: &Connection,
    hash: &Digest,
    packed_sql: &str,
) -> Result<Option<Vec<u8>>, LogError> {
    let read = |e: rusqlite::Error| map_err("reading a blob", e);
    let row: Option<(Vec<u8>, i64)> = conn
        .prepare_cached(
            "SELECT bytes, chunked FROM blobs
                 WHERE id = (SELECT id FROM blob_index WHERE hash = ?1)
             UNION ALL
             SELECT bytes, chunked FROM blobs
                 WHERE id > (SELECT upto FROM blob_index_upto) AND hash = ?1
             LIMIT 1",
        )
        .and_then(|mut stmt| {
            stmt.query_row([hash.0.as_slice()], |r| Ok((r.get(0)?, r.get(1)?)))
                .optional()
        })
        .map_err(read)?;
    let Some((bytes, chunked)) = row else {
        return Ok(None);
    };
    if chunked == 0 {
        return Ok(Some(bytes));
    }
    let damaged = |message: String| LogError::Corrupt {
        context: format!("reading blob {}", hash.short()),
        message,
        source: None,
    };
    let ids = chunk_list::decode(chunked, &bytes).map_err(damaged)?;
    let mut out = Vec::new();
    payload::read_chunks(conn, &ids, packed_sql, &mut out)
        .map_err(read)?
        .map_err(|why| damaged(format!("its {why}")))?;
    Ok(Some(out))
}

/// Notes that this thread packs the chunk `key`; false when it did so lately.
fn remember(lately: &std::cell::RefCell<std::collections::HashSet<Digest>>, key: Digest) -> bool {
    let mut lately = lately.borrow_mut();
    if lately.len() >= RECENT_LIMIT {
        lately.clear();
    }
    lately.insert(key)
}
