//! The integration test binary of `castlog-events`: the log seam exercised from outside the
//! crate, against every backend, plus the golden hashes that pin the chain recipe.
#![allow(clippy::unwrap_used)]

mod it {
    // Shared by the tests below: sample events with fixed ids and clocks, and the backends.
    mod backend;
    mod sample;
    mod scratch_schema;

    // The `EventLog` contract, each body run against `InMemoryLog`, `SqliteLog` and
    // `PostgresLog` (a fresh schema per test on the machine's server): appends,
    // conflicts, reads, heads and blobs;
    mod conformance;
    // forks (recasts) and their fork points;
    mod fork;
    // imports of a verified export, across backends.
    mod import;
    // Two writers racing for the same cast: every seq taken once, every loser told why.
    mod race;
    // The run queue: takes, leases, wake-ups, slots and appends fenced by a lease's epoch,
    // against the reference, SQLite and PostgreSQL.
    mod queue;
    // The delivery record of the event bus, on SQLite and PostgreSQL.
    mod deliveries;
    // `verify` while a writer appends: never a false integrity failure.
    mod concurrent_verify;
    // SQLite files: opening foreign or newer files, openers racing on a new file, the
    // append-only triggers, reopening.
    mod blobs;
    // Packed values: large payloads, chunks and caches stored compressed, hashed as given.
    mod durability;
    mod packing;
    mod schema;
    // Stream kinds in a database written before they were kept (schema v7 to v8).
    mod stream_kinds;
    // A damaged SQLite file, made in code; `verify` must name the exact cast and seq.
    mod corruption;
    // PostgreSQL: damage made in code named at its seq, the triggers, the schema version,
    // writers on several connections.
    mod postgres;
    // Export and import: JSONL and bincode round trips, tampering, truncation, garbage.
    mod codec;
    // Import of damaged real exports and arbitrary JSON lines (property tests): refused in
    // words, never a panic; whatever is accepted verifies.
    mod import_properties;
    // Hashes pinned by `fixtures/golden/chain-v1.json`; a change of recipe fails here.
    mod golden;
}
