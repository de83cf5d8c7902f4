//! Long texts of event payloads kept in the chunk store (schema v11): a reply's text is
//! stored once, in chunks the prompts that quote it share, instead of once in the reply's
//! row and again in every entry body that holds it.
//!
//! # Which payloads
//! A payload (a JSON object, as hashed) is *split* when the value of its first `"text"` key
//! (the top-level one of a reply, whose only field before it is `socket`) is a string whose
//! JSON form is at least [`SPLIT_FROM`] bytes and is written the way [`escape`] writes it
//! (castlog's encoder writes it so; a payload written otherwise, say by another tool and
//! imported, is stored as it is). Every other payload is stored as `pack.rs` says.
//!
//! # The stored form
//! `01`, then LEB128 numbers: `at`, the offset in the payload of the text's first escaped
//! byte (just after its opening quote); `n`, the number of chunks; then the chunks' row ids in
//! `chunk_list`'s delta form (`n` numbers); then the rest of the payload (its bytes before
//! `at` and after the text's closing quote's position, the quote kept), stored as `pack.rs`
//! stores a whole payload (its first byte names its form). The chunks
//! concatenate to the text *unescaped* (as entry bodies hold it, so the chunk cuts agree);
//! a read escapes it again with [`escape`] and puts it back at `at`. JSON never starts with
//! `01`, nor does a zstd frame, so a payload is split exactly when it starts so. Nothing
//! hashed changes: the rebuilt payload is the appended one, byte for byte (checked at write).

use super::{scan, varint};
use crate::chunk;

/// The first byte of a split payload.
pub(super) const SPLIT: u8 = 0x01;

/// Texts whose JSON form is shorter than this stay in their row: below a chunkable blob's
/// size they would be one chunk, shared with nothing.
pub(super) const SPLIT_FROM: usize = chunk::CHUNKED_FROM;

/// A payload with its text taken out.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Split {
    /// Where the escaped text started in the payload.
    pub at: usize,
    /// The text, unescaped.
    pub text: String,
    /// The payload without the text's escaped bytes.
    pub rest: Vec<u8>,
}

/// The split of `payload`, when it is one to split (see the module's rule).
pub(super) fn split(payload: &[u8]) -> Option<Split> {
    const KEY: &[u8] = b"\"text\":\"";
    if payload.len() < SPLIT_FROM || payload.first() != Some(&b'{') {
        return None;
    }
    let at = memchr::memmem::find(payload, KEY)? + KEY.len();
    // The string ends at its first quote that no backslash escapes.
    let mut end = at;
    let mut escapes = false;
    loop {
        end += memchr::memchr2(b'"', b'\\', payload.get(end..)?)?;
        if payload[end] == b'"' {
            break;
        }
        escapes = true;
        end += 2;
    }
    let raw = payload.get(at..end)?;
    if raw.len() < SPLIT_FROM {
        return None;
    }
    let text = if escapes {
        let text: String = serde_json::from_slice(&payload[at - 1..=end]).ok()?;
        let mut escaped = Vec::with_capacity(raw.len());
        escape(&text, &mut escaped);
        (escaped == raw).then_some(text)?
    } else if scan::has_control(raw) {
        // A control character as it is: not JSON, and not what `escape` writes.
        return None;
    } else {
        std::str::from_utf8(raw).ok()?.to_owned()
    };
    let rest = [&payload[..at], &payload[end..]].concat();
    Some(Split { at, text, rest })
}

/// The payload `split` took `text` out of, or what is wrong.
pub(super) fn join(at: usize, text: &[u8], rest: &[u8]) -> Result<Vec<u8>, String> {
    let text = std::str::from_utf8(text).map_err(|_| "its text's chunks are not UTF-8")?;
    if at > rest.len() {
        return Err(format!(
            "its text goes at byte {at}, past the end of the {} bytes around it",
            rest.len()
        ));
    }
    let mut out = Vec::with_capacity(rest.len() + text.len() + 16);
    out.extend_from_slice(&rest[..at]);
    escape(text, &mut out);
    out.extend_from_slice(&rest[at..]);
    Ok(out)
}

/// Appends `text` as the inside of a JSON string: `"` and `\` escaped with a backslash; the
/// control characters U+0008, U+0009, U+000A, U+000C and U+000D as `\b`, `\t`, `\n`, `\f`,
/// `\r`; the other characters below U+0020 as `\u00XX` (lowercase hex); everything else as
/// its UTF-8 bytes. This is the form castlog's encoder writes (a test pins the two together),
/// and it is pinned by a golden test: a split payload is rebuilt with it.
pub(super) fn escape(text: &str, out: &mut Vec<u8>) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let bytes = text.as_bytes();
    if !scan::needs_escape(bytes) {
        out.extend_from_slice(bytes);
        return;
    }
    // What follows the backslash of each byte written escaped (`u`: `\u00XX`), 0 for the
    // bytes written as they are.
    const AFTER_BACKSLASH: [u8; 256] = {
        let mut table = [0u8; 256];
        let mut b = 0;
        while b < 0x20 {
            table[b] = b'u';
            b += 1;
        }
        table[0x08] = b'b';
        table[0x09] = b't';
        table[0x0a] = b'n';
        table[0x0c] = b'f';
        table[0x0d] = b'r';
        table[b'"' as usize] = b'"';
        table[b'\\' as usize] = b'\\';
        table
    };
    let mut start = 0;
    for (i, &b) in bytes.iter().enumerate() {
        let after = AFTER_BACKSLASH[usize::from(b)];
        if after == 0 {
            continue;
        }
        out.extend_from_slice(&bytes[start..i]);
        start = i + 1;
        out.push(b'\\');
        out.push(after);
        if after == b'u' {
            out.extend_from_slice(b"00");
            out.push(HEX[usize::from(b >> 4)]);
            out.push(HEX[usize::from(b & 0xf)]);
        }
    }
    out.extend_from_slice(&bytes[start..]);
}

