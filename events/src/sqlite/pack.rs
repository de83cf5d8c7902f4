//! Packing: the large values of a SQLite log are stored compressed with zstd, and read back
//! to the very bytes that were given. Packing is storage only: every hash (an event's chain
//! hash, a blob's or chunk's address, a cache's seal) is of the unpacked bytes, so a packed
//! file and an unpacked one of the same casts hold the same log, export the same lines and
//! verify the same.
//!
//! # What is packed, and how a reader knows
//! - An event's `payload` (its JSON). From schema version 11 it is written in shorthand
//!   (`shorthand.rs`: [`SHORTHAND`], `03`, then the shorthand) and, when that is at least
//!   [`PAYLOAD_PACK_FROM`] bytes, packed ([`PACKED_SHORTHAND`], `04`, then one zstd frame of
//!   it). Version 10 packed a payload of at least 1 kB as a plain frame, which starts with the
//!   bytes `28 b5 2f fd` ([`MAGIC`]); such rows read as they are, and version 11 still writes
//!   one for a long payload with nothing to shorten. JSON text starts with none of these (nor
//!   with `01`, the split form of `split.rs`), so a payload's first byte names its form, and
//!   files written before version 10 (which never pack) read as they are.
//! - A blob's chunk (`chunks.bytes`) and a cache (`checkpoints.bytes`, a state snapshot or a
//!   projection checkpoint) of at least [`PACK_FROM`] bytes: their bytes are arbitrary, so
//!   the row's `packed` column (schema version 10) says it: 1 packed, 0 as given.
//!
//! A value is kept packed only when that makes it shorter; a value that does not compress
//! (random bytes, an image) is stored as given, so packing never costs more than the check.
//! Every frame records the size of what it unpacks to; a frame that does not say it, says more
//! than [`UNPACKED_LIMIT`] or does not unpack to that many bytes is damage, named as such.

use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};

/// The first bytes of a zstd frame, and of a packed event payload.
pub(super) const MAGIC: [u8; 4] = [0x28, 0xb5, 0x2f, 0xfd];

/// Values shorter than this are stored as given: a frame's own header and the compressor's
/// time cost more than the few bytes such a value could save.
pub(super) const PACK_FROM: usize = 256;

/// zstd's level: its fastest positive one, which packs a 2 kB reply of prose to about a third
/// in under 10 µs.
const LEVEL: i32 = 1;

/// The most bytes a frame may say it unpacks to: SQLite's own largest value (1 GB), so no
/// stored frame can ask for more memory than a stored value could take.
pub(super) const UNPACKED_LIMIT: u64 = 1_000_000_000;

/// The first byte of an event payload stored in shorthand (`shorthand.rs`, schema v11 on),
/// which follows it as it is.
pub(super) const SHORTHAND: u8 = 0x03;

/// The first byte of an event payload stored in shorthand and packed (schema v11 on): one
/// zstd frame of the shorthand follows it.
pub(super) const PACKED_SHORTHAND: u8 = 0x04;

/// Event payloads whose (shortened) bytes are shorter than this are not packed: a frame of
/// a few hundred bytes of shorthand saves little, and unpacking it costs every read of the
/// cast zstd's table setup.
pub(super) const PAYLOAD_PACK_FROM: usize = 512;

thread_local! {
    /// One compression context per writing thread, kept between values (making one costs more
    /// than packing a small value).
    static PACKER: RefCell<Option<zstd::bulk::Compressor<'static>>> = const { RefCell::new(None) };
    /// One decompression context per reading thread.
    static UNPACKER: RefCell<Option<zstd::bulk::Decompressor<'static>>> = const { RefCell::new(None) };
}

/// Whether this process packs what it writes (see [`set_packing`]).
static PACKING: AtomicBool = AtomicBool::new(true);

/// Whether this process packs the values it writes from now on (it does unless told not to);
/// reads unpack what is packed either way, so files written both ways mix freely. Turning it
/// off is for measuring what packing saves and costs (`castlog bench synth --no-pack`).
pub fn set_packing(on: bool) {
    PACKING.store(on, Ordering::Relaxed);
}

/// `bytes` packed, when it is at least [`PACK_FROM`] long, packing is on and packing makes
/// it shorter.
pub(super) fn pack(bytes: &[u8]) -> Option<Vec<u8>> {
    if bytes.len() < PACK_FROM || !PACKING.load(Ordering::Relaxed) {
        return None;
    }
    compress(bytes).filter(|packed| packed.len() < bytes.len())
}

