"""Environment fingerprints (driver, NCCL, GPUs, topology, worker env, versions) and their ranked diff."""

from __future__ import annotations

import json
import re
import shlex
from typing import Any

from pydantic import BaseModel, Field

from specdoctor.errors import NoData, SpecdoctorError, ToolFailed, ToolRetry, UsageError
from specdoctor.host.base import Raw
from specdoctor.host.redact import redact_env, redact_text
from specdoctor.models.fingerprint import Change, Fingerprint, FingerprintDiff, GpuFingerprint, Impact
from specdoctor.parsers.nvidia_smi import QGpu, parse_q, parse_query_csv, parse_topo
from specdoctor.parsers.sections import split_sections
from specdoctor.toolkit import ToolContext, tool
from specdoctor.tools.environment.digests import env_digest, launch_digest, parse_code_digest
from specdoctor.tools.remote import remote_command, remote_text
from specdoctor.tools.serving.server import Server, http_get, locate_servers, server_environs

__all__ = ["FingerprintInput", "GpuFingerprint", "Fingerprint", "fingerprint", "Change", "FingerprintDiff",
           "FingerprintDiffInput", "diff_fingerprints", "fingerprint_diff", "read_fingerprint", "ENV_PREFIXES"]

ENV_PREFIXES = ("NCCL_", "CUDA_", "SGLANG_", "TORCH_NCCL_", "VLLM_")
_QUERY = ["index", "name", "uuid", "pci.bus_id", "driver_version", "clocks.sm", "clocks.max.sm", "clocks.mem",
          "power.limit", "pcie.link.gen.current", "pcie.link.gen.max", "pcie.link.width.current",
          "pcie.link.width.max", "persistence_mode"]
_PY_FACTS = remote_text("python_facts.py")
# the GPUs, topology, GPU processes, governor, Python facts, NCCL library and the checkout (commit, dirty
# count and the code digest of tools/environment/digests.py, whose script it holds verbatim)
_SCRIPT = remote_command("fingerprint.sh")


class FingerprintInput(BaseModel):
    """Arguments of fingerprint."""

    port: int | None = Field(default=None, description="Server port: its workers' env and /server_info version.")
    repo: str | None = Field(default=None, description="The engine checkout on the host (commit; without a "
                             "port, the server running from it is the one examined).")
    python: str | None = Field(default=None, description="The server's python (torch NCCL, sglang version).")


def _tuning_env(env: dict[str, str], skip: frozenset[str]) -> dict[str, str]:
    """The variables that tune NCCL/CUDA/SGLang/torch (what a fingerprint records of a process's env); a per-launch
    run id is no setting and would differ from every saved fingerprint."""
    return {k: v for k, v in env.items() if k.startswith(ENV_PREFIXES) and k not in skip}


def _interconnect(kinds: dict[str, int]) -> str | None:
    if not kinds:
        return None
    nv = [k for k in kinds if k.startswith("NV")]
    return f"NVLink ({', '.join(sorted(nv))})" if nv else f"PCIe ({', '.join(sorted(kinds))})"


def _other_process_names(procs: list[Any]) -> list[Any]:
    """Sorted names of the GPU processes that are not the server (they compete with it for the GPUs)."""
    return sorted({n for p in procs
                   if isinstance(p, dict) and not p.get("server") and (n := p.get("name")) is not None})


def _the_server(ctx: ToolContext, args: FingerprintInput) -> tuple[list[Server], str]:
    """Exactly the server meant (port, else the one running from repo, else the only one) — never the first; with
    no such server, why not."""
    try:
        return locate_servers(ctx.host, args.port, args.repo, exactly_one=True).servers, ""
    except (NoData, ToolRetry) as exc:
        return [], str(exc)


def _server_python(args: FingerprintInput, servers: list[Server]) -> str | None:
    """The python given, else the server's own (its argv[0] when that is a python)."""
    python = args.python
    if not python and servers:
        first = servers[0].main.cmdline[0] if servers[0].main.cmdline else ""
        python = first if "python" in first.rsplit("/", 1)[-1] else None
    return python


def _reading(row: dict[str, str | None], key: str, qval: float | int | None) -> float | None:
    """A number from the query CSV, else the one `nvidia-smi -q` gave (the CSV says N/A where -q may not)."""
    v = row.get(key)
    try:
        return float(v) if v is not None else (float(qval) if qval is not None else None)
    except ValueError:
        return float(qval) if qval is not None else None


