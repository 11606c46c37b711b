"""NCCL tools: inventory (topology, versions, sizes) and the all-reduce micro-benchmark sweep over a grid."""

from __future__ import annotations

import json
import math
import shlex
import statistics
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import AliasChoices, BaseModel, ConfigDict, Field

from specdoctor.errors import NoData, ToolFailed, ToolRetry
from specdoctor.host.base import Raw
from specdoctor.inference import InferenceEngine
from specdoctor.parsers.nccl import latency_at, parse_all_reduce, parse_nccl_debug
from specdoctor.parsers.nvidia_smi import Topology, parse_topo
from specdoctor.parsers.sections import split_sections
from specdoctor.stats.comparator import compare
from specdoctor.toolkit import ToolContext, registry, tool
from specdoctor.tools.nccl.nccl_grid import (
    EXPERIMENT_NOTE,
    CycleWeight,
    MessageSize,
    NcclConfig,
    Skipped,
    cycle_weights,
    engine_forced_env,
    expand_grid,
    experiment_only,
    message_sizes,
)
from specdoctor.tools.remote import remote_text

__all__ = ["InventoryInput", "NcclInventory", "nccl_inventory", "SweepInput", "SizePoint", "ConfigResult",
           "NcclSweep", "nccl_sweep", "DEBUG_ENV", "relative_configs"]

DEBUG_ENV = {"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT,ENV"}

_SCRIPT = remote_text("nccl_environment.sh")
_VERSIONS = remote_text("nccl_versions.py")


def _conf(lines: list[str]) -> dict[str, str]:
    out = {}
    for line in lines:
        s = line.strip()
        if s and not s.startswith("#") and "=" in s:
            k, _, v = s.partition("=")
            out[k.strip()] = v.strip()
    return out


class InventoryInput(BaseModel):
    """Arguments of nccl_inventory."""

    port: int | None = Field(default=None, description="Port of a running server to read TP/model from.")
    launch: str | None = Field(default=None, description="The launch line (when no server is running).")
    python: str = Field(default="python3", description="Python on the host with torch/sglang.")
    tp: int | None = Field(default=None, ge=1)
    model_path: str | None = None
    hidden_size: int | None = Field(default=None, ge=1)
    draft_tokens: int | None = Field(default=None, ge=1)
    batches: list[int] = Field(default_factory=lambda: [1, 16])


class NcclInventory(BaseModel):
    """What the sweep needs to know first: topology, versions, config files, TP, and the sizes that matter."""

    model_config = ConfigDict(populate_by_name=True)

    interconnect: Literal["nvlink", "pcie", "mixed", "unknown"] = "unknown"
    link_kinds: dict[str, int] = Field(default_factory=dict)
    gpus: int = 0
    numa_nodes: list[str] = Field(default_factory=list, description="NUMA nodes of the TP GPUs.")
    crosses_numa: bool | None = None
    nccl_version: str | None = None
    torch_version: str | None = None
    engine: str | None = Field(default=None, description="The serving engine (sglang, vllm).")
    engine_version: str | None = Field(default=None, validation_alias=AliasChoices("engine_version", "sglang_version"))
    engine_forced_env: dict[str, str] = Field(default_factory=dict, validation_alias=AliasChoices(
        "engine_forced_env", "sglang_forced_env"), description="What the engine writes into the workers' env.")
    nccl_conf: dict[str, dict[str, str]] = Field(default_factory=dict, description="Config file → NCCL_* it sets.")
    tp: int | None = None
    model_path: str | None = None
    hidden_size: int | None = None
    layers: int | None = Field(default=None, description="The target's hidden layers (config.json).")
    allreduces_per_forward: int | None = Field(default=None, description="2 per target layer (attention and MLP "
                                               "outputs) when the layers are known.")
    draft_tokens: int | None = None
    sizes: list[MessageSize] = Field(default_factory=list)
    bench_tool: Literal["all_reduce_perf", "allreduce_bench"] = "allreduce_bench"
    all_reduce_perf: str | None = None
    launcher_drops: bool | None = Field(default=None, description="The running server's parent has NCCL_* its "
                                        "TP workers lack (None: no running server checked).")
    propagation: list[dict[str, Any]] = Field(default_factory=list, description="check_env_propagation rows.")
    notes: list[str] = Field(default_factory=list)

    def summary_line(self) -> str:
        sizes = ", ".join(f"{s.label} {s.bytes} B" for s in self.sizes) or "no sizes"
        drops = "LAUNCHER DROPS NCCL VARIABLES FOR THE WORKERS; " if self.launcher_drops else ""
        return (drops + f"{self.gpus} GPUs over {self.interconnect}, NCCL {self.nccl_version or '?'}, TP {self.tp or '?'}, "
                f"hidden {self.hidden_size or '?'}; sizes: {sizes}; bench: {self.bench_tool}")


def _server_args(ctx: ToolContext, port: int | None) -> dict[str, Any]:
    """The running server's parsed args via find_server_processes (empty when none or the tool is absent)."""
    try:
        res = registry.call(ctx, "find_server_processes", {"port": port, "exactly_one": True})
    except Exception:  # the server family may not be installed; the inventory works without it
        return {}
    from specdoctor.tools.serving.server import ServerList

    found = registry.typed_output(res, ServerList, where="find_server_processes")
    servers = found.servers if found is not None else []
    return dict(servers[0].args) if len(servers) == 1 else {}  # exactly the one meant, or none


