"""NCCL sweep grid: configurations, their env, what NVIDIA calls debugging-only, and the message sizes."""

from __future__ import annotations

import itertools
import re

from pydantic import BaseModel, Field, field_validator

from specdoctor.errors import UsageError
from specdoctor.inference import InferenceEngine, get_engine

__all__ = [
    "DEBUG_CLASS",
    "DEFAULT_GRID",
    "NcclConfig",
    "MessageSize",
    "Skipped",
    "expand_grid",
    "message_sizes",
    "CycleWeight",
    "cycle_weights",
    "parse_grid_option",
    "version_tuple",
    "experiment_only",
    "EXPERIMENT_NOTE",
    "engine_forced_env",
]

# NCCL's env docs list these under "Debugging": fine for experiments, not to be left set in production
# (anchors-and-math.md §D1). MIN/MAX_CTAS replace MIN/MAX_NCHANNELS (2.17+) and are treated the same way.
DEBUG_CLASS = frozenset({
    "NCCL_P2P_DISABLE", "NCCL_P2P_LEVEL", "NCCL_SHM_DISABLE", "NCCL_BUFFSIZE", "NCCL_NTHREADS",
    "NCCL_MAX_NCHANNELS", "NCCL_MIN_NCHANNELS", "NCCL_MIN_CTAS", "NCCL_MAX_CTAS", "NCCL_IB_DISABLE",
    "NCCL_CUMEM_ENABLE", "NCCL_ALGO", "NCCL_PROTO",
})
EXPERIMENT_NOTE = ("experiment-only: NVIDIA documents this as a debugging variable that stops NCCL from choosing "
                   "the best setting itself; revisit (drop and re-measure) after every NCCL/driver/SGLang upgrade")

CHANNELS = "CHANNELS"  # pseudo-variable: MIN/MAX_CTAS on NCCL >= 2.17, MIN/MAX_NCHANNELS before
DEFAULT_GRID: dict[str, list[str | None]] = {
    "NCCL_PROTO": [None, "LL", "Simple"],
    "NCCL_ALGO": [None, "Ring", "Tree"],
    "NCCL_P2P_LEVEL": [None, "SYS"],
    CHANNELS: [None, "4", "16"],
}
_NAME = re.compile(r"^NCCL_[A-Z0-9_]+$")
_VALUE = re.compile(r"^[\^A-Za-z0-9_,;:.+\-]+$")


def version_tuple(version: str | None) -> tuple[int, ...] | None:
    """'2.21.5+cuda12.4' → (2, 21, 5)."""
    if not version:
        return None
    m = re.match(r"(\d+)\.(\d+)(?:\.(\d+))?", version)
    return tuple(int(x) for x in m.groups() if x is not None) if m else None


class NcclConfig(BaseModel):
    """One point of the grid: a label and the env it sets (empty = NCCL's own choice)."""

    label: str
    env: dict[str, str] = Field(default_factory=dict)

    @property
    def is_default(self) -> bool:
        return not self.env


class Skipped(BaseModel):
    """A grid point not run, and why."""

    label: str
    reason: str


class MessageSize(BaseModel):
    """One all-reduce size that matters to this server: decode or verify at a batch size."""

    label: str
    phase: str
    batch: int
    bytes: int

    @field_validator("bytes")
    @classmethod
    def _positive(cls, v: int) -> int:
        if v <= 0:
            raise ValueError("message size must be positive")
        return v


def message_sizes(hidden: int, draft_tokens: int | None, batches: list[int], dtype_bytes: int = 2) -> list[MessageSize]:
    """decode b·hidden·2 B and verify b·draft_tokens·hidden·2 B (bf16) at each batch size."""
    out = []
    for b in batches:
        out.append(MessageSize(label=f"decode b={b}", phase="decode", batch=b, bytes=b * hidden * dtype_bytes))
        if draft_tokens and draft_tokens > 1:
            out.append(MessageSize(label=f"verify b={b}", phase="verify", batch=b,
                                   bytes=b * draft_tokens * hidden * dtype_bytes))
    return out


class CycleWeight(BaseModel):
    """How many all-reduces of one size a speculative cycle sends (what a setting's latency there is worth)."""

    size: int
    phase: str = Field(description="'verify' (the target's forward over k+1 tokens) or 'draft' (the draft steps).")
    per_cycle: float


def cycle_weights(sizes: list[MessageSize], per_forward: int, steps: int | None, batch: int = 1) -> list[CycleWeight]:
    """The all-reduces per speculative cycle at each size the cycle sends at `batch`: verify's forward sends
    `per_forward` (2 per target layer) of b·(k+1)·hidden·2 B; each of the k draft steps (a one-layer EAGLE drafter)
    sends 2 of b·hidden·2 B. Without speculation (no steps) a plain decode forward sends `per_forward` of the
    decode size. Sizes at other batches weigh nothing: this cycle does not send them."""
    out = []
    for m in sizes:
        if m.batch != batch:
            continue
        if m.phase == "verify" and steps:
            out.append(CycleWeight(size=m.bytes, phase="verify", per_cycle=float(per_forward)))
        elif m.phase == "decode":
            out.append(CycleWeight(size=m.bytes, phase="draft" if steps else "decode",
                                   per_cycle=float(2 * steps if steps else per_forward)))
    return out


