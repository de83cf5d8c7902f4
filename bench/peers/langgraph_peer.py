#!/usr/bin/env python3
"""LangGraph on the synth workload (workload.py), checkpointed by SqliteSaver.

`--channel binop` keeps the transcript as the usual reducer list (the whole list is in every
checkpoint); `--channel delta` uses LangGraph's DeltaChannel (deltas, with a snapshot now and
then). Durability `sync`: a step's checkpoint is committed before the next step starts. Prints one
JSON object: steps, wall_s, steps_per_s, ms per step over the first and last tenth, db bytes
(after the connection closes) and per step, the time to list the whole history, peak RSS.
"""

import argparse
import json
import operator
import os
import sqlite3
import tempfile
import time
from typing import Annotated, TypedDict

from langgraph.channels import DeltaChannel
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, StateGraph

import workload


def extend(current: list, batches: list) -> list:
    out = list(current)
    for batch in batches:
        out.extend(batch)
    return out


class Fields(TypedDict, total=False):
    items: list[str]
    item_idx: int
    attempt: int
    feedback: str
    satisfied: bool


class ListState(Fields, total=False):
    outputs: Annotated[list[str], operator.add]


class DeltaState(Fields, total=False):
    outputs: Annotated[list[str], DeltaChannel(extend)]


def graph(items: int, rework: int, size: int, channel: str, calls: list[int]) -> StateGraph:
    def plan(state):
        calls[0] += 1
        text = workload.reply(f"plan|{items}|{state.get('feedback', '')}", size)
        work = [f"item-{i:05d}" for i in range(items)]
        return {"outputs": [text], "items": work, "item_idx": 0, "attempt": 0,
                "feedback": "", "satisfied": False}

    def build(state):
        calls[0] += 1
        attempt = state["attempt"] + 1
        item = state["items"][state["item_idx"]]
        text = workload.reply(f"build|{item}|{attempt}|{state.get('feedback', '')}", size)
        return {"outputs": [text], "attempt": attempt, "satisfied": False}

    def evaluate(state):
        calls[0] += 1
        idx, attempt = state["item_idx"], state["attempt"]
        item = state["items"][idx]
        text = workload.reply(f"eval|{item}|{attempt}|{state.get('feedback', '')}", size)
        if attempt >= rework:
            return {"outputs": [text], "satisfied": True, "item_idx": idx + 1, "attempt": 0,
                    "feedback": f"{item}: accepted after {attempt} tries"}
        return {"outputs": [text], "satisfied": False,
                "feedback": f"{item}: try {attempt} rejected, {text[:48]}"}

    def route(state):
        if state["satisfied"] and state["item_idx"] >= len(state["items"]):
            return END
        return "build"

    g = StateGraph(DeltaState if channel == "delta" else ListState)
    g.add_node("plan", plan)
    g.add_node("build", build)
    g.add_node("eval", evaluate)
    g.add_edge(START, "plan")
    g.add_edge("plan", "build")
    g.add_edge("build", "eval")
    g.add_conditional_edges("eval", route, ["build", END])
    return g


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--items", type=int, default=50)
    p.add_argument("--rework", type=int, default=3)
    p.add_argument("--output-bytes", type=int, default=2000)
    p.add_argument("--channel", choices=["binop", "delta"], default="binop")
    args = p.parse_args()
    expected = workload.steps(args.items, args.rework)
    with tempfile.TemporaryDirectory(prefix="castlog-peer-lg-") as scratch:
        path = os.path.join(scratch, "checkpoints.sqlite")
        conn = sqlite3.connect(path, check_same_thread=False)
        saver = SqliteSaver(conn)
        saver.setup()
        calls = [0]
        app = graph(args.items, args.rework, args.output_bytes, args.channel, calls).compile(
            checkpointer=saver)
        config = {"configurable": {"thread_id": "synth"}, "recursion_limit": expected + 100}
        stamps = []
        t0 = time.perf_counter()
        for _ in app.stream({"outputs": [], "feedback": ""}, config, stream_mode="updates",
                            durability="sync"):
            stamps.append(time.perf_counter())
        wall = time.perf_counter() - t0
        if calls[0] != expected:
            raise SystemExit(f"ran {calls[0]} steps, expected {expected}")
        timer = time.perf_counter()
        history = sum(1 for _ in app.get_state_history(config))
        history_s = time.perf_counter() - timer
        journal = conn.execute("PRAGMA journal_mode").fetchone()[0]
        conn.close()
        db = workload.file_bytes(path)
    first, last = workload.tenths_ms(stamps, t0)
    print(json.dumps({
        "system": "langgraph", "variant": "delta" if args.channel == "delta" else "sync",
        "items": args.items, "rework": args.rework, "output_bytes": args.output_bytes,
        "steps": calls[0], "wall_s": wall, "steps_per_s": calls[0] / wall,
        "ms_per_step_first10pct": first, "ms_per_step_last10pct": last,
        "db_bytes": db, "db_bytes_per_step": db / calls[0], "history_len": history,
        "history_list_s": history_s, "journal_mode": journal,
        "peak_rss_mb": workload.peak_rss_mb(),
    }))


if __name__ == "__main__":
    main()
