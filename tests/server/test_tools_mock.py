"""Tools over MockHost: process parsing, env propagation rules, fingerprint from real nvidia-smi samples, diff."""

from __future__ import annotations

import json

from specdoctor.host import MockHost
from specdoctor.inference import get_engine
from specdoctor.toolkit import ToolContext, registry
from specdoctor.tools.environment.fingerprint import diff_fingerprints

from .helpers import sample

SGLANG = get_engine("sglang")  # these tools act on an SGLang checkout: no detection from stray processes

PROCS = [  # pid, ppid, comm, argv
    (1, 0, "init", ["/sbin/init"]),
    (100, 1, "bash", ["-bash"]),
    (200, 100, "python3", ["/venv/bin/python3", "-m", "sglang.launch_server", "--model-path", "/m", "--tp", "2",
                           "--speculative-algorithm", "EAGLE3", "--port", "30000"]),
    (201, 200, "sglang::schedul", ["sglang::scheduler_TP1"]),
    (202, 200, "sglang::schedul", ["sglang::scheduler_TP0"]),
    (203, 200, "sglang::detoken", ["sglang::detokenizer"]),
    (300, 1, "python3", ["python3", "other.py"]),
]
ENVS = {
    100: {"NCCL_PROTO": "LL", "NCCL_ALGO": "Ring", "HOME": "/root"},
    200: {"NCCL_PROTO": "LL", "NCCL_ALGO": "Ring", "HF_TOKEN": "hf_secretsecret123", "NCCL_CONF_FILE": "/x/nccl.conf"},
    201: {"NCCL_ALGO": "Ring", "NCCL_CUMEM_ENABLE": "0", "CUDA_DEVICE_MAX_CONNECTIONS": "8", "NCCL_P2P_LEVEL": "SYS"},
    202: {"NCCL_ALGO": "Tree", "NCCL_CUMEM_ENABLE": "0", "CUDA_DEVICE_MAX_CONNECTIONS": "8", "NCCL_P2P_LEVEL": "SYS"},
}


def _ps() -> str:
    """What `grep -z -H` over every /proc/PID/stat and cmdline prints (tools/remote/proc_table.sh)."""
    return "".join(f"/proc/{pid}/stat:{pid} ({comm}) S {ppid} {pid} {pid} 0\n\x00"
                   + "".join(f"/proc/{pid}/cmdline:{a}\x00" for a in argv) for pid, ppid, comm, argv in PROCS)


def handler(cmd, env, cwd):
    text = cmd if isinstance(cmd, str) else " ".join(cmd)
    if "/proc/[0-9]*" in text and "cmdline" in text:
        return _ps()
    if "/environ" in text and "for p in" in text:
        pids = [int(x) for x in text.split("for p in ")[1].split(";")[0].split()]
        return "".join(f"\x1e{p}\x1f" + ("".join(f"{k}={v}\x00" for k, v in ENVS[p].items()) + "\x1dok"
                                          if p in ENVS else "") for p in pids)
    if text.startswith("readlink"):
        return "/venv/bin/python3\n"
    if "@@site" in text:
        return "@@site\n/usr/lib/python3/sitecustomize.py\n@@conf\n##file /x/nccl.conf\nNCCL_SOCKET_IFNAME=eth0\n"
    if text.startswith("cat /usr/lib/python3/sitecustomize.py"):
        return "import os\nos.environ['NCCL_P2P_LEVEL'] = 'SYS'\nos.environ.setdefault('NCCL_MIN_NCHANNELS', '4')\n"
    if "@@query" in text:
        return ("@@query\n0, NVIDIA H200, GPU-a, 00000000:18:00.0, 570.1, 1980, 1980, 2619, 700.00, 5, 5, 16, 16, Enabled\n"
                "1, NVIDIA H200, GPU-b, 00000000:2A:00.0, 570.1, 1980, 1980, 2619, 700.00, 4, 5, 16, 16, Enabled\n"
                "@@q\n" + sample("nvidia-smi-q/2x-h100-nvl-q-full.txt")
                + "@@topo\n" + sample("nvidia-smi-topo/2x-rtx2080ti-container-pix-plus-p2p-NS-with-prompt.txt")
                + "@@apps\n200, python3, 1000\n999, stray.py, 500\n@@governor\npowersave\n"
                "@@py\npython 3.12.3\ntorch 2.9.0\ntorch_cuda 12.8\nnccl 2.27.5\nsglang 0.5.9\n"
                "@@libnccl\n@@commit\n" + "a" * 40 + "\n3\n")
    if "/server_info" in text or "get_server_info" in text:
        return ""
    return (1, "", "unexpected")


def ctx() -> ToolContext:
    return ToolContext(host=MockHost(handler), auto_approve=True, run_engine=SGLANG)


