#!/usr/bin/env python3
"""The markdown table of a run.sh results file (one JSON line per run).

Per system and variant: the median steps/s over the rounds with its spread (lowest–highest),
castlog's pipelined median as a multiple of it, the median DB bytes per step and peak RSS, and
the 1-minute load the runs started at. Usage: table.py RESULTS.jsonl [MACHINE_KIND]
"""

import json
import statistics
import sys

ORDER = [("castlog", "pipelined"), ("castlog", "no-pipeline"), ("langgraph", "sync"),
         ("langgraph", "delta"), ("dbos", "default"), ("dbos", "wal")]


def main() -> None:
    path = sys.argv[1]
    kind = sys.argv[2] if len(sys.argv) > 2 else "unknown"
    runs = [json.loads(line) for line in open(path) if line.strip()]
    ok = [r for r in runs if r.get("result")]
    groups: dict[tuple[str, str], list[dict]] = {}
    for r in ok:
        groups.setdefault((r["system"], r["variant"]), []).append(r)
    first = runs[0] if runs else {}
    rounds = max((r["round"] for r in runs), default=0)
    print(f"Measured {first.get('date', '?')} on machine kind `{kind}` by `bench/peers/run.sh`: "
          f"{rounds} interleaved rounds, W={first.get('items')}, R={first.get('rework')}, "
          f"S={first.get('output_bytes')}, full durability on every side.")
    print()
    base = groups.get(("castlog", "pipelined"))
    base_rate = statistics.median(r["result"]["steps_per_s"] for r in base) if base else None
    print("| system | variant | steps/s (median) | spread (min–max) | castlog pipelined × | "
          "DB bytes/step | peak RSS MB | load at start |")
    print("|---|---|---|---|---|---|---|---|")
    for key in ORDER + sorted(set(groups) - set(ORDER)):
        rows = groups.get(key)
        if not rows:
            continue
        rates = [r["result"]["steps_per_s"] for r in rows]
        median = statistics.median(rates)
        ratio = f"{base_rate / median:.1f}" if base_rate else "–"
        per_step = statistics.median(r["result"]["db_bytes_per_step"] for r in rows)
        rss = max(r["result"]["peak_rss_mb"] for r in rows)
        loads = [r["load1"] for r in rows]
        print(f"| {key[0]} | {key[1]} | {median:,.0f} | {min(rates):,.0f}–{max(rates):,.0f} | "
              f"{ratio} | {per_step / 1000:.1f} kB | {rss:.0f} | "
              f"{min(loads):.1f}–{max(loads):.1f} |")
    failed = [r for r in runs if not r.get("result")]
    if failed:
        print()
        print(f"{len(failed)} runs failed: " + ", ".join(
            f"{r['system']}/{r['variant']} round {r['round']}" for r in failed))


if __name__ == "__main__":
    main()