/// `bytes` as one zstd frame, however long that is.
pub(super) fn compress(bytes: &[u8]) -> Option<Vec<u8>> {
    PACKER.with(|cell| {
        let mut cell = cell.borrow_mut();
        if cell.is_none() {
            *cell = zstd::bulk::Compressor::new(LEVEL).ok();
        }
        cell.as_mut()?.compress(bytes).ok()
    })
}

/// The bytes a frame unpacks to, or what is wrong with it.
pub(super) fn unpack(frame: &[u8]) -> Result<Vec<u8>, String> {
    let size = match zstd::zstd_safe::get_frame_content_size(frame) {
        Ok(Some(size)) => size,
        Ok(None) => return Err("its packed bytes do not say how long they unpack to".into()),
        Err(_) => return Err("its packed bytes are not a zstd frame".into()),
    };
    if size > UNPACKED_LIMIT {
        return Err(format!(
            "its packed bytes say they unpack to {size} bytes, more than any stored value"
        ));
    }
    let unpacked = UNPACKER.with(|cell| {
        let mut cell = cell.borrow_mut();
        if cell.is_none() {
            *cell = zstd::bulk::Decompressor::new().ok();
        }
        match cell.as_mut() {
            Some(unpacker) => unpacker
                .decompress(frame, size as usize)
                .map_err(|e| format!("its packed bytes do not unpack: {e}")),
            None => Err("no zstd decompression context could be made".into()),
        }
    })?;
    if unpacked.len() as u64 != size {
        return Err(format!(
            "its packed bytes unpack to {} bytes, not the {size} they say",
            unpacked.len()
        ));
    }
    Ok(unpacked)
}

/// An event payload of cast `cast` as stored whole (see `payload.rs` for the split form):
/// written in shorthand when it has something to shorten ([`SHORTHAND`]), and packed when
/// that is at least [`PAYLOAD_PACK_FROM`] long and packing makes it shorter
/// ([`PACKED_SHORTHAND`], or a plain frame when there was nothing to shorten); else as given.
/// A payload that is not JSON yet starts as a stored form does ([`MAGIC`], [`SHORTHAND`],
/// [`PACKED_SHORTHAND`] or the split form's `01`: no event castlog writes; an imported line
/// could hold one) is packed as a plain frame whatever that costs, so that a stored
/// payload's first byte always names its form.
pub(super) fn payload_to_store<'p>(payload: &'p [u8], cast: &str) -> std::borrow::Cow<'p, [u8]> {
    let marked = is_packed_payload(payload)
        || matches!(
            payload.first(),
            Some(&(SHORTHAND | PACKED_SHORTHAND | super::split::SPLIT))
        );
    if marked {
        if let Some(packed) = compress(payload) {
            return std::borrow::Cow::Owned(packed);
        }
        return std::borrow::Cow::Borrowed(payload);
    }
    let packing = PACKING.load(Ordering::Relaxed);
    let short = if packing {
        super::shorthand::shorten(payload, cast)
    } else {
        None
    };
    let whole = short.as_deref().unwrap_or(payload);
    if packing
        && whole.len() >= PAYLOAD_PACK_FROM
        && let Some(frame) = compress(whole).filter(|frame| frame.len() < whole.len())
    {
        return std::borrow::Cow::Owned(match short {
            Some(_) => [&[PACKED_SHORTHAND][..], &frame].concat(),
            None => frame,
        });
    }
    match short {
        Some(short) => std::borrow::Cow::Owned([&[SHORTHAND][..], &short].concat()),
        None => std::borrow::Cow::Borrowed(payload),
    }
}

/// A payload of cast `cast` stored whole, as [`payload_to_store`] stored it, back as it was
/// given.
pub(super) fn payload_from_store<'s>(
    stored: &'s [u8],
    cast: &str,
) -> Result<std::borrow::Cow<'s, [u8]>, String> {
    let read = match stored.first() {
        Some(&SHORTHAND) => super::shorthand::expand(&stored[1..], cast),
        Some(&PACKED_SHORTHAND) => unpack(&stored[1..])
            .map_err(|why| format!("is packed, but {why}"))
            .and_then(|short| super::shorthand::expand(&short, cast)),
        _ if is_packed_payload(stored) => {
            unpack(stored).map_err(|why| format!("is packed, but {why}"))
        }
        _ => return Ok(std::borrow::Cow::Borrowed(stored)),
    };
    read.map(std::borrow::Cow::Owned)
        .map_err(|why| why.replacen("its shorthand", "is in shorthand, but its shorthand", 1))
}

/// The JSON a row's `payload` (of cast `cast`) holds, for a tool that reads a file's rows
/// itself: the payload, or for a split one (`split.rs`) the rest of it, without the text the
/// chunk store keeps.
pub fn stored_payload_json(stored: &[u8], cast: &str) -> Result<Vec<u8>, String> {
    let whole = if super::split::is_split(stored) {
        super::split::parts(stored)?.2
    } else {
        stored
    };
    payload_from_store(whole, cast).map(std::borrow::Cow::into_owned)
}

