#!/usr/bin/env bash
# On the lent GPU (device tool `run`, cwd = the specdoctor checkout), once run_device.sh has joined the wheelhouse
# pieces into /root/vllmwh/house: lay the box out as a vLLM user's.
#   python3            the image's own (a venv with torch 2.11.0, triton 3.6, transformers 5.17): the carried vLLM
#                      wheel and the deps the image lacks are installed into it (--no-deps), as `pip install` would;
#   /root/vllm         a git checkout laid out as upstream's (vllm/ at the top), made from the wheel's own files,
#                      commit tagged v0.26.0, the precompiled .so files in place and ignored (VLLM_USE_PRECOMPILED),
#                      installed editable into that python (so local patches take effect);
#   /root/models       config-only target and EAGLE-3 draft with a word-level tokenizer (../real_sglang/make_models.py);
#   /root/sd           specdoctor's own venv: its carried dependencies + this checkout, installed editable.
# Idempotent: a warm machine keeps all of it (marker files).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
SRC=$(cd "$HERE/../.." && pwd)
WH=${VLLM_HOUSE:-/root/vllmwh/house}
log() { echo "[setup $(date +%T)] $*"; }
PIPI="-m pip install -q --no-index --no-deps --no-compile --no-cache-dir --disable-pip-version-check"
GIT="git -c user.name=vllm -c user.email=vllm@localhost"

PY=$(command -v python3)
SITE=$($PY -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
if [ ! -f /root/.vllm-installed ]; then
  t0=$SECONDS
  $PY $PIPI "$WH"/part2/*.whl
  xz -d < "$WH"/part1/_C_stable_libtorch.abi3.so.xz > "$SITE/vllm/_C_stable_libtorch.abi3.so"
  ( cd "$SITE" && sha256sum -c "$WH/part1/SHA256SUMS" )
  rm -rf /root/vllm && mkdir -p /root/vllm
  cp -r "$SITE"/vllm /root/vllm/vllm
  find /root/vllm -name __pycache__ -prune -exec rm -rf {} +
  cp "$HERE"/checkout/pyproject.toml /root/vllm/pyproject.toml
  cp "$HERE"/checkout/gitignore /root/vllm/.gitignore
  git -C /root/vllm init -q -b main
  $GIT -C /root/vllm add -A
  $GIT -C /root/vllm commit -q -m "vLLM v0.26.0 (vllm/ from the released wheel; precompiled .so files ignored)"
  git -C /root/vllm tag v0.26.0
  $PY -m pip uninstall -q -y vllm
  # the kernel library decompressed above is in no RECORD: uninstall leaves site-packages/vllm/ holding it, a
  # namespace package that shadows the editable checkout ("cannot import name 'SamplingParams' from 'vllm'")
  rm -rf "$SITE/vllm"
  $PY -m pip install -q --no-index --no-deps --no-build-isolation --disable-pip-version-check -e /root/vllm
  touch /root/.vllm-installed
  log "vllm into $PY + editable checkout in $((SECONDS - t0)) s"
fi
bash "$SRC"/benchmarks/real_sglang/sd_venv.sh "$WH"/sd "$WH"/part2 "$PY" "$SRC"  # specdoctor's own venv
if [ ! -f /root/models/target/tokenizer.json ]; then
  $PY "$SRC"/benchmarks/real_sglang/make_models.py /root/models /root/vllm/vllm/v1
fi
mkdir -p /root/prof
$PY -c "import vllm; print('vllm', vllm.__version__, 'from', vllm.__file__)"
command -v vllm
/root/sd/bin/specdoctor --version
git -C /root/vllm status --short | head -5
