"""Stand-in `nvidia-smi`: -L, --query-gpu, --query-compute-apps, pmon, topo -m, -q, --version (real layouts)."""

from __future__ import annotations

import glob
import hashlib
import json
import os
import re
import sys
import time

from .config import load_twin, sandbox_root
from .gpumem import alive
from .perf import clock_state
from .versions import measured_0517

__all__ = ["main"]

LEGEND = """
Legend:

  X    = Self
  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes (e.g., QPI/UPI)
  NODE = Connection traversing PCIe as well as the interconnect between PCIe Host Bridges within a NUMA node
  PHB  = Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)
  PXB  = Connection traversing multiple PCIe bridges (without traversing the PCIe Host Bridge)
  PIX  = Connection traversing at most a single PCIe bridge
  NV#  = Connection traversing a bonded set of # NVLinks
"""


def _uuid(i: int, name: str, host: str) -> str:
    h = hashlib.sha1(f"{host}/{name}/{i}".encode()).hexdigest()
    return f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


def _gpu_procs() -> list[dict]:
    """Compute processes: every live server's schedulers (on the GPU their pidfile names) and other GPU jobs."""
    out = []
    root = sandbox_root()
    for f in glob.glob(os.path.join(root, "run", "pids", "*.json")):
        try:
            with open(f, encoding="utf-8") as fh:
                procs = json.load(fh)["procs"]
        except (OSError, ValueError, KeyError):
            continue
        for p in procs:
            title = p.get("title", "")
            if "gpu" not in p or not alive(int(p["pid"])):  # the ranks that hold a GPU (the server records them)
                continue
            rank = int(title.rsplit("TP", 1)[1]) if "TP" in title else 0
            out.append({"gpu": int(p.get("gpu", rank)), "pid": p["pid"], "name": title,
                        "mem": p.get("mem_mib"), "server": True})  # mem recorded when memory is enforced
    for f in glob.glob(os.path.join(root, "run", "gpu-load", "*.json")):  # all_reduce_perf -N 0 while it runs
        try:
            pid = int(os.path.basename(f).split(".")[0])
            with open(f, encoding="utf-8") as fh:
                gpus = [int(g) for g in json.load(fh)["gpus"]]
        except (OSError, ValueError, KeyError):
            continue
        if alive(pid):
            out += [{"gpu": g, "pid": pid, "name": "all_reduce_perf", "mem": 600, "load": True} for g in gpus]
    for job in load_twin().get("gpu_processes") or []:
        try:
            with open(os.path.join(root, "run", "gpu-procs", f"{job['id']}.pid"), encoding="utf-8") as fh:
                pid = int(fh.read().strip())
        except (OSError, ValueError):
            continue
        if not alive(pid):
            continue
        for g in job["gpus"]:
            out.append({"gpu": int(g), "pid": pid, "name": job.get("title", "python").split()[0],
                        "mem": int(job.get("used_memory_mib", 20000))})
    return out


def _brand(hw: dict) -> str:
    return hw.get("product_brand") or ("GeForce" if "GeForce" in hw["gpu_name"] else "NVIDIA")


