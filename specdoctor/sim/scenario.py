"""Scenario models (pydantic) and loading: built-in YAMLs, shared patch library and SGLang base trees."""

from __future__ import annotations

import copy
import functools
from importlib import resources
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from specdoctor.errors import ScenarioError
from specdoctor.sim.history import UpstreamCommit

__all__ = [
    "AllReduceModel",
    "Cause",
    "Effect",
    "EnvCond",
    "Gate",
    "GpuProcess",
    "Hardware",
    "ModelDir",
    "OtherServer",
    "Patch",
    "PerfModel",
    "Scenario",
    "ServerSpec",
    "Truth",
    "base_tree",
    "list_scenarios",
    "load_scenario",
]

Verdict = Literal["no-regression", "code-regression", "environment", "baseline-not-reproducible", "inconclusive"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True, protected_namespaces=())


class Gate(_Strict):
    """An env-var gate in a patch's added code (what scan_feature_gates should find)."""

    name: str
    default: str
    reader: Literal["os.environ.get", "os.getenv", "get_bool_env_var", "envs"] = "os.environ.get"


class Patch(_Strict):
    """A local change left uncommitted: `add` inserted after the first line containing `after` (or replacing `replace`)."""

    id: str
    file: str
    description: str = ""
    add: str
    after: str | None = None
    replace: str | None = None
    untracked: bool = Field(default=False, description="A new file left untracked (add is its whole content).")
    essential: bool = Field(default=False, description="The speculative server refuses to start without it.")
    missing_error: str | None = None
    gate: Gate | None = None


class PcieLink(_Strict):
    gen_max: int = 5
    gen_current: int = 5
    width_max: int = 16
    width_current: int = 16


class Hardware(_Strict):
    """One GPU box: what nvidia-smi, nccl-tests and check_env report."""

    gpu_name: str
    gpu_count: int = Field(ge=1, le=16)
    memory_gb: float = 96.0
    interconnect: Literal["pcie", "nvlink"] = "pcie"
    driver: str
    cuda: str
    nccl: str
    torch: str = "2.9.1+cu129"
    compute_capability: str = "12.0"
    pcie: PcieLink = Field(default_factory=PcieLink)
    pcie_per_gpu: dict[int, PcieLink] = Field(default_factory=dict)
    clocks_sm_mhz: int = Field(default=2430, description="SM clock the card sustains on its own under this load "
                               "(its boost): a datacenter part holds clocks_sm_max_mhz, a consumer/workstation part "
                               "settles below it with no clock-event reason.")
    clocks_sm_max_mhz: int = 2430
    applications_clocks_mhz: int | None = Field(default=None, description="SM clock set by `nvidia-smi -ac` / "
                                                "`-lgc` (None: the defaults); below clocks_sm_mhz it holds the "
                                                "clock there with the 'Applications Clocks Setting' reason.")
    applications_clocks_supported: bool = Field(default=True, description="nvidia-smi reports application clocks "
                                                "(GeForce parts: N/A).")
    product_brand: str | None = Field(default=None, description="nvidia-smi -q 'Product Brand' (default: GeForce "
                                      "for a GeForce name, else NVIDIA).")
    clocks_mem_mhz: int = 14001
    clocks_mem_max_mhz: int | None = Field(default=None, description="Default: clocks_mem_mhz (not locked).")
    power_limit_w: float = 600.0
    power_default_w: float | None = Field(default=None, description="The board's default limit; a lower "
                                          "power_limit_w is a cap. Default: power_limit_w.")
    load_power_w: float | None = Field(default=None, description="Draw at full clocks under this workload "
                                       "(default 55 % of power_default_w); a cap below it lowers the clock.")
    persistence_mode: bool = True
    temperature_c: int = 41
    topology: list[str] = Field(description="nvidia-smi topo -m rows: link type to every GPU ('X' for self).")
    cpu_affinity: list[str]
    numa_affinity: list[int]
    bus_ids: list[str] | None = None
    hostname: str = "gpu-box"

    @model_validator(mode="after")
    def _shape(self) -> Hardware:
        n = self.gpu_count
        rows = [r.split() for r in self.topology]
        if len(rows) != n or any(len(r) != n for r in rows) or any(rows[i][i] != "X" for i in range(n)):
            raise ValueError(f"topology must be {n} rows of {n} link types with X on the diagonal")
        if len(self.cpu_affinity) != n or len(self.numa_affinity) != n:
            raise ValueError("cpu_affinity and numa_affinity need one entry per GPU")
        if self.bus_ids is not None and len(self.bus_ids) != n:
            raise ValueError("bus_ids needs one entry per GPU")
        return self


