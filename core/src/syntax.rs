//! How JSON is told to a user: serde_json's errors in words without their position, and the
//! names values have in the JSON castlog writes.
//!
//! serde_json names Rust types in shape errors ("expected struct Header", "expected u16") and
//! appends " at line L column C" counted in the text it was given, which for one line of a
//! JSON-lines file is always line 1. Callers say where the error is in the file (a line of an
//! export or a script, a path in a config) and add [`column`] where it helps.

/// `err`'s message without its position, with Rust type names said as JSON words.
pub fn json_error(err: &serde_json::Error) -> String {
    let full = err.to_string();
    let position = format!(" at line {} column {}", err.line(), err.column());
    let message = full.strip_suffix(&position).unwrap_or(&full);
    in_words(message)
}

/// ", at column C" for an error in one line of text, else nothing (an error of a value).
pub fn column(err: &serde_json::Error) -> String {
    if err.line() == 0 {
        String::new()
    } else {
        format!(", at column {}", err.column().max(1))
    }
}

/// Where `err` is in `text`, as "line L, column C", both 1-based. serde_json puts an error
/// found at a line break (a string left open, the end of the text) at column 0 of the next
/// line; that is told as the place of the break itself, the end of the line it ends.
pub fn place(err: &serde_json::Error, text: &str) -> String {
    let (line, column) = (err.line().max(1), err.column());
    if column > 0 {
        return format!("line {line}, column {column}");
    }
    match line
        .checked_sub(2)
        .and_then(|before| text.lines().nth(before))
    {
        Some(ended) => format!("line {}, column {}", line - 1, ended.chars().count() + 1),
        None => format!("line {line}, column 1"),
    }
}

/// The name `value` has in the JSON castlog writes (`hash_mismatch`, `system_fold`), for human
/// output of a value that serializes as a string; the Rust name would read as code.
pub fn json_name<T: serde::Serialize>(value: &T) -> String {
    match serde_json::to_value(value) {
        Ok(serde_json::Value::String(name)) => name,
        Ok(other) => other.to_string(),
        Err(_) => "(unnamed)".into(),
    }
}

/// The Rust type names serde_json may expect, and what they are in JSON.
const TYPE_WORDS: [(&str, &str); 9] = [
    ("expected u8", "expected an integer from 0 to 255"),
    ("expected u16", "expected an integer from 0 to 65535"),
    ("expected u32", "expected an integer from 0 to 4294967295"),
    ("expected u64", "expected a non-negative integer"),
    ("expected usize", "expected a non-negative integer"),
    ("expected i32", "expected an integer"),
    ("expected i64", "expected an integer"),
    ("expected f64", "expected a number"),
    ("expected unit", "expected null"),
];

fn in_words(message: &str) -> String {
    let mut out = message.to_owned();
    // "expected struct Header" / "expected enum Kind": the Rust name means nothing to a user.
    for (rust, json) in [
        ("expected struct ", "expected an object"),
        ("expected enum ", "expected one of the known values"),
        ("expected tuple struct ", "expected a value"),
    ] {
        while let Some(at) = out.find(rust) {
            let name_end = out[at + rust.len()..]
                .find(|c: char| !(c.is_alphanumeric() || c == '_'))
                .map_or(out.len(), |i| at + rust.len() + i);
            out.replace_range(at..name_end, json);
        }
    }
    for (rust, json) in TYPE_WORDS {
        // Only a whole word: "expected u16" but not a hypothetical "expected u160".
        let mut from = 0;
        while let Some(found) = out[from..].find(rust) {
            let at = from + found;
            let end = at + rust.len();
            if out[end..].starts_with(|c: char| c.is_alphanumeric()) {
                from = end;
                continue;
            }
            out.replace_range(at..end, json);
            from = at + json.len();
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, serde::Deserialize)]
    #[allow(dead_code)]
    struct Header {
        v: u16,
    }

    fn error_of(text: &str) -> serde_json::Error {
        serde_json::from_str::<Header>(text).unwrap_err()
    }

    #[test]
    fn rust_type_names_are_said_in_json_words() {
        let err = error_of("5");
        assert_eq!(
            json_error(&err),
            "invalid type: integer `5`, expected an object"
        );
        assert_eq!(column(&err), ", at column 1");
        let err = error_of(r#"{"v": 70000}"#);
        assert_eq!(
            json_error(&err),
            "invalid value: integer `70000`, expected an integer from 0 to 65535"
        );
    }

    #[test]
    fn an_error_at_a_line_break_is_placed_on_the_line_it_ends() {
        let text = "{\n  \"v\": \"open\n}";
        let err = serde_json::from_str::<serde_json::Value>(text).unwrap_err();
        assert_eq!(err.column(), 0);
        assert_eq!(place(&err, text), "line 2, column 13");
        let text = "{\"v\": 1,\n";
        let err = serde_json::from_str::<serde_json::Value>(text).unwrap_err();
        assert_eq!(place(&err, text), "line 1, column 9");
    }

    #[test]
    fn a_value_is_named_as_castlog_writes_it() {
        assert_eq!(
            json_name(&crate::event::Destination::SystemFold),
            "system_fold"
        );
    }

    #[test]
    fn an_error_of_a_value_has_no_position() {
        let err = serde_json::from_value::<Header>(serde_json::json!({})).unwrap_err();
        assert_eq!(json_error(&err), "missing field `v`");
        assert_eq!(column(&err), "");
    }
}