def _propagation(ctx: ToolContext, port: int | None, inv: NcclInventory) -> None:
    """Does the running server's launcher pass NCCL_* on to its TP workers? Checked before any tuning claim."""
    try:
        res = registry.call(ctx, "check_env_propagation", {"port": port, "names": ["NCCL_*"]})
    except Exception as exc:  # noqa: BLE001 - the server family may be absent; the inventory works without it
        inv.notes.append(f"propagation not checked: {exc}")
        return
    from specdoctor.tools.serving.server import Propagation

    prop = registry.typed_output(res, Propagation, where="check_env_propagation")
    if prop is None:
        return
    inv.propagation = [r.model_dump(mode="json") for r in prop.rows]
    lost = [r for r in inv.propagation if r.get("status") in ("dropped-for-workers", "missing-in-parent")]
    inv.launcher_drops = bool(lost)
    if lost:
        inv.notes.insert(0, "the launcher drops NCCL variables for the TP workers: " + "; ".join(
            f"{r['name']}={r.get('parent') or r.get('shell')} upstream, workers: "
            + ", ".join(f"{k}={v}" for k, v in sorted(r["workers"].items())) for r in lost)
            + " — fix propagation before trusting any NCCL tuning")


def _model_config(ctx: ToolContext, model_path: str, notes: list[str]) -> tuple[int | None, int | None]:
    """The target's hidden size and layer count from its config.json (a multimodal wrapper's text config too)."""
    try:
        cfg = json.loads(ctx.host.read(f"{model_path.rstrip('/')}/config.json"))
    except Exception as exc:
        notes.append(f"could not read {model_path}/config.json on the host ({type(exc).__name__}); pass hidden_size")
        return None, None
    nodes = [n for n in (cfg, cfg.get("text_config") or {}, cfg.get("language_config") or {}) if isinstance(n, dict)]
    hidden = next((n["hidden_size"] for n in nodes if isinstance(n.get("hidden_size"), int)), None)
    layers = next((n["num_hidden_layers"] for n in nodes if isinstance(n.get("num_hidden_layers"), int)), None)
    if hidden is None:
        notes.append(f"{model_path}/config.json has no hidden_size")
    return hidden, layers


def _inventory_server(ctx: ToolContext, args: InventoryInput, inv: NcclInventory) -> dict[str, Any]:
    """The server's args: the one on the given port, else the one the launch line names (never any other SGLang
    that happens to run on the host); the launch line fills what the running server does not say."""
    port = args.port
    if port is None and args.launch:
        port = ctx.engine.parse_launch(args.launch).port
    server = _server_args(ctx, port)
    if server:
        _propagation(ctx, port, inv)
    elif port is not None:
        inv.notes.append(f"no inference server found on port {port}: TP and model read from the launch line")
    if args.launch:  # the running server's own args win over the launch line
        server = {**ctx.engine.parse_launch(args.launch).as_args(), **server}
    return server


def _links(inv: NcclInventory, topo: Topology, gpus: list[str]) -> dict[str, int]:
    """Link kinds between the TP GPUs and the interconnect they make; the link counts."""
    kinds: dict[str, int] = {}
    for i, a in enumerate(gpus):
        for b in gpus[i + 1:]:
            k = topo.links.get(a, {}).get(b)
            if k:
                kinds[k] = kinds.get(k, 0) + 1
    inv.link_kinds = kinds
    if kinds:
        nv = sum(v for k, v in kinds.items() if k.startswith("NV"))
        inv.interconnect = "nvlink" if nv == sum(kinds.values()) else "pcie" if nv == 0 else "mixed"
    elif len(gpus) == 1:
        inv.notes.append("one GPU in scope: no all-reduce at TP 1")
    else:
        inv.notes.append("no `nvidia-smi topo -m` matrix: interconnect unknown (LL128 will not be tried)")
    return kinds


def _numa(inv: NcclInventory, topo: Topology, gpus: list[str], kinds: dict[str, int]) -> None:
    """NUMA nodes of the TP GPUs, and the two layouts where NCCL's knobs matter most."""
    numa = sorted({v for g in gpus if (v := topo.numa_affinity.get(g))})
    inv.numa_nodes = numa
    inv.crosses_numa = (len(numa) > 1 or "SYS" in kinds) if gpus else None
    if inv.crosses_numa:
        inv.notes.append("TP GPUs span NUMA nodes / the CPU interconnect (SYS): small all-reduces pay 100s of µs there")
    if inv.interconnect == "pcie" and (inv.tp or 0) > 2:
        inv.notes.append("PCIe-only with TP > 2: SGLang's custom all-reduce is disabled, so every TP all-reduce goes "
                         "to NCCL and its knobs matter")