class EnvCond(_Strict):
    """A condition on one env var (unset reads as '')."""

    equals: str | None = None
    in_: list[str] | None = Field(default=None, alias="in")
    not_in: list[str] | None = None
    set: bool | None = None


class EffectWhen(_Strict):
    patches: list[str] = Field(default_factory=list, description="All of these patches present (AND: may interact).")
    patches_absent: list[str] = Field(default_factory=list)
    env: dict[str, EnvCond] = Field(default_factory=dict, description="Values in the TP0 worker's environment.")
    args: dict[str, Any] = Field(default_factory=dict, description="Resolved server args, e.g. attention_backend; "
                                 "*_path values may use placeholders ({models}/...).")
    versions: dict[str, str | list[str]] = Field(default_factory=dict,
                                                  description="sglang/driver/cuda/nccl/torch of the box.")
    speculative: bool | None = None


class Effect(_Strict):
    """A performance effect: ms added to decode/verify/draft, then a scale; alpha shifted."""

    id: str
    description: str = ""
    when: EffectWhen = Field(default_factory=EffectWhen)
    decode_ms: float = 0.0
    verify_ms: float = 0.0
    verify_host_ms: float = Field(default=0.0, ge=0, description="Host time added to verify that the GPU does not "
                                  "see (a sync, a sleep, Python work): the cycle grows, verify's GPU work and CPU "
                                  "range do not; the stall sits before the range opens (what the real H200 showed "
                                  "for a sync + sleep patch: the gap after the draft's range, +4.4 ms).")
    draft_host_ms: float = Field(default=0.0, ge=0, description="Host time at the start of the draft method, once "
                                 "a cycle (a sync, a sleep): inside the draft's range before its first launch; the "
                                 "cycle grows, the draft's GPU work does not (the real H100 story: ~3 ms).")
    draft_ms: float = 0.0
    scale: float = 1.0
    alpha_delta: float = 0.0
    verify_cuda_graph: bool | None = Field(default=None, description="False: verify runs eager in this tree "
                                           "(Decode lines say `cuda graph: False`, verify x no_cuda_graph_factor).")
    decode_cuda_graph: bool | None = Field(default=None, description="False: plain decode runs eager.")


class PromptKind(_Strict):
    """Requests whose prompt contains any marker (case-insensitive) accept differently (e.g. code vs chat)."""

    name: str
    contains: list[str]
    alpha_delta: float


class Drift(_Strict):
    amplitude: float = 0.0
    period_s: float = 600.0


class Warmup(_Strict):
    """A fresh server's first requests run slower (JIT compiles and caches of shapes not yet seen), as the real
    SGLang 0.5.17 baseline server did after its one warm-up request (docs/real-gpu.md)."""

    requests: int = Field(default=0, ge=0, description="Requests after start that are slower (0: none).")
    factor: float = Field(default=1.0, ge=1.0, description="How much slower their steps are.")


class LaterLaunches(_Strict):
    """A box that got slower after its first servers started (clocks capped, a neighbour on the cards): every
    launch from `from_launch` on (the sandbox's own count) runs `factor` times slower. A real slowdown a restart of
    the user's server must still be reported as one (the box check's must-not-fire)."""

    from_launch: int = Field(default=0, ge=0, description="The first launch that is slower (0: none).")
    factor: float = Field(default=1.0, ge=1.0, description="How much slower its steps are.")


