#!/usr/bin/env bash
# One run on the lent H200 (issue #11): specdoctor's host tools on real nvidia-smi, the NCCL all-reduce harness,
# and the break-even model against a real speculative-decoding loop. Run from the repo root with $OUT set:
#
#   bash benchmarks/gpu_validation.sh                 # on the device (carry: .whl); ~3-4 min, hard cap ~8.5 min
#   bash benchmarks/gpu_validation.sh fetch-wheels    # here, once, before the device call: fills .whl/
#
# The device has python3.12 + torch, numpy, scipy, matplotlib, httpx, rich, typer, click, shellingham, pyyaml,
# but no network. specdoctor itself is NOT pip-installed there: a copy of its package folder is staged under /tmp
# and put on PYTHONPATH.
# Wheels to carry in .whl/ (pure python except pydantic_core; cp312 manylinux2014 x86_64):
#   pydantic==2.14.4 pydantic_core==2.50.5 annotated-types==0.8.0 typing-inspection==0.4.5
#   typing_extensions==4.16.0 (pydantic needs >= 4.16) unidiff==1.0.1 (specdoctor/tools/checkout/repo.py imports it)
# Not needed for what runs here: paramiko (SSH only), langgraph/langchain/openai/mcp (engine, advisor, embed),
# gitpython. Files back in $OUT (8 at most): run.log, host_tools.json, allreduce.json, spec_validation.json,
# spec_validation.csv, spec_validation.png, fixtures.tar.gz (raw nvidia-smi, tools list, all-reduce table).
set -uo pipefail
cd "$(dirname "$0")/.."
WHEELS=(pydantic==2.14.4 pydantic_core==2.50.5 annotated-types==0.8.0 typing-inspection==0.4.5
        typing_extensions==4.16.0 unidiff==1.0.1)

if [ "${1:-}" = fetch-wheels ]; then
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 --platform manylinux1_x86_64 -d .whl "${WHEELS[@]}"
  ls -la .whl
  exit
fi

OUT=${OUT:-benchmarks/results/h200}
PY=${PYTHON:-python3}
WORK=/tmp/specdoctor-gv
DEADLINE=${DEADLINE:-510}  # seconds for the whole script: the device allows 600 per command
rm -rf "$WORK" && mkdir -p "$OUT" "$WORK/raw" "$WORK/src"
export PYTHONUNBUFFERED=1 MPLBACKEND=Agg
step() { printf '\n== %s (%ss)\n' "$*" "$SECONDS"; }
cap() { local left=$((DEADLINE - SECONDS)); [ "$left" -lt "$1" ] && echo $((left > 5 ? left : 5)) || echo "$1"; }

run_all() {
fail=0

step "install (no network)"
if [ -d .whl ] && ls .whl/*.whl >/dev/null 2>&1; then
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    || { echo "wheel install failed"; fail=1; }
else
  echo "no .whl/ folder: relying on the image's packages"
fi
cp -r specdoctor "$WORK/src/"
export PYTHONPATH="$WORK/src:/tmp/site${PYTHONPATH:+:$PYTHONPATH}"
# -P: do not put the cwd first on sys.path (the staged copy is the one under test)
"$PY" -P - <<'EOF' || fail=1
import importlib, sys
mods = ["pydantic", "unidiff", "httpx", "yaml", "rich", "typer", "numpy", "scipy", "matplotlib", "torch",
        "specdoctor", "specdoctor.tools", "specdoctor.cli"]
missing = []
for m in mods:
    try:
        importlib.import_module(m)
    except Exception as exc:  # noqa: BLE001
        missing.append(f"{m}: {type(exc).__name__}: {exc}")
print("python", sys.version.split()[0], "| missing:", missing or "none")
sys.exit(1 if missing else 0)
EOF
nvidia-smi -L
"$PY" -P -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "gpus", torch.cuda.device_count())
if torch.cuda.is_available(): print("nccl (loaded by torch)", torch.cuda.nccl.version(), torch.cuda.get_device_name())'

step "specdoctor tools list"
timeout "$(cap 60)" "$PY" -P -c 'import sys; sys.argv[0] = "specdoctor"; from specdoctor.cli import main; main()' tools list \
  | tee "$WORK/raw/tools-list.txt" || fail=1
timeout "$(cap 60)" "$PY" -P -c 'import sys; sys.argv[0] = "specdoctor"; from specdoctor.cli import main; main()' tools list --json \
  > "$WORK/raw/tools-list.json" || fail=1

step "host tools on LocalHost (host_facts, fingerprint, nccl_inventory) + raw nvidia-smi"
timeout "$(cap 90)" "$PY" benchmarks/gpu_host_tools.py --json "$OUT/host_tools.json" --raw "$WORK/raw" --python "$PY" || fail=1

step "all-reduce harness (specdoctor/tools/remote/allreduce_bench.py, torchrun, NCCL, CUDA graphs)"
if [ -f specdoctor/tools/remote/allreduce_bench.py ]; then
  AR=(--sizes 1K,2K,4K,8K,14K,16K,32K,64K,128K,256K,1M,4M,8M --graph 10 -n 20 -w 5)
  timeout "$(cap 90)" torchrun --standalone --nproc-per-node 1 specdoctor/tools/remote/allreduce_bench.py "${AR[@]}" --json \
    > "$OUT/allreduce.json" || fail=1
  timeout "$(cap 90)" torchrun --standalone --nproc-per-node 1 specdoctor/tools/remote/allreduce_bench.py "${AR[@]}" \
    | tee "$WORK/raw/allreduce_table.txt" || fail=1
  timeout "$(cap 60)" torchrun --standalone --nproc-per-node 1 specdoctor/tools/remote/allreduce_bench.py "${AR[@]}" --graph 0 \
    > "$WORK/raw/allreduce_table_eager.txt" || fail=1
else
  echo "specdoctor/tools/remote/allreduce_bench.py is missing"; fail=1
fi

step "speculative-decoding loop vs tools.breakeven (benchmarks/spec_model_validation.py)"
timeout "$(cap 420)" "$PY" benchmarks/spec_model_validation.py --out "$OUT" ${SPEC_ARGS:-} || fail=1

step "bundle the raw outputs"
tar -czf "$OUT/fixtures.tar.gz" -C "$WORK" raw && tar -tzf "$OUT/fixtures.tar.gz"
ls -la "$OUT"
step "done (fail=$fail)"
return $fail
}

SECONDS=0
run_all 2>&1 | tee "$OUT/run.log"
exit "${PIPESTATUS[0]}"