def _conf_files(inv: NcclInventory, sec: dict[str, list[str]]) -> None:
    """The NCCL_* that /etc/nccl.conf, ~/.nccl.conf and $NCCL_CONF_FILE set."""
    for name, key in (("/etc/nccl.conf", "etc_nccl_conf"), ("~/.nccl.conf", "home_nccl_conf")):
        if vals := _conf(sec.get(key, [])):
            inv.nccl_conf[name] = vals
    ncf = sec.get("nccl_conf_file", [])
    if ncf and ncf[0].startswith("path=") and (vals := _conf(ncf[1:])):
        inv.nccl_conf[ncf[0][5:]] = vals
    if inv.nccl_conf:
        inv.notes.append("NCCL config files set " + "; ".join(f"{p}: {', '.join(f'{k}={v}' for k, v in d.items())}"
                                                              for p, d in inv.nccl_conf.items())
                         + " — every NCCL process on the host reads them")


def _read_versions(inv: NcclInventory, sec: dict[str, list[str]], engine: InferenceEngine) -> None:
    """torch, engine and NCCL versions, the variables that engine version forces, and the benchmark on the host."""
    try:
        ver = json.loads((sec.get("versions") or ["{}"])[-1] or "{}")
    except json.JSONDecodeError:
        ver = {}
    inv.torch_version, inv.engine_version, inv.nccl_version = ver.get("torch"), ver.get(engine.package), ver.get("nccl")
    inv.engine = engine.name
    inv.engine_forced_env = engine_forced_env(engine, inv.engine_version)
    perf = [x.strip() for x in sec.get("all_reduce_perf", []) if x.strip()]
    if perf:
        inv.bench_tool, inv.all_reduce_perf = "all_reduce_perf", perf[0]


def _size_all_reduces(ctx: ToolContext, args: InventoryInput, inv: NcclInventory) -> None:
    """The hidden size (given, else the model's config.json) and the all-reduce sizes it gives."""
    hidden, layers = _model_config(ctx, inv.model_path, inv.notes) if inv.model_path else (None, None)
    inv.hidden_size = args.hidden_size or hidden
    inv.layers = layers
    inv.allreduces_per_forward = 2 * layers if layers else None
    if inv.hidden_size:
        inv.sizes = message_sizes(inv.hidden_size, inv.draft_tokens, args.batches)
    else:
        inv.notes.append("hidden size unknown: give the model path or hidden_size to size the all-reduces")


@tool(effect="read")
def nccl_inventory(ctx: ToolContext, args: InventoryInput) -> NcclInventory:
    """NCCL inventory: NVLink or PCIe, NUMA, NCCL/torch/SGLang versions, nccl.conf files, TP, hidden size, sizes.

    The sizes are the all-reduces decode and verify actually issue: decode b·hidden·2 B, verify
    b·draft_tokens·hidden·2 B (bf16), for each batch size asked (1 and 16 by default).
    """
    engine = ctx.engine
    res = ctx.host.run(Raw(_SCRIPT), env={"PY": args.python, "VERSIONS": _VERSIONS, "ENGINE": engine.package},
                       check="ignore", timeout=120)
    sec = split_sections(res.stdout)
    inv = NcclInventory()
    topo = parse_topo("\n".join(sec.get("topo", [])))
    server = _inventory_server(ctx, args, inv)
    inv.tp = args.tp or server.get("tp_size") or None
    inv.model_path = args.model_path or server.get("model_path")
    inv.draft_tokens = args.draft_tokens or server.get("speculative_num_draft_tokens")
    gpus = topo.gpus[: inv.tp] if inv.tp else topo.gpus
    inv.gpus = len(topo.gpus)
    kinds = _links(inv, topo, gpus)
    _numa(inv, topo, gpus, kinds)
    _conf_files(inv, sec)
    _read_versions(inv, sec, engine)
    _size_all_reduces(ctx, args, inv)
    return inv


class SweepInput(BaseModel):
    """Arguments of nccl_sweep."""

    grid: dict[str, list[str | None]] | None = Field(
        default=None, description="NCCL var → values (null = NCCL's default); CHANNELS = MIN/MAX CTAS. None = default grid.")
    sizes: list[int] = Field(default_factory=list, description="Message sizes in bytes; from the inventory when empty.")
    tp: int | None = Field(default=None, ge=2, description="Ranks (the server's TP size); from the inventory when absent.")
    interconnect: Literal["nvlink", "pcie", "mixed", "unknown"] | None = None
    nccl_version: str | None = None
    python: str = "python3"
    tool: Literal["auto", "all_reduce_perf", "allreduce_bench"] = "auto"
    backend: Literal["nccl", "gloo"] = Field(default="nccl", description="allreduce_bench backend (gloo: CPU tests).")
    repeats: int = Field(default=5, ge=1, le=50, description="Runs per finalist and for the default.")
    screen_repeats: int = Field(default=1, ge=1, le=10, description="Runs per configuration in the first pass.")
    finalists: int = Field(default=3, ge=0, le=20, description="Best screened configs re-run `repeats` times.")
    graph: int = Field(default=10, ge=0, description="All-reduces per CUDA graph (-G); 0 = eager.")
    iters: int = Field(default=20, ge=1)
    warmup: int = Field(default=5, ge=0)
    use_json: bool = Field(default=False, description="Ask all_reduce_perf for -J JSON and parse that.")
    timeout_s: float = Field(default=300, gt=0)
    port: int | None = None
    current: dict[str, str] | None = Field(default=None, description="The NCCL variables the server's workers run "
                                           "with now: the reference every configuration is compared with, and the "
                                           "base each grid point is applied on. None: read from the workers of the "
                                           "server on `port` (/proc); {} or no server: NCCL's defaults.")
    good: dict[str, Any] | str | None = Field(default=None, description="The good run's fingerprint (a dict, or a "
                                              "JSON file on the host): its workers' NCCL setting is always a "
                                              "configuration.")
    per_forward: int | None = Field(default=None, ge=1, description="All-reduces per target forward (2 per layer); "
                                    "from the inventory when absent. With it each size is weighed by how often the "
                                    "cycle sends it.")
    steps: int | None = Field(default=None, ge=1, description="Draft steps k (draft tokens − 1); from the inventory.")
    size_roles: list[MessageSize] = Field(default_factory=list, description="What each size is (decode or verify, "
                                          "at which batch); from the inventory.")
    batch: int = Field(default=1, ge=1, description="The batch the cycle runs at (the benchmark sends one request "
                       "at a time): only sizes at this batch weigh.")
    not_removable: list[str] | None = Field(default=None, description="Current variables set inside every process "
                                            "(sitecustomize.py, nccl.conf): never a 'remove' configuration. None: "
                                            "from the workers' propagation table.")


