"""benchmarks/gpu_host_tools.py on LocalHost with a stand-in nvidia-smi that replays real outputs (2x H100 NVL -q)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

DATA = Path(__file__).parent / "data"

_FAKE = f'''#!{sys.executable}
import sys
from pathlib import Path
data = Path({str(DATA)!r})
a = sys.argv[1:]
if a == ["-L"]:
    print("GPU 0: NVIDIA H100 NVL (UUID: GPU-806f8ea2-6428-1096-a076-bb687fb45fb0)")
    print("GPU 1: NVIDIA H100 NVL (UUID: GPU-1f2e3d4c-0000-1111-2222-333344445555)")
elif a == ["-q"]:
    sys.stdout.write((data / "nvidia-smi-q.txt").read_text())
elif a[:2] == ["topo", "-m"]:
    sys.stdout.write((data / "nvidia-smi-topo-m.txt").read_text())
elif a and a[0].startswith("--query-gpu=index,name,driver_version,memory.total"):
    print("0, NVIDIA H100 NVL, 550.54.14, 95830, 00000000:AD:00.0")
    print("1, NVIDIA H100 NVL, 550.54.14, 95830, 00000000:AE:00.0")
elif a and a[0].startswith("--query-gpu="):
    fields = a[0].split("=", 1)[1].split(",")
    if "noheader" not in " ".join(a):
        print(", ".join(fields))
    for i in range(2):
        print(", ".join(str(i) if f == "index" else "NVIDIA H100 NVL" if f == "name" else "N/A" for f in fields))
elif a and a[0].startswith("--query-compute-apps"):
    print("pid, process_name, used_gpu_memory [MiB]")
else:
    print("unsupported: " + " ".join(a), file=sys.stderr)
    sys.exit(2)
'''


def test_driver_runs_the_tools_and_keeps_raw_outputs(tmp_path, root):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    fake = bindir / "nvidia-smi"
    fake.write_text(_FAKE)
    fake.chmod(0o755)
    env = {**os.environ, "PATH": f"{bindir}:{os.environ['PATH']}"}
    out, raw = tmp_path / "host_tools.json", tmp_path / "raw"
    res = subprocess.run([sys.executable, str(root / "benchmarks" / "gpu_host_tools.py"), "--json", str(out),
                          "--raw", str(raw), "--python", sys.executable],
                         capture_output=True, text=True, timeout=180, env=env, cwd=root, check=False)
    doc = json.loads(out.read_text())
    runs = {r["tool"]: r for r in doc["runs"]}
    assert {"host_facts", "fingerprint"} <= set(doc["tools"])
    facts = runs["host_facts"]["result"]
    assert facts["status"] == "ok", facts
    assert [g["name"] for g in facts["output"]["gpus"]] == ["NVIDIA H100 NVL"] * 2
    assert facts["output"]["gpus"][1]["bus_id"] == "00000000:AE:00.0"
    assert any("nvidia-smi" in json.dumps(e) for e in facts["evidence"])  # the audit log holds the real command
    assert runs["fingerprint"]["result"]["status"] in {"ok", "no_data"}, runs["fingerprint"]
    # raw outputs kept byte for byte, one file per command, and the project's parsers read them
    assert sorted(doc["raw_files"]) == sorted(p.name for p in raw.iterdir())
    assert (raw / "nvidia-smi-q.txt").read_text() == (DATA / "nvidia-smi-q.txt").read_text()
    q = doc["parsers"]["nvidia-smi-q.txt"]
    assert "error" not in q, q
    assert "error" not in doc["parsers"]["nvidia-smi-topo-m.txt"]
    assert len(doc["parsers"]["nvidia-smi-L.txt"]) == 2
    # topo -p2p is not supported by the stand-in: recorded with its stderr, not fatal to the driver
    assert "unsupported" in (raw / "nvidia-smi-topo-p2p.txt").read_text()
    assert "host_facts: ok" in res.stdout
