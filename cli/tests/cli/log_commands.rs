//! `casts`, `show`, `verify`, `export`, `import` against real database files.

use std::process::Stdio;

use rstest::rstest;

use crate::common::{Sandbox, fixture};

fn raw(sandbox: &Sandbox) -> rusqlite::Connection {
    rusqlite::Connection::open(sandbox.db()).unwrap()
}

fn drop_triggers(conn: &rusqlite::Connection) {
    conn.execute_batch("DROP TRIGGER events_no_update; DROP TRIGGER events_no_delete;")
        .unwrap();
}

/// The (cast, seq, kind) of every problem of a `verify --json` report.
fn problem_list(report: &serde_json::Value) -> Vec<(String, u64, String)> {
    report["problems"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["cast"].as_str().unwrap().to_owned(),
                p["seq"].as_u64().unwrap(),
                p["kind"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

/// Runs `verify --json`, expects exit 3 and returns the first problem's (cast, seq, kind).
fn first_problem(sandbox: &Sandbox) -> (String, u64, String) {
    let run = sandbox.run(&["verify", "--json"]);
    assert_eq!(run.code, 3, "verify should fail: {}", run.stdout);
    let report = run.json();
    assert_eq!(report["ok"], false);
    let problem = &report["problems"][0];
    (
        problem["cast"].as_str().unwrap().to_owned(),
        problem["seq"].as_u64().unwrap(),
        problem["kind"].as_str().unwrap().to_owned(),
    )
}

#[test]
fn an_intact_log_verifies_with_the_documented_shape() {
    let sandbox = Sandbox::new();
    sandbox.append("one", 7);
    sandbox.append("two", 3);
    let run = sandbox.run(&["verify", "--json"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let report = run.json();
    assert_eq!(report["ok"], true);
    assert_eq!(report["casts"], 2);
    assert_eq!(report["events"], 10);
    assert_eq!(report["problems"].as_array().unwrap().len(), 0);

    let one = sandbox.run(&["verify", "one", "--json"]).json();
    assert_eq!(one["casts"], 1);
    assert_eq!(one["events"], 7);

    let casts = sandbox.run(&["casts", "--json"]).json();
    let names: Vec<&str> = casts["casts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["cast"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["one", "two"]);
    assert_eq!(casts["casts"][0]["head"], 7);

    let show = sandbox.run(&["show", "one"]);
    assert_eq!(show.code, 0);
    assert_eq!(
        show.stdout
            .lines()
            .filter(|l| l.contains("steering_noted"))
            .count(),
        7
    );
}

#[test]
fn a_flipped_payload_byte_is_named_by_seq() {
    let sandbox = Sandbox::new();
    sandbox.append("c", 10);
    let conn = raw(&sandbox);
    drop_triggers(&conn);
    let payload: Vec<u8> = conn
        .query_row("SELECT payload FROM events WHERE seq = 6", [], |r| r.get(0))
        .unwrap();
    let mut flipped = payload;
    flipped[12] ^= 0x01;
    conn.execute("UPDATE events SET payload = ?1 WHERE seq = 6", [flipped])
        .unwrap();
    drop(conn);
    assert_eq!(
        first_problem(&sandbox),
        ("c".into(), 6, "hash_mismatch".into())
    );
}

/// Regression: verify's human output named a problem's kind as Rust does (`HashMismatch`).
#[test]
fn verify_names_a_problem_kind_as_its_json_does() {
    let sandbox = Sandbox::new();
    sandbox.append("c", 3);
    let conn = raw(&sandbox);
    drop_triggers(&conn);
    conn.execute("UPDATE events SET at_ms = at_ms + 1 WHERE seq = 2", [])
        .unwrap();
    drop(conn);
    let run = sandbox.run(&["verify"]);
    assert_eq!(run.code, 3, "{}", run.stderr);
    assert!(
        run.stdout.contains("c seq 2: hash_mismatch: stored hash "),
        "{}",
        run.stdout
    );
}

#[test]
fn a_deleted_row_is_named_by_seq() {
    let sandbox = Sandbox::new();
    sandbox.append("c", 10);
    let conn = raw(&sandbox);
    drop_triggers(&conn);
    conn.execute("DELETE FROM events WHERE seq = 4", [])
        .unwrap();
    drop(conn);
    assert_eq!(first_problem(&sandbox), ("c".into(), 4, "missing".into()));
}

/// The casts table has no triggers: a deleted row there must not hide its events from
/// `verify`, which names them by the key they are stored under.
#[test]
fn events_of_a_deleted_cast_row_are_named() {
    let sandbox = Sandbox::new();
    sandbox.append("kept", 3);
    sandbox.append("gone", 5);
    let conn = raw(&sandbox);
    // As someone with the sqlite3 shell would, past the trigger that refuses it.
    conn.execute_batch("DROP TRIGGER casts_no_delete; DELETE FROM casts WHERE cast_id = 'gone';")
        .unwrap();
    drop(conn);
    let run = sandbox.run(&["verify", "--json"]);
    assert_eq!(run.code, 3, "{}", run.stdout);
    let problems = run.json()["problems"].as_array().unwrap().clone();
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert_eq!(problems[0]["kind"], "orphaned");
    assert_eq!(problems[0]["seq"], 1);
    assert!(
        problems[0]["message"]
            .as_str()
            .unwrap()
            .contains("5 events"),
        "{problems:?}"
    );
}

#[test]
fn reordered_rows_are_named_by_seq() {
    let sandbox = Sandbox::new();
    sandbox.append("c", 10);
    let conn = raw(&sandbox);
    drop_triggers(&conn);
    // The seq columns are swapped; the rows keep their ids (their addresses), which a CHECK
    // ties to the seq, so the tampering turns checks off.
    conn.execute_batch(
        "PRAGMA ignore_check_constraints = ON;
         UPDATE events SET seq = -1 WHERE seq = 3;
         UPDATE events SET seq = 3 WHERE seq = 8;
         UPDATE events SET seq = 8 WHERE seq = -1;",
    )
    .unwrap();
    drop(conn);
    let (cast, seq, _) = first_problem(&sandbox);
    assert_eq!((cast.as_str(), seq), ("c", 3));
}

#[test]
fn a_truncated_tail_is_named_by_seq() {
    let sandbox = Sandbox::new();
    sandbox.append("c", 10);
    let conn = raw(&sandbox);
    drop_triggers(&conn);
    conn.execute("DELETE FROM events WHERE seq > 7", [])
        .unwrap();
    drop(conn);
    assert_eq!(first_problem(&sandbox), ("c".into(), 8, "missing".into()));
}

/// A file damaged under schema version 5 (a copy of seq 5 and a seq no event can have, stored
/// once its UNIQUE index was gone) still opens: the upgrade keeps every row, and `verify`
/// names the copy as a duplicate and the other as misplaced, by cast and seq.
#[test]
fn rows_an_upgrade_kept_apart_are_named() {
    let sandbox = Sandbox::new();
    sandbox.append("c", 6);
    let conn = raw(&sandbox);
    drop_triggers(&conn);
    conn.execute_batch(
        "DROP TRIGGER casts_no_delete; DROP TABLE events_apart;
         CREATE TABLE loose (cast_id INTEGER NOT NULL, seq INTEGER NOT NULL,
             at_ms INTEGER NOT NULL, kind TEXT NOT NULL, v INTEGER NOT NULL,
             payload BLOB NOT NULL, prev BLOB NOT NULL, hash BLOB NOT NULL);
         INSERT INTO loose SELECT cast_id, seq, at_ms, kind, v, payload, prev, hash FROM events;
         DROP TABLE events;
         ALTER TABLE loose RENAME TO events;
         INSERT INTO events SELECT * FROM events WHERE seq = 5;
         INSERT INTO events SELECT cast_id, 0, at_ms, kind, v, payload, prev, hash
             FROM events WHERE seq = 1;
         PRAGMA user_version = 5;",
    )
    .unwrap();
    drop(conn);
    let run = sandbox.run(&["verify", "--json"]);
    assert_eq!(run.code, 3, "{}{}", run.stdout, run.stderr);
    let report = run.json();
    let problems = problem_list(&report);
    assert_eq!(
        problems,
        vec![
            ("c".to_owned(), 5, "duplicate".to_owned()),
            ("c".to_owned(), 0, "misplaced".to_owned()),
        ]
    );
    assert_eq!(report["events"], 6, "the cast itself reads whole");
    let rows: (i64, i64) = raw(&sandbox)
        .query_row(
            "SELECT (SELECT count(*) FROM events), (SELECT count(*) FROM events_apart)",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert_eq!(rows, (6, 2), "every row is kept");
}

/// A row whose cast key column was changed in place (past the CHECK that ties it to the row's
/// address) is named under the cast whose events read it, at the seq it is read as, also when
/// only that cast is verified; it is not taken for events of a deleted cast.
#[test]
fn a_row_changed_in_place_is_named_under_the_cast_that_reads_it() {
    let sandbox = Sandbox::new();
    sandbox.append("c", 6);
    sandbox.append("d", 3);
    let conn = raw(&sandbox);
    drop_triggers(&conn);
    conn.execute_batch(
        "PRAGMA ignore_check_constraints = ON;
         UPDATE events SET cast_id = 9 WHERE cast_id = 1 AND seq = 6;",
    )
    .unwrap();
    drop(conn);
    for args in [vec!["verify", "--json"], vec!["verify", "c", "--json"]] {
        let run = sandbox.run(&args);
        assert_eq!(run.code, 3, "{args:?}: {}", run.stdout);
        let problems = run.json()["problems"].as_array().unwrap().clone();
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert_eq!(
            (
                &problems[0]["cast"],
                &problems[0]["seq"],
                &problems[0]["kind"]
            ),
            (
                &serde_json::json!("c"),
                &serde_json::json!(6),
                &serde_json::json!("misplaced")
            )
        );
        let message = problems[0]["message"].as_str().unwrap();
        assert!(message.contains("changed in place"), "{message}");
    }
    assert_eq!(sandbox.run(&["verify", "d"]).code, 0);
}

/// A file of an older schema whose events table is gone cannot be upgraded: every command
/// names it as damage (exit 3), and the file is left as it was.
#[test]
fn an_older_file_without_its_events_table_is_named_as_damage() {
    let sandbox = Sandbox::new();
    sandbox.append("c", 3);
    let conn = raw(&sandbox);
    drop_triggers(&conn);
    conn.execute_batch(
        "DROP TABLE events; DROP TABLE events_apart; DROP TRIGGER casts_no_delete;
         PRAGMA user_version = 5;",
    )
    .unwrap();
    drop(conn);
    for command in [vec!["verify"], vec!["casts"]] {
        let run = sandbox.run(&command);
        assert_eq!(run.code, 3, "{command:?}: {}", run.stderr);
        assert!(
            run.stderr.contains("upgrading") && run.stderr.contains("no such table: events"),
            "{}",
            run.stderr
        );
    }
    let version: i64 = raw(&sandbox)
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap();
    assert_eq!(version, 5);
}

/// The v6 upgrade copies the events table row by row: a table with a column castlog does not
/// write (it would be dropped; one named `rowid` would hide the row ids the copy goes by) is
/// refused as damage, and the file is left at its version.
#[rstest]
#[case::another_column("note TEXT DEFAULT 'keep me'", "note")]
#[case::a_column_named_rowid("rowid", "rowid")]
fn an_older_file_the_upgrade_cannot_copy_whole_is_refused(
    #[case] column: &str,
    #[case] named: &str,
) {
    let sandbox = Sandbox::new();
    sandbox.append("c", 3);
    let conn = raw(&sandbox);
    drop_triggers(&conn);
    conn.execute_batch(&format!(
        "DROP TRIGGER casts_no_delete; DROP TABLE events_apart;
         CREATE TABLE loose ({column}, cast_id, seq, at_ms, kind, v, payload, prev, hash);
         INSERT INTO loose (cast_id, seq, at_ms, kind, v, payload, prev, hash)
             SELECT cast_id, seq, at_ms, kind, v, payload, prev, hash FROM events;
         DROP TABLE events;
         ALTER TABLE loose RENAME TO events;
         PRAGMA user_version = 5;"
    ))
    .unwrap();
    drop(conn);
    let run = sandbox.run(&["verify"]);
    assert_eq!(run.code, 3, "{}", run.stderr);
    assert!(
        run.stderr
            .contains(&format!("castlog does not write ({named})")),
        "{}",
        run.stderr
    );
    let (version, rows): (i64, i64) = raw(&sandbox)
        .query_row(
            "SELECT (SELECT user_version FROM pragma_user_version), (SELECT count(*) FROM events)",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert_eq!((version, rows), (5, 3));
}

/// Column names are case-insensitive in SQLite: a v5 table whose column is spelled `Seq` is
/// upgraded like any other.
#[test]
fn an_older_file_with_a_column_spelled_in_capitals_upgrades() {
    let sandbox = Sandbox::new();
    sandbox.append("c", 3);
    let conn = raw(&sandbox);
    drop_triggers(&conn);
    conn.execute_batch(
        "DROP TRIGGER casts_no_delete; DROP TABLE events_apart;
         CREATE TABLE loose (cast_id, Seq, at_ms, kind, v, payload, prev, hash);
         INSERT INTO loose SELECT cast_id, seq, at_ms, kind, v, payload, prev, hash FROM events;
         DROP TABLE events;
         ALTER TABLE loose RENAME TO events;
         PRAGMA user_version = 5;",
    )
    .unwrap();
    drop(conn);
    let run = sandbox.run(&["verify", "--json"]);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    assert_eq!(run.json()["events"], 3);
}

/// A row changed in place inside the range of a cast whose row was deleted is named under that
/// range's key, not under the cast its changed column names; a version 6 file made before
/// `events_apart` existed verifies clean.
#[test]
fn a_changed_row_of_a_deleted_cast_and_a_file_without_events_apart() {
    let sandbox = Sandbox::new();
    sandbox.append("kept", 3);
    sandbox.append("gone", 5);
    let conn = raw(&sandbox);
    conn.execute_batch("DROP TABLE events_apart;").unwrap();
    drop(conn);
    assert_eq!(sandbox.run(&["verify"]).code, 0);
    let conn = raw(&sandbox);
    drop_triggers(&conn);
    conn.execute_batch(
        "DROP TRIGGER casts_no_delete; DELETE FROM casts WHERE cast_id = 'gone';
         PRAGMA ignore_check_constraints = ON;
         UPDATE events SET cast_id = 1 WHERE cast_id = 2 AND seq = 5;",
    )
    .unwrap();
    drop(conn);
    let run = sandbox.run(&["verify", "--json"]);
    assert_eq!(run.code, 3, "{}", run.stdout);
    let problems = problem_list(&run.json());
    assert_eq!(
        problems,
        vec![
            ("#2".to_owned(), 1, "orphaned".to_owned()),
            ("#2".to_owned(), 5, "misplaced".to_owned()),
        ]
    );
}

#[test]
fn a_duplicated_seq_is_named() {
    let sandbox = Sandbox::new();
    sandbox.append("c", 6);
    let conn = raw(&sandbox);
    // An event's address (its row id) is unique by the table's definition, so rebuild the table
    // with the address as a plain column first.
    conn.execute_batch(
        "DROP TRIGGER events_no_update; DROP TRIGGER events_no_delete;
         CREATE TABLE loose AS SELECT * FROM events;
         DROP TABLE events;
         ALTER TABLE loose RENAME TO events;
         INSERT INTO events SELECT * FROM events WHERE seq = 5;",
    )
    .unwrap();
    drop(conn);
    assert_eq!(first_problem(&sandbox), ("c".into(), 5, "duplicate".into()));
}

/// Values of another type than castlog writes, or a table of castlog's gone, are damage: exit
/// 3 from `verify` and `casts`, never an internal error.
#[rstest]
#[case::text_head_hash("UPDATE casts SET head_hash = 'abc'")]
#[case::kind_not_utf8("UPDATE events SET kind = CAST(x'ff' AS TEXT) WHERE seq = 2")]
#[case::payload_as_text("UPDATE events SET payload = CAST(payload AS TEXT) WHERE seq = 2")]
#[case::no_events_table("DROP TABLE events")]
fn values_of_another_type_or_a_dropped_table_are_damage(#[case] sql: &str) {
    let sandbox = Sandbox::new();
    sandbox.append("c", 3);
    let conn = raw(&sandbox);
    drop_triggers(&conn);
    conn.execute_batch(&format!("{sql};")).unwrap();
    drop(conn);
    for command in [vec!["verify"], vec!["casts"]] {
        let run = sandbox.run(&command);
        assert_ne!(run.code, 2, "{command:?} after {sql}: {}", run.stderr);
        assert!(!run.stderr.contains("panicked"), "{}", run.stderr);
    }
    assert_eq!(sandbox.run(&["verify"]).code, 3, "after {sql}");
}

#[rstest]
#[case::update("UPDATE events SET at_ms = 0 WHERE seq = 1")]
#[case::delete("DELETE FROM events WHERE seq = 1")]
fn sql_cannot_change_an_intact_log(#[case] sql: &str) {
    let sandbox = Sandbox::new();
    sandbox.append("c", 2);
    let err = raw(&sandbox).execute(sql, []).unwrap_err();
    assert!(err.to_string().contains("append-only"), "{err}");
    assert_eq!(sandbox.run(&["verify"]).code, 0);
}

#[rstest]
#[case::jsonl("jsonl")]
#[case::bincode("bincode")]
fn export_then_import_reproduces_the_cast(#[case] format: &str) {
    let sandbox = Sandbox::new();
    sandbox.append("c", 12);
    let file = sandbox.path("c.export");
    let file_arg = file.to_str().unwrap();
    let run = sandbox.run(&["export", "c", "--format", format, "-o", file_arg, "--json"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.json()["events"], 12);

    let other = sandbox.path("other.db");
    let run = sandbox.run_on(&other, &["import", file_arg, "--json"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let original = sandbox.run(&["show", "c", "--json"]).json();
    let imported = sandbox.run_on(&other, &["show", "c", "--json"]).json();
    assert_eq!(original, imported);
    assert_eq!(sandbox.run_on(&other, &["verify"]).code, 0);

    // A second import of the same cast is refused, not merged.
    let again = sandbox.run_on(&other, &["import", file_arg]);
    assert_eq!(again.code, 1);
    assert!(again.stderr.contains("already exists"), "{}", again.stderr);
}

#[test]
fn a_tampered_export_is_refused_naming_the_seq() {
    let sandbox = Sandbox::new();
    sandbox.append("c", 5);
    let file = sandbox.path("c.jsonl");
    let file_arg = file.to_str().unwrap();
    assert_eq!(sandbox.run(&["export", "c", "-o", file_arg]).code, 0);
    let text = std::fs::read_to_string(&file).unwrap();
    let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
    // Line 0 is the header; line 4 is seq 4. Change one character of its payload text.
    let pos = lines[4].rfind("\"}").unwrap() - 1;
    let mut bytes = lines[4].clone().into_bytes();
    bytes[pos] = if bytes[pos] == b'x' { b'y' } else { b'x' };
    lines[4] = String::from_utf8(bytes).unwrap();
    std::fs::write(&file, lines.join("\n") + "\n").unwrap();

    let other = sandbox.path("other.db");
    let run = sandbox.run_on(&other, &["import", file_arg]);
    assert_eq!(run.code, 3, "{}", run.stderr);
    assert!(run.stderr.contains("seq 4"), "{}", run.stderr);
    let casts = sandbox.run_on(&other, &["casts", "--json"]).json();
    assert_eq!(
        casts["casts"].as_array().unwrap().len(),
        0,
        "nothing was stored"
    );
}

#[test]
fn a_file_that_is_not_sqlite_is_a_clear_user_error() {
    let sandbox = Sandbox::new();
    let db = sandbox.path("notes.txt");
    std::fs::write(&db, "these are my notes, not a database\n").unwrap();
    let run = sandbox.run_on(&db, &["casts"]);
    assert_eq!(run.code, 1);
    assert!(
        run.stderr.contains("not a SQLite database"),
        "{}",
        run.stderr
    );
    assert!(!run.stderr.contains("panicked"));
}

#[test]
fn a_damaged_database_file_is_an_error_not_a_panic() {
    let sandbox = Sandbox::new();
    sandbox.append("c", 400);
    // Checkpointed on close: the events live in the main file. Cut it in half.
    let bytes = std::fs::read(sandbox.db()).unwrap();
    std::fs::write(sandbox.db(), &bytes[..bytes.len() / 2]).unwrap();
    let run = sandbox.run(&["verify", "--json"]);
    assert!(
        run.code == 1 || run.code == 3,
        "exit {}: {}",
        run.code,
        run.stderr
    );
    assert!(!run.stderr.contains("panicked"), "{}", run.stderr);
    assert!(!run.stderr.is_empty() || !run.stdout.is_empty());
}

// Regression: castlog processes started together on a database that did not exist yet each
// applied the schema, and all but one failed with "table casts already exists".
#[test]
fn processes_started_together_on_a_new_database_all_run() {
    let sandbox = Sandbox::new();
    let script = format!("scripted:{}", fixture("scripts/build-loop.jsonl"));
    let children: Vec<_> = (0..8)
        .map(|i| {
            sandbox
                .build_loop(&format!("c{i}"), &script)
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for (i, child) in children.into_iter().enumerate() {
        let out = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "process {i}: {stderr}");
    }
    let casts = sandbox.run(&["casts", "--json"]).json();
    assert_eq!(casts["casts"].as_array().unwrap().len(), 8, "{casts}");
    assert_eq!(sandbox.run(&["verify", "--json"]).json()["ok"], true);
}

#[test]
fn another_sqlite_database_is_not_taken_for_castlog() {
    let sandbox = Sandbox::new();
    let db = sandbox.path("app.db");
    rusqlite::Connection::open(&db)
        .unwrap()
        .execute_batch("CREATE TABLE users (id INTEGER);")
        .unwrap();
    let run = sandbox.run_on(&db, &["casts"]);
    assert_eq!(run.code, 1);
    assert!(
        run.stderr.contains("not a castlog database"),
        "{}",
        run.stderr
    );
}

#[test]
fn unknown_casts_and_missing_databases_are_user_errors() {
    let sandbox = Sandbox::new();
    let run = sandbox.run(&["casts"]);
    assert_eq!(run.code, 1);
    assert!(run.stderr.contains("no castlog database"), "{}", run.stderr);
    sandbox.append("c", 1);
    let run = sandbox.run(&["show", "nope"]);
    assert_eq!(run.code, 1);
    assert!(run.stderr.contains("no cast named"), "{}", run.stderr);
}

/// `casts` once padded the cast column to 28 characters and did not pad the events column at
/// all, so a long id pushed its row out of line with the header.
#[test]
fn casts_columns_line_up_with_long_ids() {
    let sandbox = Sandbox::new();
    sandbox.append("a", 3);
    sandbox.append("a-cast-id-much-longer-than-twenty-eight-characters", 12);
    let run = sandbox.run(&["casts"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let lines: Vec<&str> = run.stdout.lines().collect();
    assert_eq!(lines.len(), 3, "{}", run.stdout);
    // Every row's head column starts where the header's does.
    let at = lines[0].find("head").unwrap();
    for line in &lines[1..] {
        let before = &line[..at];
        assert!(before.ends_with("  "), "{:?}", lines);
        assert!(
            before.trim_end().ends_with(char::is_numeric),
            "events end right before the head column: {lines:?}"
        );
        assert_eq!(line[at..].find(' '), Some(12), "{lines:?}");
    }
}
