//! Hostile inputs for property tests, and the rule every user-facing message is held to.
//!
//! Random bytes rarely get past a parser's first check, so the strategies here start from a
//! real file (the bundled pi-materia config, an export, an agent script) and damage it the ways
//! files get damaged or mis-edited: a byte flipped, the tail cut, a piece of the file spliced in
//! elsewhere, bytes that are not UTF-8, one JSON value swapped for a value of another type,
//! nesting deeper than the parser allows, a number too large for any field. Built only for tests
//! (`cfg(test)` here, the `hostile` feature for the crates downstream), never into the binary.

use proptest::prelude::*;
use proptest::sample::Index;
use proptest::test_runner::Config;
use serde_json::Value;

/// The property-test configuration of the workspace: `cases` cases, and no regression files
/// written into the source tree (a failure found is kept as a named regression test instead).
pub fn config(cases: u32) -> Config {
    Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    }
}

/// Why `message` would not read as words to a user: the first piece of Rust debug formatting
/// (or of a 0-based position) found in it outside double-quoted text, which quotes what the
/// user wrote; `None` when it reads plainly.
pub fn rust_formatting(message: &str) -> Option<String> {
    if message.trim().is_empty() {
        return Some("the message is empty".into());
    }
    const MARKERS: [&str; 12] = [
        "{ ",
        "Some(",
        "None",
        "Ok(",
        "Err(",
        "Utf8",
        "UnexpectedEnd",
        "LimitExceeded",
        "OtherString",
        "struct ",
        "\\u{",
        "line 0",
    ];
    let bare = unquoted(message);
    MARKERS
        .iter()
        .find(|marker| bare.contains(**marker))
        .map(|marker| format!("{marker:?} in {message:?}"))
}

/// `text` without its double-quoted parts (a backslash escapes the next character inside).
fn unquoted(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut quoted = false;
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        match (quoted, c) {
            (_, '"') => quoted = !quoted,
            (true, '\\') => {
                chars.next();
            }
            (true, _) => {}
            (false, c) => out.push(c),
        }
    }
    out
}

/// One way a file gets damaged.
#[derive(Debug, Clone)]
enum Damage {
    /// One byte xored with a non-zero mask.
    Flip(Index, u8),
    /// The file cut off before this index.
    Cut(Index),
    /// Up to `len` bytes removed there.
    Delete(Index, usize),
    /// Up to `len` bytes of the file copied from one place to another.
    Splice { from: Index, len: usize, to: Index },
    /// Bytes inserted (often not UTF-8).
    Insert(Index, Vec<u8>),
    /// One JSON value (of the whole file, or of one of its lines) replaced by raw JSON text.
    Swap {
        line: Index,
        node: Index,
        with: String,
    },
    /// One JSON value wrapped in `depth` arrays or objects.
    Nest {
        line: Index,
        node: Index,
        depth: usize,
        arrays: bool,
    },
}

/// Raw JSON text of every type, with the awkward cases: huge and out-of-range numbers,
/// negative and fractional counts, empty and control-character strings, a lone surrogate.
fn snippet() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::sample::select(vec![
            "null",
            "true",
            "false",
            "0",
            "-1",
            "1.5",
            "1e308",
            "1e400",
            "-1e400",
            "18446744073709551616",
            "-9223372036854775809",
            "\"\"",
            "\" \"",
            "\"\\u0000\"",
            "\"\\ud800\"",
            "[]",
            "{}",
            "[null]",
            "{\"\":null}",
        ])
        .prop_map(str::to_owned),
        "\\PC{0,16}".prop_map(|s| Value::String(s).to_string()),
        any::<i64>().prop_map(|n| n.to_string()),
        any::<f64>().prop_map(|f| f.to_string()),
        "-?[1-9][0-9]{19,40}",
    ]
}

