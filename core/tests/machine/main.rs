//! The cast machine pinned as given / when / then: given a config (or events), when an input
//! arrives, then these events (or this rejection). Numbers in test comments refer to the
//! acceptance behaviours of §5 of the pi-materia spec; where castlog deliberately does better
//! than the reference, the test name or comment says so.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[macro_use]
mod harness; // the given/when/then helper: inline config → started cast → inputs → events
mod bounds; // prompts and state stay bounded over a long cast
mod budget_warnings; // warnAtPercent once at the crossing, castlog budget raises, old casts unchanged
mod budgets; // token budget stop before commit, revive extension (items 35, castlog budget)
mod claims; // post sockets: claim before send, outcomes, day rule, at most once per step, resolution
mod cycles; // every cycle bounded: sockets outside loops, revive, recorded casts keep their rule
mod defaults; // the bundled pi-materia config run through the machine (item 39)
mod dispatch; // deferred dispatch idempotency in the log, stale replies (item 30)
mod handoff; // envelope, state patches, workItems ownership, validation and repair (3-6, 22-25)
mod lanes; // parallel lanes: the plan, a lane's start and end, the barrier, revive
mod lifecycle; // failures, interruptions, resume, abort, revive, rejections, determinism (26-28, 32-33)
mod loops; // items, advance, exits, empty loops, traversal and no-advance guards (9-15)
mod multiturn; // refinement, finalization, transcript (29-31)
mod next; // the effect every phase asks of the driver, and the states that ask for none
mod rework; // rework capture, rendering and clearing (17-19)
mod routing; // edge order and the current output's satisfied (1-2)
mod templates; // template keys, paths, prompt entries (7-8, 20-21)
mod tools; // the tool loop: calls recorded then run, results inline, the allowance, resume
mod utility; // utility exits, invalid output, infrastructure failure, state, scopes (16, 25, 36-37)
