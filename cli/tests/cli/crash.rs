//! A writer killed with SIGKILL loses nothing it acknowledged and leaves no partial event.

use std::io::{BufRead, BufReader};
use std::process::Stdio;

use crate::common::Sandbox;

/// Kills the child if the test panics before it does, so no appender outlives the test.
struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts an appender, waits for `acks` acknowledged appends, kills it, and returns the last
/// acknowledged seq.
fn kill_after(sandbox: &Sandbox, acks: u64, batch: u64) -> u64 {
    let child = sandbox
        .command_on(&sandbox.db())
        .args([
            "bench",
            "append",
            "--events",
            "10000000",
            "--payload-bytes",
            "300",
            "--batch",
            &batch.to_string(),
            "--cast",
            "crash",
            "--acks",
            "--json",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut child = KillOnDrop(child);
    let stderr = child.0.stderr.take().unwrap();
    let mut last = 0;
    let mut seen = 0;
    for line in BufReader::new(stderr).lines() {
        let line = line.unwrap();
        if let Some(seq) = line.strip_prefix("acked ") {
            last = seq.parse().unwrap();
            seen += 1;
            if seen == acks {
                break;
            }
        }
    }
    // Child::kill sends SIGKILL on Unix: no destructor, no flush, no checkpoint.
    child.0.kill().unwrap();
    child.0.wait().unwrap();
    assert!(last > 0, "the appender acknowledged nothing");
    last
}

#[test]
fn sigkill_mid_stream_keeps_every_acknowledged_append() {
    let sandbox = Sandbox::new();
    let mut acknowledged = 0;
    let mut previous_head = 0;
    for (acks, batch) in [(1, 1), (5, 3), (40, 1), (120, 7), (300, 2)] {
        let last = kill_after(&sandbox, acks, batch);
        assert!(last > acknowledged, "the cast continues from its head");
        acknowledged = last;

        let verify = sandbox.run(&["verify", "--json"]);
        assert_eq!(verify.code, 0, "verify after kill: {}", verify.stdout);
        assert_eq!(verify.json()["ok"], true);

        let casts = sandbox.run(&["casts", "--json"]).json();
        let head = casts["casts"][0]["head"].as_u64().unwrap();
        assert!(
            head >= last,
            "acknowledged seq {last} is missing after the kill (head {head})"
        );
        // Batches are atomic: the head is a whole number of batches past the previous one.
        assert_eq!(
            (head - previous_head) % batch,
            0,
            "a batch was cut by the kill"
        );
        previous_head = head;
        let shown = sandbox.run(&["show", "crash", "--json"]).json();
        let events = shown["events"].as_array().unwrap();
        assert_eq!(events.len() as u64, head);
        for (i, event) in events.iter().enumerate() {
            assert_eq!(event["seq"].as_u64().unwrap(), i as u64 + 1);
            assert_eq!(event["kind"], "steering_noted");
        }
    }
}