def _gpu_from_row(i: int, row: dict[str, str | None], qg: QGpu | None) -> GpuFingerprint:
    """One GPU from its query CSV row, filled in from its `nvidia-smi -q` block (same bus id)."""
    gen = _reading(row, "pcie.link.gen.current", qg.pcie_gen_current if qg else None)
    gen_max = _reading(row, "pcie.link.gen.max", qg.pcie_gen_max if qg else None)
    w = _reading(row, "pcie.link.width.current", qg.pcie_width_current if qg else None)
    w_max = _reading(row, "pcie.link.width.max", qg.pcie_width_max if qg else None)
    index = row.get("index") or ""
    return GpuFingerprint(
        index=int(index) if index.isdigit() else i,
        name=(qg.name if qg and qg.name else row.get("name")),  # -q's Product Name is the full name
        uuid=row.get("uuid"), bus_id=row.get("pci.bus_id"),
        sm_clock_mhz=_reading(row, "clocks.sm", qg.sm_clock_mhz if qg else None),
        max_sm_clock_mhz=_reading(row, "clocks.max.sm", qg.max_sm_clock_mhz if qg else None),
        mem_clock_mhz=_reading(row, "clocks.mem", qg.mem_clock_mhz if qg else None),
        power_limit_w=_reading(row, "power.limit", qg.power_limit_w if qg else None),
        pcie_gen=int(gen) if gen else None, pcie_gen_max=int(gen_max) if gen_max else None,
        pcie_width=int(w) if w else None, pcie_width_max=int(w_max) if w_max else None,
        persistence_mode=row.get("persistence_mode") or (qg.persistence_mode if qg else None))


def _gpu_from_q(i: int, g: QGpu) -> GpuFingerprint:
    """One GPU from `nvidia-smi -q` alone (when the query CSV gave none)."""
    return GpuFingerprint(index=i, name=g.name, uuid=g.uuid, bus_id=g.bus_id, sm_clock_mhz=g.sm_clock_mhz,
                          max_sm_clock_mhz=g.max_sm_clock_mhz, mem_clock_mhz=g.mem_clock_mhz,
                          power_limit_w=g.power_limit_w, pcie_gen=g.pcie_gen_current,
                          pcie_gen_max=g.pcie_gen_max, pcie_width=g.pcie_width_current,
                          pcie_width_max=g.pcie_width_max, persistence_mode=g.persistence_mode)


def _record_gpus(fp: Fingerprint, sec: dict[str, list[str]]) -> None:
    """Driver, CUDA and the GPUs: the query CSV joined with `nvidia-smi -q` by bus id, else -q alone."""
    q = parse_q("\n".join(sec.get("q", [])))
    fp.driver, fp.cuda_driver = q.driver, q.cuda
    rows = parse_query_csv("\n".join(sec.get("query", [])), _QUERY)
    by_bus = {g.bus_id.lower()[-12:]: g for g in q.gpus}
    for i, row in enumerate(rows):
        qg = by_bus.get((row.get("pci.bus_id") or "").lower()[-12:])
        fp.gpus.append(_gpu_from_row(i, row, qg))
        fp.driver = fp.driver or row.get("driver_version")
    if not fp.gpus and q.gpus:
        for i, g in enumerate(q.gpus):
            fp.gpus.append(_gpu_from_q(i, g))
    if not fp.gpus:
        fp.problems.append("nvidia-smi gave no GPUs: " + " ".join(sec.get("query", []))[:200])


def _record_topology(fp: Fingerprint, sec: dict[str, list[str]]) -> None:
    """GPU-to-GPU links, link-kind counts and NUMA affinity from `nvidia-smi topo -m`, and the interconnect."""
    topo = parse_topo("\n".join(sec.get("topo", [])))
    if topo.devices:
        kinds = topo.link_kinds()
        fp.topology = {"links": {g: {k: v for k, v in topo.links.get(g, {}).items() if k.startswith("GPU")}
                                 for g in topo.gpus}, "kinds": kinds,
                       "numa": {g: topo.numa_affinity.get(g) for g in topo.gpus}}
        fp.interconnect = _interconnect(kinds)


