#!/usr/bin/env bash
# The remote runner (device tool `run`, cwd = this checkout, `.whl` carried):
#   bash benchmarks/real_sglang/run_device.sh STORY...      e.g. no-regression launch-flag
# Lays the box out (device_setup.sh, idempotent: a warm machine keeps it), runs the stories one at a time, and after
# each packs what came back into $OUT/results.tar.gz (summary.json, per story report.json, report.md, run.log,
# server.log, smi.csv, box.json; the claims and the good run's fingerprint), so a call cut at its limit still
# returns every finished story. BUDGET_S (default 560): no story starts with less than MIN_STORY_S (240) left,
# and a running investigate gets Ctrl-C (its safety net puts the box back) 40 s before the budget ends.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
BUDGET_S=${BUDGET_S:-560}; MIN_STORY_S=${MIN_STORY_S:-240}
bash "$HERE/device_setup.sh" 2>&1 | tee "$OUT/setup.log"; [ "${PIPESTATUS[0]}" -eq 0 ] || exit 1
mkdir -p /root/results
export STORIES_PY=$(command -v python3)  # the user's python: the image's, sglang installed into it
for story in "$@"; do
  left=$(( BUDGET_S - SECONDS ))
  if [ "$left" -lt "$MIN_STORY_S" ]; then echo "skip $story: ${left}s left" | tee -a "$OUT/stories.log"; continue; fi
  STORY_TIMEOUT_S=$(( left - 40 )) /root/sd/bin/python "$HERE/stories.py" /root/results "$story" 2>&1 | tee -a "$OUT/stories.log"
  nvidia-smi > /root/results/nvidia-smi-end.txt 2>&1
  tar -C /root -czf "$OUT/results.tar.gz" results state
done
cat /root/results/summary.json 2>/dev/null | head -c 3000
