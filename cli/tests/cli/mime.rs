//! The built-ins for pi-materia's Commit-Sigil (Conventional Commit titles, the work items
//! passed through) and Mime-Bootstrap / Mime-Maintain (a git branch per cast, one commit per
//! accepted work item), named as the bundled config names them (`script.kind:
//! shippedUtility`), in `fixtures/loadouts/mime.json`.

use std::path::Path;

use crate::common::{Sandbox, fixture, git, scripted, with_git_identity};

fn mime_run(sb: &Sandbox, workdir: &Path, cast: &str) -> crate::common::Run {
    let loadout = fixture("loadouts/mime.json");
    let agent = scripted("mime.jsonl");
    sb.finish(
        with_git_identity(&mut sb.command_on(&sb.db()))
            .args([
                "run", &loadout, "--task", "greet", "--cast", cast, "--agent", &agent,
            ])
            .arg("--workdir")
            .arg(workdir),
    )
}

#[test]
fn a_cast_works_on_its_own_branch_and_commits_each_accepted_item_under_its_conventional_title() {
    let sb = Sandbox::new();
    let repo = sb.path("repo");
    std::fs::create_dir(&repo).unwrap();
    git(&repo, &["init", "--quiet", "--initial-branch", "main"]);
    git(
        &repo,
        &["commit", "--quiet", "--allow-empty", "--message", "init"],
    );
    let run = mime_run(&sb, &repo, "m1");
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run.stdout.contains("cast m1: completed"), "{}", run.stdout);
    // Commit-Sigil sent the first plan back: "Add a greeting" is no Conventional Commit title.
    let show = sb.run(&["show", "m1"]);
    assert!(
        show.stdout
            .contains("Socket-3 -> Socket-2 (not_satisfied, traversal 1)"),
        "{}",
        show.stdout
    );
    assert!(
        show.stdout.contains("rename these titles"),
        "{}",
        show.stdout
    );
    assert_eq!(git(&repo, &["branch", "--show-current"]), "mime/m1");
    assert_eq!(
        git(&repo, &["log", "--format=%s", "mime/m1"]),
        "docs: add a readme\nfeat: add a greeting\ninit"
    );
    assert_eq!(git(&repo, &["log", "--format=%s", "main"]), "init");
    assert_eq!(
        git(&repo, &["show", "--name-only", "--format=", "mime/m1~1"]),
        "greet.txt"
    );
    let state = sb.run(&["state", "m1", "--json"]);
    let data = &state.json()["data"];
    assert_eq!(data["mimeBootstrap"]["branchName"], "mime/m1", "{data}");
    assert_eq!(
        data["mimeMaintain"]["title"], "docs: add a readme",
        "{data}"
    );
    let verify = sb.run(&["verify", "m1"]);
    assert_eq!(verify.code, 0, "{}{}", verify.stdout, verify.stderr);
}

#[test]
fn a_working_directory_that_is_not_a_repository_root_fails_with_the_reason() {
    let sb = Sandbox::new();
    let plain = sb.path("plain");
    std::fs::create_dir(&plain).unwrap();
    let run = mime_run(&sb, &plain, "m2");
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run.stdout.contains("cast m2: failed"), "{}", run.stdout);
    assert!(
        run.stdout
            .contains("is not a git repository; run `git init` there first"),
        "{}",
        run.stdout
    );
    // Inside a repository but not at its root: refused, nothing committed there.
    let repo = sb.path("repo");
    std::fs::create_dir_all(repo.join("sub")).unwrap();
    git(&repo, &["init", "--quiet", "--initial-branch", "main"]);
    git(
        &repo,
        &["commit", "--quiet", "--allow-empty", "--message", "init"],
    );
    let inner = mime_run(&sb, &repo.join("sub"), "m3");
    assert!(inner.stdout.contains("not its root"), "{}", inner.stdout);
    assert_eq!(git(&repo, &["branch", "--show-current"]), "main");
}