def _gpus(twin: dict) -> list[dict]:
    """Each GPU as nvidia-smi reads it. Clock-event reasons follow their real causes: Idle with no load; Applications
    Clocks Setting only while application/locked clocks set below the card's own clock hold it; SW Power Cap while
    the draw sits at the limit; none otherwise (a consumer card below "max" at its normal boost shows none)."""
    hw = twin["hardware"]
    mem_mib = int(hw["memory_gb"] * 1024)
    procs = _gpu_procs()
    used = {p["gpu"] for p in procs if p.get("server")}
    state = clock_state(hw)
    sm_load = int(round(state.sm_mhz))
    default_power = float(hw.get("power_default_w") or hw["power_limit_w"])
    supported = hw.get("applications_clocks_supported", True)
    app_default = int(hw["clocks_sm_max_mhz"])
    app_set = hw.get("applications_clocks_mhz")
    gpus = []
    for i in range(hw["gpu_count"]):
        link = hw["pcie_per_gpu"][str(i)]
        busy = i in used or any(p["gpu"] == i and p.get("load") for p in procs)
        other_mem = sum(p["mem"] for p in procs if p["gpu"] == i and not p.get("server") and p["mem"] is not None)
        held = [p["mem"] for p in procs if p["gpu"] == i and p.get("server")]
        server_mem = (sum(m for m in held if m is not None) or int(mem_mib * 0.92)) if busy else 0
        loaded = busy or bool(other_mem)

        def reason(on: bool, loaded: bool = loaded) -> str:
            return "Active" if loaded and on else "Not Active"

        gpus.append({
            "index": i, "name": hw["gpu_name"], "uuid": _uuid(i, hw["gpu_name"], hw["hostname"]), "bus_id": hw["bus_ids"][i],
            "mem_total": mem_mib, "mem_used": min(max(server_mem + other_mem, 1), mem_mib), "link": link,
            "sm": sm_load if loaded else 180, "sm_max": hw["clocks_sm_max_mhz"],
            "mem_clk": hw["clocks_mem_mhz"] if loaded else 405,
            "mem_clk_max": hw.get("clocks_mem_max_mhz") or hw["clocks_mem_mhz"],
            "app_sm": str(app_set if app_set is not None else app_default) if supported else "[N/A]",
            "app_sm_default": str(app_default) if supported else "[N/A]",
            "app_mem": str(hw["clocks_mem_mhz"]) if supported else "[N/A]",
            "power_limit": hw["power_limit_w"], "power_default": default_power,
            "power": state.power_w if busy else default_power * 0.05,
            "temp": hw["temperature_c"] + (6 if busy else 0),
            "pstate": "P0" if loaded else "P8", "persistence": hw["persistence_mode"],
            "idle": "Not Active" if loaded else "Active",
            "sw_power_cap": reason(busy and state.power_cap_active),
            "app_clocks": reason(state.app_clocks_active),
            "util": 100 if loaded else 0,
        })
    return gpus


