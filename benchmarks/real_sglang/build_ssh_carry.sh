#!/usr/bin/env bash
# What the upstream story needs to reach the box over SSH, for the device (no network there):
#   .sshpkg/debs/  Debian 12's openssh-server (+ sftp-server) and the libraries its sshd links that a CUDA image may
#                  lack; ssh_box.py unpacks them with `dpkg -x` into a folder of their own (never into /) and puts only
#                  the libraries the box lacks on sshd's LD_LIBRARY_PATH. Used only when the box has no sshd.
#   .sshpkg/whl/   paramiko and its crypto stack for Python 3.12 (the sd venv of .whl/sd leaves them out), installed by
#                  upstream_story.py into specdoctor's venv when `import paramiko` fails.
# ≈ 9 MB. In .gitignore; carried with `.whl` (see docs/real-gpu.md, "The upstream story", for the carry limit).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
OUT=$ROOT/.sshpkg
rm -rf "$OUT"; mkdir -p "$OUT/debs" "$OUT/whl"
(cd "$OUT/debs" && apt-get download openssh-server openssh-sftp-server libwrap0 libkrb5-3 libgssapi-krb5-2 \
  libk5crypto3 libkrb5support0 libkeyutils1 libcom-err2 libnsl2 libtirpc3 libaudit1 libcap-ng0 libpam0g \
  libselinux1 libpcre2-8-0 libcrypt1 2>&1 | grep -v '^W:' || true)
PLAT="--no-deps --only-binary=:all: --python-version 3.12 --implementation cp --platform manylinux_2_28_x86_64 \
 --platform manylinux_2_26_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64"
for p in paramiko==5.1.0 bcrypt==5.0.0 cryptography==51.0.1 pynacl==1.6.2 invoke==3.0.3 pycparser==3.12; do
  python3 -m pip download $PLAT -d "$OUT/whl" "$p" 2>&1 | grep -E "Saved|ERROR" || true
done
ls "$OUT/debs" | grep -q '^openssh-server_' || { echo "openssh-server not downloaded" >&2; exit 1; }
du -sh "$OUT"
