//! Property tests of import: damaged copies of real exports (both formats) and arbitrary bytes
//! are refused with an error that reads as words (never a panic), and whatever is accepted
//! verifies.

use std::sync::OnceLock;

use castlog_core::hostile::{self, damaged, json_like, noise, rust_formatting};
use castlog_events::codec::{self, CodecError, Format};
use castlog_events::verify::verify_cast;
use castlog_events::{EventLog, InMemoryLog, LogError};
use proptest::prelude::*;

use super::sample;

/// The JSONL and bincode exports of the populated parent and its fork, made once.
fn files() -> &'static [Vec<u8>; 4] {
    static FILES: OnceLock<[Vec<u8>; 4]> = OnceLock::new();
    FILES.get_or_init(|| {
        let log = InMemoryLog::new();
        let written = sample::populate(&log);
        let export = |cast, format| codec::encode(&codec::collect(&log, cast).unwrap(), format);
        [
            export(&written.origin, Format::Jsonl),
            export(&written.origin, Format::Bincode),
            export(&written.recast, Format::Jsonl),
            export(&written.recast, Format::Bincode),
        ]
    })
}

/// Decodes and imports `bytes` into an empty log; `Err` says what broke the rule.
fn import(bytes: &[u8]) -> Result<(), String> {
    let log = InMemoryLog::new();
    let outcome = codec::decode(bytes).and_then(|export| {
        codec::import(&log, &export)?;
        Ok(export.head)
    });
    match outcome {
        Ok(head) => {
            // Import verifies before it stores: what it stored must verify.
            let stored = log.head(&head.cast).map_err(|e| e.to_string())?;
            let stored = stored.ok_or("an accepted import stored no cast")?;
            let verified = verify_cast(&log, &stored).map_err(|e| e.to_string())?;
            match verified.problems.first() {
                Some(problem) => Err(format!("an import that does not verify: {problem:?}")),
                None => Ok(()),
            }
        }
        // What a log refuses on import is the file's fault (exit 1 or 3), never castlog's.
        Err(CodecError::Log(
            err
            @ (LogError::Conflict { .. } | LogError::Open { .. } | LogError::EmptyAppend { .. }),
        )) => Err(format!("an import refused as a log failure: {err}")),
        Err(err) => rust_formatting(&err.to_string()).map_or(Ok(()), Err),
    }
}

proptest! {
    #![proptest_config(hostile::config(256))]

    #[test]
    fn a_damaged_export_is_refused_in_words(
        bytes in prop_oneof![
            8 => (0..4usize).prop_flat_map(|i| damaged(&files()[i])),
            1 => noise(b""),
            1 => noise(b"CASTLOG\0BIN1"),
        ]
    ) {
        if let Err(why) = import(&bytes) {
            prop_assert!(false, "{why}");
        }
    }

    #[test]
    fn a_line_of_arbitrary_json_is_refused_in_words(
        line in json_like(std::str::from_utf8(&files()[0]).unwrap()),
        at in any::<prop::sample::Index>(),
    ) {
        let text = std::str::from_utf8(&files()[0]).unwrap();
        let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
        lines.insert(at.index(lines.len() + 1), line.to_string());
        if let Err(why) = import(lines.join("\n").as_bytes()) {
            prop_assert!(false, "{why}");
        }
    }
}
