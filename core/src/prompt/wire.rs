//! The stored form of a rendered prompt, written without serde: compact JSON
//! `[{"role":…,"content":…,"tool_call":…},…]` (`tool_call` only when there is one), byte for
//! byte what `serde_json::to_vec` writes for the messages, which is what the prompt hash
//! covers.
//!
//! A prompt is mostly long text, and serde_json decides for every byte of a string whether to
//! escape it. Here a string is read eight bytes at a time while none of them needs escaping
//! (a control byte under 0x20, `"` or `\`), and copied in runs. The escapes are serde_json's:
//! `\"`, `\\`, `\b`, `\f`, `\n`, `\r`, `\t`, and `\u00xx` (lowercase hex) for the other control
//! bytes; nothing else (not `/`, not DEL, not non-ASCII) is escaped. A property test below pins
//! the two writers to the same bytes.

use super::Message;

/// Eight copies of a byte.
const fn lanes(byte: u8) -> u64 {
    u64::from_ne_bytes([byte; 8])
}

/// Whether any of the eight bytes of `word` is a control byte, `"` or `\` (a word-at-a-time
/// test: it may say so for a word whose only such byte is the one it stops at, never miss one).
fn needs_escape(word: u64) -> bool {
    let low = 0x80u64 * lanes(1);
    let below_space = word.wrapping_sub(lanes(0x20)) & !word & low;
    let quote = word ^ lanes(b'"');
    let backslash = word ^ lanes(b'\\');
    let zero = |v: u64| v.wrapping_sub(lanes(1)) & !v & low;
    (below_space | zero(quote) | zero(backslash)) != 0
}

/// Appends `text` as a JSON string, escaped as serde_json escapes it.
fn push_string(out: &mut Vec<u8>, text: &str) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let bytes = text.as_bytes();
    out.reserve(bytes.len() + 2);
    out.push(b'"');
    let (mut run, mut at) = (0, 0);
    while at < bytes.len() {
        if let Some(word) = bytes.get(at..at + 8) {
            let word = u64::from_ne_bytes(<[u8; 8]>::try_from(word).unwrap_or([0; 8]));
            if !needs_escape(word) {
                at += 8;
                continue;
            }
        }
        let byte = bytes[at];
        let escape: Option<&[u8]> = match byte {
            b'"' => Some(b"\\\""),
            b'\\' => Some(b"\\\\"),
            0x08 => Some(b"\\b"),
            0x0c => Some(b"\\f"),
            b'\n' => Some(b"\\n"),
            b'\r' => Some(b"\\r"),
            b'\t' => Some(b"\\t"),
            _ => None,
        };
        if escape.is_some() || byte < 0x20 {
            out.extend_from_slice(&bytes[run..at]);
            match escape {
                Some(escape) => out.extend_from_slice(escape),
                None => out.extend_from_slice(&[
                    b'\\',
                    b'u',
                    b'0',
                    b'0',
                    HEX[usize::from(byte >> 4)],
                    HEX[usize::from(byte & 0xf)],
                ]),
            }
            run = at + 1;
        }
        at += 1;
    }
    out.extend_from_slice(&bytes[run..]);
    out.push(b'"');
}

/// The messages as compact JSON (see the module documentation).
pub(super) fn write(messages: &[Message]) -> Vec<u8> {
    let mut out =
        Vec::with_capacity(messages.iter().map(|m| m.content.len() + 48).sum::<usize>() + 2);
    out.push(b'[');
    for (i, message) in messages.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(b"{\"role\":");
        push_string(&mut out, message.role.as_str());
        out.extend_from_slice(b",\"content\":");
        push_string(&mut out, &message.content);
        if let Some(call) = &message.tool_call {
            out.extend_from_slice(b",\"tool_call\":");
            push_string(&mut out, call);
        }
        out.push(b'}');
    }
    out.push(b']');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::prompt::Role;
    use proptest::prelude::*;

    fn serde_form(messages: &[Message]) -> Vec<u8> {
        serde_json::to_vec(messages).unwrap()
    }

    #[test]
    fn every_byte_that_needs_an_escape_is_escaped_as_serde_json_escapes_it() {
        let all: String = (0u8..=0x7f).map(char::from).collect();
        for text in [
            String::new(),
            all.clone(),
            format!("{all}{all}"),
            "plain text, long enough for a few words at a time".into(),
            "é \u{2028} \u{feff} 𝄞 / \u{7f} end\"".into(),
            "a\"b\\c\nd\re\tf\u{8}g\u{c}h\u{1}i\u{1f}".into(),
        ] {
            let messages = [Message {
                role: Role::User,
                content: text.clone(),
                tool_call: Some(text),
            }];
            assert_eq!(write(&messages), serde_form(&messages));
        }
        assert_eq!(write(&[]), b"[]");
    }

    /// Texts with every kind of byte at every offset of a word.
    fn text() -> impl Strategy<Value = String> {
        let piece = prop::sample::select(vec![
            "a", "word ", "\"", "\\", "\n", "\t", "\r", "\u{1}", "\u{1f}", "\u{7f}", "é", "😀",
            " ", "/", "\u{8}", "\u{c}",
        ]);
        prop::collection::vec(piece, 0..64).prop_map(|p| p.concat())
    }

    proptest! {
        #[test]
        fn the_fast_writer_writes_serde_jsons_bytes(
            parts in prop::collection::vec((0usize..4, text(), prop::option::of(text())), 0..5)
        ) {
            let roles = [Role::System, Role::User, Role::Assistant, Role::Tool];
            let messages: Vec<Message> = parts
                .into_iter()
                .map(|(role, content, tool_call)| Message { role: roles[role], content, tool_call })
                .collect();
            prop_assert_eq!(write(&messages), serde_form(&messages));
        }
    }
}