/// A thread that packs the values of held appends while the appender goes on.
///
/// The writer holds a begun append for a while before it writes it (see `held.rs`); packing
/// its payloads and chunks then, on the appender's thread, would add the compressor's time to
/// every step. The packer is given a copy of them when the append is held and has their
/// stored forms ready by the time it is written, on the machine's other core. Its thread
/// starts with the first job and ends when the packer is dropped. If it cannot be started or
/// has gone, a job's answer is none and its values are packed where they are written, as an
/// ordinary append's are.
#[derive(Debug, Default)]
pub(super) struct Packer {
    jobs: Option<Sender<Job>>,
}

type Job = Box<dyn FnOnce() + Send>;

/// The answer of one job, once the packer has it.
#[derive(Debug)]
pub(super) struct Packing<T>(Option<Receiver<T>>);

impl Packer {
    /// Runs `job` on the packer's thread.
    pub(super) fn submit<T: Send + 'static>(
        &mut self,
        job: impl FnOnce() -> T + Send + 'static,
    ) -> Packing<T> {
        if self.jobs.is_none() {
            self.jobs = Self::start();
        }
        let (reply, answer) = mpsc::channel();
        let job: Job = Box::new(move || {
            // A writer that no longer waits for this has nothing to be told.
            let _ = reply.send(job());
        });
        match &self.jobs {
            Some(jobs) if jobs.send(job).is_ok() => Packing(Some(answer)),
            _ => {
                self.jobs = None;
                Packing(None)
            }
        }
    }

    fn start() -> Option<Sender<Job>> {
        let (jobs, work) = mpsc::channel::<Job>();
        std::thread::Builder::new()
            .name("castlog-packer".into())
            .spawn(move || {
                for job in work {
                    job();
                }
            })
            .ok()?;
        Some(jobs)
    }
}

impl<T> Packing<T> {
    /// The job's answer, or `None` when the packer could not run it.
    pub(super) fn wait(&self) -> Option<T> {
        self.0.as_ref()?.recv().ok()
    }
}

/// Whether a stored event payload is packed (see the module's rule).
pub(super) fn is_packed_payload(stored: &[u8]) -> bool {
    stored.starts_with(&MAGIC)
}

/// A value with a `packed` column as stored: its bytes and that column's value.
pub(super) fn value_to_store(bytes: &[u8]) -> (std::borrow::Cow<'_, [u8]>, i64) {
    match pack(bytes) {
        Some(packed) => (std::borrow::Cow::Owned(packed), 1),
        None => (std::borrow::Cow::Borrowed(bytes), 0),
    }
}

/// A stored value back as it was given, from its bytes and its `packed` column.
pub(super) fn value_from_store(
    stored: &[u8],
    packed: i64,
) -> Result<std::borrow::Cow<'_, [u8]>, String> {
    match packed {
        0 => Ok(std::borrow::Cow::Borrowed(stored)),
        1 => unpack(stored).map(std::borrow::Cow::Owned),
        other => Err(format!("its packed column holds {other}, not 0 or 1")),
    }
}

/// The SQL a read selects a `packed` column with from a file at schema `version`: the column,
/// or for a read-only file older than version 10 (which packs nothing) the constant 0.
pub(super) fn packed_column(version: i64) -> &'static str {
    if version >= PACKED_SINCE {
        "packed"
    } else {
        "0"
    }
}