def _record_gpu_processes(fp: Fingerprint, sec: dict[str, list[str]], servers: list[Server]) -> None:
    """The compute processes on the GPUs, each marked whether it is the server's."""
    server_pids = {p.pid for s in servers for p in [s.main, *s.workers]}
    for line in sec.get("apps", []):
        cells = [c.strip() for c in line.split(",")]
        if len(cells) >= 2 and cells[0].isdigit():
            pid = int(cells[0])
            fp.gpu_processes.append({"pid": pid, "name": cells[1], "used_mib": cells[2] if len(cells) > 2 else None,
                                     "server": pid in server_pids})


def _cpu_governor(sec: dict[str, list[str]]) -> str | None:
    gov = [ln.strip() for ln in sec.get("governor", []) if ln.strip()]
    return gov[0] if gov and "No such file" not in gov[0] and "cannot" not in gov[0] else None


def _record_python_facts(fp: Fingerprint, sec: dict[str, list[str]]) -> None:
    """Python, torch, CUDA runtime and SGLang versions, and the NCCL version with where it was read (torch, the pip
    wheel, else a versioned libnccl.so)."""
    facts = dict(ln.split(" ", 1) for ln in sec.get("py", []) if " " in ln)
    fp.python = facts.get("python")
    fp.torch_version, fp.cuda_runtime = facts.get("torch"), facts.get("torch_cuda")
    fp.engine_version = facts.get(fp.engine or "")
    if facts.get("nccl"):
        fp.nccl_version, fp.nccl_source = facts["nccl"], "torch.cuda.nccl.version()"
    elif facts.get("nccl_pip"):
        fp.nccl_version, fp.nccl_source = facts["nccl_pip"], "pip:nvidia-nccl-cu12"
    else:
        for path in sec.get("libnccl", []):
            m = re.search(r"libnccl\.so\.(\d+\.\d+\.\d+)", path)
            if m:
                fp.nccl_version, fp.nccl_source = m.group(1), f"library {path.strip()}"
                break
    if not fp.nccl_version:
        fp.problems.append("NCCL version unknown (no torch in the server's python, no libnccl.so.X.Y.Z)")


def _record_commit(fp: Fingerprint, sec: dict[str, list[str]], repo: str | None) -> None:
    """The checkout's commit and how many files differ from it."""
    commit = [ln.strip() for ln in sec.get("commit", []) if ln.strip()]
    if commit and re.fullmatch(r"[0-9a-f]{40}", commit[0]):
        fp.commit = commit[0]
        fp.dirty_files = int(commit[1]) if len(commit) > 1 and commit[1].isdigit() else None
    elif repo:
        fp.problems.append(f"no git commit for {repo}: {' '.join(commit)[:150]}")
    fp.code_digest = parse_code_digest("\n".join(sec.get("code_digest", []))) if fp.commit else None


def _record_server(ctx: ToolContext, fp: Fingerprint, s: Server) -> None:
    """The server's workers' and main's tuning env, its launch line and the version /server_info reports."""
    envs = server_environs(ctx.host, s)
    fp.problems.extend(envs.notes)
    readable = {r: e for r, e in envs.workers.items() if e is not None}

    if readable:
        first_env = _tuning_env(next(iter(readable.values())), ctx.engine.run_identity_env)
        fp.worker_env = redact_env(first_env)
        names = set().union(*(_tuning_env(e, ctx.engine.run_identity_env).keys() for e in readable.values()))
        fp.worker_env_mismatch = sorted(n for n in names if len({e.get(n) for e in readable.values()}) > 1)
    else:
        fp.problems.append("workers' environments not readable")
    fp.parent_env = redact_env(_tuning_env(envs.main or {}, ctx.engine.run_identity_env))
    fp.launch = redact_text(shlex.join(s.argv)) if s.argv else None
    # Digests of the redacted forms: a saved fingerprint without them gets the same digest from its fields.
    fp.launch_digest = launch_digest(fp.launch)
    fp.env_digest = env_digest(fp.worker_env) if readable else None
    try:
        _, body = http_get(ctx.host, s.port, ["/server_info", "/get_server_info"], timeout=5)
        fp.server_version = str(body.get("version")) if isinstance(body, dict) and body.get("version") else None
    except ToolFailed as exc:
        fp.problems.append(str(exc))