class PerfModel(_Strict):
    """Step times at the reference NCCL env, acceptance, noise, effects (see docs/scenarios.md)."""

    decode_ms: float = Field(gt=0)
    verify_ms_base: float = Field(gt=0)
    verify_ms_per_token: float = 0.0
    draft_ms_per_step: float = Field(ge=0)
    alpha: float = Field(ge=0, lt=1, description="Per-token acceptance of the draft.")
    cv: float = Field(default=0.025, ge=0, lt=0.5)
    drift: Drift = Field(default_factory=Drift)
    warmup: Warmup = Field(default_factory=Warmup)
    later_launches: LaterLaunches = Field(default_factory=LaterLaunches)
    verify_cuda_graph: bool = True
    no_cuda_graph_factor: float = 1.3
    prefill_ms: float = 20.0
    prefill_ms_per_token: float = 0.02
    allreduce_per_forward: int = 0
    compute_fraction: float = Field(default=0.3, ge=0, le=1, description="Share of a step bound by the SM clock "
                                    "(the rest follows the memory clock).")
    kv_ms_per_1k_tokens: float = Field(default=0.0, ge=0, description="ms added to each step per 1k tokens of "
                                       "context (KV-cache reads).")
    alpha_per_temperature: float = Field(default=0.0, description="alpha change per unit of sampling temperature.")
    prompt_kinds: list[PromptKind] = Field(default_factory=list)
    reference_env: dict[str, str] = Field(default_factory=dict)
    effects: list[Effect] = Field(default_factory=list)


class Protocol(_Strict):
    base_us: float
    busbw_gbs: float


class Factor(_Strict):
    base: float = 1.0
    bw: float = 1.0


class AllReduceModel(_Strict):
    """latency(size) = base_us*Πbase + size*2(n-1)/n / (busbw*Πbw), best allowed protocol."""

    protocols: dict[str, Protocol]
    default_protocol: str = "auto"
    auto_overhead: float = 1.0
    factors: dict[str, dict[str, Factor]] = Field(default_factory=dict)
    noise_cv: float = 0.02


class ModelDir(_Strict):
    """An extra model directory on the box (another draft, an older checkpoint): config.json and its acceptance."""

    path: str
    config: dict[str, Any]
    alpha: float | None = Field(default=None, ge=0, lt=1, description="Per-token acceptance when used as the draft.")


class GpuProcess(_Strict):
    """A non-SGLang process on some GPUs (a training job, a notebook): it holds memory and time-slices the SMs."""

    id: str
    title: str = "python train.py"
    gpus: list[int]
    used_memory_mib: int = 20000
    sm_share: float = Field(default=0.3, ge=0, lt=1)


class GpuMemory(_Strict):
    """GPU memory as SGLang meets it (on by default: a second server beside the user's fails as it would).

    Enforced, each stand-in server holds `--mem-fraction-static` of what was free on its GPUs (weights included)
    plus its CUDA graphs, shown by nvidia-smi; a launch whose GPUs lack it fails SGLang's way and exits non-zero.
    """

    enforce: bool = True
    weights_gb: float | None = Field(default=None, gt=0, description="Target weights (GiB) over all ranks (sharded by "
                                     "TP); unset: from the model config (parameter count × dtype), as on disk.")
    draft_gb: float | None = Field(default=None, ge=0, description="EAGLE draft weights (GiB) per rank; unset: from "
                                   "the draft's config.")
    cuda_graph_gb: float = Field(default=1.2, ge=0, description="Held per rank outside the static pool.")


class OtherServer(_Strict):
    """A second, unrelated SGLang server on the box (another user's): its own checkout, port and GPUs."""

    name: str = "other"
    user: str = "alice"
    dir: str = "{root}/srv/alice/sglang"
    base: str = "sglang-0.5.9"
    port: int = 31000
    launch: str
    env: dict[str, str] = Field(default_factory=dict, description="Its launch env, e.g. CUDA_VISIBLE_DEVICES.")
    log: str = "{root}/srv/alice/server.log"


class LaunchTime(_Strict):
    """What a launch costs on this box, in model seconds (logged as SGLang logs it; the wall clock stays short)."""

    disk_gb_s: float = Field(default=2.0, gt=0, description="Weights read speed: load = gpu_memory.weights_gb / "
                             "this (ranks read their shards in parallel; the draft loads after the target).")
    cuda_graph_s: float = Field(default=35.0, ge=0, description="CUDA-graph capture of the target.")
    draft_cuda_graph_s: float = Field(default=12.0, ge=0, description="CUDA-graph capture of the draft.")