_FIELDS = {
    "index": ("index", lambda g, t: str(g["index"]), ""),
    "count": ("count", lambda g, t: str(t["hardware"]["gpu_count"]), ""),
    "name": ("name", lambda g, t: g["name"], ""),
    "gpu_name": ("name", lambda g, t: g["name"], ""),
    "uuid": ("uuid", lambda g, t: g["uuid"], ""),
    "gpu_uuid": ("uuid", lambda g, t: g["uuid"], ""),
    "driver_version": ("driver_version", lambda g, t: t["hardware"]["driver"], ""),
    "vbios_version": ("vbios_version", lambda g, t: "98.02.52.00.03", ""),
    "pci.bus_id": ("pci.bus_id", lambda g, t: g["bus_id"], ""),
    "gpu_bus_id": ("pci.bus_id", lambda g, t: g["bus_id"], ""),
    "memory.total": ("memory.total", lambda g, t: str(g["mem_total"]), "MiB"),
    "memory.used": ("memory.used", lambda g, t: str(g["mem_used"]), "MiB"),
    "memory.free": ("memory.free", lambda g, t: str(g["mem_total"] - g["mem_used"]), "MiB"),
    "clocks.sm": ("clocks.current.sm", lambda g, t: str(g["sm"]), "MHz"),
    "clocks.current.sm": ("clocks.current.sm", lambda g, t: str(g["sm"]), "MHz"),
    "clocks.max.sm": ("clocks.max.sm", lambda g, t: str(g["sm_max"]), "MHz"),
    "clocks.max.graphics": ("clocks.max.graphics", lambda g, t: str(g["sm_max"]), "MHz"),
    "clocks.mem": ("clocks.current.memory", lambda g, t: str(g["mem_clk"]), "MHz"),
    "clocks.max.mem": ("clocks.max.memory", lambda g, t: str(g["mem_clk_max"]), "MHz"),
    "clocks.max.memory": ("clocks.max.memory", lambda g, t: str(g["mem_clk_max"]), "MHz"),
    "clocks.applications.graphics": ("clocks.applications.graphics", lambda g, t: g["app_sm"], "MHz"),
    "clocks.applications.gr": ("clocks.applications.graphics", lambda g, t: g["app_sm"], "MHz"),
    "clocks.default_applications.graphics": ("clocks.default_applications.graphics",
                                             lambda g, t: g["app_sm_default"], "MHz"),
    "clocks.default_applications.gr": ("clocks.default_applications.graphics", lambda g, t: g["app_sm_default"],
                                       "MHz"),
    "clocks.applications.memory": ("clocks.applications.memory", lambda g, t: g["app_mem"], "MHz"),
    "clocks_event_reasons.sw_power_cap": ("clocks_event_reasons.sw_power_cap", lambda g, t: g["sw_power_cap"], ""),
    "clocks_throttle_reasons.sw_power_cap": ("clocks_throttle_reasons.sw_power_cap",
                                             lambda g, t: g["sw_power_cap"], ""),
    "clocks_event_reasons.applications_clocks_setting": ("clocks_event_reasons.applications_clocks_setting",
                                                         lambda g, t: g["app_clocks"], ""),
    "clocks_throttle_reasons.applications_clocks_setting": ("clocks_throttle_reasons.applications_clocks_setting",
                                                            lambda g, t: g["app_clocks"], ""),
    **{f"{prefix}.gpu_idle": (f"{prefix}.gpu_idle", lambda g, t: g["idle"], "")
       for prefix in ("clocks_event_reasons", "clocks_throttle_reasons")},
    **{f"{prefix}.{reason}": (f"{prefix}.{reason}", lambda g, t: "Not Active", "")  # no slowdown modelled
       for prefix in ("clocks_event_reasons", "clocks_throttle_reasons")
       for reason in ("hw_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown",
                      "sw_thermal_slowdown", "sync_boost")},
    "power.limit": ("power.limit", lambda g, t: f"{g['power_limit']:.2f}", "W"),
    "enforced.power.limit": ("enforced.power.limit", lambda g, t: f"{g['power_limit']:.2f}", "W"),
    "power.default_limit": ("power.default_limit", lambda g, t: f"{g['power_default']:.2f}", "W"),
    "power.max_limit": ("power.max_limit", lambda g, t: f"{g['power_default']:.2f}", "W"),
    "power.draw": ("power.draw", lambda g, t: f"{g['power']:.2f}", "W"),
    "pcie.link.gen.current": ("pcie.link.gen.current", lambda g, t: str(g["link"]["gen_current"]), ""),
    "pcie.link.gen.gpucurrent": ("pcie.link.gen.gpucurrent", lambda g, t: str(g["link"]["gen_current"]), ""),
    "pcie.link.gen.max": ("pcie.link.gen.max", lambda g, t: str(g["link"]["gen_max"]), ""),
    "pcie.link.width.current": ("pcie.link.width.current", lambda g, t: str(g["link"]["width_current"]), ""),
    "pcie.link.width.max": ("pcie.link.width.max", lambda g, t: str(g["link"]["width_max"]), ""),
    "persistence_mode": ("persistence_mode", lambda g, t: "Enabled" if g["persistence"] else "Disabled", ""),
    "temperature.gpu": ("temperature.gpu", lambda g, t: str(g["temp"]), ""),
    "utilization.gpu": ("utilization.gpu", lambda g, t: str(g["util"]), "%"),
    "utilization.memory": ("utilization.memory", lambda g, t: "0", "%"),
    "pstate": ("pstate", lambda g, t: g["pstate"], ""),
    "compute_cap": ("compute_cap", lambda g, t: t["hardware"]["compute_capability"], ""),
}


_UNIT = re.compile(r" (MHz|MiB|W|%)$")


def _csv(header: list[str], rows: list[list[str]], fmt: str) -> str:
    opts = {o.strip() for o in fmt.split(",")}
    if "csv" not in opts:
        raise SystemExit('"' + fmt + '" is not a valid format. Try "csv" or "csv,noheader,nounits".')
    out = [] if "noheader" in opts else [", ".join(header)]
    for r in rows:
        out.append(", ".join(_UNIT.sub("", v) if "nounits" in opts else v for v in r))  # 'Not Active' stays
    return "\n".join(out) + "\n"


def _cell(value: str, unit: str) -> str:
    """A value with its unit, as nvidia-smi prints it ('[N/A]' has none)."""
    return value + (f" {unit}" if unit and not value.startswith("[") else "")


