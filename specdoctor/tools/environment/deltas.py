"""Every difference between the reference (good-run fingerprint, else what the box itself calls normal) and now, typed."""

from __future__ import annotations

import os
import re
from typing import Any, NamedTuple

from pydantic import BaseModel, Field

from specdoctor.errors import NoData, ToolFailed
from specdoctor.host.base import Raw
from specdoctor.inference import InferenceEngine, get_engine
from specdoctor.models import DeltaList, MeasureFacts
from specdoctor.models.delta import Delta, Revert, norm_value
from specdoctor.models.fingerprint import Fingerprint, GpuFingerprint
from specdoctor.parsers.nvidia_smi import parse_query_csv
from specdoctor.parsers.sections import split_sections
from specdoctor.toolkit import ToolContext, tool
from specdoctor.tools.environment.fingerprint import ENV_PREFIXES, _aliases, _flat_env, _load, same_value
from specdoctor.tools.remote import remote_command
from specdoctor.tools.serving.server import Propagation

__all__ = ["DeltasInput", "Deltas", "list_deltas", "env_impact", "flag_impact", "nccl_default", "BoxState",
           "GpuState", "read_box_state"]

# -- priors: what a variable or flag touches (before any trial) ----------------------------------------------

# NCCL/CUDA variables that change the collective path (protocol, transport, algorithm, channels) or every launch.
_ENV_HIGH = ("NCCL_PROTO", "NCCL_ALGO", "NCCL_P2P_DISABLE", "NCCL_P2P_LEVEL", "NCCL_SHM_DISABLE",
             "NCCL_MIN_NCHANNELS", "NCCL_MAX_NCHANNELS", "NCCL_MIN_CTAS", "NCCL_MAX_CTAS", "NCCL_NTHREADS",
             "NCCL_BUFFSIZE", "NCCL_CUMEM_ENABLE", "NCCL_NVLS_ENABLE", "NCCL_GRAPH_REGISTER", "NCCL_LAUNCH_MODE",
             "NCCL_TUNER_PLUGIN", "NCCL_NET_GDR_LEVEL", "NCCL_P2P_USE_CUDA_MEMCPY", "CUDA_LAUNCH_BLOCKING",
             "CUDA_DEVICE_MAX_CONNECTIONS", "CUDA_VISIBLE_DEVICES", "CUDA_MODULE_LOADING", "NCCL_CONF_FILE")
_ENV_NONE = re.compile(r"(DEBUG|_LOG|LOG_|_TRACE|_DUMP|_FILE$)")
_ENV_LOW = re.compile(r"^(NCCL_IB_|NCCL_SOCKET_|NCCL_NET_|NCCL_COLLNET|TORCH_NCCL_.*(TIMEOUT|HEARTBEAT|ASYNC))")

# Launch flags (dest names) that change what every step computes, how it is launched or how much is accepted.
_FLAG_HIGH = re.compile(r"^(model_path|speculative_.*|attention_backend|.*_attention_backend|disable_cuda_graph.*|"
                        r"cuda_graph_.*|tp_size|dp_size|pp_size|ep_size|dtype|quantization|kv_cache_dtype|"
                        r"disable_custom_all_reduce|enable_torch_compile|torch_compile_.*|sampling_backend|"
                        r"enable_dp_attention|moe_.*|disable_overlap_schedule|chunked_prefill_size|"
                        r"disable_radix_cache|enable_mixed_chunk|max_running_requests)$")
_FLAG_NONE = re.compile(r"^(log_.*|.*_log_.*|enable_metrics|show_time_cost|served_model_name|api_key|"
                        r"crash_dump_folder|enable_cache_report|decode_log_interval|file_storage_path|"
                        r"enable_request_time_stats_logging|collect_tokens_histogram|bucket_.*|"
                        r"prompt_tokens_buckets|generation_tokens_buckets|enable_trace|otlp_.*)$")
# Identity noise: where the server listens, who it is — never a performance difference.
_FLAG_IDENTITY = {"port", "host", "nccl_port", "dist_init_addr", "node_rank", "api_key", "served_model_name",
                  "metrics_port", "grpc_port"}
_PATH_FLAGS = re.compile(r"(^|_)(path|dir|folder|file)$")


def env_impact(name: str) -> str:
    """Prior impact of a worker variable from what it touches (collective path and kernel launches high, logs none)."""
    if name in _ENV_HIGH:
        return "high"
    if _ENV_NONE.search(name):
        return "none"
    if _ENV_LOW.search(name):
        return "low"
    return "medium"


def flag_impact(dest: str) -> str:
    """Prior impact of a launch flag by its dest name (model, draft, attention, graphs, parallelism high; logs none)."""
    if _FLAG_NONE.match(dest):
        return "none"
    if _FLAG_HIGH.match(dest):
        return "high"
    return "medium"