def test_find_servers_from_proc():
    r = registry.call(ctx(), "find_server_processes", {})
    assert r.ok
    s = r.output["servers"][0]
    assert s["main"]["pid"] == 200 and s["ranks"] == {"TP0": 202, "TP1": 201} and s["detokenizer"]["pid"] == 203
    assert s["args"]["tp_size"] == 2 and s["port"] == 30000
    assert registry.call(ctx(), "find_server_processes", {"port": 1234}).status == "no_data"


def test_propagation_statuses_and_sources():
    r = registry.call(ctx(), "check_env_propagation", {})
    assert r.ok, r.summary
    out = r.output
    rows = {x["name"]: x for x in out["rows"]}
    assert out["shell_source"].startswith("parent-process 100")
    assert rows["NCCL_PROTO"]["status"] == "dropped-for-workers"
    assert (rows["NCCL_PROTO"]["shell"], rows["NCCL_PROTO"]["parent"]) == ("LL", "LL")
    assert rows["NCCL_ALGO"]["status"] == "differs"
    assert rows["NCCL_CUMEM_ENABLE"]["status"] == "forced-by-sglang"
    assert rows["NCCL_P2P_LEVEL"]["status"] == "only-in-workers" and rows["NCCL_P2P_LEVEL"]["from_sitecustomize"]
    assert out["sitecustomize"] == "/usr/lib/python3/sitecustomize.py"
    assert out["sitecustomize_vars"] == {"NCCL_P2P_LEVEL": "SYS", "NCCL_MIN_NCHANNELS": "4"}
    assert rows["NCCL_SOCKET_IFNAME"]["from_nccl_conf"] and out["nccl_conf_files"] == ["/x/nccl.conf"]
    assert "HF_TOKEN" not in rows
    assert {x["name"] for x in out["rows"][:2]} == {"NCCL_PROTO", "NCCL_CONF_FILE"}  # both never reach the workers
    env = registry.call(ctx(), "read_process_env", {"pid": 200})
    assert env.output["env"]["HF_TOKEN"] == "***REDACTED***"
    assert registry.call(ctx(), "read_process_env", {"pid": 4242}).status == "error"


def test_fingerprint_from_samples_and_diff():
    r = registry.call(ctx(), "fingerprint", {"repo": "/r"})
    assert r.ok, r.summary
    fp = r.output
    assert fp["driver"] == "550.54.14" and fp["cuda_driver"] == "12.4"  # header of -q
    assert fp["nccl_version"] == "2.27.5" and fp["nccl_source"].startswith("torch")
    assert [g["pcie_gen"] for g in fp["gpus"]] == [5, 4] and fp["gpus"][0]["power_limit_w"] == 700.0
    assert fp["interconnect"] == "PCIe (PIX)" and fp["cpu_governor"] == "powersave"
    assert fp["worker_env"]["NCCL_ALGO"] == "Tree" and "NCCL_ALGO" in fp["worker_env_mismatch"]
    assert fp["commit"] == "a" * 40 and fp["dirty_files"] == 3 and fp["python"] == "3.12.3"
    assert {p["pid"]: p["server"] for p in fp["gpu_processes"]} == {200: True, 999: False}
    good = {"worker_env": {"NCCL_PROTO": "LL", "NCCL_ALGO": "Ring", "NCCL_CUMEM_ENABLE": "0",
                           "CUDA_DEVICE_MAX_CONNECTIONS": "8", "NCCL_P2P_LEVEL": "SYS"},
            "driver": "550.54.14", "nccl_version": "2.21.5", "gpus": [{"name": "NVIDIA H100 NVL"}] * 2,
            "sglang_version": "0.5.9", "commit": "a" * 40}
    d = diff_fingerprints(good, fp)
    assert d.changes[0].key == "worker_env.NCCL_PROTO" and d.changes[0].after is None and "LOST" in d.changes[0].why
    keys = [c.key for c in d.changes]
    assert keys.index("nccl_version") < keys.index("gpus[0].name") and "driver" not in keys
    per_rank = diff_fingerprints({"worker_env": {"TP0": {"NCCL_PROTO": "LL"}}}, {"worker_env": {"NCCL_PROTO": "LL"}})
    assert per_rank.changes == []
    host = MockHost(handler, files={"/good.json": json.dumps(good).encode()})
    t = registry.call(ToolContext(host=host, run_engine=SGLANG), "fingerprint_diff", {"a": "/good.json", "b": fp})
    assert t.ok and t.output["changes"][0]["key"] == "worker_env.NCCL_PROTO"
    assert registry.call(ToolContext(host=host, run_engine=SGLANG), "fingerprint_diff", {"a": "/missing.json", "b": fp}).status == "no_data"


def test_compare_samples_tool():
    r = registry.call(ctx(), "compare_samples", {"a": [82, 82.5, 81.8, 82.2, 81.9], "b": [60, 60.4, 59.8, 60.1, 60.3]})
    assert r.ok and r.output["outcome"] in ("DIFFERENT", "UNKNOWN") and r.output["delta"] < -20
    assert registry.call(ctx(), "compare_samples", {"a": [1], "b": [2]}).status == "error"
