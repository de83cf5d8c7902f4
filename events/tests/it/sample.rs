//! Sample events with fixed ids and a fixed clock, so every run writes the same bytes, and the
//! checks of the chains they form.

use castlog_core::event::{
    AgentReplied, CastForked, CursorAdvanced, Destination, EdgeTaken, Event, Placement,
    PromptDispatched, SocketStarted, SteeringNoted, Target, Usage, When,
};
use castlog_core::id::{CastId, Digest, MateriaName, Seq, SocketId, Turn, Visit};
use castlog_events::{EventLog, ForkPoint, Pending, Recorded};

/// The fixed clock reading of event 0; event `i` happens `i` seconds later.
pub const AT: u64 = 1_700_000_000_000;

/// `len` bytes of word-like text, a fixed function of `seed` (a linear congruential sequence
/// over letters, spaces and newlines), for blobs that must be cut into chunks.
pub fn text(seed: u64, len: usize) -> Vec<u8> {
    let mut state = seed;
    (0..len)
        .map(|_| {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            b"abcdefghij klmnopqrst uvwxyz\n"[(state >> 59) as usize % 29]
        })
        .collect()
}

/// A cast id.
pub fn cast(name: &str) -> CastId {
    CastId::new(name)
}

/// Sample event `i`: five kinds in turn, with fields that depend on `i`.
pub fn event(i: u64) -> Event {
    let socket = SocketId::new(format!("Socket-{}", i % 3 + 1));
    let visit = Visit(u32::try_from(i % 7).unwrap() + 1);
    match i % 5 {
        0 => SocketStarted {
            socket,
            materia: MateriaName::new("planner"),
            materia_label: "Planner".into(),
            visit,
            item: None,
            item_label: None,
            attempt: 1,
        }
        .into(),
        1 => AgentReplied {
            socket,
            visit,
            turn: Turn(1),
            text: format!("reply number {i}"),
            usage: Some(Usage {
                input: 10 * i,
                output: i,
            }),
            tool_calls: Vec::new(),
            cost: None,
        }
        .into(),
        2 => CursorAdvanced {
            cursor: "items".into(),
            from: i,
            to: i + 1,
        }
        .into(),
        3 => EdgeTaken {
            from: socket,
            to: Target::End,
            when: When::Always,
            item: None,
            traversal: 1,
        }
        .into(),
        _ => SteeringNoted {
            text: format!("note {i}"),
            locked: i.is_multiple_of(2),
            origin: None,
        }
        .into(),
    }
}

/// Sample event `i`, ready to append at its fixed time.
pub fn pending(i: u64) -> Pending {
    Pending::new(AT + i * 1000, &event(i))
}

/// Sample events `from..from + n`.
pub fn batch(from: u64, n: u64) -> Vec<Pending> {
    (from..from + n).map(pending).collect()
}

/// Creates `cast` with `n` sample events in one append.
pub fn seed(log: &dyn EventLog, cast: &CastId, n: u64) -> Vec<Recorded> {
    log.append(cast, Seq::FIRST, &batch(0, n)).unwrap()
}

/// The casts `populate` writes.
#[derive(Debug)]
pub struct Populated {
    /// Six events; event 4 is a prompt that references three blobs.
    pub origin: CastId,
    /// A fork of `origin` at seq 4, with two events.
    pub recast: CastId,
    /// The blobs event 4 references: UTF-8 text, non-ASCII text, and bytes that are not UTF-8.
    pub blobs: Vec<Digest>,
}

/// Writes a parent cast that references blobs, and a fork of it.
pub fn populate(log: &dyn EventLog) -> Populated {
    let origin = cast("origin");
    let prompt = log.put_blob(b"the rendered prompt").unwrap();
    let entry = log
        .put_blob("an entry body, not ASCII: \u{e9}".as_bytes())
        .unwrap();
    let system = log.put_blob(&[0x00, 0x9f, 0x92, 0x96]).unwrap();
    seed(log, &origin, 3);
    let dispatched = Event::from(PromptDispatched {
        socket: SocketId::new("Socket-1"),
        visit: Visit(1),
        turn: Turn(1),
        prompt_hash: prompt,
        system_hash: Some(system),
        // Three entries whose bodies are UTF-8, non-ASCII and non-UTF-8 (the rendered prompt
        // and the system fold are named by digest only).
        placements: [("entry-0", prompt), ("entry-1", entry), ("entry-2", system)]
            .into_iter()
            .enumerate()
            .map(|(position, (name, body))| Placement {
                entry: name.into(),
                source_type: "steeringNote".into(),
                layer: 2,
                role: "user".into(),
                destination: Destination::Inline,
                position: u32::try_from(position).unwrap(),
                rule: "recommended/inline".into(),
                body,
            })
            .collect(),
        redispatch: false,
    });
    let fork_at = log
        .append(&origin, Seq(4), &[Pending::new(AT + 3000, &dispatched)])
        .unwrap();
    log.append(&origin, Seq(5), &batch(4, 2)).unwrap();
    let recast = cast("recast");
    let point = ForkPoint {
        cast: origin.clone(),
        seq: Seq(4),
        hash: fork_at[0].hash,
    };
    let forked = Event::from(CastForked {
        cast: recast.clone(),
        parent: origin.clone(),
        parent_seq: point.seq,
        parent_hash: point.hash,
        loadout_hash: None,
        loadout: None,
        workdir: None,
        tools: None,
    });
    log.fork(
        &recast,
        &point,
        &[Pending::new(AT + 10_000, &forked), pending(11)],
    )
    .unwrap();
    Populated {
        origin,
        recast,
        blobs: vec![prompt, entry, system],
    }
}

/// The seqs of `records`, in order.
pub fn seqs(records: &[Recorded]) -> Vec<u64> {
    records.iter().map(|r| r.seq.get()).collect()
}

/// Asserts that `records` are seqs 1, 2, 3, ... each linked to the one before (or `genesis`).
pub fn assert_chain(records: &[Recorded], genesis: Digest) {
    let mut prev = genesis;
    for (i, record) in records.iter().enumerate() {
        assert_eq!(record.seq, Seq(i as u64 + 1));
        assert_eq!(record.prev, prev, "prev of seq {}", record.seq);
        assert_eq!(
            record.hash,
            record.computed_hash(),
            "hash of seq {}",
            record.seq
        );
        prev = record.hash;
    }
}