def nccl_default(name: str, interconnect: str | None) -> str | None:
    """A value that makes NCCL behave as with the variable unset (None: no value does).

    Needed because /etc/nccl.conf is always read and its lines only yield to the environment: a trial reverting a
    conf line to "unset" must set the variable to NCCL's own default. Protocols: LL and Simple are on by default,
    LL128 is "auto" (on only over NVLink), so the default set depends on the interconnect (reference D2).
    """
    if name in ("NCCL_P2P_DISABLE", "NCCL_SHM_DISABLE", "NCCL_IB_DISABLE", "NCCL_NET_GDR_READ"):
        return "0"
    if name == "NCCL_PROTO":
        kind = (interconnect or "").lower()
        if "nvlink" in kind:
            return "LL,LL128,Simple"
        if "pcie" in kind:
            return "LL,Simple"
    return None


# -- today's box: the state nvidia-smi reports beyond the fingerprint ------------------------------------------

class GpuState(BaseModel):
    """One GPU's limits as nvidia-smi reports them now."""

    index: int
    bus_id: str | None = None
    pcie_gen: int | None = None
    pcie_gen_max: int | None = None
    pcie_width: int | None = None
    pcie_width_max: int | None = None
    app_sm_clock_mhz: float | None = None
    max_sm_clock_mhz: float | None = None
    power_limit_w: float | None = None
    power_default_w: float | None = None
    clocks_locked: bool | None = Field(default=None, description="The applications-clocks reason is active.")
    power_capped: bool | None = Field(default=None, description="The SW power cap reason is active.")


class BoxState(BaseModel):
    """GPU limits, compute processes (with their GPU) and login-profile exports, read in one command."""

    gpus: list[GpuState] = Field(default_factory=list)
    apps: list[dict[str, Any]] = Field(default_factory=list, description="pid, name, used_mib, bus_id.")
    profile_exports: dict[str, str] = Field(default_factory=dict, description="NAME -> file that exports it "
                                            "(~ for the user's home).")
    problems: list[str] = Field(default_factory=list)


_GPU_FIELDS = ["index", "pci.bus_id", "pcie.link.gen.current", "pcie.link.gen.max", "pcie.link.width.current",
               "pcie.link.width.max", "clocks.applications.graphics", "clocks.max.sm", "power.limit",
               "power.default_limit"]
_BOX_SCRIPT = remote_command("box_state.sh")
_ASSIGN = re.compile(r"^\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)=")


def _num(v: str | None) -> float | None:
    try:
        return float(v) if v not in (None, "") else None
    except ValueError:
        return None


def read_box_state(ctx: ToolContext) -> BoxState:
    """GPU limits and clock/power reasons, compute apps per GPU, and the variables login profiles export."""
    res = ctx.host.run(Raw(_BOX_SCRIPT), check="ignore", timeout=60)
    sec = split_sections(res.stdout)
    out = BoxState()
    rows = parse_query_csv("\n".join(sec.get("gpu", [])), _GPU_FIELDS)
    reasons = {}
    for line in sec.get("reasons", []):  # index, applications-clocks setting, SW power cap (box_state.sh)
        cells = [c.strip() for c in line.split(",")]
        if len(cells) == 3 and cells[0].isdigit():
            reasons[int(cells[0])] = (cells[1] == "Active", cells[2] == "Active")
    for i, row in enumerate(rows):
        idx = int(row.get("index") or i) if (row.get("index") or "").isdigit() else i

        def num(key: str, row: dict[str, str | None] = row) -> float | None:
            return _num(row.get(key))

        gen, gen_max, w, w_max = (num("pcie.link.gen.current"), num("pcie.link.gen.max"),
                                  num("pcie.link.width.current"), num("pcie.link.width.max"))
        locked, capped = reasons.get(idx, (None, None))
        out.gpus.append(GpuState(
            index=idx, bus_id=row.get("pci.bus_id"), pcie_gen=int(gen) if gen else None,
            pcie_gen_max=int(gen_max) if gen_max else None, pcie_width=int(w) if w else None,
            pcie_width_max=int(w_max) if w_max else None, app_sm_clock_mhz=num("clocks.applications.graphics"),
            max_sm_clock_mhz=num("clocks.max.sm"), power_limit_w=num("power.limit"),
            power_default_w=num("power.default_limit"), clocks_locked=locked, power_capped=capped))
    if not out.gpus:
        out.problems.append("nvidia-smi gave no GPU limits: " + " ".join(sec.get("gpu", []))[:200])
    for line in sec.get("apps", []):
        cells = [c.strip() for c in line.split(",")]
        if len(cells) >= 4 and cells[0].isdigit():
            out.apps.append({"pid": int(cells[0]), "name": cells[1], "used_mib": _num(cells[2]),
                             "bus_id": cells[3]})
    home = next((ln.strip() for ln in sec.get("home", []) if ln.strip()), "")
    for line in sec.get("profile", []):
        path, _, rest = line.partition(":")
        _lineno, _, text = rest.partition(":")
        m = _ASSIGN.match(text)
        if m:
            out.profile_exports.setdefault(m.group(1), "~" + path[len(home):] if home and path.startswith(home + "/")
                                           else path)
    return out