class SizePoint(BaseModel):
    """Latency of one configuration at one message size (median over its runs), and the comparator's call."""

    size: int
    latency_us: float | None
    samples: list[float] = Field(default_factory=list)
    outcome: str | None = None
    verdict: str | None = None
    pct_change: float | None = None


class ConfigResult(BaseModel):
    """One configuration: latencies per size, the score the comparator judged, the verdict."""

    label: str
    env: dict[str, str] = Field(default_factory=dict, description="The whole NCCL setting it runs with (the "
                                "workers' current variables plus the grid point's).")
    unset: list[str] = Field(default_factory=list, description="Variables it removes (a 'remove' configuration).")
    points: list[SizePoint] = Field(default_factory=list)
    scores: list[float] = Field(default_factory=list, description="Per run: Σ latency over the sizes, µs.")
    cycle_us: float | None = Field(default=None, description="All-reduce µs per speculative cycle: Σ over the "
                                   "cycle's sizes of (all-reduces per cycle × median latency); None: unweighted.")
    score_median: float | None = None
    outcome: str | None = Field(default=None, description="Comparator vs the reference (the workers' current "
                                "setting) over the sizes: DIFFERENT / SAME / UNKNOWN.")
    verdict: str | None = Field(default=None, description="better / trade-off / worse / no change / undecided.")
    pct_change: float | None = Field(default=None, description="Latency change, %: of the all-reduce time per cycle "
                                     "when the sizes are weighed, else the geometric mean over sizes.")
    worse_at: list[int] = Field(default_factory=list, description="Sizes where it is DIFFERENT and slower.")
    p_value: float | None = None
    promote: bool = False
    seen_by_nccl: bool | None = Field(default=None, description="NCCL logged 'set by environment' for every variable.")
    experiment_only: list[str] = Field(default_factory=list)
    failed: str | None = None


class NcclSweep(BaseModel):
    """Config × size → latency, which configurations the comparator calls better, and the ones to promote."""

    tool: str
    tp: int
    sizes: list[int]
    interconnect: str
    nccl_version: str | None = None
    results: list[ConfigResult]
    skipped: list[Skipped] = Field(default_factory=list)
    promoted: list[str] = Field(default_factory=list)
    best: str | None = None
    runs: int = 0
    reference: str = Field(default="NCCL defaults", description="What every configuration was compared with: the "
                           "workers' current effective setting.")
    reference_env: dict[str, str] = Field(default_factory=dict)
    weights: list[CycleWeight] = Field(default_factory=list, description="All-reduces per cycle at each size the "
                                       "cycle sends (empty: the sizes were not weighed; every size counts the same).")
    notes: list[str] = Field(default_factory=list)

    def summary_line(self) -> str:
        at = " at the cycle's sizes" if self.weights else ""
        best = f"best {self.best}{at}" if self.best else f"no configuration beats {self.reference}{at}"
        return f"{len(self.results)} configs × {len(self.sizes)} sizes on TP {self.tp} ({self.tool}, {self.runs} runs): {best}"


def _cover(sizes: list[int]) -> tuple[int, int]:
    """-b/-e for a ×2 sweep that brackets every size (the last row must reach the largest)."""
    lo, hi = min(sizes), max(sizes)
    return lo, lo * 2 ** max(0, math.ceil(math.log2(hi / lo) - 1e-12))


def _argv(ctx: ToolContext, args: SweepInput, tool_name: str, tp: int, sizes: list[int], json_path: str | None) -> list[str]:
    if tool_name == "all_reduce_perf":
        b, e = _cover(sizes)
        argv = ["all_reduce_perf", "-b", str(b), "-e", str(e), "-f", "2", "-g", str(tp), "-d", "bfloat16",
                "-n", str(args.iters), "-w", str(args.warmup), "-G", str(args.graph)]
        return argv + (["-J", json_path] if json_path else [])
    script = ctx.remote_script("allreduce_bench.py")
    return [args.python, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(tp), script,
            "--sizes", ",".join(str(s) for s in sizes), "-n", str(args.iters), "-w", str(args.warmup),
            "-G", str(args.graph), "-d", "bfloat16", "--backend", args.backend]


