//! Golden hashes: the chain recipe of format version 1, pinned by
//! `fixtures/golden/chain-v1.json`. If a test here fails, the recipe, the payload encoding of an
//! event kind, or a header field changed: every stored log would stop verifying. Such a change
//! needs a new context string and a new golden file, never an edit of this one.

use castlog_core::event::{
    AgentReplied, CastAborted, CastCompleted, CastForked, CastStarted, Destination, Event,
    Placement, PromptDispatched, SocketStarted, Usage,
};
use castlog_core::id::{CastId, Digest, ItemKey, MateriaName, Seq, SocketId, Turn, Visit};
use castlog_events::chain::{self, Link, blob_hash};
use castlog_events::{EventLog, ForkPoint, Pending, Recorded};
use rstest::rstest;
use serde_json::{Value, json};

use super::backend::Backend;

const FIXTURE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../fixtures/golden/chain-v1.json"
);

/// The fixed clock of the golden chain.
const T0: u64 = 1_700_000_000_000;

fn fixture() -> Value {
    let text = std::fs::read_to_string(FIXTURE).unwrap();
    serde_json::from_str(&text).unwrap()
}

/// The pinned link: every field hand-chosen, none of them a default.
fn pinned_link_hash() -> Digest {
    Link {
        prev: &Digest([0x11; 32]),
        cast: &CastId::new("golden-link"),
        seq: Seq(42),
        at_ms: 1_234_567_890_123,
        kind: "cast_aborted",
        v: 1,
        payload: br#"{"reason":"pinned"}"#,
    }
    .hash()
}

fn at(i: u64) -> u64 {
    T0 + i * 1000
}

/// The golden chain (five events of different kinds, appended in three batches) and a fork of
/// it at seq 3 (two events).
fn golden_chain(log: &dyn EventLog) -> [Vec<Recorded>; 2] {
    let cast = CastId::new("golden");
    let socket = SocketId::new("Socket-1");
    let started = Event::from(CastStarted {
        cast: cast.clone(),
        loadout_name: "review".into(),
        loadout: json!({"sockets": {"Socket-1": {"materia": "planner", "next": "end"}}}),
        loadout_hash: blob_hash(b"loadout"),
        request: "summarize the log".into(),
        policy: "recommended".into(),
        policy_document: None,
        config_source: None,
        fence: None,
        workdir: None,
        handoff: None,
        conformance: None,
        tools: None,
    });
    let socket_started = Event::from(SocketStarted {
        socket: socket.clone(),
        materia: MateriaName::new("planner"),
        materia_label: "Planner".into(),
        visit: Visit(1),
        item: Some(ItemKey::new("WI-1")),
        item_label: Some("first item".into()),
        attempt: 1,
    });
    let dispatched = Event::from(PromptDispatched {
        socket: socket.clone(),
        visit: Visit(1),
        turn: Turn(1),
        prompt_hash: blob_hash(b"prompt"),
        system_hash: Some(blob_hash(b"system")),
        placements: vec![Placement {
            entry: "steer-1".into(),
            source_type: "steeringNote".into(),
            layer: 1,
            role: "system".into(),
            destination: Destination::SystemFold,
            position: 0,
            rule: "recommended/system-fold".into(),
            body: blob_hash(b"steer"),
        }],
        redispatch: false,
    });
    let usage = Usage {
        input: 120,
        output: 30,
    };
    let replied = Event::from(AgentReplied {
        socket,
        visit: Visit(1),
        turn: Turn(1),
        text: "{\"summary\": \"done\"}\nwith a second line".into(),
        usage: Some(usage),
        tool_calls: Vec::new(),
        cost: None,
    });
    let completed = Event::from(CastCompleted { usage });
    let mut parent = log
        .append(
            &cast,
            Seq(1),
            &[
                Pending::new(at(0), &started),
                Pending::new(at(1), &socket_started),
            ],
        )
        .unwrap();
    parent.extend(
        log.append(&cast, Seq(3), &[Pending::new(at(2), &dispatched)])
            .unwrap(),
    );
    parent.extend(
        log.append(
            &cast,
            Seq(4),
            &[
                Pending::new(at(3), &replied),
                Pending::new(at(4), &completed),
            ],
        )
        .unwrap(),
    );
    let fork = CastId::new("golden-fork");
    let point = ForkPoint {
        cast: cast.clone(),
        seq: Seq(3),
        hash: parent[2].hash,
    };
    let forked = Event::from(CastForked {
        cast: fork.clone(),
        parent: cast,
        parent_seq: point.seq,
        parent_hash: point.hash,
        loadout_hash: Some(blob_hash(b"loadout, edited")),
        loadout: None,
        workdir: None,
        tools: None,
    });
    let aborted = Event::from(CastAborted {
        reason: "stopped by hand".into(),
    });
    let child = log
        .fork(
            &fork,
            &point,
            &[
                Pending::new(at(10), &forked),
                Pending::new(at(11), &aborted),
            ],
        )
        .unwrap();
    [parent, child]
}