// Swaps weigh most: byte damage nearly always breaks the JSON syntax, and a file that no
// longer parses never reaches the checks of its fields.
fn damage() -> impl Strategy<Value = Damage> {
    prop_oneof![
        1 => (any::<Index>(), 1..=u8::MAX).prop_map(|(at, mask)| Damage::Flip(at, mask)),
        1 => any::<Index>().prop_map(Damage::Cut),
        1 => (any::<Index>(), 1..64usize).prop_map(|(at, len)| Damage::Delete(at, len)),
        1 => (any::<Index>(), 1..256usize, any::<Index>())
            .prop_map(|(from, len, to)| Damage::Splice { from, len, to }),
        1 => (
            any::<Index>(),
            prop::collection::vec(
                prop_oneof![any::<u8>(), Just(0xff), Just(0xc3), Just(b'"')],
                1..8
            )
        )
            .prop_map(|(at, bytes)| Damage::Insert(at, bytes)),
        8 => (any::<Index>(), any::<Index>(), snippet())
            .prop_map(|(line, node, with)| Damage::Swap { line, node, with }),
        1 => (any::<Index>(), any::<Index>(), 1..300usize, any::<bool>()).prop_map(
            |(line, node, depth, arrays)| Damage::Nest {
                line,
                node,
                depth,
                arrays
            }
        ),
    ]
}

/// Arbitrary bytes, up to 512 of them, after `prefix` (a format's magic, or nothing).
pub fn noise(prefix: &[u8]) -> impl Strategy<Value = Vec<u8>> + use<> {
    let prefix = prefix.to_vec();
    prop::collection::vec(any::<u8>(), 0..512)
        .prop_map(move |bytes| [prefix.clone(), bytes].concat())
}

/// `seed` with one to three damages applied, one after the other.
pub fn damaged(seed: &[u8]) -> impl Strategy<Value = Vec<u8>> + use<> {
    let seed = seed.to_vec();
    prop::collection::vec(damage(), 1..4)
        .prop_map(move |damages| damages.into_iter().fold(seed.clone(), apply))
}

fn apply(mut bytes: Vec<u8>, damage: Damage) -> Vec<u8> {
    let len = bytes.len();
    let at = |i: &Index| i.index(len + 1);
    match damage {
        Damage::Flip(i, mask) => {
            if len > 0 {
                bytes[i.index(len)] ^= mask;
            }
        }
        Damage::Cut(i) => bytes.truncate(at(&i)),
        Damage::Delete(i, n) => {
            let start = at(&i);
            let end = (start + n).min(len);
            bytes.drain(start..end);
        }
        Damage::Splice { from, len: n, to } => {
            let start = at(&from);
            let piece = bytes[start..(start + n).min(len)].to_vec();
            let to = at(&to);
            bytes.splice(to..to, piece);
        }
        Damage::Insert(i, piece) => {
            let to = at(&i);
            bytes.splice(to..to, piece);
        }
        Damage::Swap { line, node, with } => {
            bytes = rewrite_value(&bytes, &|n| line.index(n), &|n| node.index(n), |_| {
                with.clone()
            });
        }
        Damage::Nest {
            line,
            node,
            depth,
            arrays,
        } => {
            bytes = rewrite_value(&bytes, &|n| line.index(n), &|n| node.index(n), |old| {
                let (open, close) = if arrays { ("[", "]") } else { ("{\"a\":", "}") };
                format!("{}{old}{}", open.repeat(depth), close.repeat(depth))
            });
        }
    }
    bytes
}

/// A string no real file holds, marking the value being replaced while the tree is written out.
const HOLE: &str = "\u{1}castlog-hole\u{1}";

