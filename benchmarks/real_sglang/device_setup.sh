#!/usr/bin/env bash
# On the lent H200 (device tool `run`, cwd = the specdoctor checkout, `.whl` carried): lay the box out as a user's.
#   /root/sgl          a venv (system site packages: the image's torch 2.11, triton, transformers) with the carried
#                      wheels and the flashinfer/deep_gemm/IPython stubs installed into it;
#   /root/sglang       a git checkout laid out as upstream's (python/sglang/...), made from the wheel's own files,
#                      commit "v0.5.17", installed editable into /root/sgl (so local patches take effect);
#   /root/models       config-only target and draft models with a word-level tokenizer (make_models.py);
#   /root/sd           specdoctor's own venv: its carried dependencies + this checkout, installed editable.
# Idempotent: a warm machine keeps all of it (marker files), a fresh one builds it in about a minute.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
SRC=$(cd "$HERE/../.." && pwd)
WHL=$SRC/.whl
log() { echo "[setup $(date +%T)] $*"; }
PIPI="python -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --disable-pip-version-check"

if [ ! -f /root/sgl/.done ]; then
  t0=$SECONDS
  python3 -m venv --system-site-packages /root/sgl
  /root/sgl/bin/$PIPI "$WHL"/*.whl
  site=$(/root/sgl/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  cp -r "$WHL"/stubs/* "$site"/
  # the checkout: the wheel's package as upstream lays it out, one commit, then editable over the wheel's copy
  rm -rf /root/sglang && mkdir -p /root/sglang/python
  cp -r "$site"/sglang /root/sglang/python/sglang
  find /root/sglang -name __pycache__ -prune -exec rm -rf {} +
  cp "$HERE"/checkout/pyproject.toml /root/sglang/python/pyproject.toml
  cp "$HERE"/checkout/gitignore /root/sglang/.gitignore
  git -C /root/sglang init -q -b main
  git -C /root/sglang -c user.name=sglang -c user.email=sglang@localhost add -A
  git -C /root/sglang -c user.name=sglang -c user.email=sglang@localhost commit -q -m "sglang v0.5.17 (python/ from the released wheel)"
  git -C /root/sglang tag v0.5.17
  /root/sgl/bin/python -m pip uninstall -q -y sglang
  /root/sgl/bin/python -m pip install -q --no-index --no-deps --no-build-isolation --disable-pip-version-check -e /root/sglang/python
  touch /root/sgl/.done
  log "sglang venv + editable checkout in $((SECONDS - t0)) s"
fi
if [ ! -f /root/sd/.done ]; then
  t0=$SECONDS
  python3 -m venv --system-site-packages /root/sd
  /root/sd/bin/$PIPI "$WHL"/sd/*.whl $(sed "s|^|$WHL/|" "$WHL"/sd/shared.txt)
  /root/sd/bin/python -m pip install -q --no-index --no-deps --no-build-isolation --disable-pip-version-check -e "$SRC"
  touch /root/sd/.done
  log "specdoctor venv in $((SECONDS - t0)) s"
fi
if [ ! -f /root/models/target/tokenizer.json ]; then
  /root/sgl/bin/python "$HERE"/make_models.py /root/models /root/sglang/python/sglang
fi
/root/sgl/bin/python -c "import sglang, sys; print('sglang', sglang.__version__, 'from', sglang.__file__)"
/root/sd/bin/specdoctor --version
git -C /root/sglang status --short | head -5
