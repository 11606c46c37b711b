#!/usr/bin/env bash
# The remote runner for the vLLM stories (device tool `run`, cwd = this checkout). The wheelhouse comes in pieces,
# one a call, in consecutive calls on the warm machine (build_wheelhouse.sh; .whl-vllm/MANIFEST says how many):
#   call k < N:  bash benchmarks/real_vllm/run_device.sh --piece k                 carry [".whl-vllm/callk"]
#   call N:      bash benchmarks/real_vllm/run_device.sh --piece N STORY...        carry [".whl-vllm/callN"]
#   later:       bash benchmarks/real_vllm/run_device.sh                           (keeps watching; no carry)
# Each piece is copied to /root/vllmwh (a carried path not named again is gone in the next call; /root stays while
# the machine is warm). Once all N are there they are checked against the MANIFEST and joined into
# /root/vllmwh/house; then the SGLang runner (../real_sglang/run_device.sh: setup, stories in a detached session,
# watch, pack results into $OUT) runs with this folder's device_setup.sh and stories.py.
# STORIES e.g.: no-regression draft-sync enforce-eager batch-invariant (docs/real-gpu.md gives the device seconds).
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
SRC=$(cd "$HERE/../.." && pwd)
WHD=${VLLM_WH_DIR:-/root/vllmwh}
mkdir -p "$WHD"
piece_only=0
if [ "${1:-}" = "--piece" ]; then
  k=$2; shift 2; [ $# -gt 0 ] || piece_only=1
  cp "$SRC/.whl-vllm/call$k"/* "$WHD"/ || { echo "[run_device] piece $k not carried (.whl-vllm/call$k)"; exit 1; }
fi
if [ ! -d "$WHD/house" ]; then
  have=$(ls "$WHD"/house.tar.* 2>/dev/null | wc -l)
  want=$(awk '/^pieces/ {print $2}' "$WHD/MANIFEST" 2>/dev/null)
  echo "[run_device] wheelhouse pieces here: $have of ${want:-? (the MANIFEST comes with the last)}"
  if [ -n "$want" ] && [ "$have" -eq "$want" ]; then
    ( cd "$WHD" && cat house.tar.* > house.tar && sed -n 2p MANIFEST | sha256sum -c - ) || exit 1
    tar -C "$WHD" -xf "$WHD/house.tar" && rm -f "$WHD"/house.tar "$WHD"/house.tar.*
    echo "[run_device] wheelhouse joined: $(du -sh "$WHD/house" | cut -f1)"
  fi
  [ -d "$WHD/house" ] || exit 0
fi
[ "$piece_only" -eq 0 ] || exit 0  # a piece and no stories: nothing to start or watch
[ -f "$HERE/../results/real-vllm/claims.json" ] && seed="$HERE/../results/real-vllm" || seed=""
export STORIES_SEED_STATE=${STORIES_SEED_STATE-$seed}  # empty: none (never the SGLang runner's claims)
export RUNNER_DIR=$HERE
exec bash "$HERE/../real_sglang/run_device.sh" "$@"