def _run_once(ctx: ToolContext, args: SweepInput, tool_name: str, tp: int, cfg: NcclConfig, n: int,
              res: ConfigResult, all_vars: set[str]) -> None:
    json_path = f"{ctx.run_dir}/nccl/{abs(hash(cfg.label)) % 10**8}-{n}.json" if (
        args.use_json and tool_name == "all_reduce_perf") else None
    if json_path:
        ctx.host.run(["mkdir", "-p", json_path.rsplit("/", 1)[0]])
        ctx.host.run(["rm", "-f", json_path])
    env = {**DEBUG_ENV, **cfg.env}
    # A configuration is its whole setting: whatever the login shell or ~/.bashrc exports for a variable it does not
    # set is removed, so "unset" means NCCL's own choice
    unset = [x for v in sorted(all_vars - set(cfg.env)) for x in ("-u", v)]
    argv = ["env", *unset, *_argv(ctx, args, tool_name, tp, args.sizes, json_path)]
    out = ctx.host.run(argv, env=env, check="ignore", timeout=args.timeout_s)
    if not out.ok:
        tail = (out.stderr or out.stdout).strip().splitlines()[-1:] or [""]
        res.failed = f"exit {out.exit}: {tail[0][:200]}"
        return
    text = ctx.host.read(json_path).decode() if json_path else out.stdout
    try:
        table = parse_all_reduce(text)
    except ValueError as exc:
        res.failed = str(exc)
        return
    lats = [latency_at(table, s) for s in args.sizes]
    if any(x is None for x in lats):
        res.failed = "the benchmark did not cover every size"
        return
    for p, lat in zip(res.points, lats, strict=True):
        p.samples.append(round(float(lat), 3))  # type: ignore[arg-type]
    res.scores.append(round(sum(lats), 3))  # type: ignore[arg-type]
    logged = parse_nccl_debug(out.stdout + "\n" + out.stderr)
    if logged.lines:
        seen = {e.name: e.value for e in logged.env}
        ok = all(seen.get(k) == v for k, v in cfg.env.items())
        res.seen_by_nccl = ok if res.seen_by_nccl is None else (res.seen_by_nccl and ok)
    if table.nccl_version and not args.nccl_version:
        args.nccl_version = table.nccl_version


def _summarise(res: ConfigResult) -> None:
    for p in res.points:
        p.latency_us = round(statistics.median(p.samples), 3) if p.samples else None
    res.score_median = round(statistics.median(res.scores), 3) if res.scores else None


def _propagation_rows(ctx: ToolContext, port: int) -> list[dict[str, Any]]:
    """The server's NCCL_* rows (parent and every worker, /proc); [] when no server answers there."""
    try:
        res = registry.call(ctx, "check_env_propagation", {"port": port, "names": ["NCCL_*"]})
    except Exception:  # noqa: BLE001 - no server family or no server: the sweep then compares with NCCL's defaults
        return []
    from specdoctor.tools.serving.server import Propagation

    prop = registry.typed_output(res, Propagation, where="check_env_propagation")
    return [r.model_dump(mode="json") for r in prop.rows] if prop is not None else []


def _worker_value(row: dict[str, Any]) -> str | None:
    values = [v for v in (row.get("workers") or {}).values() if v is not None]
    return max(set(values), key=values.count) if values else None


def _workers_setting(rows: list[dict[str, Any]]) -> dict[str, str]:
    """The NCCL variables the workers have now; what the engine forces itself and the debug switches are not
    settings to compare."""
    out = {}
    for row in rows:
        value = _worker_value(row)
        if str(row.get("name", "")).startswith("NCCL_") and value is not None and not (row.get("forced_by_engine") or row.get("forced_by_sglang")) \
                and row["name"] not in DEBUG_ENV and "REDACTED" not in value:
            out[row["name"]] = value
    return out


def _set_in_process(rows: list[dict[str, Any]]) -> list[str]:
    """Variables every process gets from inside (sitecustomize.py, nccl.conf): a configuration cannot remove them."""
    return sorted(r["name"] for r in rows if r.get("from_sitecustomize") or r.get("from_nccl_conf"))


def _good_worker_env(ctx: ToolContext, good: dict[str, Any] | str, notes: list[str]) -> dict[str, Any] | None:
    """The good run's worker env from its fingerprint (given as data or as a JSON file on the host)."""
    data: Any = good
    if isinstance(good, str):
        try:
            data = json.loads(ctx.host.read(good).decode("utf-8", "replace"))
        except Exception as exc:  # noqa: BLE001 - an unreadable reference only loses the 'as in the good run' row
            notes.append(f"good-run fingerprint {good} not read ({type(exc).__name__}): no 'as in the good run' row")
            return None
    env = data.get("worker_env") if isinstance(data, dict) else None
    return env if isinstance(env, dict) else None