/// Replaces one JSON value of `bytes` (the whole file when it is one JSON document, else one of
/// its lines that is) by `with(old value's JSON text)`; unchanged if no part is JSON. `line`
/// and `node` pick one of `n` lines and one of `n` values in pre-order.
fn rewrite_value(
    bytes: &[u8],
    line: &dyn Fn(usize) -> usize,
    node: &dyn Fn(usize) -> usize,
    with: impl Fn(&str) -> String,
) -> Vec<u8> {
    let rewrite = |text: &[u8]| -> Option<Vec<u8>> {
        let mut value: Value = serde_json::from_slice(text).ok()?;
        let count = count_nodes(&value);
        let mut target = node(count);
        let old = take_nth(&mut value, &mut target)?;
        let hole = Value::String(HOLE.into()).to_string();
        let written = value
            .to_string()
            .replacen(&hole, &with(&old.to_string()), 1);
        Some(written.into_bytes())
    };
    if let Some(whole) = rewrite(bytes) {
        return whole;
    }
    let lines: Vec<&[u8]> = bytes.split(|b| *b == b'\n').collect();
    let chosen = line(lines.len());
    let Some(new) = rewrite(lines[chosen]) else {
        return bytes.to_vec();
    };
    let mut out = Vec::with_capacity(bytes.len() + new.len());
    for (i, l) in lines.iter().enumerate() {
        if i > 0 {
            out.push(b'\n');
        }
        out.extend_from_slice(if i == chosen { &new } else { l });
    }
    out
}

fn count_nodes(value: &Value) -> usize {
    1 + match value {
        Value::Array(items) => items.iter().map(count_nodes).sum(),
        Value::Object(map) => map.values().map(count_nodes).sum(),
        _ => 0,
    }
}

/// Takes the `n`th value in pre-order out of `value`, leaving [`HOLE`] in its place.
fn take_nth(value: &mut Value, n: &mut usize) -> Option<Value> {
    if *n == 0 {
        return Some(std::mem::replace(value, Value::String(HOLE.into())));
    }
    *n -= 1;
    let children: Vec<&mut Value> = match value {
        Value::Array(items) => items.iter_mut().collect(),
        Value::Object(map) => map.values_mut().collect(),
        _ => return None,
    };
    for child in children {
        let size = count_nodes(child);
        if *n < size {
            return take_nth(child, n);
        }
        *n -= size;
    }
    None
}

/// Arbitrary JSON whose keys and strings are mostly drawn from `seed` (JSON, or JSON lines), so
/// that generated documents look like the files they stand in for and reach past the first
/// check for a known key.
pub fn json_like(seed: &str) -> impl Strategy<Value = Value> + use<> {
    let mut words = Vec::new();
    for doc in std::iter::once(seed).chain(seed.lines()) {
        if let Ok(value) = serde_json::from_str::<Value>(doc) {
            collect_words(&value, &mut words);
        }
    }
    words.sort();
    words.dedup();
    if words.is_empty() {
        words.push(String::new());
    }
    let word = prop_oneof![
        3 => prop::sample::select(words),
        1 => "\\PC{0,8}",
    ];
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>().prop_map(Value::from),
        word.clone().prop_map(Value::String),
    ];
    leaf.prop_recursive(6, 64, 6, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::vec((word.clone(), inner), 0..6)
                .prop_map(|entries| Value::Object(entries.into_iter().collect())),
        ]
    })
}

fn collect_words(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::String(s) if s.len() <= 64 => out.push(s.clone()),
        Value::Array(items) => items.iter().for_each(|v| collect_words(v, out)),
        Value::Object(map) => {
            for (k, v) in map {
                out.push(k.clone());
                collect_words(v, out);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_formatting_is_found_outside_quotes_only() {
        assert!(rust_formatting("UnexpectedEnd { additional: 1 }").is_some());
        assert!(rust_formatting("malformed export at line 0: x").is_some());
        assert!(rust_formatting("").is_some());
        assert_eq!(
            rust_formatting("no loadout named \"Some(x) { \"; use one of: A"),
            None
        );
        assert_eq!(
            rust_formatting("expected one of {\"reply\"}, {\"continue\": true}"),
            None
        );
    }

    #[test]
    fn a_swap_replaces_one_value_of_one_line() {
        let text = b"{\"a\":1}\nnot json\n{\"b\":[true]}";
        let out = rewrite_value(text, &|_| 0, &|n| n - 1, |_| "null".into());
        // The whole file is not JSON, so the first line's last value is replaced.
        assert_eq!(out, b"{\"a\":null}\nnot json\n{\"b\":[true]}");
    }
}
