env -i PATH="${SD_PATH:-/usr/local/bin:/usr/bin:/bin}" HOME="$HOME" "$SD_PY" -S -c "$SD_PROBE" 2>&1; true