class ServerSpec(_Strict):
    model_path: str
    model_config_json: dict[str, Any] = Field(alias="model_config")
    draft_model_path: str | None = None
    draft_config: dict[str, Any] | None = None
    extra_models: list[ModelDir] = Field(default_factory=list)
    port: int = 30000
    launch: str = Field(description="The launch line in SGLang's flag syntax; {port}/{models}/... substituted.")
    running: bool = Field(default=False, description="A server is already running when specdoctor arrives.")
    running_env: dict[str, str] = Field(default_factory=dict, description="Extra env the running server was given.")
    log: str = "{home}/sglang_server.log"
    worker_env_drop: list[str] = Field(default_factory=list, description="Env the launcher drops for workers.")
    worker_env_set: dict[str, str] = Field(default_factory=dict, description="Env the launcher sets for workers.")
    max_total_num_tokens: int = 400000
    supervisor: Literal["nohup", "restarter", "tmux", "screen"] = Field(
        default="nohup", description="How the running server was started: nohup, a shell loop restarting it when it "
        "exits, or typed in a tmux/screen session (real tmux/screen on a private socket under the sandbox).")
    session_name: str = Field(default="sglang", pattern=r"^[A-Za-z0-9_-]+$",
                              description="The tmux/screen session's name (supervisor tmux or screen).")
    terminal_output: bool = Field(default=False, description="tmux/screen: the server writes to its window "
                                  "(no log file), as when the launch line is typed without a redirect.")
    launch_time: LaunchTime = Field(default_factory=lambda: LaunchTime())


class ExtraFile(_Strict):
    """A file placed on the host (patch scripts, notes); `mode` as octal text, e.g. "0o755"."""

    path: str
    content: str
    mode: int = 0o644

    @field_validator("mode", mode="before")
    @classmethod
    def _octal(cls, v: Any) -> Any:
        return int(v, 8) if isinstance(v, str) else v


class SGLangCheckout(_Strict):
    version: str
    base: str = Field(description="Name of a base tree in _bases.yaml.")
    dir: str = "{home}/sglang"
    commit_message: str = "Merge upstream sglang"
    use_patches: list[str] = Field(default_factory=list, description="Patch ids from _library.yaml.")
    patches: list[Patch] = Field(default_factory=list)
    files: dict[str, str] = Field(default_factory=dict, description="Files added to the base tree (committed).")
    install: Literal["editable", "wheel"] = Field(default="editable", description="editable: `pip install -e` of "
                                                  "the checkout; wheel: a stock wheel in site-packages (no patches).")
    history: list[UpstreamCommit] = Field(default_factory=list, description="Upstream commits on top of the base "
                                          "(sim/history.py); effects name a commit by its id.")
    good_commit: str | None = Field(default=None, description="The history commit the good run was measured at "
                                    "({good_commit} in the good fingerprint; None: the base).")


class UserHints(_Strict):
    """What the user tells specdoctor (becomes HostHints)."""

    expect: dict[str, float] = Field(default_factory=dict)
    essential: list[str] = Field(default_factory=list)
    patch_script: str | None = None


CauseKind = Literal["code", "commit", "env", "launch-flag", "software", "hardware", "workload"]


class Cause(_Strict):
    """One true cause of the gap between the reference and now (what a diagnosis should name)."""

    kind: CauseKind
    name: str = Field(description="Patch id, variable, flag, component or hardware knob, e.g. NCCL_PROTO.")
    source: str = Field(default="", description="Where it comes from: a file, sitecustomize, ~/.bashrc, GPU 3 ...")
    share: float = Field(default=1.0, ge=0, le=1.5, description="Expected share of the measured gap it explains.")
    revertible: bool = Field(default=True, description="A trial can revert it (patch, variable, flag).")
    detail: str = ""


class PhaseEffectTruth(_Strict):
    """The phase the culprit moves and by how much (ms; a draft step's per step, the others per cycle); phase
    'none': no phase effect may be claimed."""

    phase: Literal["draft", "verify", "draft_extend", "none"]
    delta_ms: float | None = None


