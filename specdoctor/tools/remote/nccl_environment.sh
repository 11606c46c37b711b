
echo "@@topo"; nvidia-smi topo -m 2>&1 || true
echo "@@numa"; (lscpu 2>/dev/null | grep -i '^NUMA') || true
echo "@@etc_nccl_conf"; cat /etc/nccl.conf 2>/dev/null || true
echo "@@nccl_conf_file"; if [ -n "${NCCL_CONF_FILE:-}" ]; then echo "path=$NCCL_CONF_FILE"; cat "$NCCL_CONF_FILE" 2>/dev/null; fi
echo "@@home_nccl_conf"; cat "$HOME/.nccl.conf" 2>/dev/null || true
echo "@@all_reduce_perf"; command -v all_reduce_perf 2>/dev/null || true
echo "@@versions"; "$PY" -c "$VERSIONS" "$ENGINE" 2>/dev/null || echo '{}'