# -- the tool -----------------------------------------------------------------------------------------------

class DeltasInput(BaseModel):
    """Arguments of list_deltas."""

    good_fingerprint: dict[str, Any] | str | None = Field(
        default=None, description="The good run's fingerprint (a dict or a JSON file on the host); None: compare "
        "with what the box itself calls normal (reference 'claims').")
    fingerprint: dict[str, Any] | None = Field(default=None, description="Today's fingerprint (the fingerprint step).")
    launch: str | None = Field(default=None, description="Today's launch line (what trials relaunch).")
    propagation: dict[str, Any] | None = Field(default=None, description="check_env_propagation's table "
                                               "(each variable's source).")
    measure: dict[str, Any] | None = Field(default=None, description="The reproduce step's facts (today's tau).")
    catalog: dict[str, Any] | None = Field(default=None, description="catalog_diffs' output (local code changes).")
    max_new_tokens: int | None = Field(default=None, description="Output tokens per request of today's benchmark.")
    read_box: bool = Field(default=True, description="Also read GPU limits, compute apps and login profiles.")


class Deltas(DeltaList):
    """list_deltas' output: the shared DeltaList (a one-line summary for the live view)."""

    def summary_line(self) -> str:
        if not self.deltas:
            return f"no differences from the {self.reference}"
        hot = [d for d in self.deltas if d.impact == "high"]
        head = f"{len(self.deltas)} differences from the {self.reference}, {len(self.revertible())} revertible"
        return head + (f"; high impact: {', '.join(d.label for d in hot[:4])}" if hot else "")


def _tier(d: Delta) -> tuple[int, int, str]:
    kinds = ["env", "launch-flag", "hardware", "software", "acceptance", "workload", "code"]
    return ({"high": 0, "medium": 1, "low": 2, "none": 3}[d.impact], kinds.index(d.kind), d.name)


def _first_worker(row: Any) -> str | None:
    vals = [v for _, v in sorted(row.workers.items(), key=lambda kv: (len(kv[0]), kv[0])) if v is not None]
    return vals[0] if vals else None


def _env_source(row: Any, prop: Propagation, profiles: dict[str, str], launch_env: dict[str, str],
                forced: frozenset[str] = frozenset()) -> str:
    """Where a worker variable's current value comes from, as /proc and the files show it (`forced`: what this
    engine version sets itself before it spawns the workers)."""
    in_env = row.parent is not None or _first_worker(row) is not None
    if row.forced_by_engine and row.status == "forced-by-sglang":
        return "engine-forced"
    if row.name in forced and row.parent is None and _first_worker(row) is not None and not row.from_sitecustomize:
        return "engine-forced"
    if row.from_sitecustomize and row.parent is None:  # a start-up hook: the one observed setting it, by name
        return prop.startup_hooks.get(row.name) or prop.sitecustomize or "sitecustomize.py"
    if not in_env and row.from_nccl_conf:
        return ", ".join(prop.nccl_conf_files) or "nccl.conf"
    if row.name in launch_env:
        return "launch line"
    if row.name in profiles and (row.shell is not None or row.parent is not None):
        return profiles[row.name]
    if row.shell is not None:
        return "launch shell"
    if row.parent is not None:
        return "launcher"
    return "injected after start-up (source not found)"


def _current_env(prop: Propagation | None, fp: Fingerprint) -> dict[str, tuple[str | None, Any]]:
    """NAME -> (effective value in the workers, its propagation row): env first, else an nccl.conf line."""
    out: dict[str, tuple[str | None, Any]] = {}
    if prop is not None:
        for row in prop.rows:
            val = _first_worker(row)
            if val is None and row.parent is None and row.from_nccl_conf:
                val = row.nccl_conf_value  # NCCL reads it from the file: the workers run with it
            if val is None and row.status == "forced-by-sglang":
                val = row.parent
            out[row.name] = (val, row)
    else:
        out = {k: (v, None) for k, v in fp.worker_env.items()}
    return out


def _env_revert(name: str, ref: str | None, source: str, row: Any, interconnect: str | None) -> tuple[Revert | None, str]:
    if source == "engine-forced":
        return None, "the engine sets it itself"
    if row is not None and row.from_sitecustomize and row.parent is None:
        return Revert(undo_sitecustomize=[name], env={name: ref} if ref is not None else {}), ""
    if row is not None and row.from_nccl_conf and row.parent is None and _first_worker(row) is None:
        value = ref if ref is not None else nccl_default(name, interconnect)
        if value is None:
            return None, "nccl.conf sets it and no value gives NCCL's automatic choice back: remove the line"
        return Revert(env={name: value}), ""
    if source.startswith("injected"):
        return None, "set after start-up by something not found (not the launch env): cannot be reverted by a relaunch"
    return (Revert(env={name: ref}) if ref is not None else Revert(unset=[name])), ""