def _query_gpu(twin: dict, fields: str, fmt: str, ids: list[int] | None) -> int:
    names = [f.strip() for f in fields.split(",") if f.strip()]
    for n in names:
        if n not in _FIELDS:
            sys.stdout.write(f'Field "{n}" is not a valid field to query.\n\n')
            return 2
    header = [_FIELDS[n][0] + (f" [{_FIELDS[n][2]}]" if _FIELDS[n][2] else "") for n in names]
    rows = []
    for g in _gpus(twin):
        if ids is not None and g["index"] not in ids:
            continue
        rows.append([_cell(_FIELDS[n][1](g, twin), _FIELDS[n][2]) for n in names])
    sys.stdout.write(_csv(header, rows, fmt))
    return 0


def _query_apps(twin: dict, fields: str, fmt: str) -> int:
    gpus = _gpus(twin)
    known = {"pid": ("pid", ""), "process_name": ("process_name", ""), "used_memory": ("used_gpu_memory", "MiB"),
             "used_gpu_memory": ("used_gpu_memory", "MiB"), "gpu_bus_id": ("gpu_bus_id", ""),
             "gpu_uuid": ("gpu_uuid", ""), "name": ("process_name", "")}
    names = [f.strip() for f in fields.split(",") if f.strip()]
    for n in names:
        if n not in known:
            sys.stdout.write(f'Field "{n}" is not a valid field to query.\n\n')
            return 2
    header = [known[n][0] + (f" [{known[n][1]}]" if known[n][1] else "") for n in names]
    rows = []
    for p in sorted(_gpu_procs(), key=lambda p: p["gpu"]):
        g = gpus[p["gpu"]] if p["gpu"] < len(gpus) else gpus[0]
        mem = p["mem"] if p["mem"] is not None else int(g["mem_total"] * 0.92) - 1
        vals = {"pid": str(p["pid"]), "process_name": p["name"], "name": p["name"],
                "used_memory": f"{mem} MiB", "used_gpu_memory": f"{mem} MiB",
                "gpu_bus_id": g["bus_id"], "gpu_uuid": g["uuid"]}
        rows.append([vals[n] for n in names])
    sys.stdout.write(_csv(header, rows, fmt))
    return 0


def _topo(twin: dict) -> str:
    hw = twin["hardware"]
    n = hw["gpu_count"]
    head = "\t" + "\t".join(f"GPU{i}" for i in range(n)) + "\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\n"
    lines = [head]
    for i, row in enumerate(hw["topology"]):
        cells = [" X " if c == "X" else c for c in row.split()]
        lines.append(f"GPU{i}\t" + "\t".join(cells) + f"\t{hw['cpu_affinity'][i]}\t{hw['numa_affinity'][i]}\t\tN/A\n")
    return "".join(lines) + LEGEND


def _mhz(value: str) -> str:
    return "N/A" if value.startswith("[") else f"{value} MHz"


