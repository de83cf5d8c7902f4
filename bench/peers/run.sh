#!/usr/bin/env bash
# castlog and its peers on the synth workload, interleaved for ROUNDS rounds, into a markdown table.
#
# Each round runs, in turn: castlog pipelined, LangGraph (SqliteSaver, durability sync), castlog
# --no-pipeline, LangGraph DeltaChannel, castlog pipelined, DBOS (SQLite defaults), castlog
# --no-pipeline, DBOS with WAL. Before every run the 1-minute load average is read; above LOAD_MAX
# it waits (up to WAIT_S seconds) for it to fall, and each run records the load it started at.
# One JSON line per run goes to OUT/results.jsonl, the table to OUT/table.md (and stdout).
#
# Needs a release castlog (cargo build --release) and a virtualenv with requirements.txt:
#   python3 -m venv /tmp/castlog-peers && /tmp/castlog-peers/bin/pip install -r bench/peers/requirements.txt
#   PY=/tmp/castlog-peers/bin/python bench/peers/run.sh
# Settings (defaults): ROUNDS=3 ITEMS=200 REWORK=3 BYTES=2000 LOAD_MAX=1.5 WAIT_S=120
#   CASTLOG=target/release/castlog PY=python3 OUT=${TMPDIR:-/tmp}/castlog-peers KIND=rust-svc
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
ROUNDS="${ROUNDS:-3}" ITEMS="${ITEMS:-200}" REWORK="${REWORK:-3}" BYTES="${BYTES:-2000}"
LOAD_MAX="${LOAD_MAX:-1.5}" WAIT_S="${WAIT_S:-120}" KIND="${KIND:-rust-svc}"
CASTLOG="${CASTLOG:-$root/target/release/castlog}" PY="${PY:-python3}"
OUT="${OUT:-${TMPDIR:-/tmp}/castlog-peers}"
mkdir -p "$OUT"
results="$OUT/results.jsonl"
: > "$results"
[ -x "$CASTLOG" ] || { echo "no castlog at $CASTLOG (cargo build --release, or set CASTLOG)" >&2; exit 1; }
"$PY" -c 'import langgraph, dbos' 2>/dev/null ||
  { echo "$PY lacks langgraph or dbos: pip install -r $here/requirements.txt" >&2; exit 1; }

# Waits for the 1-minute load to fall to LOAD_MAX (at most WAIT_S s); prints the load then.
gate() {
  local waited=0 load
  load="$(cut -d' ' -f1 /proc/loadavg)"
  while awk -v l="$load" -v m="$LOAD_MAX" 'BEGIN { exit !(l > m) }' && [ "$waited" -lt "$WAIT_S" ]; do
    sleep 5; waited=$((waited + 5)); load="$(cut -d' ' -f1 /proc/loadavg)"
  done
  echo "$load"
}

# run ROUND SYSTEM VARIANT COMMAND...: one JSON line {round, system, variant, load1, result}.
run() {
  local round="$1" system="$2" variant="$3"; shift 3
  local load out
  load="$(gate)"
  echo "round $round: $system $variant (load $load)" >&2
  if out="$("$@" 2>"$OUT/last.stderr")"; then :; else out=""; cat "$OUT/last.stderr" >&2; fi
  "$PY" - "$round" "$system" "$variant" "$load" "$ITEMS" "$REWORK" "$BYTES" "$out" >> "$results" <<'PY'
import json, sys, time
round_, system, variant, load, items, rework, size, out = sys.argv[1:9]
try:
    result = json.loads(out)
except ValueError:
    result = None
print(json.dumps({"round": int(round_), "system": system, "variant": variant, "load1": float(load),
                  "items": int(items), "rework": int(rework), "output_bytes": int(size),
                  "date": time.strftime("%Y-%m-%d", time.gmtime()), "result": result}))
PY
}

synth=(bench synth --items "$ITEMS" --rework "$REWORK" --output-bytes "$BYTES" --json)
peer=(--items "$ITEMS" --rework "$REWORK" --output-bytes "$BYTES")
cd "$here"
for round in $(seq "$ROUNDS"); do
  run "$round" castlog pipelined "$CASTLOG" "${synth[@]}"
  run "$round" langgraph sync "$PY" langgraph_peer.py "${peer[@]}"
  run "$round" castlog no-pipeline "$CASTLOG" "${synth[@]}" --no-pipeline
  run "$round" langgraph delta "$PY" langgraph_peer.py "${peer[@]}" --channel delta
  run "$round" castlog pipelined "$CASTLOG" "${synth[@]}"
  run "$round" dbos default "$PY" dbos_peer.py "${peer[@]}"
  run "$round" castlog no-pipeline "$CASTLOG" "${synth[@]}" --no-pipeline
  run "$round" dbos wal "$PY" dbos_peer.py "${peer[@]}" --journal wal
done
"$PY" table.py "$results" "$KIND" | tee "$OUT/table.md"