/// The first schema version with `packed` columns.
pub(super) const PACKED_SINCE: i64 = 10;

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn prose_is_packed_and_unpacks_to_itself() {
        let text = "the build of item 7 passed its eval with a note on the plan ".repeat(40);
        let packed = pack(text.as_bytes()).expect("prose packs");
        assert!(
            packed.len() * 3 < text.len(),
            "{} of {}",
            packed.len(),
            text.len()
        );
        assert!(is_packed_payload(&packed));
        assert_eq!(unpack(&packed).unwrap(), text.as_bytes());
    }

    #[test]
    fn short_and_incompressible_values_are_kept_as_given() {
        assert!(pack(&[b'a'; PACK_FROM - 1]).is_none());
        let mut noise = Vec::with_capacity(4096);
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..4096 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            noise.push(x as u8);
        }
        assert!(pack(&noise).is_none());
        let (stored, packed) = value_to_store(&noise);
        assert_eq!((stored.as_ref(), packed), (noise.as_slice(), 0));
        let odd = [&MAGIC[..], &noise[..]].concat();
        assert_eq!(
            value_to_store(&odd).1,
            0,
            "a chunk's column, not its bytes, says it"
        );
    }

    #[test]
    fn json_never_reads_as_packed() {
        for text in ["{}", "[1]", "\"x\"", "7", "true", "null", " {}"] {
            assert!(!is_packed_payload(text.as_bytes()), "{text}");
        }
    }

    #[test]
    fn a_damaged_frame_is_named_not_unpacked() {
        let text = "reply ".repeat(200);
        let mut packed = pack(text.as_bytes()).unwrap();
        // Cut short.
        let cut = unpack(&packed[..packed.len() / 2]).unwrap_err();
        assert!(cut.contains("do not unpack"), "{cut}");
        // Not a frame at all.
        let foreign = unpack(b"(\xb5/\xfd not a frame").unwrap_err();
        assert!(foreign.contains("packed bytes"), "{foreign}");
        // A body byte flipped: zstd's own checks or the size check name it.
        let last = packed.len() - 3;
        packed[last] ^= 0x55;
        assert!(unpack(&packed).is_err() || unpack(&packed).unwrap() != text.as_bytes());
        assert_eq!(
            value_from_store(b"x", 2).unwrap_err(),
            "its packed column holds 2, not 0 or 1"
        );
    }

    #[test]
    fn small_payloads_are_stored_in_shorthand_and_long_ones_packed() {
        let payload = br#"{"attempt":2,"item":"WI-7","item_label":"greet","materia":"Build","materia_label":"Build","socket":"Socket-2","visit":4}"#;
        let stored = payload_to_store(payload, "cast");
        assert_eq!(stored[0], SHORTHAND);
        assert!(
            stored.len() * 2 < payload.len(),
            "{} of {}",
            stored.len(),
            payload.len()
        );
        assert_eq!(
            payload_from_store(&stored, "cast").unwrap(),
            payload.as_slice()
        );
        let long = format!(
            r#"{{"text":"{}","turn":1}}"#,
            "the plan, and then the build ".repeat(40)
        );
        let stored = payload_to_store(long.as_bytes(), "cast");
        assert_eq!(stored[0], PACKED_SHORTHAND);
        assert!(
            stored.len() * 4 < long.len(),
            "{} of {}",
            stored.len(),
            long.len()
        );
        assert_eq!(
            payload_from_store(&stored, "cast").unwrap(),
            long.as_bytes()
        );
        // Nothing to shorten, too short to pack: as given.
        assert_eq!(payload_to_store(b"{}", "cast").as_ref(), b"{}");
    }

    #[test]
    fn a_tool_reads_every_whole_form_and_a_split_payloads_rest() {
        let payload = br#"{"socket":"Socket-2","text":"","turn":1,"visit":3}"#;
        let rest = payload_to_store(payload, "cast");
        assert_eq!(rest[0], SHORTHAND);
        assert_eq!(stored_payload_json(&rest, "cast").unwrap(), payload);
        let split = super::super::split::stored(28, &[4, 5], &rest);
        assert_eq!(stored_payload_json(&split, "cast").unwrap(), payload);
        assert_eq!(stored_payload_json(b"{}", "cast").unwrap(), b"{}");
    }

    #[test]
    fn a_payload_that_starts_as_a_stored_form_is_always_packed_plainly() {
        for first in [SHORTHAND, PACKED_SHORTHAND, super::super::split::SPLIT] {
            let odd = [&[first][..], b" not JSON"].concat();
            let stored = payload_to_store(&odd, "cast");
            assert!(is_packed_payload(&stored), "{odd:?}");
            assert_eq!(payload_from_store(&stored, "cast").unwrap(), odd.as_slice());
        }
    }

    #[test]
    fn a_payload_that_starts_as_a_frame_is_always_packed() {
        let odd = [&MAGIC[..], b" but no frame"].concat();
        let stored = payload_to_store(&odd, "cast");
        assert!(is_packed_payload(&stored));
        assert_ne!(stored.as_ref(), odd.as_slice());
        assert_eq!(unpack(&stored).unwrap(), odd);
    }

    proptest! {
        #[test]
        fn stored_values_read_back_as_given(bytes in proptest::collection::vec(any::<u8>(), 0..3000), repeat in 1usize..8) {
            let bytes = bytes.repeat(repeat);
            let (stored, packed) = value_to_store(&bytes);
            prop_assert!(stored.len() <= bytes.len());
            let read = value_from_store(&stored, packed).unwrap().into_owned();
            prop_assert_eq!(read, bytes.clone());
            let payload = payload_to_store(&bytes, "cast");
            let read = payload_from_store(&payload, "cast").unwrap().into_owned();
            prop_assert_eq!(read, bytes);
        }
    }
}
