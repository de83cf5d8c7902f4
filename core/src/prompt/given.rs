//! Context entries given as data by another orchestrator, for `castlog placement`.
//!
//! One prompt is `{"entries": [ENTRY, ...]}`; a sequence of turns is
//! `{"turns": [{"entries": [ENTRY, ...]}, ...]}`. An ENTRY is
//! `{"sourceType", "layer": "L0".."L3", "role": "system|user|assistant|tool", "ordinal",
//! "text", "locked"?, "id"?, "untrusted"?}`. Each entry keeps the layer and role its producer
//! gave it. `id` names the entry in placements (default: its source type, `-2`, `-3`... for a
//! repeat within a prompt), so the turns of a sequence can be compared entry by entry;
//! `untrusted` says its text was written by a model or a person (default: [`UNTRUSTED`]).

use super::ContextEntry;
use super::fields::{DocumentError, Object, parse_json};

/// Source types whose text a model, a tool or a person wrote, unless an entry says otherwise.
/// A steering note is the operator speaking to the runtime on purpose and is not listed.
pub const UNTRUSTED: [&str; 11] = [
    "toolResult",
    "assistantToolCall",
    "clarificationAnswer",
    "initialIntent",
    "rejectionFeedback",
    "userRefinement",
    "refinementDraft",
    "previousOutput",
    "handoffContext",
    "criticFeedback",
    "workItem",
];

/// The entries of one prompt.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Prompt {
    /// The entries, in the order given.
    pub entries: Vec<ContextEntry>,
    /// Per entry, whether its text is untrusted.
    pub untrusted: Vec<bool>,
}

/// A document of entries given as data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Given {
    /// `{"entries": [...]}`: one prompt.
    Prompt(Prompt),
    /// `{"turns": [{"entries": [...]}, ...]}`: one prompt per turn.
    Turns(Vec<Prompt>),
}

impl Given {
    /// Reads an entries (or turns) document.
    pub fn parse(text: &str) -> Result<Given, DocumentError> {
        let value = parse_json("the entries", text)?;
        let top = Object::new(&value, "", &["entries", "turns"])?;
        match (top.get("entries"), top.get("turns")) {
            (Some(_), None) => Ok(Given::Prompt(prompt(&top)?)),
            (None, Some(_)) => {
                let mut turns = Vec::new();
                for (path, item) in top.array("turns", false)? {
                    turns.push(prompt(&Object::new(item, &path, &["entries"])?)?);
                }
                if turns.is_empty() {
                    return Err(DocumentError::field("turns", "no turn given"));
                }
                Ok(Given::Turns(turns))
            }
            (Some(_), Some(_)) => Err(DocumentError::field(
                "(top)",
                "give either \"entries\" (one prompt) or \"turns\", not both",
            )),
            (None, None) => Err(DocumentError::field(
                "entries",
                "missing (give \"entries\" for one prompt or \"turns\" for a sequence)",
            )),
        }
    }

    /// The prompts: one, or one per turn.
    pub fn prompts(&self) -> &[Prompt] {
        match self {
            Given::Prompt(p) => std::slice::from_ref(p),
            Given::Turns(t) => t,
        }
    }
}

const ENTRY: [&str; 8] = [
    "sourceType",
    "layer",
    "role",
    "ordinal",
    "text",
    "locked",
    "id",
    "untrusted",
];