def _nccl_only(env: dict[str, Any], rows: list[dict[str, Any]]) -> dict[str, str]:
    """A good run's NCCL setting from its worker env (rank 0's when per rank); a variable the engine forces today
    to the same value is not part of it (every launch gets it anyway)."""
    if env and all(isinstance(v, dict) for v in env.values()):
        env = env[sorted(env, key=lambda k: (len(str(k)), str(k)))[0]]
    forced = {r["name"]: _worker_value(r) for r in rows if r.get("forced_by_engine") or r.get("forced_by_sglang")}
    return {str(k): str(v) for k, v in env.items() if str(k).startswith("NCCL_") and v is not None
            and str(k) not in DEBUG_ENV and forced.get(str(k)) != str(v)}


def relative_configs(grid: list[NcclConfig], current: dict[str, str], good: dict[str, str] | None,
                     not_removable: list[str]) -> tuple[list[NcclConfig], dict[str, list[str]], str]:
    """The sweep's configurations relative to what the workers run now: the reference (their setting) first, each
    grid point applied on top of it, then 'remove' (NCCL's own choice for every variable a relaunch can remove)
    and 'as in the good run'. Configurations with the same effective setting run once. With no current variables
    this is the plain grid with 'default' first, as before."""
    label = "default" if not current else "current (" + " ".join(f"{k}={v}" for k, v in sorted(current.items())) + ")"
    out = [NcclConfig(label=label, env=dict(current))]
    unsets: dict[str, list[str]] = {}
    for c in grid:
        if not c.is_default:
            out.append(NcclConfig(label=c.label, env={**current, **c.env}))
    removable = sorted(n for n in current if n not in not_removable)
    if removable:
        name = "remove " + ", ".join(removable)
        out.append(NcclConfig(label=name, env={k: v for k, v in current.items() if k not in removable}))
        unsets[name] = removable
    if good is not None:
        kept = {k: v for k, v in current.items() if k in not_removable}
        name = "as in the good run (" + (" ".join(f"{k}={v}" for k, v in sorted(good.items())) or "NCCL defaults") + ")"
        out.append(NcclConfig(label=name, env={**kept, **good}))
        unsets[name] = sorted(set(current) - set(good) - set(not_removable))
    seen: set[tuple[tuple[str, str], ...]] = set()
    unique = []
    for c in out:
        key = tuple(sorted(c.env.items()))
        if key not in seen:
            seen.add(key)
            unique.append(c)
    reference = "NCCL defaults" if not current else "what the workers run now (" + label[len("current ("):-1] + ")"
    return unique, unsets, reference


def _fill_from_inventory(ctx: ToolContext, args: SweepInput) -> list[dict[str, Any]]:
    """What the caller left out (sizes, TP, interconnect, NCCL version, bench tool) from nccl_inventory; its
    propagation rows."""
    inv_res = registry.call(ctx, "nccl_inventory", {"port": args.port, "python": args.python})
    inv = registry.typed_output(inv_res, NcclInventory, where="nccl_inventory", unresolved=True) or NcclInventory()
    args.sizes = args.sizes or [s.bytes for s in inv.sizes]
    args.tp = args.tp or inv.tp
    args.interconnect = args.interconnect or inv.interconnect
    args.nccl_version = args.nccl_version or inv.nccl_version
    args.per_forward = args.per_forward or inv.allreduces_per_forward
    if args.steps is None and inv.draft_tokens and inv.draft_tokens > 1:
        args.steps = inv.draft_tokens - 1
    if not args.size_roles:
        args.size_roles = list(inv.sizes)
    if args.tool == "auto":
        args.tool = inv.bench_tool
    return inv.propagation


def _sweep_inputs(ctx: ToolContext, args: SweepInput) -> tuple[list[dict[str, Any]], int]:
    """Complete `args` (inventory, the workers' current setting) and check there is something to sweep: the
    workers' propagation rows and the TP size."""
    rows: list[dict[str, Any]] = []
    if not args.sizes or args.tp is None or args.interconnect is None:
        rows = _fill_from_inventory(ctx, args)
    if not args.sizes:
        raise ToolRetry("no message sizes: give sizes, or a model path / hidden size to the inventory")
    if not rows and args.port is not None and (args.current is None or args.not_removable is None
                                               or args.good is not None):
        rows = _propagation_rows(ctx, args.port)
    if args.current is None:
        args.current = _workers_setting(rows)
    if not args.tp or args.tp < 2:
        raise NoData("TP size below 2: the server does no all-reduce, nothing to sweep")
    return rows, args.tp


def _bench_tool_name(ctx: ToolContext, args: SweepInput) -> str:
    """The benchmark to run: the one asked for, else all_reduce_perf when the host has it."""
    if args.tool != "auto":
        return args.tool
    found = ctx.host.run(["sh", "-c", "command -v all_reduce_perf"], check="ignore")
    return "all_reduce_perf" if found.ok and found.stdout.strip() else "allreduce_bench"


@dataclass
class _SweepPlan:
    """What every benchmark run of one sweep shares: the tool, the configurations and their results."""

    tool_name: str
    tp: int
    configs: list[NcclConfig]
    results: dict[str, ConfigResult]
    all_vars: set[str]
    skipped: list[Skipped]
    current: dict[str, str]
    reference: str