class _EnvView(NamedTuple):
    """What each worker variable's delta is judged with: the good run's env (None: none recorded), the propagation
    table, the box's login-profile exports, the launch line's env, what the engine forces, the interconnect."""

    ref_env: dict[str, str] | None
    prop: Propagation | None
    box: BoxState
    launch_env: dict[str, str]
    forced: frozenset[str]
    interconnect: str | None


def _forced_by_box(name: str, cur: str | None, row: Any, box: BoxState) -> bool:
    """No good run: only what the box forces on NCCL/CUDA (sitecustomize, nccl.conf, login profile) is a delta."""
    if cur is None or row is None:
        return False
    by_box = (row.from_sitecustomize and row.parent is None) or \
        (row.from_nccl_conf and row.parent is None and _first_worker(row) is None) or \
        name in box.profile_exports
    return bool(by_box and name.startswith(("NCCL_", "CUDA_", "TORCH_NCCL_")))


def _is_env_delta(v: _EnvView, name: str, cur: str | None, row: Any) -> bool:
    """A variable is a delta when its value differs from the good run's (without one: when the box forces it)."""
    if v.ref_env is None:
        return _forced_by_box(name, cur, row, v.box)
    ref = v.ref_env.get(name)
    return not ((cur or "").strip() == (ref or "").strip() and (cur is None) == (ref is None))


def _env_delta(v: _EnvView, name: str, cur: str | None, row: Any) -> Delta:
    """One worker variable's delta: its source, its Revert (or why there is none) and its prior impact."""
    ref = (v.ref_env or {}).get(name)
    prop = v.prop
    source = _env_source(row, prop, v.box.profile_exports, v.launch_env, v.forced) if row is not None and prop else \
        "worker environment"
    revert, why = _env_revert(name, ref, source, row, v.interconnect)
    if source == "engine-forced" and not why:
        why = "the engine sets it itself"
    impact = env_impact(name)
    if v.ref_env is None and impact == "high":
        impact = "medium"  # no good run: a forced variable is a suspect, not an observed change
    return Delta(kind="env", name=name, reference=ref, current=cur, source=source,
                 reference_label="good run" if v.ref_env is not None else "claims",
                 revertible=revert is not None, revert=revert, impact=impact,  # type: ignore[arg-type]
                 why=why or ("new in the workers" if ref is None else "LOST: the workers no longer get it"
                             if cur is None else "value changed in the workers"),
                 step_ids=["propagation"] if prop else ["fingerprint"])


def _env_deltas(ref_env: dict[str, str] | None, fp: Fingerprint, prop: Propagation | None, box: BoxState,
                launch_env: dict[str, str], engine: InferenceEngine) -> list[Delta]:
    """The NCCL/CUDA/SGLang/torch variables whose worker value differs from the good run's (or the box forces)."""
    out: list[Delta] = []
    version = fp.engine_version or fp.server_version
    forced = get_engine(engine.name, version).forced_env_names if version else frozenset()
    current = _current_env(prop, fp)
    v = _EnvView(ref_env=ref_env, prop=prop, box=box, launch_env=launch_env, forced=forced,
                 interconnect=fp.interconnect)
    names = set(current) | set(ref_env or {})
    for name in sorted(n for n in names if n.startswith(ENV_PREFIXES)):
        cur, row = current.get(name, (None, None))
        if _is_env_delta(v, name, cur, row):
            out.append(_env_delta(v, name, cur, row))
    return out


def _same_path(a: str, b: str) -> bool:
    """Two paths name the same thing when equal, or when only the directory above differs (another mount of the
    models folder); a different last component is a different model."""
    na, nb = os.path.normpath(a), os.path.normpath(b)
    return na == nb or (os.path.basename(na) == os.path.basename(nb) and os.path.isabs(na) and os.path.isabs(nb))


def _flag_value(v: Any) -> str | None:
    if v is None or v is False:
        return None
    if v is True:
        return ""
    if isinstance(v, list | tuple):
        return " ".join(str(x) for x in v)
    return norm_value(v)


def _flag_deltas(ref_line: str | None, cur_line: str | None, notes: list[str],
                 engine: InferenceEngine) -> list[Delta]:
    if not ref_line or not cur_line:
        if ref_line and not cur_line:
            notes.append("today's launch line unknown: launch flags not compared")
        return []
    try:
        ref, cur = engine.parse_launch(ref_line), engine.parse_launch(cur_line)
    except Exception as exc:  # an unparsable line: say so, compare the rest
        notes.append(f"launch lines not compared: {exc}")
        return []
    ra, ca = ref.as_args(), cur.as_args()
    derived = set(ref.derived) | set(cur.derived)
    out: list[Delta] = []
    for dest in sorted(set(ra) | set(ca)):
        if dest in _FLAG_IDENTITY or dest in derived:
            continue
        rv, cv = _flag_value(ra.get(dest)), _flag_value(ca.get(dest))
        if rv == cv:
            continue
        if rv and cv and _PATH_FLAGS.search(dest) and _same_path(rv, cv):
            continue
        if rv is not None and cv is not None and same_value(rv, cv):
            continue
        out.append(Delta(kind="launch-flag", name=dest, reference=rv, current=cv, source="launch line",
                         revertible=True, revert=Revert(argv_set={dest: rv}), impact=flag_impact(dest),  # type: ignore[arg-type]
                         why="flag added" if rv is None else "flag removed" if cv is None else "value changed",
                         step_ids=["locate"]))
    return out