def _q(twin: dict, ids: list[int] | None) -> str:
    hw = twin["hardware"]
    cc = hw["compute_capability"]
    arch = ("Blackwell" if cc.startswith(("10", "12")) else "Ada Lovelace" if cc == "8.9" else
            "Ampere" if cc.startswith("8") else "Hopper")
    out = ["", "==============NVSMI LOG==============", "",
           f"{'Timestamp':<42}: {time.strftime('%a %b %d %H:%M:%S %Y')}",
           f"{'Driver Version':<42}: {hw['driver']}", f"{'CUDA Version':<42}: {hw['cuda']}", "",
           f"{'Attached GPUs':<42}: {hw['gpu_count']}"]
    procs = _gpu_procs()
    for g in _gpus(twin):
        if ids is not None and g["index"] not in ids:
            continue
        link = g["link"]

        def kv(indent: int, key: str, val: str) -> str:
            return " " * indent + f"{key:<{42 - indent}}: {val}"

        out += [f"GPU {g['bus_id']}", kv(4, "Product Name", g["name"]), kv(4, "Product Brand", _brand(hw)),
                kv(4, "Product Architecture", arch), kv(4, "Persistence Mode",
                                                        "Enabled" if g["persistence"] else "Disabled"),
                kv(4, "GPU UUID", g["uuid"]), kv(4, "Minor Number", str(g["index"])),
                kv(4, "VBIOS Version", "98.02.52.00.03"),
                "    PCI", kv(8, "Bus", "0x" + g["bus_id"].split(":")[1]), kv(8, "Device", "0x00"),
                kv(8, "Domain", "0x0000"), kv(8, "Bus Id", g["bus_id"]),
                "        GPU Link Info", "            PCIe Generation",
                kv(16, "Max", str(link["gen_max"])), kv(16, "Current", str(link["gen_current"])),
                kv(16, "Device Current", str(link["gen_current"])), kv(16, "Device Max", str(link["gen_max"])),
                kv(16, "Host Max", str(link["gen_max"])), "            Link Width",
                kv(16, "Max", f"{link['width_max']}x"), kv(16, "Current", f"{link['width_current']}x"),
                kv(4, "Performance State", g["pstate"]),
                "    FB Memory Usage", kv(8, "Total", f"{g['mem_total']} MiB"), kv(8, "Reserved", "604 MiB"),
                kv(8, "Used", f"{g['mem_used']} MiB"), kv(8, "Free", f"{g['mem_total'] - g['mem_used']} MiB"),
                "    Utilization", kv(8, "Gpu", f"{g['util']} %"), kv(8, "Memory", "0 %"),
                "    Temperature", kv(8, "GPU Current Temp", f"{g['temp']} C"),
                "    GPU Power Readings", kv(8, "Power Draw", f"{g['power']:.2f} W"),
                kv(8, "Current Power Limit", f"{g['power_limit']:.2f} W"),
                kv(8, "Default Power Limit", f"{g['power_default']:.2f} W"),
                kv(8, "Max Power Limit", f"{g['power_default']:.2f} W"),
                "    Clocks Event Reasons", kv(8, "Idle", g["idle"]),
                kv(8, "Applications Clocks Setting", g["app_clocks"]), kv(8, "SW Power Cap", g["sw_power_cap"]),
                kv(8, "HW Slowdown", "Not Active"), kv(12, "HW Thermal Slowdown", "Not Active"),
                kv(12, "HW Power Brake Slowdown", "Not Active"), kv(8, "Sync Boost", "Not Active"),
                kv(8, "SW Thermal Slowdown", "Not Active"), kv(8, "Display Clock Setting", "Not Active"),
                "    Clocks", kv(8, "Graphics", f"{g['sm']} MHz"), kv(8, "SM", f"{g['sm']} MHz"),
                kv(8, "Memory", f"{g['mem_clk']} MHz"), "    Applications Clocks",
                kv(8, "Graphics", _mhz(g["app_sm"])), kv(8, "Memory", _mhz(g["app_mem"])),
                "    Default Applications Clocks", kv(8, "Graphics", _mhz(g["app_sm_default"])),
                kv(8, "Memory", _mhz(g["app_mem"])),
                "    Max Clocks", kv(8, "Graphics", f"{g['sm_max']} MHz"),
                kv(8, "SM", f"{g['sm_max']} MHz"), kv(8, "Memory", f"{g['mem_clk_max']} MHz")]
        mine = [p for p in procs if p["gpu"] == g["index"]]
        if not mine:
            out.append(kv(4, "Processes", "None"))
        else:
            out.append("    Processes")
            for p in mine:
                out += [kv(8, "GPU instance ID", "N/A"), kv(8, "Process ID", str(p["pid"])),
                        kv(12, "Type", "C"), kv(12, "Name", p["name"]),
                        kv(12, "Used GPU Memory",
                           f"{p['mem'] if p['mem'] is not None else int(g['mem_total'] * 0.92) - 1} MiB")]
        out.append("")
    return "\n".join(out) + "\n"


