//! With `--json`, a command that fails prints one JSON document too (`{"error": {"code",
//! "kind", "message"}}`), so a script reads stdout the same way whatever happened; the exit
//! code and the message on stderr stay as they were.

use crate::common::Sandbox;

#[test]
fn a_failing_command_with_json_prints_one_error_document() {
    let sandbox = Sandbox::new();
    sandbox.completed_build_loop("demo");
    let cases: [(&[&str], i32, &str, &str); 3] = [
        (
            &["show", "nope", "--json"],
            1,
            "user",
            "no cast named \"nope\"",
        ),
        (
            &[
                "run",
                "missing.json",
                "--task",
                "t",
                "--agent",
                "scripted:x",
                "--json",
            ],
            1,
            "user",
            "cannot read config missing.json",
        ),
        (
            &["casts", "--json", "--bogus"],
            1,
            "user",
            "unexpected argument '--bogus'",
        ),
    ];
    for (args, code, kind, message) in cases {
        let run = sandbox.run(args);
        assert_eq!(run.code, code, "{args:?}: {}", run.stderr);
        let doc = run.json();
        assert_eq!(doc["error"]["code"], code, "{args:?}");
        assert_eq!(doc["error"]["kind"], kind, "{args:?}");
        let said = doc["error"]["message"].as_str().unwrap();
        assert!(said.contains(message), "{args:?}: {said}");
        assert!(run.stderr.contains(message), "{args:?}: {}", run.stderr);
    }
}

#[test]
fn an_integrity_failure_with_json_is_kind_integrity_and_a_report_is_not_doubled() {
    let sandbox = Sandbox::new();
    sandbox.completed_build_loop("demo");
    let conn = rusqlite::Connection::open(sandbox.db()).unwrap();
    conn.execute_batch(
        "DROP TRIGGER events_no_update; UPDATE events SET payload = CAST('{}' AS BLOB) WHERE seq = 5;",
    )
    .unwrap();
    drop(conn);
    // verify prints its report (the one document) and exits 3: no error document after it.
    let run = sandbox.run(&["verify", "--json"]);
    assert_eq!(run.code, 3);
    let report = run.json();
    assert_eq!(report["ok"], false);
    assert!(report.get("error").is_none());
}

#[test]
fn without_json_a_failure_prints_nothing_on_stdout() {
    let sandbox = Sandbox::new();
    let run = sandbox.run(&[
        "run",
        "missing.json",
        "--task",
        "t",
        "--agent",
        "scripted:x",
    ]);
    assert_eq!(run.code, 1);
    assert_eq!(run.stdout, "");
}
