#!/usr/bin/env python3
"""DBOS Transact on the synth workload (workload.py), on its SQLite system database.

One workflow whose steps are `@DBOS.step` functions (plan, then build and eval per try): DBOS
commits each step's output before the workflow goes on. `--journal default` leaves SQLite's
defaults (rollback journal, synchronous FULL), as DBOS does; `--journal wal` switches the file
to WAL first (still FULL). Prints one JSON object: steps, wall_s, steps_per_s, ms per step over
the first and last tenth, db bytes after DBOS shuts down and per step, the time to list the
steps with their outputs after a relaunch, peak RSS.
"""

import argparse
import json
import logging
import os
import sqlite3
import tempfile
import time

from dbos import DBOS, SetWorkflowID

import workload

STAMPS: list[float] = []
CALLS = [0]


@DBOS.step()
def plan(items: int, size: int) -> dict:
    CALLS[0] += 1
    return {"text": workload.reply(f"plan|{items}|", size),
            "items": [f"item-{i:05d}" for i in range(items)]}


@DBOS.step()
def build(item: str, attempt: int, feedback: str, size: int) -> str:
    CALLS[0] += 1
    return workload.reply(f"build|{item}|{attempt}|{feedback}", size)


@DBOS.step()
def evaluate(item: str, attempt: int, feedback: str, rework: int, size: int) -> dict:
    CALLS[0] += 1
    text = workload.reply(f"eval|{item}|{attempt}|{feedback}", size)
    if attempt >= rework:
        return {"text": text, "satisfied": True, "feedback": f"{item}: accepted after {attempt} tries"}
    return {"text": text, "satisfied": False, "feedback": f"{item}: try {attempt} rejected, {text[:48]}"}


@DBOS.workflow()
def synth(items: int, rework: int, size: int) -> dict:
    transcript = []
    planned = plan(items, size)
    STAMPS.append(time.perf_counter())
    transcript.append(planned["text"])
    feedback = ""
    for item in planned["items"]:
        attempt = 0
        while True:
            attempt += 1
            transcript.append(build(item, attempt, feedback, size))
            STAMPS.append(time.perf_counter())
            verdict = evaluate(item, attempt, feedback, rework, size)
            STAMPS.append(time.perf_counter())
            transcript.append(verdict["text"])
            feedback = verdict["feedback"]
            if verdict["satisfied"]:
                break
    return {"outputs": len(transcript)}


def launch(path: str) -> None:
    DBOS(config={
        "name": "castlog-peer-dbos",
        "system_database_url": f"sqlite:///{path}",
        "application_version": "castlog-peer-1",
        "run_admin_server": False,
        "log_level": "WARNING",
    })
    DBOS.launch()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--items", type=int, default=50)
    p.add_argument("--rework", type=int, default=3)
    p.add_argument("--output-bytes", type=int, default=2000)
    p.add_argument("--journal", choices=["default", "wal"], default="default")
    args = p.parse_args()
    logging.getLogger("dbos").setLevel(logging.WARNING)
    expected = workload.steps(args.items, args.rework)
    with tempfile.TemporaryDirectory(prefix="castlog-peer-dbos-") as scratch:
        path = os.path.join(scratch, "dbos.sqlite")
        if args.journal == "wal":
            conn = sqlite3.connect(path)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.close()
        launch(path)
        t0 = time.perf_counter()
        with SetWorkflowID("synth"):
            result = synth(args.items, args.rework, args.output_bytes)
        wall = time.perf_counter() - t0
        DBOS.destroy()
        if CALLS[0] != expected or result["outputs"] != expected:
            raise SystemExit(f"ran {CALLS[0]} steps, expected {expected}")
        db = workload.file_bytes(path)
        launch(path)
        timer = time.perf_counter()
        history = len(DBOS.list_workflow_steps("synth"))
        history_s = time.perf_counter() - timer
        DBOS.destroy()
        conn = sqlite3.connect(path)
        journal = conn.execute("PRAGMA journal_mode").fetchone()[0]
        conn.close()
    first, last = workload.tenths_ms(STAMPS, t0)
    print(json.dumps({
        "system": "dbos", "variant": args.journal,
        "items": args.items, "rework": args.rework, "output_bytes": args.output_bytes,
        "steps": CALLS[0], "wall_s": wall, "steps_per_s": CALLS[0] / wall,
        "ms_per_step_first10pct": first, "ms_per_step_last10pct": last,
        "db_bytes": db, "db_bytes_per_step": db / CALLS[0], "history_len": history,
        "history_list_s": history_s, "journal_mode": journal,
        "peak_rss_mb": workload.peak_rss_mb(),
    }))


if __name__ == "__main__":
    main()