def _plan_sweep(ctx: ToolContext, args: SweepInput, rows: list[dict[str, Any]], tool_name: str, tp: int,
                notes: list[str]) -> _SweepPlan:
    """The configurations relative to the workers' current setting (plus 'remove' and the good run's), each with
    an empty result at every size."""
    args.sizes = sorted(set(args.sizes))
    grid, skipped = expand_grid(args.grid, interconnect=args.interconnect or "unknown", nccl_version=args.nccl_version)
    current = dict(args.current or {})
    good_env = _good_worker_env(ctx, args.good, notes) if args.good is not None else None
    good = _nccl_only(good_env, rows) if good_env is not None else None
    not_removable = args.not_removable if args.not_removable is not None else _set_in_process(rows)
    configs, unsets, reference = relative_configs(grid, current, good, not_removable)
    results = {c.label: ConfigResult(label=c.label, env=c.env, unset=unsets.get(c.label, []),
                                     points=[SizePoint(size=s, latency_us=None) for s in args.sizes],
                                     experiment_only=experiment_only(c.env)) for c in configs}
    all_vars = {k for c in grid for k in c.env} | set(current) | set(good or {})
    return _SweepPlan(tool_name=tool_name, tp=tp, configs=configs, results=results, all_vars=all_vars,
                      skipped=skipped, current=current, reference=reference)


def _screen(ctx: ToolContext, args: SweepInput, plan: _SweepPlan) -> int:
    """First pass: every configuration `screen_repeats` times (stopping at its first failure); the runs made."""
    runs = 0
    for i, cfg in enumerate(plan.configs):
        ctx.say(f"nccl sweep: {cfg.label} ({i + 1}/{len(plan.configs)})")
        for n in range(args.screen_repeats):
            _run_once(ctx, args, plan.tool_name, plan.tp, cfg, n, plan.results[cfg.label], plan.all_vars)
            runs += 1
            if plan.results[cfg.label].failed:
                break
    return runs


def _ratio_to(default: ConfigResult, weights: list[CycleWeight] | None = None) -> Callable[[ConfigResult], float]:
    """Median latency against the reference's: with the cycle's weights, all-reduce time per cycle over the
    reference's; without, the geometric mean over sizes (every size weighs the same)."""
    base_med = [statistics.median(p.samples) for p in default.points]
    per = {w.size: w.per_cycle for w in weights or []}

    def ratio(r: ConfigResult) -> float:
        meds = [statistics.median(p.samples) for p in r.points]
        if per:
            ws = [per.get(p.size, 0.0) for p in r.points]
            return sum(w * m for w, m in zip(ws, meds, strict=True)) / sum(
                w * b for w, b in zip(ws, base_med, strict=True))
        return math.exp(statistics.fmean(math.log(m / b) for m, b in zip(meds, base_med, strict=True)))

    return ratio


def _final_runs(ctx: ToolContext, args: SweepInput, plan: _SweepPlan, default: ConfigResult,
                finalists: list[ConfigResult]) -> int:
    """Second pass up to `repeats`, interleaved: default, f1, f2, default, f1, f2, ...; the runs made."""
    runs = 0
    for n in range(args.screen_repeats, args.repeats):
        for r in [default, *finalists]:
            cfg = next(c for c in plan.configs if c.label == r.label)
            _run_once(ctx, args, plan.tool_name, plan.tp, cfg, n, r, plan.all_vars)
            runs += 1
    return runs


MIN_CYCLE_GAIN = 0.05
"""A setting is promoted to the end-to-end A/B (launches: the user's box time) only when it cuts the cycle's
all-reduce time by at least 5 %: all-reduce is a share of the cycle, so less is below what an A/B can tell."""


def _weights(args: SweepInput) -> list[CycleWeight]:
    """All-reduces per cycle at each swept size, when the sizes' roles and the count per forward are known."""
    if not args.per_forward or not args.size_roles:
        return []
    swept = set(args.sizes)
    return [w for w in cycle_weights(args.size_roles, args.per_forward, args.steps, args.batch) if w.size in swept]


def _cycle_us(r: ConfigResult, weights: list[CycleWeight]) -> float | None:
    """µs of all-reduce per cycle under this setting (None: unweighted, or a size not measured)."""
    lat = {p.size: p.latency_us for p in r.points}
    vals = [lat.get(w.size) for w in weights]
    if not weights or any(v is None for v in vals):
        return None
    return round(sum(w.per_cycle * v for w, v in zip(weights, vals, strict=True) if v is not None), 3)


