//! Prompts and state stay bounded however long a cast runs (the reference rendered the whole
//! accumulated context and the whole remaining list into every prompt).

use serde_json::json;

use crate::harness::{build_loop, given, plan};

#[test]
fn the_handoff_context_and_the_remaining_delta_are_bounded() {
    let titles: Vec<String> = (1..=30).map(|i| format!("Item {i}")).collect();
    let refs: Vec<&str> = titles.iter().map(String::as_str).collect();
    let mut cast = given(&build_loop());
    cast.reply(&plan(&refs).to_string());
    for i in 1..=20 {
        cast.reply(&format!("built item {i}"));
        cast.json(&json!({"satisfied": true, "context": format!("item {i} verified")}));
        cast.json(&json!({"satisfied": true, "context": format!("item {i} committed")}));
    }
    // 40 contexts were handed off; the state keeps the most recent 16 paragraphs.
    let context = cast.data()["context"].as_str().unwrap().to_owned();
    assert_eq!(context.split("\n\n").count(), 16);
    assert!(context.ends_with("item 20 committed"), "{context}");
    assert!(!context.contains("item 1 verified"));
    // The next Build prompt shows the 6 most recent, says more exist, and names 5 items ahead.
    cast.settle();
    let handoff = cast.entry("handoffContext").unwrap();
    assert_eq!(
        handoff.matches("\n[Socket-").count() + usize::from(handoff.contains(":\n[")),
        6
    );
    assert!(
        handoff.contains("earlier entries are in the cast's state"),
        "{handoff}"
    );
    let delta = cast.entry("remainingDelta").unwrap();
    assert_eq!(delta.matches("\n- Item").count(), 5, "{delta}");
    assert!(delta.ends_with("- … and 4 more"), "{delta}");
    assert_eq!(cast.item().as_deref(), Some("WI-21"));
}