def _locate_paths(ctx: ToolContext, deltas: list[Delta]) -> list[Delta]:
    """A path flag's revert must name something on this box: the good run's path, else the same name next to
    today's (the models folder mounted elsewhere); when neither exists the delta cannot be reverted here."""
    paths = [d for d in deltas if _PATH_FLAGS.search(d.name) and d.reference and d.reference.startswith("/")]
    if not paths:
        return deltas
    cands = {d.name: [d.reference or ""] + ([os.path.join(os.path.dirname(d.current), os.path.basename(d.reference or ""))]
                                              if d.current and d.current.startswith("/") else []) for d in paths}
    words = [c for cs in cands.values() for c in cs]
    res = ctx.host.run(["sh", "-c", 'for p in "$@"; do [ -e "$p" ] && printf "%s\\0" "$p"; done; true', "sh",
                        *words], check="ignore")
    exists = set(res.stdout.split("\0"))
    for d in paths:
        found = next((c for c in cands[d.name] if c in exists), None)
        if found is None:
            d.revertible, d.revert = False, None
            d.why = f"{d.why}; the good run's {d.reference} is not on this box"
        elif found != d.reference and d.revert is not None:
            d.revert.argv_set[d.name] = found
            d.why = f"{d.why}; the good run's {os.path.basename(found)} is at {found} here"
    return deltas


_SOFTWARE = [("nccl_version", "nccl", "high"), ("driver", "driver", "high"), ("cuda_driver", "cuda-driver", "high"),
             ("cuda_runtime", "cuda-runtime", "high"), ("torch_version", "torch", "medium"),
             ("engine_version", "engine", "high")]


def _software_deltas(ref: dict[str, Any], fp: Fingerprint) -> list[Delta]:
    cur = fp.model_dump()
    if not cur.get("engine_version"):
        cur["engine_version"] = cur.get("server_version")
    out = []
    for key, name, impact in _SOFTWARE:
        a, b = ref.get(key), cur.get(key)
        if a is None or b is None or str(a).strip() == str(b).strip():
            continue
        src = fp.nccl_source if key == "nccl_version" and fp.nccl_source else "fingerprint"
        out.append(Delta(kind="software", name=name, reference=str(a), current=str(b), source=src, impact=impact,  # type: ignore[arg-type]
                         why="a different version than the good run's", step_ids=["fingerprint"]))
    return out


def _link(g: Any) -> str | None:
    gen, width = g.get("pcie_gen"), g.get("pcie_width")
    return None if gen is None and width is None else f"Gen{gen or '?'} x{width or '?'}"


class _HwView(NamedTuple):
    """What the per-GPU hardware checks read: the good run's GPUs and today's nvidia-smi state and fingerprint GPUs,
    each by GPU index."""

    ref_gpus: dict[int, dict[str, Any]]
    state: dict[int, GpuState]
    gpus: dict[int, GpuFingerprint]


def _gpu_identity_deltas(ref: dict[str, Any] | None, fp: Fingerprint) -> list[Delta]:
    """The GPUs themselves and how they are connected (a good run on other hardware is another reference)."""
    out: list[Delta] = []
    ref_list = [g for g in (ref or {}).get("gpus") or [] if isinstance(g, dict)]
    names_now = sorted({g.name for g in fp.gpus if g.name})
    names_ref = sorted({str(g["name"]) for g in ref_list if g.get("name")})
    if names_now and names_ref and not same_value(names_now, names_ref):
        out.append(Delta(kind="hardware", name="gpu-model", reference=", ".join(names_ref), current=", ".join(names_now),
                         source="nvidia-smi", impact="high", why="the good run ran on other GPUs",
                         step_ids=["fingerprint"]))
    if ref and isinstance(ref.get("gpu_count"), int | float) and fp.gpus and int(ref["gpu_count"]) != len(fp.gpus):
        out.append(Delta(kind="hardware", name="gpu-count", reference=norm_value(ref["gpu_count"]),
                         current=norm_value(len(fp.gpus)), source="nvidia-smi", impact="high",
                         step_ids=["fingerprint"]))
    if ref and ref.get("interconnect") and fp.interconnect and not same_value(ref["interconnect"], fp.interconnect):
        out.append(Delta(kind="hardware", name="interconnect", reference=str(ref["interconnect"]),
                         current=fp.interconnect, source="nvidia-smi topo -m", impact="high",
                         why="GPUs connected differently than in the good run", step_ids=["fingerprint"]))
    return out


