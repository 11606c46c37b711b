#!/usr/bin/env bash
# First contact with vLLM on the lent GPU, before any story (device tool `run`, after device_setup.sh): the stories'
# own launch line (launch.py) started as a user would, asked once for each thing specdoctor reads (/health,
# /version, /v1/models, a completion, /metrics, the profiler's /start_profile + /stop_profile and the trace it
# writes), then stopped and the GPU seen free. If the line does not come up, the same line with --enforce-eager is
# tried, so one call tells the compile/graph path from the rest. Everything goes to $OUT/smoke.tar.gz (server logs,
# answers, the trace: fixtures for the conformance test and the vLLM phase reader). Exit 0 when the stories' line
# served.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
S=/root/results/smoke; rm -rf "$S"; mkdir -p "$S"
PY=$(command -v python3); VLLM=$(dirname "$PY")/vllm
PORT=${SMOKE_PORT:-30100}
U=http://127.0.0.1:$PORT
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 VLLM_NO_USAGE_STATS=1 VLLM_DO_NOT_TRACK=1 VLLM_USE_FLASHINFER_SAMPLER=0
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
log() { echo "[smoke $(date +%T)] $*" | tee -a "$S/smoke.log"; }

try() {  # try NAME EXTRA_FLAGS...: 0 when the server answered a completion
  local name=$1; shift
  local d=$S/$name; mkdir -p "$d" "$d/prof"
  local argv
  argv=$("$PY" -c 'import sys, shlex; sys.path.insert(0, sys.argv[1]); from launch import launch_argv
print(shlex.join(launch_argv("/root/models", int(sys.argv[2]), sys.argv[3], extra=sys.argv[5:], vllm=sys.argv[4])))' \
    "$HERE" "$PORT" "$d/prof" "$VLLM" "$@")
  echo "$argv" > "$d/launch.txt"
  log "$name: $argv"
  local t0=$SECONDS
  setsid bash -c "exec $argv" > "$d/server.log" 2>&1 < /dev/null &
  local pid=$! ok=0
  while [ $((SECONDS - t0)) -lt "${SMOKE_START_S:-420}" ]; do
    kill -0 "$pid" 2>/dev/null || { log "$name: the server exited ($(wait "$pid"; echo rc $?)) after $((SECONDS - t0)) s"; break; }
    [ "$(curl -s -o /dev/null -w '%{http_code}' "$U/health")" = 200 ] && { ok=1; break; }
    sleep 2
  done
  if [ "$ok" = 1 ]; then
    log "$name: healthy in $((SECONDS - t0)) s"
    curl -s "$U/version" > "$d/version.json"; curl -s "$U/v1/models" > "$d/models.json"
    curl -s "$U/metrics" > "$d/metrics-before.txt"
    local model; model=$("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["data"][0]["id"])' "$d/models.json")
    local body="{\"model\": \"$model\", \"prompt\": \"the quick brown fox jumps over the lazy dog\", \"max_tokens\": 128, \"temperature\": 0, \"ignore_eos\": true}"
    for i in 1 2 3; do
      curl -s -w '%{time_total} s' -o "$d/completion-$i.json" -H 'content-type: application/json' -d "$body" \
        "$U/v1/completions" > "$d/completion-$i.time"
      log "$name: completion $i: $(cat "$d/completion-$i.time"), $(head -c 300 "$d/completion-$i.json" | tr -d '\n' | cut -c1-160)…"
    done
    curl -s -o "$d/start_profile.txt" -w '%{http_code}' -X POST "$U/start_profile" > "$d/start_profile.code"
    curl -s -H 'content-type: application/json' -d "${body/\"max_tokens\": 128/\"max_tokens\": 48}" \
      "$U/v1/completions" > "$d/completion-profiled.json"
    curl -s -o "$d/stop_profile.txt" -w '%{http_code}' -X POST "$U/stop_profile" > "$d/stop_profile.code"
    log "$name: profile start $(cat "$d/start_profile.code") stop $(cat "$d/stop_profile.code")"
    sleep 5
    curl -s "$U/metrics" > "$d/metrics-after.txt"
    find "$d/prof" -type f -printf '%s %p\n' | tee -a "$S/smoke.log"
    grep -E "SpecDecoding|Avg prompt throughput|Graph capturing|version" "$d/server.log" | tail -n 6 | tee -a "$S/smoke.log"
  else
    tail -n 40 "$d/server.log" | tee -a "$S/smoke.log"
  fi
  kill -INT -- -"$pid" 2>/dev/null; for _ in $(seq 30); do kill -0 "$pid" 2>/dev/null || break; sleep 1; done
  kill -KILL -- -"$pid" 2>/dev/null; pkill -KILL -f "VLLM::" 2>/dev/null
  for _ in $(seq 30); do [ -z "$(nvidia-smi --query-compute-apps=pid --format=csv,noheader)" ] && break; sleep 1; done
  log "$name: stopped; GPU apps left: $(nvidia-smi --query-compute-apps=pid --format=csv,noheader | wc -l)"
  [ "$ok" = 1 ]
}

nvidia-smi > "$S/nvidia-smi.txt" 2>&1
"$PY" -c "import vllm, torch; print('vllm', vllm.__version__, 'torch', torch.__version__, torch.cuda.get_device_name())" 2>&1 | tee -a "$S/smoke.log"
rc=0
# SMOKE_EXTRA: more flags for the stories' line (e.g. --enforce-eager); a start that fails is tried again eager
# shellcheck disable=SC2086
try main ${SMOKE_EXTRA:-} || { rc=1; [ -n "${SMOKE_EXTRA:-}" ] || try eager --enforce-eager || true; }
find "$S" -type f -size +12M -printf 'too big to bring back: %s %p\n' -delete | tee -a "$S/smoke.log"
tar -C /root/results -czf "$OUT/smoke.tar.gz" smoke
log "smoke done in $SECONDS s: $([ $rc = 0 ] && echo 'the stories line served' || echo 'the stories line did NOT serve')"
exit $rc
