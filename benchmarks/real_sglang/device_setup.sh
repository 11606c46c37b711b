#!/usr/bin/env bash
# On the lent H200 (device tool `run`, cwd = the specdoctor checkout, `.whl` carried): lay the box out as a user's.
#   python3            the image's own (a venv with torch 2.11, triton, transformers): the carried wheels and the
#                      flashinfer/deep_gemm/IPython stubs are installed into it, as a user's `pip install` would;
#   /root/sglang       a git checkout laid out as upstream's (python/sglang/...), made from the wheel's own files,
#                      commit "v0.5.17", installed editable into that python (so local patches take effect);
#   /root/models       config-only target and draft models with a word-level tokenizer (make_models.py);
#   /root/sd           specdoctor's own venv: its carried dependencies + this checkout, installed editable.
# Idempotent: a warm machine keeps all of it (marker files), a fresh one builds it in about a minute.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
SRC=$(cd "$HERE/../.." && pwd)
WHL=$SRC/.whl
log() { echo "[setup $(date +%T)] $*"; }
PIPI="-m pip install -q --no-index --no-deps --no-compile --no-cache-dir --disable-pip-version-check"

# The user's python is the image's (a venv holding torch 2.11): sglang goes into it, as `pip install` would put it.
PY=$(command -v python3)
SITE=$($PY -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
if [ ! -f /root/.sgl-installed ]; then
  t0=$SECONDS
  $PY $PIPI "$WHL"/*.whl
  cp -r "$WHL"/stubs/* "$SITE"/
  # the checkout: the wheel's package as upstream lays it out, one commit, then editable over the wheel's copy
  rm -rf /root/sglang && mkdir -p /root/sglang/python
  cp -r "$SITE"/sglang /root/sglang/python/sglang
  find /root/sglang -name __pycache__ -prune -exec rm -rf {} +
  cp "$HERE"/checkout/pyproject.toml /root/sglang/python/pyproject.toml
  cp "$HERE"/checkout/gitignore /root/sglang/.gitignore
  git -C /root/sglang init -q -b main
  git -C /root/sglang -c user.name=sglang -c user.email=sglang@localhost add -A
  git -C /root/sglang -c user.name=sglang -c user.email=sglang@localhost commit -q -m "sglang v0.5.17 (python/ from the released wheel)"
  git -C /root/sglang tag v0.5.17
  $PY -m pip uninstall -q -y sglang
  $PY -m pip install -q --no-index --no-deps --no-build-isolation --disable-pip-version-check -e /root/sglang/python
  touch /root/.sgl-installed
  log "sglang into $PY + editable checkout in $((SECONDS - t0)) s"
fi
bash "$SRC"/benchmarks/real_sglang/sd_venv.sh "$WHL"/sd "$WHL" "$PY" "$SRC"  # specdoctor's own venv
if [ ! -f /root/models/target/tokenizer.json ]; then
  $PY "$HERE"/make_models.py /root/models /root/sglang/python/sglang
fi
$PY -c "import sglang, sys; print('sglang', sglang.__version__, 'from', sglang.__file__)"
/root/sd/bin/specdoctor --version
git -C /root/sglang status --short | head -5