@tool(effect="read")
def fingerprint(ctx: ToolContext, args: FingerprintInput) -> Fingerprint:
    """Record driver, CUDA, NCCL version (and its source), GPUs, clocks, power, PCIe, topology, GPU processes,
    CPU governor, the TP workers' NCCL/CUDA/SGLANG env, SGLang version, checkout commit and Python."""
    servers, server_problem = _the_server(ctx, args)
    python = _server_python(args, servers)
    env = {"SD_PY": python or "python3", "SD_PYSRC": _PY_FACTS, "SD_ENGINE": ctx.engine.package}
    if args.repo:
        env["SD_REPO"] = args.repo
    res = ctx.host.run(Raw(_SCRIPT), env=env, check="ignore", timeout=120)
    sec = split_sections(res.stdout)
    fp = Fingerprint(engine=ctx.engine.name)
    _record_gpus(fp, sec)
    _record_topology(fp, sec)
    _record_gpu_processes(fp, sec, servers)
    fp.cpu_governor = _cpu_governor(sec)
    _record_python_facts(fp, sec)
    _record_commit(fp, sec, args.repo)
    if servers:
        _record_server(ctx, fp, servers[0])
    else:
        fp.problems.append(f"{server_problem or 'no engine server running'}: worker env not recorded")
    return fp


# -- diff ------------------------------------------------------------------------------------------------

class FingerprintDiffInput(BaseModel):
    """Arguments of fingerprint_diff."""

    a: dict[str, Any] | str = Field(description="Earlier (good) fingerprint, or a JSON file path on the host.")
    b: dict[str, Any] | str = Field(description="Current fingerprint, or a JSON file path on the host.")


def _flat_env(v: Any) -> dict[str, str]:
    """worker_env as {NAME: value}; a per-rank {rank: {NAME: value}} is reduced to rank 0's view."""
    if not isinstance(v, dict) or not v:
        return {}
    if all(isinstance(x, dict) for x in v.values()):
        first = v[sorted(v, key=lambda k: (len(str(k)), str(k)))[0]]
        return {str(k): str(x) for k, x in first.items()}
    return {str(k): str(x) for k, x in v.items() if x is not None}


def _s(v: Any) -> str | None:
    return None if v is None else (v if isinstance(v, str) else json.dumps(v, sort_keys=True))


# A number as nvidia-smi, a saved JSON file or a hand-written fingerprint may spell it: 2617, 2617.0, "2617 MHz".
_NUMBER = re.compile(r"([-+]?\d+(?:\.\d*)?(?:[eE][-+]?\d+)?)\s*(mhz|w|mib|gib|gb|mb|%|c)?", re.IGNORECASE)
_TIER: dict[str, int] = {"high": 0, "medium": 1, "low": 2}


