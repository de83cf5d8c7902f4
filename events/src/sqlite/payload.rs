//! How an event payload goes to its row and comes back: split, its long text kept in the
//! chunk store (`split.rs`, schema v11); written in shorthand and packed when long (`pack.rs`,
//! `shorthand.rs`, schema v11; a plain zstd frame in v10); or as given. A stored payload says
//! which by its first byte: `01` split, `03` shorthand, `04` packed shorthand, `28` (a zstd
//! frame) packed, anything else (JSON) as given. Every form reads back to the appended bytes.

use std::borrow::Cow;

use rusqlite::{Connection, OptionalExtension};

use super::blobs::{BlobStore, PreparedChunk, cut_chunks};
use super::{pack, split};
use crate::log::LogError;

/// A payload's stored form, worked out before its write (on the packer's thread for a held
/// append, see [`pack::Packer`]), so that the writer only stores what is new.
#[derive(Debug)]
pub(super) enum Prepared {
    /// Stored as it is.
    AsGiven,
    /// Stored as these bytes (packed).
    Packed(Vec<u8>),
    /// Stored split: the text's chunks, cut, hashed and packed, go to the chunk store.
    Split {
        at: usize,
        text: String,
        chunks: Vec<PreparedChunk>,
        /// The rest of the payload as stored (packed when that pays).
        rest: Vec<u8>,
    },
}

/// The stored form of `payload`, an event of cast `cast`.
pub(super) fn prepare(payload: &[u8], cast: &str) -> Prepared {
    if let Some(split::Split { at, text, rest }) = split::split(payload) {
        let chunks = cut_chunks(text.as_bytes(), true);
        let rest = pack::payload_to_store(&rest, cast).into_owned();
        return Prepared::Split {
            at,
            text,
            chunks,
            rest,
        };
    }
    match pack::payload_to_store(payload, cast) {
        Cow::Owned(packed) => Prepared::Packed(packed),
        Cow::Borrowed(_) => Prepared::AsGiven,
    }
}

/// The stored forms of a batch's payloads.
pub(super) type PreparedPayloads = Vec<Prepared>;

/// The stored forms of `payloads` of cast `cast`, by [`prepare`].
pub(super) fn prepare_all(payloads: &[Vec<u8>], cast: &str) -> PreparedPayloads {
    payloads.iter().map(|p| prepare(p, cast)).collect()
}

/// The bytes of `payload`'s row, as `prepared` (by [`prepare`] for these bytes), storing a
/// split text's new chunks through `store`.
pub(super) fn to_row<'p>(
    conn: &Connection,
    store: &mut BlobStore,
    payload: &'p [u8],
    prepared: Prepared,
) -> Result<Cow<'p, [u8]>, LogError> {
    match prepared {
        Prepared::AsGiven => Ok(Cow::Borrowed(payload)),
        Prepared::Packed(packed) => Ok(Cow::Owned(packed)),
        Prepared::Split {
            at,
            text,
            chunks,
            rest,
        } => {
            let ids = store.put_chunks(conn, text.as_bytes(), Some(&chunks))?;
            Ok(Cow::Owned(split::stored(at, &ids, &rest)))
        }
    }
}

/// The payload a row of cast `cast` holds in its bytes `stored`, or what is wrong with them.
pub(super) fn from_row(conn: &Connection, stored: &[u8], cast: &str) -> Result<Vec<u8>, String> {
    if split::is_split(stored) {
        let but = |why: String| format!("is split, but {why}");
        let (at, ids, rest) = split::parts(stored).map_err(but)?;
        let rest = pack::payload_from_store(rest, cast)
            .map_err(|why| but(format!("the rest of it {why}")))?;
        let mut text = Vec::new();
        read_chunks(conn, &ids, "packed", &mut text)
            .map_err(|e| but(format!("its text cannot be read: {e}")))?
            .map_err(|why| but(format!("its text's {why}")))?;
        return split::join(at, &text, &rest).map_err(but);
    }
    pack::payload_from_store(stored, cast).map(Cow::into_owned)
}

/// Appends the bytes of the chunk rows `ids`, in order, to `out`; `packed_sql` reads a
/// chunk's `packed` column ([`pack::packed_column`]). The inner error is damage, naming the
/// chunk; the outer one SQLite's.
pub(super) fn read_chunks(
    conn: &Connection,
    ids: &[i64],
    packed_sql: &str,
    out: &mut Vec<u8>,
) -> rusqlite::Result<Result<(), String>> {
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT bytes, {packed_sql} FROM chunks WHERE id = ?1"
    ))?;
    for (i, &id) in ids.iter().enumerate() {
        // An unpacked chunk is appended straight from the row, without a copy of its own.
        let found = stmt
            .query_row([id], |r| {
                let stored = r.get_ref(0)?.as_blob()?;
                Ok(pack::value_from_store(stored, r.get(1)?)
                    .map(|bytes| out.extend_from_slice(&bytes)))
            })
            .optional()?;
        match found {
            None => return Ok(Err(format!("chunk {i} (row {id}) is missing"))),
            Some(Err(why)) => return Ok(Err(format!("chunk {i} (row {id}): {why}"))),
            Some(Ok(())) => {}
        }
    }
    Ok(Ok(()))
}