def _judge_finalist(r: ConfigResult, default: ConfigResult, ratio: Callable[[ConfigResult], float],
                    weights: list[CycleWeight] | None = None) -> None:
    """The comparator at every size vs the reference: promoted when DIFFERENT and faster at one size or more — with
    the cycle's weights, at a size the cycle sends and with less all-reduce time per cycle than the reference."""
    if r.failed or len(r.scores) < 2 or len(default.scores) < 2:
        return
    r.pct_change = round(100.0 * (ratio(r) - 1.0), 2)
    better_p = []
    for p, d in zip(r.points, default.points, strict=True):
        c = compare(d.samples, p.samples, unit="µs", higher_is_better=False)
        p.outcome, p.verdict, p.pct_change = c.outcome, c.verdict, round(c.pct_change, 2)
        if c.outcome == "DIFFERENT" and c.verdict == "better":
            better_p.append(c.p_value)
    worse = [p.size for p in r.points if p.outcome == "DIFFERENT" and p.verdict == "worse"]
    if weights:
        sent = {w.size for w in weights if w.per_cycle > 0}
        better_p = [c for p, c in zip(r.points, _better_ps(r, default), strict=True) if c is not None and p.size in sent]
        if r.cycle_us is None or default.cycle_us is None or r.cycle_us > (1 - MIN_CYCLE_GAIN) * default.cycle_us:
            better_p = []
    r.promote = bool(better_p)
    r.outcome = "DIFFERENT" if better_p or worse else (
        "SAME" if all(p.outcome == "SAME" for p in r.points) else "UNKNOWN")
    r.verdict = ("better" if not worse else "trade-off") if better_p else ("worse" if worse else (
        "no change" if r.outcome == "SAME" else "undecided"))
    r.p_value = min(better_p) if better_p else None
    r.worse_at = worse


def _better_ps(r: ConfigResult, default: ConfigResult) -> list[float | None]:
    """Per size: the comparator's p when this setting is DIFFERENT and faster there, else None."""
    out: list[float | None] = []
    for p, d in zip(r.points, default.points, strict=True):
        c = compare(d.samples, p.samples, unit="µs", higher_is_better=False)
        out.append(c.p_value if c.outcome == "DIFFERENT" and c.verdict == "better" else None)
    return out


def _promotion_notes(args: SweepInput, promoted: list[ConfigResult], notes: list[str]) -> None:
    """Trade-offs for the end-to-end A/B, the experiment-only warning, and too few runs to promote anything."""
    for r in promoted:
        if r.worse_at:
            notes.append(f"{r.label}: faster at some sizes but slower at {', '.join(f'{s} B' for s in r.worse_at)}; "
                         "the end-to-end A/B at the server's batch decides")
    if any(r.experiment_only for r in promoted):
        notes.append(EXPERIMENT_NOTE)
    if args.repeats < 5:
        notes.append("fewer than 5 runs per side: the comparator cannot reach p ≤ 0.01, so nothing is promoted")


@tool(effect="read")
def nccl_sweep(ctx: ToolContext, args: SweepInput) -> NcclSweep:
    """All-reduce micro-benchmark over an NCCL grid at the decode/verify sizes; the comparator picks what to promote.

    Runs nccl-tests' all_reduce_perf (-G CUDA graphs, bf16, -g TP) when the host has it, else
    tools/remote/allreduce_bench.py under torchrun. Every config runs `screen_repeats` times; the default and
    the best `finalists` (by geometric-mean latency ratio) run up to `repeats` times, interleaved; a config
    is promoted only when the comparator calls it DIFFERENT and faster at one size or more (slower sizes are
    listed as a trade-off for the end-to-end A/B to settle). Runs only benchmarks.
    """
    notes: list[str] = []
    rows, tp = _sweep_inputs(ctx, args)
    tool_name = _bench_tool_name(ctx, args)
    plan = _plan_sweep(ctx, args, rows, tool_name, tp, notes)
    results = plan.results
    runs = _screen(ctx, args, plan)
    default = results[plan.configs[0].label]
    if default.failed:
        raise ToolFailed(f"the benchmark failed with {plan.reference}: {default.failed}")
    weights = _weights(args)
    ratio = _ratio_to(default, weights)
    screened = sorted((r for r in results.values() if r is not default and r.scores and not r.failed), key=ratio)
    finalists = [r for r in screened[: args.finalists] if ratio(r) < 1.0]
    runs += _final_runs(ctx, args, plan, default, finalists)
    for r in results.values():
        _summarise(r)
        r.cycle_us = _cycle_us(r, weights)
    for r in finalists:
        _judge_finalist(r, default, ratio, weights)
    promoted = sorted((r for r in results.values() if r.promote),
                      key=lambda r: (r.cycle_us or 0.0, bool(r.worse_at), ratio(r)) if weights
                      else (bool(r.worse_at), ratio(r)))
    _promotion_notes(args, promoted, notes)
    if weights:
        notes.append("ranked at the cycle's own sizes: " + ", ".join(
            f"{w.per_cycle:g} × {w.size} B ({w.phase})" for w in weights) + f" per cycle at batch {args.batch}; "
            "a size the cycle does not send weighs nothing")
    return NcclSweep(tool=tool_name, tp=tp, sizes=args.sizes, interconnect=args.interconnect or "unknown",
                     nccl_version=args.nccl_version, results=list(results.values()), skipped=plan.skipped,
                     promoted=[r.label for r in promoted], best=promoted[0].label if promoted else None, runs=runs,
                     reference=plan.reference, reference_env=plan.current, weights=weights,
                     notes=notes + [f"command: {shlex.join(_argv(ctx, args, tool_name, tp, args.sizes, None))}"])
