#!/usr/bin/env bash
# specdoctor's own venv on the lent GPU, for both engines' device_setup.sh (idempotent: /root/sd/.done):
# its carried dependencies first, then (a .pth appended last) the image's packages (numpy, scipy, matplotlib, rich,
# typer, httpx, ...): --system-site-packages would see the base interpreter's, not the image venv's.
#   bash sd_venv.sh SD_WHEELS_DIR SHARED_WHEELS_DIR PYTHON CHECKOUT
set -euo pipefail
SD=$1; SHARED=$2; PY=$3; SRC=$4
[ -f /root/sd/.done ] && exit 0
t0=$SECONDS
PIPI="-m pip install -q --no-index --no-deps --no-compile --no-cache-dir --disable-pip-version-check"
SITE=$($PY -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
rm -rf /root/sd && $PY -m venv /root/sd
echo "$SITE" > "$(/root/sd/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/zz-image-site.pth"
# shellcheck disable=SC2046
/root/sd/bin/python $PIPI "$SD"/*.whl $(sed "s|^|$SHARED/|" "$SD"/shared.txt)
/root/sd/bin/python -m pip install -q --no-index --no-deps --no-build-isolation --disable-pip-version-check -e "$SRC"
touch /root/sd/.done
echo "[setup $(date +%T)] specdoctor venv in $((SECONDS - t0)) s"