def typed(v: Any) -> Any:
    """A fingerprint value in the form it is compared in: numbers as float, text with whitespace collapsed and
    case folded, containers element-wise (so `2617` and `"2617.0 MHz"` are one value, "Enabled" and "enabled" too)."""
    if v is None or isinstance(v, bool):
        return v
    if isinstance(v, int | float):
        return float(v)
    if isinstance(v, str):
        m = _NUMBER.fullmatch(v.strip())
        return float(m.group(1)) if m else " ".join(v.split()).casefold()
    if isinstance(v, dict):
        return {str(k): typed(x) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [typed(x) for x in v]
    return v


def same_value(a: Any, b: Any) -> bool:
    """Equal as typed values (int/float, units and formatting are not a change)."""
    return bool(typed(a) == typed(b))


def _number(v: Any) -> float | None:
    t = typed(v)
    return t if isinstance(t, float) else None


def _limit_impact(before: Any, after: Any, *, lower_is_worse: bool = True) -> tuple[Impact, str]:
    """Impact of a changed limit (link gen/width, power limit, max clock): a drop matters by its size."""
    x, y = _number(before), _number(after)
    if x is None or y is None or x <= 0:
        return "medium", "changed"
    drop = (x - y) / x if lower_is_worse else (y - x) / x
    if drop >= 0.10:
        return "high", f"{drop:.0%} lower than in the good run"
    if drop > 0.02:
        return "medium", f"{drop:.0%} lower than in the good run"
    return "low", "higher than in the good run" if drop < 0 else "within 2 % of the good run"


_TOP_ALIASES = {"cuda": "cuda_driver", "cuda_version": "cuda_driver", "nccl": "nccl_version",
                "sglang": "engine_version", "vllm": "engine_version", "sglang_version": "engine_version", "governor": "cpu_governor"}
_GPU_ALIASES = {"clocks_sm_max": "max_sm_clock_mhz", "clocks_sm": "sm_clock_mhz", "clocks_mem": "mem_clock_mhz",
                "power_limit": "power_limit_w", "pcie_gen_current": "pcie_gen", "pcie_width_current": "pcie_width"}


def _aliases(d: dict[str, Any]) -> dict[str, Any]:
    """Accept hand-written/saved fingerprints that use nvidia-smi-ish names (cuda, clocks_sm_max, ...)."""
    out = {_TOP_ALIASES.get(k, k): v for k, v in d.items()}
    if isinstance(out.get("gpus"), list):
        out["gpus"] = [{_GPU_ALIASES.get(k, k): v for k, v in g.items()} if isinstance(g, dict) else g
                       for g in out["gpus"]]
    return out


def _env_change(name: str, ea: dict[str, str], eb: dict[str, str]) -> Change:
    """One worker variable that differs: a lost NCCL variable ranks first."""
    nccl = name.startswith(("NCCL_", "TORCH_NCCL_"))
    if name in eb and name not in ea:
        why = "new in the workers"
    elif name in ea and name not in eb:
        why = "LOST: the workers no longer get it"
    else:
        why = "value changed in the workers"
    return Change(key=f"worker_env.{name}", before=ea.get(name), after=eb.get(name),
                  impact="high" if nccl else "medium", rank=(0 if nccl else 20) + (0 if name not in eb else 1),
                  why=why)


def _env_changes(da: dict[str, Any], db: dict[str, Any]) -> list[Change]:
    """Worker env, compared as the program reads it (text): only surrounding blanks are noise."""
    if not ("worker_env" in da and "worker_env" in db):
        return []
    ea, eb = _flat_env(da["worker_env"]), _flat_env(db["worker_env"])
    return [_env_change(name, ea, eb) for name in sorted(set(ea) | set(eb))
            if not ((ea.get(name) or "").strip() == (eb.get(name) or "").strip() and (name in ea) == (name in eb))]


_SCALARS: list[tuple[str, int, Impact]] = [
    ("nccl_version", 10, "high"), ("driver", 30, "high"), ("cuda_driver", 31, "high"), ("cuda_runtime", 32, "high"),
    ("torch_version", 33, "medium"), ("interconnect", 40, "high"), ("cpu_governor", 60, "medium"),
    ("engine_version", 70, "medium"), ("server_version", 71, "medium"), ("commit", 72, "medium"),
    ("dirty_files", 73, "low"), ("python", 80, "low")]


def _scalar_changes(da: dict[str, Any], db: dict[str, Any]) -> list[Change]:
    """Versions, interconnect, governor, commit: each with its fixed rank and impact."""
    return [Change(key=key, before=_s(da[key]), after=_s(db[key]), impact=impact, rank=rank)
            for key, rank, impact in _SCALARS if key in da and key in db and not same_value(da[key], db[key])]


# Per-GPU fields: limits (a lower value can slow the box, by its size: impact None) and readings (instantaneous: low).
_GPU_DIFF_FIELDS: list[tuple[str, int, Impact | None]] = [
    ("name", 36, "high"), ("pcie_gen", 50, None), ("pcie_width", 50, None), ("power_limit_w", 51, None),
    ("max_sm_clock_mhz", 52, None), ("persistence_mode", 53, "low"), ("sm_clock_mhz", 90, "low"),
    ("mem_clock_mhz", 90, "low")]


def _one_gpu_changes(i: int, x: Any, y: Any) -> list[Change]:
    """GPU i's fields that differ (a GPU entry that is not a dict is compared whole)."""
    if not (isinstance(x, dict) and isinstance(y, dict)):
        if not same_value(x, y):
            return [Change(key=f"gpus[{i}]", before=_s(x), after=_s(y), impact="high", rank=36)]
        return []
    ch: list[Change] = []
    for f, rank, fixed in _GPU_DIFF_FIELDS:
        if f in x and f in y and not same_value(x[f], y[f]):
            impact, why = (fixed, "") if fixed else _limit_impact(x[f], y[f])
            ch.append(Change(key=f"gpus[{i}].{f}", before=_s(x[f]), after=_s(y[f]), impact=impact,
                             rank=rank, why=why))
    return ch


def _gpu_changes(da: dict[str, Any], db: dict[str, Any]) -> list[Change]:
    """GPU count, then each GPU pair's fields."""
    if not (isinstance(da.get("gpus"), list) and isinstance(db.get("gpus"), list)):
        return []
    ga, gb = da["gpus"], db["gpus"]
    ch: list[Change] = []
    if len(ga) != len(gb):
        ch.append(Change(key="gpus.count", before=str(len(ga)), after=str(len(gb)), impact="high", rank=35))
    for i, (x, y) in enumerate(zip(ga, gb, strict=False)):
        ch += _one_gpu_changes(i, x, y)
    return ch


def _topology_changes(da: dict[str, Any], db: dict[str, Any]) -> list[Change]:
    """The topology's link-kind counts."""
    ka = (da.get("topology") or {}).get("kinds") if isinstance(da.get("topology"), dict) else None
    kb = (db.get("topology") or {}).get("kinds") if isinstance(db.get("topology"), dict) else None
    if ka is not None and kb is not None and not same_value(ka, kb):
        return [Change(key="topology.kinds", before=_s(ka), after=_s(kb), impact="high", rank=41)]
    return []


def _process_changes(da: dict[str, Any], db: dict[str, Any]) -> list[Change]:
    """The names of the GPU processes that are not the server."""
    if isinstance(da.get("gpu_processes"), list) and isinstance(db.get("gpu_processes"), list):
        oa, ob = _other_process_names(da["gpu_processes"]), _other_process_names(db["gpu_processes"])
        if oa != ob:
            return [Change(key="gpu_processes.others", before=_s(oa), after=_s(ob), impact="medium", rank=55,
                           why="other processes share the GPUs")]
    return []


def diff_fingerprints(a: dict[str, Any] | Fingerprint, b: dict[str, Any] | Fingerprint) -> FingerprintDiff:
    """Rank differences by expected impact: worker NCCL env, NCCL version, driver/CUDA, GPU links and limits
    that dropped, then the rest. Values are compared typed (`2617` = `2617.0` = "2617 MHz"; blanks and case
    in text are not a change); a limit that dropped ranks by how much. Either side may be a full Fingerprint or a partial dict (every field optional); a field missing on one
    side is not compared.
    """
    da = _aliases(a.model_dump() if isinstance(a, BaseModel) else dict(a))
    db = _aliases(b.model_dump() if isinstance(b, BaseModel) else dict(b))
    out = FingerprintDiff(compared=sorted(k for k in da if k in db))
    ch = (_env_changes(da, db) + _scalar_changes(da, db) + _gpu_changes(da, db) + _topology_changes(da, db) +
          _process_changes(da, db))
    ch.sort(key=lambda c: (_TIER[c.impact], c.rank, c.key))  # expected impact first, then suspicion
    out.changes = ch
    return out


def _load(ctx: ToolContext, v: dict[str, Any] | str) -> dict[str, Any]:
    if isinstance(v, dict):
        return v
    try:
        data = json.loads(ctx.host.read(v).decode("utf-8", "replace"))
    except (UsageError, SpecdoctorError) as exc:
        raise NoData(f"cannot read fingerprint {v}: {exc}") from None
    except ValueError as exc:
        raise ToolFailed(f"{v} is not a JSON fingerprint: {exc}") from None
    if not isinstance(data, dict):
        raise ToolFailed(f"{v} is not a JSON object")
    return data


def read_fingerprint(ctx: ToolContext, v: dict[str, Any] | str) -> dict[str, Any] | None:
    """A saved fingerprint as data: given as a dict, or read from its JSON file on the host; None when it cannot be
    read or is no JSON object (the steps that need it say why through fingerprint_diff)."""
    try:
        return _load(ctx, v)
    except Exception:  # noqa: BLE001 - unreadable, whatever the host said: fingerprint_diff reports why
        return None


@tool(effect="read")
def fingerprint_diff(ctx: ToolContext, args: FingerprintDiffInput) -> FingerprintDiff:
    """Diff two fingerprints (dicts or JSON files on the host); lost worker NCCL variables come first."""
    return diff_fingerprints(_load(ctx, args.a), _load(ctx, args.b))