class Truth(_Strict):
    """Ground truth for tests and benchmarks; specdoctor's engine never reads it."""

    verdict: Verdict
    causes: list[Cause] = Field(default_factory=list)
    culprits: list[str] = Field(default_factory=list)
    culprit_files: list[str] = Field(default_factory=list)
    culprit_commits: list[str] = Field(default_factory=list, description="History commit ids a diagnosis must "
                                       "name (by their subject); none other may be named.")
    expected_findings: list[str] = Field(default_factory=list)
    nccl_win: dict[str, str] | None = None
    baseline_tps: float | None = None
    spec_tps: float | None = None
    verify_ms: float | None = None
    accept_length: float | None = None
    breakeven_tau: float | None = None
    phase_effect: PhaseEffectTruth | None = Field(default=None, description="What the attribution's phase effect "
                                                  "of the culprit must be (None: not checked).")
    notes: str = ""


class Scenario(_Strict):
    """One simulated GPU box and its history."""

    name: str
    description: str
    corpus: bool = Field(default=False, description="A corpus story (not one of the six the agent was built on).")
    seed: int = 0
    time_scale: float = Field(default=200.0, gt=0, description="Model seconds per wall second.")
    engine: Literal["sglang", "vllm"] = Field(default="sglang", description="The serving engine the box runs; its "
                                              "checkout is `checkout:` (alias of `sglang:`), its base a tree of "
                                              "_bases.yaml / _bases_vllm.yaml.")
    hardware: Hardware
    sglang: SGLangCheckout = Field(alias="checkout")
    files: list[ExtraFile] = Field(default_factory=list)
    sitecustomize: str | None = None
    nccl_conf: str | None = None
    shell_env: dict[str, str] = Field(default_factory=dict, description="Exported in the user's login shell.")
    shell_profile: str | None = Field(default=None, description="~/.bashrc content; its `export K=V` lines are "
                                      "in the login environment.")
    gpu_processes: list[GpuProcess] = Field(default_factory=list)
    gpu_memory: GpuMemory = Field(default_factory=GpuMemory)
    other_servers: list[OtherServer] = Field(default_factory=list)
    server: ServerSpec
    perf: PerfModel
    allreduce: AllReduceModel
    hints: UserHints = Field(default_factory=UserHints)
    good_fingerprint: dict[str, Any] | None = None
    truth: Truth

    @model_validator(mode="after")
    def _refs(self) -> Scenario:
        ids = [p.id for p in self.sglang.patches]
        if len(ids) != len(set(ids)):
            raise ValueError(f"duplicate patch ids: {ids}")
        commits = [c.id for c in self.sglang.history]
        if len(commits) != len(set(commits)) or set(commits) & set(ids):
            raise ValueError(f"history commit ids must be unique and differ from patch ids: {commits}")
        if self.sglang.good_commit is not None and self.sglang.good_commit not in commits:
            raise ValueError(f"good_commit {self.sglang.good_commit!r} is not a history commit")
        for cid in self.truth.culprit_commits:
            if cid not in commits:
                raise ValueError(f"truth names unknown culprit commit {cid!r}")
        known = set(ids) | set(commits)
        for eff in self.perf.effects:
            for pid in eff.when.patches + eff.when.patches_absent:
                if pid not in known:
                    raise ValueError(f"effect {eff.id} names unknown patch {pid!r}")
        for pid in self.truth.culprits:
            if pid not in ids:
                raise ValueError(f"truth names unknown culprit patch {pid!r}")
        for proc in self.gpu_processes:
            if any(g >= self.hardware.gpu_count for g in proc.gpus):
                raise ValueError(f"gpu process {proc.id} names a GPU the box does not have")
        for cause in self.truth.causes:
            if cause.kind == "code" and cause.name not in ids or cause.kind == "commit" and cause.name not in commits:
                raise ValueError(f"truth cause names unknown patch {cause.name!r}")
        if self.allreduce.default_protocol != "auto" and self.allreduce.default_protocol not in self.allreduce.protocols:
            raise ValueError(f"default_protocol {self.allreduce.default_protocol!r} is not a protocol")
        return self


def _read_builtin(name: str) -> str:
    return resources.files("specdoctor.sim.scenarios").joinpath(name).read_text(encoding="utf-8")


