//! No secret reaches the log: programs castlog starts get no deny-listed variable unless it is
//! passed with `--pass-env`, and whatever comes back from outside (a utility's output, an
//! agent's reply, an HTTP error body, a URL) is scrubbed of the key values and of URL userinfo.
//! Each test reads the database file and its WAL as bytes.

use std::io::{BufRead, BufReader, Read, Write};
use std::process::Command;

use serde_json::json;

use crate::common::{Sandbox, stored_payload};

/// castlog's own key, long enough to be scrubbed.
const CASTLOG_KEY: &str = "sk-castlog-test-6f1d2a9b8c7e";
/// Another deny-listed key.
const OPENAI_KEY: &str = "sk-openai-test-3e5a7c9d1b2f";
/// A password in a URL.
const URL_PASSWORD: &str = "url-password-4b8d2f6a";
/// A variable that is not deny-listed: children get it, and it shows that the environment an
/// echo printed did reach the log.
const VISIBLE: (&str, &str) = ("CASTLOG_TEST_VISIBLE", "visible-marker-91c3");

/// A castlog command with the fake keys in its environment.
fn with_keys(sandbox: &Sandbox) -> Command {
    let mut cmd = sandbox.command_on(&sandbox.db());
    cmd.env("CASTLOG_API_KEY", CASTLOG_KEY)
        .env("OPENAI_API_KEY", OPENAI_KEY)
        .env(VISIBLE.0, VISIBLE.1);
    cmd
}

/// The bytes of the database file and of every file beside it that SQLite keeps for it, and
/// every packed value of the database unpacked (packed bytes would hide a key from a search).
fn stored_bytes(sandbox: &Sandbox) -> Vec<u8> {
    let mut bytes = std::fs::read(sandbox.db()).expect("the database exists");
    for suffix in ["-wal", "-shm", "-journal"] {
        let path = sandbox.path(&format!("castlog.db{suffix}"));
        if let Ok(more) = std::fs::read(path) {
            bytes.extend(more);
        }
    }
    let conn = rusqlite::Connection::open(sandbox.db()).unwrap();
    let mut stmt = conn
        .prepare("SELECT e.payload, c.cast_id FROM events e JOIN casts c ON c.id = e.id >> 32")
        .unwrap();
    let rows = stmt.query_map([], |r| {
        Ok((r.get::<_, Vec<u8>>(0)?, r.get::<_, String>(1)?))
    });
    for row in rows.unwrap() {
        let (stored, cast) = row.unwrap();
        bytes.extend(stored_payload(&stored, &cast).unwrap_or_default());
    }
    for sql in [
        "SELECT bytes FROM chunks WHERE packed = 1",
        "SELECT bytes FROM checkpoints WHERE packed = 1",
    ] {
        let mut stmt = conn.prepare(sql).unwrap();
        let packed = stmt.query_map([], |r| r.get::<_, Vec<u8>>(0)).unwrap();
        for frame in packed {
            bytes.extend(zstd::decode_all(frame.unwrap().as_slice()).unwrap());
        }
    }
    bytes
}

fn hits(haystack: &[u8], needle: &str) -> usize {
    haystack
        .windows(needle.len())
        .filter(|w| *w == needle.as_bytes())
        .count()
}

/// Asserts no key, password or withheld variable is stored, and that every one of `present`
/// is (what an echo put there reached the log, so the search could have found a key).
fn assert_no_secret_stored(sandbox: &Sandbox, present: &[&str]) {
    let bytes = stored_bytes(sandbox);
    for secret in [CASTLOG_KEY, OPENAI_KEY, URL_PASSWORD, "CASTLOG_API_KEY="] {
        assert_eq!(hits(&bytes, secret), 0, "{secret:?} is in the database");
    }
    for marker in present {
        assert!(
            hits(&bytes, marker) > 0,
            "{marker:?} is not in the database"
        );
    }
}

/// Writes a file holding the keys and a URL with a password: what a program that found them
/// some other way than its environment would print.
fn leak_file(sandbox: &Sandbox) -> String {
    sandbox.write(
        "leak.txt",
        &format!(
            "castlog {CASTLOG_KEY} openai {OPENAI_KEY} at http://me:{URL_PASSWORD}@example.test/v1\n"
        ),
    )
}

/// One utility socket, then one agent socket.
fn tool_then_say(sandbox: &Sandbox, command: &[&str]) -> String {
    let config = json!({
        "activeLoadout": "Tool-Then-Say",
        "loadouts": { "Tool-Then-Say": {
            "entry": "Socket-1",
            "sockets": {
                "Socket-1": { "materia": "Tool", "edges": [{ "when": "always", "to": "Socket-2" }] },
                "Socket-2": { "materia": "Say", "parse": "text" }
            }
        }},
        "materia": {
            "Tool": { "type": "utility", "label": "Tool", "parse": "json", "command": command },
            "Say": { "type": "agent", "tools": "readOnly", "prompt": "Say what happened: {{request}}" }
        }
    });
    sandbox.write("tool.json", &config.to_string())
}