def _below_ref_link(r: dict[str, Any] | None, ref_link: str | None, gen: int, width: int) -> bool:
    """The link runs below the good run's link of this GPU (in generation or width)."""
    return bool(ref_link is not None and r is not None and (
        (r.get("pcie_gen") and gen < int(r["pcie_gen"])) or (r.get("pcie_width") and width < int(r["pcie_width"]))))


def _pcie_delta(v: _HwView, i: int, g: GpuFingerprint, link: tuple[int, int], best: tuple[int, int]) -> Delta | None:
    """One GPU's link when it is below its max or the good run's (None: it is not)."""
    s = v.state.get(i)
    gen, width = link
    gen_max = (s.pcie_gen_max if s else None) or g.pcie_gen_max
    width_max = (s.pcie_width_max if s else None) or g.pcie_width_max
    r = v.ref_gpus.get(i)
    ref_link = _link(r) if r else None
    cur_link = f"Gen{gen} x{width}"
    below_max = (gen_max and gen < gen_max) or (width_max and width < width_max)
    below_ref = _below_ref_link(r, ref_link, gen, width)
    if not (gen and (below_max or below_ref)):
        return None
    peer_faster = (gen, width) < best
    impact = "high" if below_ref or peer_faster else "low"
    return Delta(kind="hardware", name="pcie-link", reference=ref_link or f"Gen{gen_max} x{width_max}",
                 current=cur_link, source=f"GPU {i} ({g.bus_id or '?'})",
                 reference_label="good run" if ref_link else "claims", impact=impact,  # type: ignore[arg-type]
                 why=("below the good run's link" if below_ref else "below its max") +
                 ("; the other GPUs' links are faster" if peer_faster else
                  "; every GPU alike (links downshift when idle)"), step_ids=["fingerprint"])


def _pcie_deltas(v: _HwView) -> list[Delta]:
    """PCIe: a link below its max is suspicious when the box's other GPUs run faster (all alike: idle power saving)."""
    state = v.state
    links = {i: ((state[i].pcie_gen if i in state else g.pcie_gen) or 0,
                 (state[i].pcie_width if i in state else g.pcie_width) or 0) for i, g in v.gpus.items()}
    best = max(links.values(), default=(0, 0))
    return [d for i, g in sorted(v.gpus.items()) if (d := _pcie_delta(v, i, g, links[i], best)) is not None]


def _held_clock(v: _HwView, i: int, g: GpuFingerprint) -> tuple[int, float | None, float] | None:
    """(GPU, its application/locked SM clock, its max) when its SM clock is held below max or the good run's."""
    s = v.state.get(i)
    mx = (s.max_sm_clock_mhz if s else None) or g.max_sm_clock_mhz
    app = s.app_sm_clock_mhz if s else None
    r = v.ref_gpus.get(i)
    ref_sm = _num(str(r.get("sm_clock_mhz"))) if r and r.get("sm_clock_mhz") is not None else None
    below_ref = ref_sm is not None and g.sm_clock_mhz is not None and g.sm_clock_mhz < 0.95 * ref_sm
    if mx and ((app is not None and app < mx * 0.98) or (s is not None and s.clocks_locked) or below_ref):
        return (i, app if app is not None else g.sm_clock_mhz, mx)  # GeForce: no application clocks
    return None


def _sm_clock_delta(v: _HwView) -> list[Delta]:
    """SM clocks locked below max (application clocks / locked clocks), per box: one delta naming the GPUs."""
    locked = [h for i, g in sorted(v.gpus.items()) if (h := _held_clock(v, i, g)) is not None]
    if not locked:
        return []
    ref_gpus = v.ref_gpus
    ref_max = next((r.get("sm_clock_mhz") or r.get("max_sm_clock_mhz") for r in ref_gpus.values()
                    if r.get("sm_clock_mhz") or r.get("max_sm_clock_mhz")), None)  # its clock under load first
    app = min((a for _, a, _ in locked if a is not None), default=None)
    mx = locked[0][2]
    return [Delta(kind="hardware", name="sm-clock", reference=norm_value(ref_max or mx), current=norm_value(app),
                  source=f"GPUs {','.join(str(i) for i, _, _ in locked)}: application/locked SM clock "
                  f"{norm_value(app)} of {norm_value(mx)} MHz",
                  reference_label="good run" if ref_max else "claims",
                  impact="high" if app is not None and app < mx * 0.9 else "medium",
                  why="SM clocks held below their max", step_ids=["deltas"])]


def _capped_power(v: _HwView, i: int, g: GpuFingerprint) -> tuple[int, float, float, bool] | None:
    """(GPU, its power limit, the limit it should have, whether that is the good run's) when 5 % or more below."""
    s = v.state.get(i)
    limit = (s.power_limit_w if s else None) or g.power_limit_w
    ref_gpus = v.ref_gpus
    r = ref_gpus.get(i) or (ref_gpus.get(0) if ref_gpus else None)
    ref_limit = _num(str(r.get("power_limit_w"))) if r and r.get("power_limit_w") is not None else None
    default = (s.power_default_w if s else None) or ref_limit
    base = ref_limit or default
    if limit and base and limit < base * 0.95:
        return (i, limit, base, ref_limit is not None)
    return None


