
echo "@@os"; (uname -srm; cat /etc/os-release 2>/dev/null | grep -E '^PRETTY_NAME=' ) 2>&1
echo "@@python"; ("${PY:-python3}" -c 'import sys; print(sys.version.split()[0]); print(sys.executable)') 2>&1
echo "@@git"; git --version 2>&1
echo "@@nproc"; nproc 2>&1
echo "@@gpus"; if command -v nvidia-smi >/dev/null 2>&1; then nvidia-smi --query-gpu=index,name,driver_version,memory.total,pci.bus_id --format=csv,noheader,nounits 2>&1; else echo "no-nvidia-smi"; fi