def main(argv: list[str]) -> int:
    twin = load_twin()
    hw = twin["hardware"]
    ids: list[int] | None = None
    fmt = "csv"
    query = apps = None
    for i, a in enumerate(argv):
        if a.startswith("--format="):
            fmt = a.split("=", 1)[1]
        elif a == "--format" and i + 1 < len(argv):
            fmt = argv[i + 1]
        elif a.startswith(("-i=", "--id=")):
            ids = [int(x) for x in a.split("=", 1)[1].split(",")]
        elif a in ("-i", "--id") and i + 1 < len(argv):
            ids = [int(x) for x in argv[i + 1].split(",")]
        elif a.startswith("--query-gpu="):
            query = a.split("=", 1)[1]
        elif a.startswith("--query-compute-apps="):
            apps = a.split("=", 1)[1]
    if argv[:1] == ["topo"]:
        if any(a in ("-m", "--matrix") for a in argv[1:]):
            sys.stdout.write(_topo(twin))
            return 0
        sys.stdout.write("topo -- Display topological information about the system.\n\n    -m, --matrix\n")
        return 0 if len(argv) == 1 else 2
    if "--version" in argv:
        sys.stdout.write(f"NVIDIA-SMI version  : {hw['driver']}\nNVML version        : {hw['driver'][:6]}\n"
                         f"DRIVER version      : {hw['driver']}\nCUDA Version        : {hw['cuda']}\n")
        return 0
    if "-L" in argv or "--list-gpus" in argv:
        for g in _gpus(twin):
            sys.stdout.write(f"GPU {g['index']}: {g['name']} (UUID: {g['uuid']})\n")
        return 0
    if query is not None:
        return _query_gpu(twin, query, fmt, ids)
    if apps is not None:
        return _query_apps(twin, apps, fmt)
    if argv[:1] == ["pmon"]:
        sys.stdout.write(_pmon(twin))
        return 0
    if any(a in ("-q", "--query", "-a") for a in argv):
        sys.stdout.write(_q(twin, ids))
        return 0
    if argv:
        sys.stdout.write(f"Invalid combination of input arguments: {' '.join(argv)}. "
                         "Please run 'nvidia-smi -h' for help.\n")
        return 2
    return _table(twin)


def _pmon(twin: dict) -> str:
    """`nvidia-smi pmon -c 1 -s u`: one utilisation sample per compute process (the server's idle ranks: '-')."""
    share = {job.get("title", "python").split()[0]: job.get("sm_share") for job in twin.get("gpu_processes") or []}
    lines = ["# gpu         pid   type     sm    mem    enc    dec    jpg    ofa    command ",
             "# Idx           #    C/G      %      %      %      %      %      %    name "]
    for p in sorted(_gpu_procs(), key=lambda p: (p["gpu"], p["pid"])):
        sm = share.get(p["name"]) if not p.get("server") else None
        cell = str(int(round(float(sm) * 100))) if sm is not None else "-"
        lines.append(f"{p['gpu']:>5} {p['pid']:>11}     C {cell:>6} {'-':>6} {'-':>6} {'-':>6} {'-':>6} {'-':>6}    "
                     f"{p['name'][:20]} ")
    return "\n".join(lines) + "\n"


def _table(twin: dict) -> int:
    hw = twin["hardware"]
    real_0517 = measured_0517(twin["version"])
    w = sys.stdout.write
    w(time.strftime("%a %b %d %H:%M:%S %Y") + "\n")
    w("+-----------------------------------------------------------------------------------------+\n")
    w(f"| NVIDIA-SMI {hw['driver']:<21}Driver Version: {hw['driver']:<15}CUDA Version: {hw['cuda']:<9}|\n")
    w("|-----------------------------------------+------------------------+----------------------+\n")
    for g in _gpus(twin):
        pm = "On" if g["persistence"] else "Off"
        w(f"| {g['index']:>3}  {g['name'][:31]:<31}{pm:>4} |{g['bus_id']:>17} Off |{'Off':>21} |\n")
        w(f"| N/A   {g['temp']}C    {g['pstate']}  {g['power']:>8.0f}W / {g['power_limit']:>4.0f}W |"
          f"{g['mem_used']:>9}MiB / {g['mem_total']:>6}MiB |      0%      Default |\n")
        if real_0517:  # the real H200 table's third row (MIG M.)
            w("|                                         |                        |             Disabled |\n")
    w("+-----------------------------------------------------------------------------------------+\n")
    procs = _gpu_procs()
    w("| Processes:                                                                              |\n")
    if not procs:
        w("|  No running processes found                                                             |\n")
    for p in sorted(procs, key=lambda p: p["gpu"]):
        mem = f"{p['mem']}MiB" if real_0517 and p.get("mem") else "N/A"  # the real table shows each one's MiB
        w(f"| {p['gpu']:>4}   N/A  N/A  {p['pid']:>8}      C   {p['name'][:38]:<38}  {mem:>9} |\n")
    w("+-----------------------------------------------------------------------------------------+\n")
    return 0
