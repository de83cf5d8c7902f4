//! `verify` beside a writer and on rows or pages that cannot be read: never a false failure,
//! and with `--json` always one report naming the cast and seq (or the table) of the damage.

use std::process::Stdio;

use rstest::rstest;

use crate::common::Sandbox;

fn raw(sandbox: &Sandbox) -> rusqlite::Connection {
    rusqlite::Connection::open(sandbox.db()).unwrap()
}

/// `verify ARGS --json`, which must exit 3 with a report: its problems as (cast, seq, kind).
fn failed_report(sandbox: &Sandbox, args: &[&str]) -> Vec<(String, u64, String)> {
    let mut all = vec!["verify"];
    all.extend_from_slice(args);
    all.push("--json");
    let run = sandbox.run(&all);
    assert_eq!(run.code, 3, "{all:?}: {}{}", run.stdout, run.stderr);
    let report = run.json();
    assert_eq!(report["ok"], false);
    report["problems"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            assert!(!p["message"].as_str().unwrap().is_empty());
            (
                p["cast"].as_str().unwrap().to_owned(),
                p["seq"].as_u64().unwrap(),
                p["kind"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

fn problem(cast: &str, seq: u64, kind: &str) -> (String, u64, String) {
    (cast.to_owned(), seq, kind.to_owned())
}

// Regression: `verify` read the casts' heads, then their events, so an append committed in
// between made it exit 3 with "the chain goes past the recorded head seq".
#[test]
fn verify_while_another_process_appends_reports_no_false_damage() {
    let sandbox = Sandbox::new();
    sandbox.append("seed", 1);
    let mut writer = sandbox
        .command_on(&sandbox.db())
        .args(["bench", "append", "--events", "3000", "--batch", "1"])
        .args(["--payload-bytes", "64", "--durability", "normal"])
        .args(["--cast", "growing", "--json"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut rounds = 0;
    loop {
        let finished = writer.try_wait().unwrap().is_some();
        let run = sandbox.run(&["verify", "--json"]);
        assert_eq!(run.code, 0, "round {rounds}: {}{}", run.stdout, run.stderr);
        assert_eq!(run.json()["ok"], true);
        rounds += 1;
        if finished {
            break;
        }
    }
    assert!(writer.wait().unwrap().success());
    let report = sandbox.run(&["verify", "growing", "--json"]).json();
    assert_eq!(report["events"], 3000, "{report}");
}

// Regression: a row that does not decode ended `verify --json` with an empty stdout.
#[rstest]
#[case::kind_not_utf8("kind = CAST(x'ff' AS TEXT)", 2)]
#[case::payload_as_text("payload = CAST(payload AS TEXT)", 3)]
#[case::payload_as_integer("payload = 7", 1)]
#[case::short_hash("hash = x'0102'", 5)]
#[case::hash_as_integer("hash = 42", 4)]
#[case::prev_as_text("prev = 'abc'", 6)]
fn verify_json_names_a_row_that_does_not_decode(#[case] set: &str, #[case] seq: u64) {
    let sandbox = Sandbox::new();
    sandbox.append("c", 6);
    sandbox.append("other", 2);
    raw(&sandbox)
        .execute_batch(&format!(
            "DROP TRIGGER events_no_update;
             UPDATE events SET {set}
             WHERE cast_id = (SELECT id FROM casts WHERE cast_id = 'c') AND seq = {seq};"
        ))
        .unwrap();
    let mut expected = vec![problem("c", seq, "unreadable")];
    if set.starts_with("hash") {
        // The next event's link is this hash (schema v11 stores it once), so it is unreadable
        // too.
        expected.push(problem("c", seq + 1, "unreadable"));
    }
    assert_eq!(failed_report(&sandbox, &[]), expected);
    assert_eq!(failed_report(&sandbox, &["c"]), expected);
    assert_eq!(sandbox.run(&["verify", "other"]).code, 0);
}

/// The page number of the third leaf page of the events table (in key order), the seq of
/// its first row and its number of rows, when cast c is the only cast.
fn third_leaf(sandbox: &Sandbox) -> (i64, u64, u64) {
    raw(sandbox)
        .query_row(
            "WITH leaves AS (
                 SELECT pageno, ncell, row_number() OVER (ORDER BY path) AS n FROM dbstat
                 WHERE name = 'events' AND pagetype = 'leaf')
             SELECT pageno, (SELECT sum(ncell) FROM leaves WHERE n < 3) + 1, ncell
             FROM leaves WHERE n = 3",
            [],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .unwrap()
}

/// Overwrites the header of page `page` with bytes no page has.
fn smash_page(sandbox: &Sandbox, page: i64) {
    use std::io::{Seek, SeekFrom, Write};
    let size: i64 = raw(sandbox)
        .query_row("PRAGMA page_size", [], |r| r.get(0))
        .unwrap();
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .open(sandbox.db())
        .unwrap();
    file.seek(SeekFrom::Start(((page - 1) * size) as u64))
        .unwrap();
    file.write_all(&[0x42; 8]).unwrap();
}

// Regression: a damaged page of the events table ended `verify --json` with an empty stdout.
#[test]
fn verify_json_names_the_rows_of_a_damaged_page_and_checks_the_rows_after_it() {
    let sandbox = Sandbox::new();
    sandbox.append("c", 400);
    let (page, first, rows) = third_leaf(&sandbox);
    let last = first + rows - 1;
    assert!(last < 390, "seq 390 is after the page");
    // A row after the damaged page is altered too: it must still be found.
    let conn = raw(&sandbox);
    conn.execute_batch(
        "DROP TRIGGER events_no_update;
         UPDATE events SET at_ms = at_ms + 1 WHERE seq = 390;",
    )
    .unwrap();
    drop(conn);
    smash_page(&sandbox, page);
    // The page's rows are one span; the row after it keeps its link as the hash of the page's
    // last row (schema v11 stores it once), so it is named too.
    let expected = [
        problem("c", first, "unreadable"),
        problem("c", last + 1, "unreadable"),
        problem("c", 390, "hash_mismatch"),
    ];
    let run = sandbox.run(&["verify", "c", "--json"]);
    let message = run.json()["problems"][0]["message"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        message.contains(&format!("seqs {first} to {last}")),
        "{message}"
    );
    for args in [vec!["c"], vec![]] {
        // The cast's problems, then the checks over the table (misplaced rows, events of no
        // cast), which cannot read that page either and say so.
        let found = failed_report(&sandbox, &args);
        assert_eq!(found[..3], expected[..], "{args:?}");
        assert!(!found[3..].is_empty());
        for (cast, _, kind) in &found[3..] {
            assert_eq!((cast.as_str(), kind.as_str()), ("#events", "unreadable"));
        }
    }
}

// Regression: with a damaged `casts` table, `verify --json` printed nothing, and `verify c`
// said "no cast named c" (exit 1) when the damage was what hid it.
#[rstest]
#[case::head_hash_as_text("UPDATE casts SET head_hash = 'abc' WHERE cast_id = 'c'", "c")]
#[case::cast_id_not_utf8(
    "UPDATE casts SET cast_id = CAST(x'ff' AS TEXT) WHERE cast_id = 'c'",
    "#1"
)]
#[case::parent_seq_as_text(
    "UPDATE casts SET parent_cast = 'other', parent_seq = 'x', parent_hash = head_hash
     WHERE cast_id = 'c'",
    "c"
)]
fn a_damaged_casts_row_is_an_integrity_failure_not_an_unknown_cast(
    #[case] sql: &str,
    #[case] named: &str,
) {
    let sandbox = Sandbox::new();
    sandbox.append("c", 3);
    sandbox.append("other", 2);
    raw(&sandbox).execute_batch(sql).unwrap();
    let expected = vec![problem(named, 0, "unreadable")];
    assert_eq!(failed_report(&sandbox, &[]), expected);
    assert_eq!(failed_report(&sandbox, &["c"]), expected);
    assert_eq!(sandbox.run(&["verify", "other"]).code, 0);
}

#[derive(Debug, Clone, Copy)]
enum CastsDamage {
    /// The table's page is overwritten.
    TablePage,
    /// The page of its index of names is overwritten.
    IndexPage,
    /// The index names the cast otherwise (one byte of its name in the index changed).
    IndexName,
}

#[rstest]
#[case::table_page(CastsDamage::TablePage)]
#[case::index_page(CastsDamage::IndexPage)]
#[case::index_name(CastsDamage::IndexName)]
fn a_damaged_casts_page_or_index_is_an_integrity_failure(#[case] damage: CastsDamage) {
    let sandbox = Sandbox::new();
    sandbox.append("castname", 3);
    let page = |name: &str| -> i64 {
        raw(&sandbox)
            .query_row(
                "SELECT rootpage FROM sqlite_master WHERE name = ?1",
                [name],
                |r| r.get(0),
            )
            .unwrap()
    };
    match damage {
        CastsDamage::TablePage => smash_page(&sandbox, page("casts")),
        CastsDamage::IndexPage => smash_page(&sandbox, page("sqlite_autoindex_casts_1")),
        CastsDamage::IndexName => {
            let index = page("sqlite_autoindex_casts_1");
            let size: usize = raw(&sandbox)
                .query_row("PRAGMA page_size", [], |r| r.get(0))
                .unwrap();
            let mut bytes = std::fs::read(sandbox.db()).unwrap();
            let start = (index as usize - 1) * size;
            let at = bytes[start..start + size]
                .windows(8)
                .position(|w| w == b"castname")
                .expect("the index page holds the name");
            bytes[start + at] = b'C';
            std::fs::write(sandbox.db(), bytes).unwrap();
        }
    }
    let all = failed_report(&sandbox, &[]);
    assert!(all.iter().any(|(cast, _, _)| cast == "#casts"), "{all:?}");
    let named = failed_report(&sandbox, &["castname"]);
    assert!(!named.is_empty());
    for command in [vec!["show", "castname"], vec!["state", "castname"]] {
        let run = sandbox.run(&command);
        assert_eq!(run.code, 3, "{command:?}: {}", run.stderr);
        assert!(!run.stderr.contains("no cast named"), "{}", run.stderr);
    }
}
