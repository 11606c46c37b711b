#!/usr/bin/env bash
# Proves the vLLM wheelhouse on the CPU machine before any device time is spent (docs/real-gpu.md, "vLLM"):
# a Python 3.12 venv laid out as the lent image (torch 2.11.0 from the registry — the same cu130 build, run on the
# CPU — and the image's own packages by name, .library/device/KINDS.md), the wheelhouse installed into it exactly as
# device_setup.sh does (--no-index --no-deps; part1's pieces joined and checked), then cpu_check/check.py: `vllm
# serve --help`, vLLM's parser on the stories' launch lines, the engine config, the start-up imports, and every
# third-party distribution they load found in the image or the wheelhouse. Report: OUTDIR/cpu-check.json.
#   bash benchmarks/real_vllm/prove_on_cpu.sh [HOUSE] [VENV]   (defaults: .whl-vllm/house, /tmp/vllm-cpu-venv)
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
WH=$(cd "${1:-$ROOT/.whl-vllm/house}" && pwd)
VENV=${2:-/tmp/vllm-cpu-venv}
export VLLM_CPU_CHECK_SM=""
PY312=${PY312:-$(command -v python3.12 || ls /root/.pyenv/versions/3.12*/bin/python3.12 2>/dev/null | head -1)}
log() { echo "[prove $(date +%T)] $*"; }
# The image's packages that vLLM's start-up imports (names from the image's list; the image's own versions where
# KINDS.md gives them): installed here from the registry, as the image has them.
IMAGE_SET="torch==2.11.0 transformers==5.17.0 tokenizers safetensors huggingface-hub numpy psutil requests tqdm regex
 sentencepiece prometheus-client pillow aiohttp einops cloudpickle ninja py-cpuinfo protobuf tiktoken numba
 opencv-python-headless six setuptools<81 httpx anyio uvloop h11 click typer rich msgpack pyyaml jinja2 filelock
 typing-extensions packaging sympy networkx fsspec triton==3.6.0"
if [ ! -f "$VENV/.image-set" ]; then
  "$PY312" -m venv "$VENV"
  # shellcheck disable=SC2086
  "$VENV/bin/pip" install -q --disable-pip-version-check $IMAGE_SET
  touch "$VENV/.image-set"
  log "venv laid out as the image: $("$VENV/bin/python" -c 'import torch; print("torch", torch.__version__)')"
fi
SITE=$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
# the wheelhouse, as device_setup.sh installs it
"$VENV/bin/pip" install -q --no-index --no-deps --no-compile --force-reinstall --disable-pip-version-check \
  "$WH"/part2/*.whl
xz -d < "$WH"/part1/_C_stable_libtorch.abi3.so.xz > "$SITE/vllm/_C_stable_libtorch.abi3.so"
( cd "$SITE" && sha256sum -c "$WH/part1/SHA256SUMS" )
log "wheelhouse installed: $("$VENV/bin/python" -c 'import importlib.metadata as m; print("vllm", m.version("vllm"))')"
MODELS=$(mktemp -d /tmp/vllm-models.XXXX)
"$VENV/bin/python" "$ROOT/benchmarks/real_sglang/make_models.py" "$MODELS" "$SITE/vllm/v1" >/dev/null
OUTDIR=${OUTDIR:-$ROOT/.whl-vllm}
# twice: as the CPU machine is (stops where the driver is first needed), then with the H100's capability answered
# (sitecustomize.py's DevicePlatform: goes on to where the kernel library's ops are needed)
rc=0
for sm in "" 9.0; do
  rm -f "$OUTDIR/stubbed.tsv"
  VLLM_CPU_CHECK_SM=$sm VLLM_CPU_CHECK_STUBBED="$OUTDIR/stubbed.tsv" PYTHONPATH="$HERE/cpu_check" HF_HUB_OFFLINE=1 \
    TRANSFORMERS_OFFLINE=1 "$VENV/bin/python" "$HERE/cpu_check/check.py" "$MODELS" "$HERE/image-packages.txt" \
    "$WH/part2" "$OUTDIR/cpu-check${sm:+-sm$sm}.json" > "$OUTDIR/cpu-check${sm:+-sm$sm}.log" 2>&1 || rc=1
  sed -n '/^{/,$p' "$OUTDIR/cpu-check${sm:+-sm$sm}.log"
done
rm -rf "$MODELS"
log "report: $OUTDIR/cpu-check.json, $OUTDIR/cpu-check-sm9.0.json; $([ $rc -eq 0 ] && echo nothing blocks a start || echo SOMETHING BLOCKS A START)"
exit $rc