fn prompt(at: &Object<'_>) -> Result<Prompt, DocumentError> {
    let mut out = Prompt::default();
    let mut explicit: Vec<(String, String)> = Vec::new();
    let items = at.array("entries", false)?;
    for (path, item) in &items {
        let e = Object::new(item, path, &ENTRY)?;
        let source_type = e.name("sourceType")?.to_owned();
        let layer = e
            .opt_layer("layer")?
            .ok_or_else(|| DocumentError::field(e.path("layer"), "missing"))?;
        let role = e
            .opt_role("role")?
            .ok_or_else(|| DocumentError::field(e.path("role"), "missing"))?;
        let ordinal = e
            .opt_uint("ordinal", u64::from(u32::MAX))?
            .ok_or_else(|| DocumentError::field(e.path("ordinal"), "missing"))?;
        let text = e.str("text")?;
        let locked = e.opt_bool("locked")?.unwrap_or(false);
        let untrusted = e
            .opt_bool("untrusted")?
            .unwrap_or_else(|| UNTRUSTED.contains(&source_type.as_str()));
        let id = match e.opt_str("id")? {
            Some(id) => {
                if id.trim().is_empty() {
                    return Err(DocumentError::field(e.path("id"), "must not be empty"));
                }
                if let Some((_, other)) = explicit.iter().find(|(x, _)| x == id) {
                    return Err(DocumentError::field(
                        e.path("id"),
                        format!("{id:?} is already the id of {other}"),
                    ));
                }
                explicit.push((id.to_owned(), path.clone()));
                id.to_owned()
            }
            None => String::new(),
        };
        out.entries.push(ContextEntry {
            id,
            source_type: source_type.into(),
            layer,
            role,
            ordinal: u32::try_from(ordinal).unwrap_or(u32::MAX),
            text: text.to_owned(),
            locked,
        });
        out.untrusted.push(untrusted);
    }
    // Default ids: the source type, then `-2`, `-3`... skipping any id given explicitly.
    let mut taken: Vec<String> = explicit.into_iter().map(|(id, _)| id).collect();
    for entry in &mut out.entries {
        if !entry.id.is_empty() {
            continue;
        }
        let base = entry.source_type.to_string();
        let mut id = base.clone();
        let mut n = 1;
        while taken.contains(&id) {
            n += 1;
            id = format!("{base}-{n}");
        }
        taken.push(id.clone());
        entry.id = id;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::prompt::Role;
    use rstest::rstest;

    #[test]
    fn entries_read_with_default_ids() {
        let given = Given::parse(
            r#"{"entries": [
                {"sourceType": "toolResult", "layer": "L2", "role": "TOOL", "ordinal": 3, "text": "a"},
                {"sourceType": "toolResult", "layer": "L2", "role": "tool", "ordinal": 4, "text": ""},
                {"sourceType": "steeringNote", "layer": "L0", "role": "system", "ordinal": 1, "text": "b", "locked": true}
            ]}"#,
        )
        .unwrap();
        let p = &given.prompts()[0];
        let ids: Vec<&str> = p.entries.iter().map(|e| e.id.as_str()).collect();
        assert_eq!(ids, ["toolResult", "toolResult-2", "steeringNote"]);
        assert_eq!(p.entries[0].role, Role::Tool);
        assert!(p.entries[2].locked && p.entries[2].layer == 0);
        assert_eq!(p.untrusted, [true, true, false]);
    }

    #[rstest]
    #[case::layer(r#"{"entries": [{"sourceType": "a", "layer": "L1", "role": "user", "ordinal": 1, "text": ""}, {"sourceType": "b", "layer": "L9", "role": "user", "ordinal": 1, "text": ""}]}"#, "entries[1].layer: expected one of")]
    #[case::role(r#"{"entries": [{"sourceType": "a", "layer": "L1", "role": "boss", "ordinal": 1, "text": ""}]}"#, "entries[0].role: expected one of")]
    #[case::ordinal(r#"{"entries": [{"sourceType": "a", "layer": "L1", "role": "user", "ordinal": "1", "text": ""}]}"#, "entries[0].ordinal: expected an integer")]
    #[case::text(
        r#"{"entries": [{"sourceType": "a", "layer": "L1", "role": "user", "ordinal": 1}]}"#,
        "entries[0].text: missing"
    )]
    #[case::unknown(r#"{"entries": [{"sourceType": "a", "layer": "L1", "role": "user", "ordinal": 1, "text": "", "colour": 1}]}"#, "entries[0].colour: unknown field")]
    #[case::turn(
        r#"{"turns": [{"entries": []}, {"entries": [{"layer": "L1"}]}]}"#,
        "turns[1].entries[0].sourceType: missing"
    )]
    #[case::neither(r#"{}"#, "entries: missing")]
    #[case::id(r#"{"entries": [{"sourceType": "a", "layer": "L1", "role": "user", "ordinal": 1, "text": "", "id": "x"}, {"sourceType": "b", "layer": "L1", "role": "user", "ordinal": 1, "text": "", "id": "x"}]}"#, "entries[1].id: \"x\" is already the id of entries[0]")]
    fn a_malformed_entry_is_named(#[case] text: &str, #[case] expected: &str) {
        let err = Given::parse(text).unwrap_err().to_string();
        assert!(err.starts_with(expected), "{err}");
    }

    const INVENTORY: &str = include_str!("../../../fixtures/placement/inventory.json");
    const TURNS: &str = include_str!("../../../fixtures/placement/turns.json");
    const POLICY: &str = include_str!("../../policies/recommended.json");

    fn plain(message: &str) -> Result<(), proptest::test_runner::TestCaseError> {
        match crate::hostile::rust_formatting(message) {
            Some(why) => Err(proptest::test_runner::TestCaseError::fail(why)),
            None => Ok(()),
        }
    }

    proptest::proptest! {
        #![proptest_config(crate::hostile::config(256))]

        #[test]
        fn a_damaged_entries_or_policy_file_reads_or_fails_in_words(
            bytes in proptest::prop_oneof![
                crate::hostile::damaged(INVENTORY.as_bytes()),
                crate::hostile::damaged(TURNS.as_bytes()),
                crate::hostile::damaged(POLICY.as_bytes()),
            ]
        ) {
            let text = String::from_utf8_lossy(&bytes);
            if let Err(e) = Given::parse(&text) {
                plain(&e.to_string())?;
            }
            if let Err(e) = crate::prompt::Policy::parse(&text) {
                plain(&e.to_string())?;
            }
        }

        #[test]
        fn arbitrary_json_reads_or_fails_in_words(value in crate::hostile::json_like(INVENTORY)) {
            if let Err(e) = Given::parse(&value.to_string()) {
                plain(&e.to_string())?;
            }
            if let Err(e) = crate::prompt::Policy::from_json(&value) {
                plain(&e.to_string())?;
            }
        }
    }
}