#[test]
fn a_utility_and_a_cmd_agent_echoing_env_and_keys_leave_no_key_in_the_log() {
    let sandbox = Sandbox::new();
    let leak = leak_file(&sandbox);
    // The utility prints its environment on stderr and the keys it read in its state.
    let utility = format!(
        "env >&2; printf '{{\"state\": {{\"found\": \"%s\"}}}}' \"$(cat {leak})\"; \
         echo \"openai=[$OPENAI_API_KEY]\" >&2"
    );
    let config = tool_then_say(&sandbox, &["sh", "-c", &utility]);
    let agent = sandbox.write(
        "agent.sh",
        &format!("cat >/dev/null\nenv\ncat {leak}\necho \"agent-marker $CASTLOG_API_KEY\"\n"),
    );
    let run = sandbox.finish(with_keys(&sandbox).args([
        "run",
        &config,
        "--task",
        "leak",
        "--cast",
        "leaky",
        "--agent",
        &format!("cmd:sh {agent}"),
        "--json",
    ]));
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.json()["status"], "completed", "{}", run.stdout);
    assert_no_secret_stored(
        &sandbox,
        &[
            VISIBLE.1,
            "openai=[]",
            "agent-marker",
            "castlog *** openai ***",
            "http://***@example.test/v1",
        ],
    );
    assert_eq!(hits(&stored_bytes(&sandbox), "OPENAI_API_KEY="), 0);
}

// `--pass-env NAME` hands a deny-listed variable to the program on purpose; its value is still
// scrubbed from what the program prints.
#[test]
fn pass_env_hands_a_key_on_and_still_keeps_it_out_of_the_log() {
    let sandbox = Sandbox::new();
    let utility = "echo \"passed=$OPENAI_API_KEY withheld=[$CASTLOG_API_KEY]\" >&2; echo '{}'";
    let config = tool_then_say(&sandbox, &["sh", "-c", utility]);
    let script = sandbox.write("say.jsonl", "{\"reply\": \"done\"}\n");
    let run = sandbox.finish(with_keys(&sandbox).args([
        "--pass-env",
        "OPENAI_API_KEY",
        "run",
        &config,
        "--task",
        "pass",
        "--agent",
        &format!("scripted:{script}"),
        "--json",
    ]));
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_no_secret_stored(&sandbox, &["passed=*** withheld=[]"]);
}

/// A chat-completions server on 127.0.0.1 that echoes the request's Authorization header: in
/// its first reply's content, then in a 401 error body. Returns the base URL (with a user and
/// password in it) and the server thread.
fn echoing_server() -> (String, std::thread::JoinHandle<usize>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let base = format!("http://castlog:{URL_PASSWORD}@{addr}/v1");
    let handle = std::thread::spawn(move || {
        let mut served = 0;
        for stream in listener.incoming().take(2) {
            let stream = stream.unwrap();
            let mut reader = BufReader::new(stream);
            let (mut length, mut auth, mut target) = (0, String::new(), String::new());
            loop {
                let mut line = String::new();
                reader.read_line(&mut line).unwrap();
                if target.is_empty() {
                    target = line.trim().to_owned();
                }
                if line.trim().is_empty() {
                    break;
                }
                if let Some((name, value)) = line.split_once(':') {
                    if name.eq_ignore_ascii_case("content-length") {
                        length = value.trim().parse().unwrap();
                    }
                    if name.eq_ignore_ascii_case("authorization") {
                        auth = value.trim().to_owned();
                    }
                }
            }
            let mut body = vec![0; length];
            reader.read_exact(&mut body).unwrap();
            let echoed = format!("{auth} for http://castlog:{URL_PASSWORD}@{addr}{target}");
            let (status, answer) = if served == 0 {
                let content = format!("server-reply-marker {echoed}");
                let reply =
                    json!({"choices": [{"message": {"role": "assistant", "content": content}}]});
                ("200 OK", reply.to_string())
            } else {
                let error = json!({"error": {"message": format!("server-error-marker {echoed}")}});
                ("401 Unauthorized", error.to_string())
            };
            let mut stream = reader.into_inner();
            write!(
                stream,
                "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{answer}",
                answer.len()
            )
            .unwrap();
            served += 1;
        }
        served
    });
    (base, handle)
}

#[test]
fn an_openai_agent_whose_server_echoes_the_key_and_url_leaves_neither_in_the_log() {
    let sandbox = Sandbox::new();
    let (base, server) = echoing_server();
    let config = sandbox.write(
        "two.json",
        &json!({
            "activeLoadout": "Two",
            "loadouts": { "Two": {
                "entry": "Socket-1",
                "sockets": {
                    "Socket-1": { "materia": "Say", "parse": "text", "edges": [{ "when": "always", "to": "Socket-2" }] },
                    "Socket-2": { "materia": "Say", "parse": "text" }
                }
            }},
            "materia": {
                "Say": { "type": "agent", "tools": "readOnly", "prompt": "Say: {{request}}" }
            }
        })
        .to_string(),
    );
    let run = sandbox.finish(with_keys(&sandbox).args([
        "run",
        &config,
        "--task",
        "echo",
        "--agent",
        &format!("openai:{base}#test-model"),
        "--json",
    ]));
    assert_eq!(server.join().unwrap(), 2, "{}", run.stderr);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.json()["status"], "awaiting_agent", "{}", run.stdout);
    assert_no_secret_stored(
        &sandbox,
        &[
            "server-reply-marker Bearer [redacted]",
            "server-error-marker",
            "http://***@127.0.0.1",
        ],
    );
}