/// The stored form of a split payload: its text's chunk rows `ids` and its rest as stored.
pub(super) fn stored(at: usize, ids: &[i64], rest: &[u8]) -> Vec<u8> {
    let list = super::chunk_list::encode(ids);
    let mut out = Vec::with_capacity(1 + 10 + 10 + list.len() + rest.len());
    out.push(SPLIT);
    varint::write(at as u64, &mut out);
    varint::write(ids.len() as u64, &mut out);
    out.extend_from_slice(&list);
    out.extend_from_slice(rest);
    out
}

/// The parts of a stored split payload: `at`, the chunk rows, and the rest as stored.
pub(super) fn parts(stored: &[u8]) -> Result<(usize, Vec<i64>, &[u8]), String> {
    let header = |why: &str| format!("its split header {why}");
    let mut pos = 1;
    let at = varint::read(stored, &mut pos).map_err(header)?;
    let n = varint::read(stored, &mut pos).map_err(header)?;
    let start = pos;
    for _ in 0..n {
        varint::read(stored, &mut pos).map_err(header)?;
    }
    let ids = super::chunk_list::decode(super::chunk_list::DELTAS, &stored[start..pos])?;
    let at = usize::try_from(at).map_err(|_| format!("its text goes at byte {at}"))?;
    Ok((at, ids, &stored[pos..]))
}

/// Whether a stored payload is split.
pub(super) fn is_split(stored: &[u8]) -> bool {
    stored.first() == Some(&SPLIT)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reply(text: &str) -> Vec<u8> {
        serde_json::to_vec(&serde_json::json!({
            "socket": "Socket-2", "text": text, "turn": 1, "visit": 3,
            "tool_calls": [{"name": "note", "input": {"text": "inner"}}],
        }))
        .unwrap()
    }

    #[test]
    fn a_long_text_is_taken_out_and_put_back_byte_for_byte() {
        let text = "line one \"quoted\" \\ back\n\ttab \u{1} ctl é 😀 ".repeat(60);
        let payload = reply(&text);
        let split = split(&payload).expect("long enough to split");
        assert_eq!(split.text, text);
        assert!(split.rest.len() < 200, "{}", split.rest.len());
        assert_eq!(
            join(split.at, text.as_bytes(), &split.rest).unwrap(),
            payload
        );
        let form = stored(split.at, &[10, 11, 12, 3], &split.rest);
        assert!(is_split(&form));
        let (at, ids, rest) = parts(&form).unwrap();
        assert_eq!(
            (at, ids, rest),
            (split.at, vec![10, 11, 12, 3], split.rest.as_slice())
        );
    }

    #[test]
    fn escape_is_the_encoders_form() {
        let mut all = String::new();
        for c in (0u32..0x80).chain([0xe9, 0x2028, 0x1f600]) {
            all.push(char::from_u32(c).unwrap());
        }
        let mut ours = vec![b'"'];
        escape(&all, &mut ours);
        ours.push(b'"');
        assert_eq!(ours, serde_json::to_vec(&all).unwrap());
    }

    #[test]
    fn escape_is_pinned() {
        let mut out = Vec::new();
        escape("a\"b\\c\u{8}\u{9}\u{a}\u{c}\u{d}\u{0}\u{1f}é", &mut out);
        assert_eq!(out, br#"a\"b\\c\b\t\n\f\r\u0000\u001f"#.iter().chain("é".as_bytes()).copied().collect::<Vec<u8>>());
    }

    #[test]
    fn short_foreign_or_textless_payloads_are_not_split() {
        assert_eq!(split(&reply("short")), None);
        assert_eq!(split(br#"{"socket":"S","turn":1}"#), None);
        let long = "x".repeat(2000);
        // Escaped otherwise than castlog writes it (a solidus as \/): left as it is.
        let foreign = format!(r#"{{"text":"\/{long}"}}"#);
        assert_eq!(split(foreign.as_bytes()), None);
        // Not an object: left as it is.
        assert_eq!(split(format!("[\"{long}\"]").as_bytes()), None);
        // A raw control character (not JSON): left as it is.
        assert_eq!(
            split(format!("{{\"text\":\"\u{1}{long}\"}}").as_bytes()),
            None
        );
        // Two texts (not what castlog writes): the first is taken, and put back where it was.
        let twice = format!(r#"{{"text":"{long}","text":"{long}x"}}"#);
        let split = split(twice.as_bytes()).expect("split");
        assert_eq!((split.at, split.text.len()), (9, long.len()));
        assert!(join(split.at, split.text.as_bytes(), &split.rest).unwrap() == twice.as_bytes());
    }

    #[test]
    fn a_damaged_header_is_named() {
        assert!(
            parts(&[SPLIT])
                .unwrap_err()
                .contains("header ends inside a number")
        );
        assert!(
            parts(&[SPLIT, 0x80])
                .unwrap_err()
                .contains("header ends inside a number")
        );
        assert!(
            parts(&[SPLIT, 5, 2, 2])
                .unwrap_err()
                .contains("header ends inside a number")
        );
        assert!(
            join(50, b"text", b"{}")
                .unwrap_err()
                .contains("past the end")
        );
        assert!(join(1, &[0xff], b"{}").unwrap_err().contains("not UTF-8"));
    }
}