@functools.cache
def _parsed_builtin(name: str) -> Any:
    # libyaml's loader where the wheel has it: the built-ins are parsed at every test collection and scenario load
    # (pure-Python parsing of the corpus was seconds each time). Trusted files, so error wording does not matter here.
    return yaml.load(_read_builtin(name), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))  # noqa: S506


def _builtin_yaml(name: str) -> Any:
    """A built-in YAML file, parsed once per process; a fresh copy each call, since callers merge into it."""
    return copy.deepcopy(_parsed_builtin(name))


def _library() -> dict[str, dict]:
    return _builtin_yaml("_library.yaml")["patches"]


def base_tree(name: str) -> dict[str, str]:
    """The files of a named SGLang base tree (path -> content), resolving `extends`."""
    trees = {**_builtin_yaml("_bases.yaml")["trees"], **_builtin_yaml("_bases_vllm.yaml")["trees"]}
    if name not in trees:
        raise ScenarioError(f"unknown base tree {name!r} (known: {', '.join(sorted(trees))})")
    spec = trees[name]
    files = dict(base_tree(spec["extends"])) if spec.get("extends") else {}
    for path in spec.get("remove") or []:
        files.pop(path, None)
    files.update(spec.get("files") or {})
    return files


def _builtin_names() -> list[str]:
    return sorted(p.name[:-5] for p in resources.files("specdoctor.sim.scenarios").iterdir()
                  if p.name.endswith(".yaml") and not p.name.startswith("_"))


def _merge(base: dict, over: dict) -> dict:
    """Deep merge for `extends`: mappings merge key by key, anything else (lists too) is replaced."""
    out = dict(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


def _is_box(ref: str) -> bool:
    """`_box-*` files hold shared hardware/model/perf for corpus scenarios (not scenarios by themselves)."""
    return ref.startswith("_box-") and resources.files("specdoctor.sim.scenarios").joinpath(f"{ref}.yaml").is_file()


def _raw(ref: str, depth: int = 0) -> dict:
    if ref in _builtin_names() or _is_box(ref):
        raw = _builtin_yaml(f"{ref}.yaml")
    else:
        path = Path(ref).expanduser()
        if not path.is_file():
            raise ScenarioError(f"no built-in scenario or file named {ref!r} (built-ins: {', '.join(_builtin_names())})")
        try:
            raw = yaml.safe_load(path.read_text(encoding="utf-8"))
        except yaml.YAMLError as exc:
            raise ScenarioError(f"scenario {ref}: invalid YAML: {exc}") from None
    if not isinstance(raw, dict):
        raise ScenarioError(f"scenario {ref}: expected a mapping at the top level")
    parent = raw.pop("extends", None)
    if parent:
        if depth > 4:
            raise ScenarioError(f"scenario {ref}: `extends` nests too deep")
        raw = _merge(_raw(str(parent), depth + 1), raw)
    return raw


def load_scenario(name_or_path: str | Path) -> Scenario:
    """A built-in scenario by name (`seed`) or a YAML file by path; `extends` and library patches resolved."""
    ref = str(name_or_path)
    raw = _raw(ref)
    checkout = raw.get("sglang") or raw.get("checkout") or {}
    if checkout.get("use_patches"):
        lib = _library()
        own = list(checkout.get("patches") or [])
        merged = []
        for pid in checkout["use_patches"]:
            if pid not in lib:
                raise ScenarioError(f"scenario {ref}: unknown library patch {pid!r}")
            merged.append({"id": pid, **lib[pid]})
        checkout["patches"] = merged + own
    try:
        return Scenario.model_validate(raw)
    except ValidationError as exc:
        raise ScenarioError(f"scenario {ref} is invalid:\n{exc}") from None


def list_scenarios(*, include_corpus: bool = False) -> list[tuple[str, str]]:
    """Built-in scenarios as (name, one-line description): the six first stories, plus the corpus on request.

    The corpus (`corpus: true`) measures how the diagnosis generalizes; per-scenario suites that must pass
    stay on the first stories, and benchmarks/diagnosis_accuracy.py runs them all.
    """
    out = []
    for name in _builtin_names():
        raw = _parsed_builtin(f"{name}.yaml")
        if raw.get("corpus") and not include_corpus:
            continue
        out.append((name, str(raw.get("description", "")).strip().splitlines()[0]))
    return out