/// The golden events of one cast in the fixture.
fn pinned_events(doc: &Value, cast: &str) -> Vec<Value> {
    let casts = doc["casts"].as_array().unwrap();
    let entry = casts.iter().find(|c| c["cast"] == cast).unwrap();
    entry["events"].as_array().unwrap().clone()
}

#[test]
fn the_fixture_names_this_recipe() {
    let doc = fixture();
    assert_eq!(doc["recipe"], chain::CONTEXT);
    assert_eq!(chain::CONTEXT, "castlog event chain v1");
    let casts: Vec<&Value> = doc["casts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| &c["cast"])
        .collect();
    assert_eq!(casts, ["golden", "golden-fork"]);
}

#[test]
fn a_hand_built_link_hashes_to_its_golden_value() {
    assert_eq!(json!(pinned_link_hash()), fixture()["link"]);
}

#[test]
fn the_blob_address_of_hello_is_golden() {
    assert_eq!(json!(blob_hash(b"hello")), fixture()["blob_hello"]);
}

#[rstest]
fn every_record_of_the_golden_chain_and_its_fork_hashes_to_its_golden_value(
    #[values(Backend::Memory, Backend::Sqlite, Backend::Postgres)] backend: Backend,
) {
    let doc = fixture();
    let log = backend.open();
    for records in golden_chain(&*log) {
        let cast = records[0].cast.as_str();
        let pinned = pinned_events(&doc, cast);
        assert_eq!(records.len(), pinned.len(), "events of {cast}");
        for (record, pin) in records.iter().zip(&pinned) {
            let at = format!("{cast} seq {}", record.seq);
            assert_eq!(json!(record.seq), pin["seq"], "{at}");
            assert_eq!(json!(record.at_ms), pin["at_ms"], "{at}");
            assert_eq!(
                json!((&record.kind, record.v)),
                json!([pin["kind"], pin["v"]]),
                "{at}"
            );
            assert_eq!(
                String::from_utf8(record.payload.clone()).unwrap(),
                pin["payload"].as_str().unwrap(),
                "{at}: the payload encoding of {} changed",
                record.kind
            );
            assert_eq!(json!(record.prev), pin["prev"], "{at}: prev");
            assert_eq!(
                json!(record.hash),
                pin["hash"],
                "{at}: the chain hash changed"
            );
        }
        // What the log stored is what it returned.
        let head = log.head(&records[0].cast).unwrap().unwrap();
        assert_eq!(head.hash, records[records.len() - 1].hash);
        assert_eq!(
            log.read(&records[0].cast, Seq::FIRST, None).unwrap(),
            records
        );
    }
}

/// The loadout hash recorded by older builds is what [`chain::loadout_hash`] gives, both
/// from the loadout the event carries and from the fixture config resolved again today, and
/// it is the hash of the loadout's bytes exactly as the stored payload holds them. The casts
/// are the ones a schema v7 build wrote (`fixtures/casts/v7/`) and the exported `stream`.
#[rstest]
#[case::build_loop("built", "loadouts/build-loop.json")]
#[case::post("sent", "loadouts/post.json")]
fn loadout_hashes_of_recorded_casts_are_computed_again(#[case] cast: &str, #[case] config: &str) {
    let fixtures = concat!(env!("CARGO_MANIFEST_DIR"), "/../fixtures/");
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("castlog.db");
    std::fs::copy(format!("{fixtures}casts/v7/castlog.db"), &db).unwrap();
    let log = castlog_events::SqliteLog::open_existing(&db).unwrap();
    let first = log
        .read(&CastId::new(cast), Seq::FIRST, Some(Seq::FIRST))
        .unwrap()
        .remove(0);
    let Ok(Event::CastStarted(started)) = first.event() else {
        panic!("{cast} starts with {}", first.kind);
    };
    assert_eq!(chain::loadout_hash(&started.loadout), started.loadout_hash);
    let stored = serde_json::to_vec(&started.loadout).unwrap();
    assert!(
        first.payload.windows(stored.len()).any(|w| w == stored),
        "the loadout's bytes are not the payload's"
    );
    let text = std::fs::read_to_string(format!("{fixtures}{config}")).unwrap();
    let resolved = castlog_core::loadout::load_config(&text)
        .unwrap()
        .resolve(None)
        .unwrap();
    assert_eq!(
        chain::loadout_hash(&resolved.to_json()),
        started.loadout_hash
    );
}

/// The exported fixture cast (written by an older build) records the hash of its loadout.
#[test]
fn the_exported_fixture_records_its_loadout_hash() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../fixtures/exports/stream.jsonl"
    );
    let export = castlog_events::codec::decode(&std::fs::read(path).unwrap()).unwrap();
    let Ok(Event::CastStarted(started)) = export.events[0].event() else {
        panic!("the export does not start with cast_started");
    };
    assert_eq!(chain::loadout_hash(&started.loadout), started.loadout_hash);
    assert_eq!(
        started.loadout_hash.to_hex(),
        "0a5d1b427558f443afd8c02f6aa0fb9d2d628b9ac125e7b7f39c218a884da46a"
    );
}