def parse_grid_option(items: list[str]) -> dict[str, list[str | None]]:
    """CLI `--grid NCCL_PROTO=default,LL,Simple` (repeat) → grid; 'default' means unset."""
    grid: dict[str, list[str | None]] = {}
    for item in items:
        name, sep, values = item.partition("=")
        if not sep or not values:
            raise UsageError(f"--grid takes NAME=v1,v2,... (use 'default' for unset), got {item!r}")
        grid[name.strip()] = [None if v.strip().lower() == "default" else v.strip() for v in values.split(",")]
    return grid


def _check(grid: dict[str, list[str | None]]) -> None:
    for name, values in grid.items():
        if name != CHANNELS and not _NAME.match(name):
            raise UsageError(f"grid variable {name!r} is not an NCCL_* name (or {CHANNELS})")
        if not values:
            raise UsageError(f"grid variable {name} has no values")
        for v in values:
            if v is not None and not _VALUE.match(v):
                raise UsageError(f"grid value {v!r} for {name} has characters NCCL does not use")
            if name == CHANNELS and v is not None and not v.isdigit():
                raise UsageError(f"{CHANNELS} values are channel/CTA counts, got {v!r}")


def _channel_env(n: str, version: tuple[int, ...] | None) -> dict[str, str]:
    if version is not None and version < (2, 17):
        return {"NCCL_MIN_NCHANNELS": n, "NCCL_MAX_NCHANNELS": n}
    return {"NCCL_MIN_CTAS": n, "NCCL_MAX_CTAS": n}


def _has_ll128(value: str) -> bool:
    """True when a NCCL_PROTO value enables LL128 ('^LL128' excludes it, so it is safe)."""
    for part in value.split(";"):
        spec = part.split(":", 1)[-1]
        if spec.startswith("^"):
            continue
        if any(tok.strip().upper() == "LL128" for tok in spec.split(",")):
            return True
    return False


def _uses_nvls(env: dict[str, str]) -> bool:
    """True when a config would turn NVLink multicast on: an NVLS algorithm (not excluded with '^') or NVLS enabled."""
    algo = env.get("NCCL_ALGO", "")
    spec = algo.split(":", 1)[-1]
    on = not spec.startswith("^") and any(t.strip().upper().startswith("NVLS") for t in spec.split(","))
    return on or env.get("NCCL_NVLS_ENABLE", "0") not in ("0", "")


def expand_grid(grid: dict[str, list[str | None]] | None, *, interconnect: str = "unknown",
                nccl_version: str | None = None) -> tuple[list[NcclConfig], list[Skipped]]:
    """Every combination, default first; LL128 is never run on PCIe (NCCL's own guard keeps it off there), NVLS never."""
    grid = dict(DEFAULT_GRID if grid is None else grid)
    _check(grid)
    ver = version_tuple(nccl_version)
    names = list(grid)
    configs: list[NcclConfig] = []
    skipped: list[Skipped] = []
    seen: set[tuple[tuple[str, str], ...]] = set()
    for combo in itertools.product(*(grid[n] for n in names)):
        env: dict[str, str] = {}
        parts = []
        for name, value in zip(names, combo, strict=True):
            if value is None:
                continue
            parts.append(f"{name.removeprefix('NCCL_')}={value}")
            env.update(_channel_env(value, ver) if name == CHANNELS else {name: value})
        label = " ".join(parts) or "default"
        if _uses_nvls(env):
            skipped.append(Skipped(label=label, reason="NVLS (NVLink multicast) is never swept: a program that uses "
                                   "multicast can take a host's shared GPUs out of service"))
            continue
        if "NCCL_PROTO" in env and _has_ll128(env["NCCL_PROTO"]) and interconnect in ("pcie", "mixed", "unknown"):
            skipped.append(Skipped(label=label, reason=f"LL128 with a {interconnect} interconnect: NCCL only enables it on NVLink, "
                                   "forcing it risks data corruption; never forced"))
            continue
        key = tuple(sorted(env.items()))
        if key in seen:
            continue
        seen.add(key)
        configs.append(NcclConfig(label=label, env=env))
    configs.sort(key=lambda c: not c.is_default)
    if not configs or not configs[0].is_default:
        configs.insert(0, NcclConfig(label="default"))
    return configs, skipped


def experiment_only(env: dict[str, str]) -> list[str]:
    """The variables of a config that NCCL classes as debugging knobs."""
    return sorted(k for k in env if k in DEBUG_CLASS)


def engine_forced_env(engine: InferenceEngine, version: str | None) -> dict[str, str]:
    """What the engine writes into os.environ before spawning workers, at this version (ask the seam)."""
    return (get_engine(engine.name, version) if version else engine).forced_env()
