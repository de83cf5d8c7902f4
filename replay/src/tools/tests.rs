use serde_json::json;

use super::{Scope, Workdir, run};
use crate::process::Launcher;

fn setup() -> (tempfile::TempDir, Workdir, Launcher) {
    let dir = tempfile::tempdir().unwrap();
    let workdir = Workdir::open(dir.path()).unwrap();
    (dir, workdir, Launcher::new(&[]))
}

#[test]
fn read_only_scope_refuses_write_and_writes_nothing() {
    let (dir, wd, l) = setup();
    let out = run(
        &Scope::ReadOnly,
        &wd,
        &l,
        "write",
        &json!({"path": "a.txt", "content": "x"}),
    );
    assert!(out.error && out.text.contains("not allowed"), "{out:?}");
    assert!(!dir.path().join("a.txt").exists());
}

#[test]
fn paths_leaving_the_workdir_are_refused() {
    let (dir, wd, l) = setup();
    let outside = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(outside.path(), dir.path().join("out")).unwrap();
    for path in ["../x.txt", "/tmp/x.txt", "out/x.txt", "sub/../../x.txt"] {
        let out = run(
            &Scope::Coding,
            &wd,
            &l,
            "write",
            &json!({"path": path, "content": "x"}),
        );
        assert!(out.error, "{path}: {out:?}");
    }
    assert!(!outside.path().join("x.txt").exists());
}

#[test]
fn write_edit_read_and_bash_work_in_the_workdir() {
    let (dir, wd, l) = setup();
    let coding = Scope::Coding;
    let w = run(
        &coding,
        &wd,
        &l,
        "write",
        &json!({"path": "src/a.txt", "content": "one\ntwo\n"}),
    );
    assert!(!w.error, "{w:?}");
    let e = run(
        &coding,
        &wd,
        &l,
        "edit",
        &json!({"path": "src/a.txt", "edits": [{"oldText": "one", "newText": "1"}, {"oldText": "two", "newText": "2"}]}),
    );
    assert!(!e.error, "{e:?}");
    let single = run(
        &coding,
        &wd,
        &l,
        "edit",
        &json!({"path": "src/a.txt", "oldText": "2", "newText": "two"}),
    );
    assert!(!single.error, "{single:?}");
    assert_eq!(
        std::fs::read_to_string(dir.path().join("src/a.txt")).unwrap(),
        "1\ntwo\n"
    );
    let r = run(&coding, &wd, &l, "read", &json!({"path": "src/a.txt"}));
    assert_eq!(r.text, "1\ntwo\n");
    let b = run(&coding, &wd, &l, "bash", &json!({"command": "ls src"}));
    assert_eq!(
        (b.text.as_str(), b.exit, b.error),
        ("a.txt\n", Some(0), false)
    );
    let f = run(&coding, &wd, &l, "find", &json!({"pattern": "*.txt"}));
    assert_eq!(f.text, "src/a.txt");
    let g = run(&coding, &wd, &l, "grep", &json!({"pattern": "two"}));
    assert_eq!(g.text, "src/a.txt:2:two");
    let ls = run(&Scope::ReadOnly, &wd, &l, "ls", &json!({}));
    assert_eq!(ls.text, "src/");
}

#[test]
fn edits_must_be_unique_and_not_overlap() {
    let (dir, wd, l) = setup();
    std::fs::write(dir.path().join("a"), "abab").unwrap();
    let twice = run(
        &Scope::Coding,
        &wd,
        &l,
        "edit",
        &json!({"path": "a", "oldText": "ab", "newText": "x"}),
    );
    assert!(
        twice.error && twice.text.contains("more than once"),
        "{twice:?}"
    );
    let overlap = run(
        &Scope::Coding,
        &wd,
        &l,
        "edit",
        &json!({"path": "a", "edits": [{"oldText": "aba", "newText": "x"}, {"oldText": "bab", "newText": "y"}]}),
    );
    assert!(
        overlap.error && overlap.text.contains("overlap"),
        "{overlap:?}"
    );
    assert_eq!(
        std::fs::read_to_string(dir.path().join("a")).unwrap(),
        "abab"
    );
}

#[test]
fn scopes_parse_from_materia_tools() {
    assert_eq!(
        Scope::parse(Some(&json!("readOnly"))).unwrap().tools(),
        ["read", "ls", "grep", "find"]
    );
    assert_eq!(
        Scope::parse(Some(&json!("coding"))).unwrap().tools().len(),
        7
    );
    assert_eq!(Scope::parse(None).unwrap(), Scope::None);
    let custom = Scope::parse(Some(&json!({"type": "custom", "tools": ["read", "bash"]}))).unwrap();
    assert!(custom.allows("bash") && !custom.allows("write"));
    assert!(Scope::parse(Some(&json!("everything"))).is_err());
    assert!(Scope::parse(Some(&json!({"type": "custom", "tools": ["rm"]}))).is_err());
}
