//! Running the real `castlog` binary in a scratch directory.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// A scratch directory with a database path and a way to run castlog against it.
pub struct Sandbox {
    pub dir: tempfile::TempDir,
}

/// What one run printed and returned.
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("stdout is not one JSON document ({e}): {}", self.stdout))
    }

    /// A failed command's stdout: nothing, or (under `--json`) one error document with its
    /// exit code and the message it printed on stderr.
    pub fn assert_failure_stdout(&self) {
        if self.stdout.is_empty() {
            return;
        }
        let doc = self.json();
        assert_eq!(doc["error"]["code"], self.code, "{}", self.stdout);
        let message = doc["error"]["message"].as_str().unwrap_or_default();
        assert!(
            !message.is_empty() && self.stderr.contains(message),
            "the error document says {message:?}, stderr says {}",
            self.stderr
        );
    }
}

/// The absolute path of a file under the workspace's `fixtures/` directory.
pub fn fixture(path: &str) -> String {
    format!(
        "{}{path}",
        concat!(env!("CARGO_MANIFEST_DIR"), "/../fixtures/")
    )
}

/// The lines of a fixture file (e.g. an agent script).
pub fn fixture_lines(path: &str) -> Vec<String> {
    std::fs::read_to_string(fixture(path))
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect()
}