def _power_limit_delta(v: _HwView) -> list[Delta]:
    """Power limit below the default (or the good run's), per box: one delta naming the GPUs."""
    capped = [c for i, g in sorted(v.gpus.items()) if (c := _capped_power(v, i, g)) is not None]
    if not capped:
        return []
    limit = min(c[1] for c in capped)
    base = capped[0][2]
    return [Delta(kind="hardware", name="power-limit", reference=norm_value(base), current=norm_value(limit),
                  source=f"GPUs {','.join(str(c[0]) for c in capped)}: power.limit {norm_value(limit)} W "
                  f"(default {norm_value(base)} W)",
                  reference_label="good run" if capped[0][3] else "claims",
                  impact="high" if limit < base * 0.8 else "medium",
                  why="power limit below the default: clocks sag under load", step_ids=["deltas"])]


def _persistence_deltas(v: _HwView) -> list[Delta]:
    """Persistence mode (a changed setting only)."""
    out: list[Delta] = []
    for i, g in sorted(v.gpus.items()):
        r = v.ref_gpus.get(i)
        if r and r.get("persistence_mode") is not None and g.persistence_mode is not None and \
                not same_value(r["persistence_mode"], g.persistence_mode):
            out.append(Delta(kind="hardware", name="persistence", reference=str(r["persistence_mode"]),
                             current=g.persistence_mode, source=f"GPU {i}", impact="low", step_ids=["fingerprint"]))
    return out


def _foreign_apps(fp: Fingerprint, box: BoxState) -> list[dict[str, Any]]:
    """The compute processes that are not the server: nvidia-smi's apps now, else the fingerprint's."""
    server_pids = {int(p["pid"]) for p in fp.gpu_processes if isinstance(p, dict) and p.get("server")}
    return [a for a in box.apps if a["pid"] not in server_pids] if box.apps else \
        [p for p in fp.gpu_processes if isinstance(p, dict) and not p.get("server")]


def _other_process_delta(a: dict[str, Any], gpu: int | None, shared: bool, ref_others: list[str],
                         ref: dict[str, Any] | None, server_bus: set[str]) -> Delta:
    """One foreign process (`shared`: on a GPU the server computes on)."""
    where = f"GPU {gpu}" if gpu is not None else "a GPU"
    return Delta(kind="hardware", name="other-gpu-process", reference=", ".join(ref_others) or None,
                 current=f"pid {a['pid']} {a.get('name')}", source=f"{where}: {a.get('name')} "
                 f"(pid {a['pid']}, {norm_value(a.get('used_mib'))} MiB)",
                 reference_label="good run" if ref else "claims",
                 impact="high" if shared or not server_bus else "low",
                 why="another process computes on a GPU the server uses" if shared else
                 "another process holds GPU memory", step_ids=["fingerprint"])


def _other_process_deltas(ref: dict[str, Any] | None, fp: Fingerprint, box: BoxState, server_bus: set[str],
                          gpus: dict[int, GpuFingerprint]) -> list[Delta]:
    """Other processes on the GPUs (those the good run also had are no difference)."""
    out: list[Delta] = []
    foreign = _foreign_apps(fp, box)
    by_bus = {(g.bus_id or "").lower()[-12:]: i for i, g in gpus.items()}
    ref_others = sorted({str(p.get("name")) for p in (ref or {}).get("gpu_processes") or []
                         if isinstance(p, dict) and not p.get("server")})
    for a in foreign:
        bus = str(a.get("bus_id") or "").lower()[-12:]
        if str(a.get("name")) in ref_others:
            continue
        out.append(_other_process_delta(a, by_bus.get(bus), bool(bus) and bus in server_bus, ref_others, ref,
                                        server_bus))
    return out


def _hardware_deltas(ref: dict[str, Any] | None, fp: Fingerprint, box: BoxState, server_bus: set[str]) -> list[Delta]:
    """GPU model/count/interconnect, PCIe links, SM clocks, power limits, persistence and other GPU processes."""
    ref_gpus = {int(g.get("index", i)): g for i, g in enumerate(ref.get("gpus") or [])
                if isinstance(g, dict)} if ref else {}
    v = _HwView(ref_gpus=ref_gpus, state={g.index: g for g in box.gpus}, gpus={g.index: g for g in fp.gpus})
    return (_gpu_identity_deltas(ref, fp) + _pcie_deltas(v) + _sm_clock_delta(v) + _power_limit_delta(v) +
            _persistence_deltas(v) + _other_process_deltas(ref, fp, box, server_bus, v.gpus))


