//! The phrases of event payloads that shorthand (`shorthand.rs`) writes as two bytes: the
//! field names of castlog's events and the values they take most often (placement rules and
//! entry names, edge conditions, pi-materia's default names: `Socket-N`, `WI-N`,
//! `lastFeedback`, `workItemIndex`, `Build`, `Auto-Eval`). A phrase is written
//! [`PHRASE`](super::shorthand::PHRASE) then its index here.
//!
//! The list is a storage format: a stored payload needs these very phrases at these very
//! indexes to be read back (a golden test pins the list's hash). It only ever grows at its end,
//! and never past 256 phrases.

/// The phrases, by index.
pub(super) const PHRASES: &[&str] = &[
    // Field names.
    r#""cast":"#,
    r#""loadout_name":"#,
    r#""loadout":"#,
    r#""budget":"#,
    r#""max_tokens":"#,
    r#""warn_at_percent":"#,
    r#""entry":"#,
    r#""sockets":"#,
    r#""policy":"#,
    r#""request":"#,
    r#""field":"#,
    r#""from":"#,
    r#""to":"#,
    r#""by":"#,
    r#""path":"#,
    r#""socket":"#,
    r#""source":"#,
    r#""value_of":"#,
    r#""item":"#,
    r#""traversal":"#,
    r#""when":"#,
    r#""materia_label":"#,
    r#""reason_of":"#,
    r#""target":"#,
    r#""output_of":"#,
    r#""parsed":"#,
    r#""context":"#,
    r#""satisfied":"#,
    r#""visit":"#,
    r#""text":"#,
    r#""tool_calls":"#,
    r#""id":"#,
    r#""input":"#,
    r#""name":"#,
    r#""turn":"#,
    r#""usage":"#,
    r#""output":"#,
    r#""call":"#,
    r#""status":"#,
    r#""key":"#,
    r#""placements":"#,
    r#""body":"#,
    r#""destination":"#,
    r#""layer":"#,
    r#""position":"#,
    r#""role":"#,
    r#""rule":"#,
    r#""source_type":"#,
    r#""prompt_hash":"#,
    r#""system_hash":"#,
    r#""attempt":"#,
    r#""item_label":"#,
    r#""materia":"#,
    r#""value":"#,
    r#""reason":"#,
    r#""cost":"#,
    r#""error":"#,
    r#""kind":"#,
    r#""seq":"#,
    r#""hash":"#,
    // A field and the start of its value.
    r#""socket":"Socket-"#,
    r#""from":"Socket-"#,
    r#""to":{"socket":"Socket-"#,
    r#""target":"Socket-"#,
    r#""source":"Socket-"#,
    r#""by":"Socket-"#,
    r#""entry":"Socket-"#,
    r#""item":"WI-"#,
    r#""key":""#,
    // A field and its whole value.
    r#""policy":"recommended""#,
    r#""field":"workItemIndex""#,
    r#""path":"workItems""#,
    r#""path":"lastFeedback""#,
    r#""source":"$.workItems""#,
    r#""source":"$.context""#,
    r#""when":"not_satisfied""#,
    r#""when":"always""#,
    r#""when":"satisfied""#,
    r#""to":"end""#,
    r#""status":"ok""#,
    r#""satisfied":true"#,
    r#""satisfied":false"#,
    r#""destination":"system_fold""#,
    r#""destination":"inline""#,
    r#""destination":"trailing""#,
    r#""destination":"dropped""#,
    r#""role":"system""#,
    r#""role":"user""#,
    r#""rule":"fold:l0-or-system""#,
    r#""rule":"inline:ordinal""#,
    r#""rule":"trailing:mandate""#,
    r#""rule":"trailing:appended-delta""#,
    r#""entry":"materiaInstructions""#,
    r#""source_type":"materiaInstructions""#,
    r#""entry":"outputContract""#,
    r#""source_type":"outputContract""#,
    r#""entry":"initialIntent""#,
    r#""source_type":"initialIntent""#,
    r#""entry":"workItem""#,
    r#""source_type":"workItem""#,
    r#""entry":"guidance""#,
    r#""source_type":"guidance""#,
    r#""entry":"handoffContext""#,
    r#""source_type":"handoffContext""#,
    r#""entry":"previousOutput""#,
    r#""source_type":"previousOutput""#,
    r#""entry":"reworkFeedback""#,
    r#""source_type":"reworkFeedback""#,
    r#""entry":"remainingDelta""#,
    r#""source_type":"remainingDelta""#,
    r#""entry":"steering""#,
    r#""source_type":"steering""#,
    r#""materia":"Build""#,
    r#""materia_label":"Build""#,
    r#""materia":"Auto-Eval""#,
    r#""materia_label":"Auto-Eval""#,
];

/// The phrases that may start at a byte, by that byte's successor (every phrase starts with
/// `"`), longest first, as indexes into [`PHRASES`].
pub(super) fn by_second_byte() -> &'static [Vec<u8>; 256] {
    static TABLE: std::sync::LazyLock<[Vec<u8>; 256]> = std::sync::LazyLock::new(|| {
        let mut table: [Vec<u8>; 256] = std::array::from_fn(|_| Vec::new());
        let mut order: Vec<usize> = (0..PHRASES.len()).collect();
        order.sort_by_key(|&i| std::cmp::Reverse(PHRASES[i].len()));
        for i in order {
            let second = PHRASES[i].as_bytes()[1];
            table[usize::from(second)].push(i as u8);
        }
        table
    });
    &TABLE
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_phrases_are_pinned_and_fit_their_index() {
        assert!(PHRASES.len() <= 256);
        assert!(PHRASES.iter().all(|p| p.starts_with('"') && p.len() >= 4));
        let distinct: std::collections::BTreeSet<&str> = PHRASES.iter().copied().collect();
        assert_eq!(distinct.len(), PHRASES.len());
        let joined = PHRASES.join("\n");
        assert_eq!(
            blake3::hash(joined.as_bytes()).to_hex().as_str(),
            "46f4dc3ea6a0db8826997489a8674d03baa9e989ac041afcb096ca41950d8322"
        );
    }
}