/// How many `socket_completed` lines of a JSONL export hold `with` and not `without`.
pub fn completion_lines(jsonl: &str, with: &str, without: &str) -> usize {
    jsonl
        .lines()
        .filter(|l| l.contains(r#""kind":"socket_completed""#))
        .filter(|l| l.contains(with) && !l.contains(without))
        .count()
}

/// The agent SPEC of a shipped script: `scripted:` and the path of `fixtures/scripts/NAME`.
pub fn scripted(name: &str) -> String {
    format!("scripted:{}", fixture(&format!("scripts/{name}")))
}

pub fn castlog_bin() -> &'static str {
    env!("CARGO_BIN_EXE_castlog")
}

impl Sandbox {
    pub fn new() -> Self {
        Self {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    pub fn db(&self) -> PathBuf {
        self.path("castlog.db")
    }

    /// A command for castlog against `db`, run in the sandbox directory.
    pub fn command_on(&self, db: &Path) -> Command {
        let mut cmd = Command::new(castlog_bin());
        cmd.current_dir(self.dir.path())
            .env_remove("CASTLOG_DB")
            .env_remove("CASTLOG_ANCHOR")
            .env_remove("XDG_CONFIG_HOME")
            // The user config layer is the sandbox's own (empty unless a test writes it).
            .env("PI_MATERIA_PROFILE_DIR", self.path("profile"))
            .env("NO_COLOR", "1")
            .arg("--db")
            .arg(db);
        cmd
    }

    /// Writes `text` to `name` in the sandbox directory and returns its absolute path.
    pub fn write(&self, name: &str, text: &str) -> String {
        let path = self.path(name);
        std::fs::write(&path, text).unwrap();
        path.to_str().unwrap().to_owned()
    }

    /// A `cmd:` sender that records each call as a line (the claim id) in the returned file,
    /// then runs `then` (shell text: what it prints is the message id).
    pub fn counting_sender(&self, then: &str) -> (PathBuf, String) {
        let calls = self.path("sender-calls");
        let script = self.write(
            "sender.sh",
            &format!(
                "cat > /dev/null\necho \"$CASTLOG_CLAIM\" >> {}\n{then}\n",
                calls.display()
            ),
        );
        (calls, format!("cmd:sh {script}"))
    }

    /// `castlog run` of the build-loop fixture's `greet` task as cast `cast` with the agent
    /// `spec` (JSON output), against the sandbox database, to run or spawn.
    pub fn build_loop(&self, cast: &str, spec: &str) -> Command {
        let mut cmd = self.command_on(&self.db());
        cmd.args([
            "run",
            &fixture("loadouts/build-loop.json"),
            "--task",
            "greet",
        ])
        .args(["--cast", cast, "--agent", spec, "--json"]);
        cmd
    }

    /// Runs the build-loop fixture as `cast` with its shipped script and expects it to
    /// complete; the run's JSON output is returned.
    pub fn completed_build_loop(&self, cast: &str) -> Run {
        let run = self.finish(&mut self.build_loop(cast, &scripted("build-loop.jsonl")));
        assert_eq!(run.code, 0, "{}", run.stderr);
        assert_eq!(run.json()["status"], "completed", "{}", run.stdout);
        run
    }

    /// Runs a command built by this sandbox to the end.
    pub fn finish(&self, cmd: &mut Command) -> Run {
        to_run(&cmd.output().unwrap())
    }

    /// A `cmd:` sender that, when called, first asks `castlog claims --pending --json` on the
    /// sandbox database what is pending (kept in the returned file), then answers with a
    /// message id. Its calls are counted like [`Sandbox::counting_sender`]'s.
    pub fn witnessing_sender(&self) -> (SenderWitness, String) {
        let seen = self.path("pending-at-send.json");
        let (calls, spec) = self.counting_sender(&format!(
            "{} --db {} claims --pending --json > {}\necho \"msg-$CASTLOG_CLAIM\"",
            castlog_bin(),
            self.db().display(),
            seen.display()
        ));
        (SenderWitness { calls, seen }, spec)
    }

    /// A closed [`Gate`]; the database is created now, so that the runs meeting there open
    /// the same schema.
    pub fn gate(&self) -> Gate {
        let arrived = self.path("arrived");
        std::fs::create_dir(&arrived).unwrap();
        self.append("warmup", 1);
        Gate {
            arrived,
            go: self.path("go"),
        }
    }

    /// Runs castlog with `args` against the sandbox database.
    pub fn run(&self, args: &[&str]) -> Run {
        self.run_on(&self.db(), args)
    }

    /// Runs castlog with `args` against another database file.
    pub fn run_on(&self, db: &Path, args: &[&str]) -> Run {
        self.finish(self.command_on(db).args(args))
    }

    /// Appends `events` steering events to `cast` through `bench append`.
    pub fn append(&self, cast: &str, events: u64) {
        let run = self.run(&[
            "bench",
            "append",
            "--events",
            &events.to_string(),
            "--payload-bytes",
            "64",
            "--durability",
            "normal",
            "--cast",
            cast,
            "--json",
        ]);
        assert_eq!(run.code, 0, "bench append failed: {}", run.stderr);
    }
}

/// Holds racing castlog runs at one `cmd:` agent turn until all of them are there, then lets
/// them go together.
pub struct Gate {
    arrived: PathBuf,
    go: PathBuf,
}

impl Gate {
    /// Shell text for a `cmd:` agent script: wait at the gate.
    pub fn wait(&self) -> String {
        format!(
            "touch {}/$$\nwhile [ ! -e {} ]; do sleep 0.001; done\n",
            self.arrived.display(),
            self.go.display()
        )
    }

    /// Waits until `runs` runs wait at the gate, then opens it. Before that it creates a long
    /// cast: being newer than the runs' casts, it is read last by every ledger check they make
    /// next, so their checks overlap and only the compare-and-set on the destination's ledger
    /// chain can keep a day for one of them.
    pub fn open_when(&self, sandbox: &Sandbox, runs: usize) {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while std::fs::read_dir(&self.arrived).unwrap().count() < runs {
            assert!(
                std::time::Instant::now() < deadline,
                "the runs never reached the gate"
            );
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        sandbox.append("long", 5000);
        std::fs::write(&self.go, "").unwrap();
    }
}

/// What a [`Sandbox::witnessing_sender`] saw.
pub struct SenderWitness {
    calls: PathBuf,
    seen: PathBuf,
}

impl SenderWitness {
    /// Asserts the sender ran exactly once and that, when it ran, its own claim was already
    /// in the database as pending (claimed before sent); returns the claim's id.
    pub fn assert_claimed_before_sent(&self) -> String {
        let calls = std::fs::read_to_string(&self.calls).expect("the sender was never called");
        let claims: Vec<&str> = calls.lines().collect();
        assert_eq!(claims.len(), 1, "the sender ran {} times", claims.len());
        let seen: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&self.seen).unwrap())
                .expect("the sender's `claims --pending --json` printed no JSON");
        let pending = seen["claims"].as_array().unwrap();
        assert!(
            pending
                .iter()
                .any(|c| c["claim"] == claims[0] && c["status"] == "pending"),
            "claim {} was not pending in the database when its sender ran: {seen}",
            claims[0]
        );
        claims[0].to_owned()
    }
}

/// A one-shot webhook endpoint on localhost: it answers the first POST with `{"id": ID}` and
/// hands back the request's JSON body.
pub fn webhook_once(id: &str) -> (String, std::thread::JoinHandle<serde_json::Value>) {
    use std::io::{BufRead, BufReader, Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/post", listener.local_addr().unwrap());
    let answer = serde_json::json!({ "id": id }).to_string();
    let handle = std::thread::spawn(move || {
        let (stream, _) = listener.accept().unwrap();
        let mut reader = BufReader::new(stream);
        let mut length = 0;
        loop {
            let mut line = String::new();
            reader.read_line(&mut line).unwrap();
            if line.trim().is_empty() {
                break;
            }
            if let Some((name, value)) = line.split_once(':')
                && name.eq_ignore_ascii_case("content-length")
            {
                length = value.trim().parse().unwrap();
            }
        }
        let mut body = vec![0; length];
        reader.read_exact(&mut body).unwrap();
        let mut stream = reader.into_inner();
        write!(
            stream,
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{answer}",
            answer.len()
        )
        .unwrap();
        serde_json::from_slice(&body).unwrap()
    });
    (url, handle)
}

pub fn to_run(out: &Output) -> Run {
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// `cmd` with a git identity of its own (the machine's may have none), for a command whose
/// programs commit.
pub fn with_git_identity(cmd: &mut Command) -> &mut Command {
    cmd.env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@example.com")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@example.com")
}

/// Runs git in `dir` (with [`with_git_identity`]) and returns its trimmed stdout; a failure
/// fails the test, naming the arguments.
pub fn git(dir: &Path, args: &[&str]) -> String {
    let out = with_git_identity(Command::new("git").args(args).current_dir(dir))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// Rewrites every packed value of the SQLite database at `db` as it was given (payloads,
/// chunks and caches unpacked, their `packed` columns 0), as a build that packs nothing would
/// have stored them, so a test can damage a value by editing its text in SQL. The events
/// table's append-only trigger is put back as it was.
/// A stored event payload of cast `cast` as JSON, from its row's bytes, as castlog reads it
/// back (`castlog_events::sqlite::stored_payload_json`): a plain zstd frame (schema v10), its
/// shorthand (03, v11) or a frame of its shorthand (04, v11), or the rest of a split payload
/// (01, v11: its text is in the chunks, which this does not read). `None`: stored as given.
pub fn stored_payload(stored: &[u8], cast: &str) -> Option<Vec<u8>> {
    matches!(stored.first()?, 0x01 | 0x03 | 0x04 | 0x28)
        .then(|| castlog_events::sqlite::stored_payload_json(stored, cast).unwrap())
}

pub fn unpack_values(db: &Path) {
    let conn = rusqlite::Connection::open(db).unwrap();
    let trigger: String = conn
        .query_row(
            "SELECT sql FROM sqlite_master WHERE type = 'trigger' AND name = 'events_no_update'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    conn.execute_batch("BEGIN; DROP TRIGGER events_no_update;")
        .unwrap();
    // Payloads packed whole, plainly, against the dictionary or in shorthand; a split payload
    // is left as it is (its text is in the chunks).
    let payloads: Vec<(i64, Vec<u8>, String)> = {
        let mut stmt = conn
            .prepare(
                "SELECT e.id, e.payload, c.cast_id FROM events e JOIN casts c ON c.id = e.id >> 32
                 WHERE substr(e.payload, 1, 4) = x'28b52ffd'
                    OR substr(e.payload, 1, 1) IN (x'03', x'04')",
            )
            .unwrap();
        stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .unwrap()
            .map(Result::unwrap)
            .collect()
    };
    for (id, stored, cast) in payloads {
        let payload = stored_payload(&stored, &cast).unwrap();
        conn.execute(
            "UPDATE events SET payload = ?1 WHERE id = ?2",
            rusqlite::params![payload, id],
        )
        .unwrap();
    }
    // (table, its key, the packed value, which rows are packed, what the update sets)
    for (table, key, value, packed, set) in [
        (
            "chunks",
            "id",
            "bytes",
            "packed = 1",
            "bytes = ?1, packed = 0",
        ),
        (
            "checkpoints",
            "cast_id || char(0) || name",
            "bytes",
            "packed = 1",
            "bytes = ?1, packed = 0",
        ),
    ] {
        let rows: Vec<(rusqlite::types::Value, Vec<u8>)> = {
            let mut stmt = conn
                .prepare(&format!(
                    "SELECT {key}, {value} FROM {table} WHERE {packed}"
                ))
                .unwrap();
            stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
                .unwrap()
                .map(Result::unwrap)
                .collect()
        };
        for (at, frame) in rows {
            let bytes = zstd::decode_all(frame.as_slice()).unwrap();
            let changed = conn
                .execute(
                    &format!("UPDATE {table} SET {set} WHERE {key} = ?2"),
                    rusqlite::params![bytes, at],
                )
                .unwrap();
            assert_eq!(changed, 1, "unpacking a row of {table}");
        }
    }
    conn.execute_batch(&format!("{trigger}; COMMIT;")).unwrap();
}

/// Marks the sandbox database read-only the way SQLite reads it from the file itself (a write
/// version above 2 in its header), which holds for every user, root included.
pub fn make_read_only(sandbox: &Sandbox) {
    let mut bytes = std::fs::read(sandbox.db()).unwrap();
    assert_eq!(&bytes[18..20], &[2, 2], "a WAL database");
    bytes[18] = 3;
    std::fs::write(sandbox.db(), bytes).unwrap();
}
