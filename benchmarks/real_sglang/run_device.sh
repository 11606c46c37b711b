#!/usr/bin/env bash
# The remote runner (device tool `run`, cwd = this checkout, `.whl` carried):
#   bash benchmarks/real_sglang/run_device.sh STORY...      e.g. no-regression code-regression env-var launch-flag
# Lays the box out (device_setup.sh, idempotent: a warm machine keeps it), then runs the stories one at a time in a
# detached session (setsid: it outlives this call while the machine stays warm), and watches it for at most CALL_S
# (560) seconds. Call it again right away (same arguments, or none) to keep watching: one device call is at most 10
# minutes, a code-regression story alone takes longer. Each call ends by packing what has come back into $OUT:
# results.tar.gz (summary.json, per story report.json, report.md, run.log, server.log, smi.csv, box.json; the
# claims and the good run's fingerprint), stories.log, setup.log and each story's profiler trace (trace-STORY.json.gz).
# DEVICE_LEFT_S: device seconds left when the stories start; a story starts only if its cost (STORY_COST_S) fits,
# and a running investigate gets Ctrl-C (its safety net puts the box back) 60 s before that budget ends.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
CALL_S=${CALL_S:-560}
RES=/root/results; PIDF=$RES/.runner.pid
mkdir -p "$RES"
running() { [ -f "$PIDF" ] && kill -0 "$(cat "$PIDF")" 2>/dev/null; }

if ! running && [ $# -gt 0 ]; then
  bash "$HERE/device_setup.sh" 2>&1 | tee "$RES/setup.log"; [ "${PIPESTATUS[0]}" -eq 0 ] || { cp "$RES/setup.log" "$OUT/"; exit 1; }
  export STORIES_SEED_STATE=${STORIES_SEED_STATE:-$(cd "$HERE/../results/real-sglang" && pwd)}  # claims if none measured yet
  export STORIES_PY=$(command -v python3)  # the user's python: the image's, sglang installed into it
  export DEVICE_LEFT_S=$(( ${DEVICE_LEFT_S:-1500} - SECONDS ))
  setsid bash -c '/root/sd/bin/python "$0"/stories.py /root/results "$@"; nvidia-smi > /root/results/nvidia-smi-end.txt 2>&1' \
    "$HERE" "$@" >> "$RES/stories.log" 2>&1 < /dev/null &
  echo $! > "$PIDF"
  echo "[run_device] stories started (pid $(cat "$PIDF")): $*, ${DEVICE_LEFT_S}s of device time for them"
fi
while running && [ "$SECONDS" -lt "$CALL_S" ]; do sleep 5; done
running && echo "[run_device] still running after ${SECONDS}s: call again to keep watching" \
        || echo "[run_device] stories finished"
tar -C /root -czf "$OUT/results.tar.gz" --exclude='*.trace.json.gz' results state 2>/dev/null
cp "$RES"/stories.log "$RES"/setup.log "$OUT"/ 2>/dev/null
for t in "$RES"/*/trace.json.gz; do [ -f "$t" ] && cp "$t" "$OUT/trace-$(basename "$(dirname "$t")").json.gz"; done
for t in "$RES"/*/traces/*.json.gz; do [ -f "$t" ] && mkdir -p "$OUT/traces" && cp "$t" "$OUT/traces/$(basename "$(dirname "$(dirname "$t")")")-$(basename "$t")"; done
tail -n 15 "$RES/stories.log" 2>/dev/null
python3 -c "import json;[print(r['story'],r['truth_verdict'],r['verdict'],r['launches'],r['wall_s'],r['box_left_as_found']) for r in json.load(open('$RES/summary.json'))]" 2>/dev/null