def _acceptance_delta(ref: dict[str, Any], measure: MeasureFacts | None) -> list[Delta]:
    then = (ref.get("measurements") or {}).get("accept_length") if isinstance(ref.get("measurements"), dict) else None
    now = measure.spec.accept_length if measure is not None and measure.spec is not None else None
    if then is None or now is None:
        return []
    drop = (float(then) - float(now)) / float(then) if float(then) else 0.0
    if abs(drop) < 0.03:  # accept length over a few requests varies by a few percent
        return []
    return [Delta(kind="acceptance", name="accept-length", reference=norm_value(round(float(then), 2)),
                  current=norm_value(round(float(now), 2)), source="reproduce (spec)",
                  impact="high" if drop >= 0.10 else "medium" if drop > 0 else "low",
                  why=f"tau {'lower' if drop > 0 else 'higher'} than in the good run ({drop:+.0%} drop)",
                  step_ids=["reproduce"])]


def _workload_deltas(ref: dict[str, Any], max_new_tokens: int | None, engine: InferenceEngine) -> list[Delta]:
    w = ref.get("workload")
    if not isinstance(w, dict):
        return []
    payload = engine.generate_payload("x", max_new_tokens or 128)
    temp = (payload.get("sampling_params") or payload).get("temperature") if isinstance(payload, dict) else None
    today: dict[str, Any] = {"output_tokens": max_new_tokens, "concurrency": 1, "temperature": temp,
                             "dataset": "specdoctor benchmark prompts"}
    out = []
    for key in sorted(w):
        if key not in today or today[key] is None:
            continue
        if same_value(w[key], today[key]):
            continue
        out.append(Delta(kind="workload", name=key, reference=norm_value(w[key]), current=norm_value(today[key]),
                         source="good-run workload vs today's benchmark", impact="high" if key == "dataset" else "medium",
                         why="the good run's figures were measured with another workload", step_ids=["reproduce"]))
    return out


def _code_deltas(catalog: dict[str, Any] | None) -> list[Delta]:
    if not catalog:
        return []
    out = []
    for f in catalog.get("files") or []:
        if not isinstance(f, dict) or not f.get("path"):
            continue
        out.append(Delta(kind="code", name=f["path"], reference="HEAD",
                         current="untracked" if f.get("untracked") else f"changed ({f.get('status') or 'M'})",
                         source="working tree", reference_label="HEAD", revertible=True,
                         revert=Revert(drop_patches=[f["path"]]), impact="none" if f.get("logging_only") else "medium",
                         why="logging-only change" if f.get("logging_only") else "local change", step_ids=["catalog"]))
    return out


@tool(effect="read")
def list_deltas(ctx: ToolContext, args: DeltasInput) -> Deltas:
    """Every difference between the good run (or, without one, what the box calls normal) and now, typed and ranked:
    worker env with each variable's source, launch flags (by dest name), software versions, GPU link/clocks/power/
    other processes, acceptance, workload and local code changes; each revertible one carries its Revert."""
    ref: dict[str, Any] | None = None
    notes: list[str] = []
    if args.good_fingerprint:
        try:
            ref = _aliases(_load(ctx, args.good_fingerprint))
        except (NoData, ToolFailed) as exc:
            notes.append(f"good-run fingerprint not read ({exc}): compared with what the box calls normal")
    fp = Fingerprint.model_validate(args.fingerprint) if args.fingerprint else Fingerprint()
    if not args.fingerprint:
        notes.append("no fingerprint of today: software and per-GPU state not compared")
    prop = Propagation.model_validate(args.propagation) if args.propagation else None
    if prop is None:
        notes.append("no env-propagation table: variable sources unknown (fingerprint worker env used)")
    measure = MeasureFacts.model_validate(args.measure) if args.measure else None
    box = read_box_state(ctx) if args.read_box else BoxState()
    notes.extend(box.problems)
    launch_env: dict[str, str] = {}
    if args.launch:
        try:
            launch_env = dict(ctx.engine.parse_launch(args.launch).env)
        except Exception:  # reported by _flag_deltas
            launch_env = {}
    server_pids = {int(p["pid"]) for p in fp.gpu_processes if isinstance(p, dict) and p.get("server")}
    server_bus = {str(a.get("bus_id") or "").lower()[-12:] for a in box.apps if a["pid"] in server_pids}
    deltas: list[Delta] = []
    ref_env = _flat_env(ref.get("worker_env")) if ref and "worker_env" in ref else None
    if ref is not None and ref_env is None:
        notes.append("the good run recorded no worker env: env compared with what the box forces")
    deltas += _env_deltas(ref_env, fp, prop, box, launch_env, ctx.engine)
    if ref is not None:
        deltas += _locate_paths(ctx, _flag_deltas(ref.get("launch"), args.launch, notes, ctx.engine))
        deltas += _software_deltas(ref, fp)
        deltas += _acceptance_delta(ref, measure)
        deltas += _workload_deltas(ref, args.max_new_tokens, ctx.engine)
    if args.fingerprint or box.gpus:
        deltas += _hardware_deltas(ref, fp, box, server_bus)
    deltas += _code_deltas(args.catalog)
    deltas.sort(key=_tier)
    return Deltas(reference="good run" if ref is not None else "claims", deltas=deltas, notes=notes)
