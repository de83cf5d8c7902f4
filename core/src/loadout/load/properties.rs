//! Property tests of the config loader: damaged copies of real configs, arbitrary bytes and
//! arbitrary JSON load or fail with a config error whose path and reason read as words, and
//! never panic.

use proptest::prelude::*;

use super::{LoadError, load_config};
use crate::hostile::{self, damaged, json_like, noise, rust_formatting};

/// pi-materia's bundled config (MIT), and castlog's own build loop in the same format.
const DEFAULT: &str = include_str!("../../../../fixtures/pi-materia-default.json");
const BUILD_LOOP: &str = include_str!("../../../../fixtures/loadouts/build-loop.json");

/// Loads `text` and resolves every loadout it names; every error must be plain.
fn load_everything(text: &str) -> Result<(), String> {
    let check = |e: &LoadError| match rust_formatting(&e.to_string()) {
        _ if e.path.is_empty() || e.reason.trim().is_empty() => {
            Err(format!("an error without a path or reason: {e}"))
        }
        Some(why) => Err(why),
        None => Ok(()),
    };
    match load_config(text) {
        Err(e) => check(&e),
        Ok(config) => config
            .names
            .iter()
            .filter_map(|name| config.resolve(Some(name)).err())
            .try_for_each(|e| check(&e)),
    }
}

proptest! {
    #![proptest_config(hostile::config(256))]

    #[test]
    fn a_damaged_config_fails_in_words(
        bytes in prop_oneof![
            4 => damaged(DEFAULT.as_bytes()),
            4 => damaged(BUILD_LOOP.as_bytes()),
            1 => noise(b""),
        ]
    ) {
        // The loader reads text; the CLI's property test covers bytes that are not UTF-8.
        let text = String::from_utf8_lossy(&bytes);
        if let Err(why) = load_everything(&text) {
            prop_assert!(false, "{why}");
        }
    }

    #[test]
    fn arbitrary_json_fails_in_words(value in json_like(DEFAULT)) {
        if let Err(why) = load_everything(&value.to_string()) {
            prop_assert!(false, "{why}");
        }
    }
}
