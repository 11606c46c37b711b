"""Targeted measurements for what a trial cannot revert: a slow PCIe link, held-down clocks, a power cap, a GPU neighbour."""

from __future__ import annotations

import shlex
import statistics
from typing import Any

from pydantic import BaseModel, Field

from specdoctor.errors import NoData, ToolFailed
from specdoctor.host.base import Raw
from specdoctor.models import DeltaList
from specdoctor.models.delta import CauseFact, norm_value
from specdoctor.parsers.nccl import parse_all_reduce
from specdoctor.parsers.nvidia_smi import parse_query_csv
from specdoctor.parsers.sections import split_sections
from specdoctor.stats.comparator import compare
from specdoctor.toolkit import ToolContext, tool
from specdoctor.tools.environment.fingerprint import _aliases, _load
from specdoctor.tools.remote import remote_command

__all__ = ["ProbeInput", "LinkProbe", "ClockProbe", "ProcessProbe", "HardwareProbe", "probe_hardware"]


class ProbeInput(BaseModel):
    """Arguments of probe_hardware."""

    deltas: dict[str, Any] | None = Field(default=None, description="list_deltas' output: which GPUs/links/limits "
                                          "look abnormal (None: every check on every GPU).")
    fingerprint: dict[str, Any] | None = Field(default=None, description="Today's fingerprint (server GPU processes).")
    good_fingerprint: dict[str, Any] | str | None = Field(
        default=None, description="The good run's fingerprint (a dict or a JSON file on the host): the reference a "
        "clock or power state must differ from before it can be a cause.")
    tp: int | None = Field(default=None, description="GPUs per all-reduce (the server's TP size; default 2..4).")
    size_bytes: int = Field(default=64 << 20, description="All-reduce message size: bandwidth-bound, where a link "
                            "shows.")
    repeats: int = Field(default=5, ge=5, le=30, description="all_reduce_perf runs per GPU set (interleaved) before "
                         "the first comparison; 5 is the fewest a rank test can call DIFFERENT with.")
    max_repeats: int = Field(default=10, ge=5, le=60, description="More runs while the comparator says UNKNOWN.")
    python: str | None = Field(default=None, description="The server's python: without nccl-tests on the host the "
                               "link probe runs tools/remote/allreduce_bench.py under torchrun with it.")
    samples: int = Field(default=2, ge=1, le=20, description="nvidia-smi readings under load, one a second.")
    load_warmup_s: float = Field(default=3.0, ge=0, le=60, description="Seconds between starting the load and the "
                                 "first reading (NCCL's set-up takes a second or two on a real box).")


class LinkProbe(BaseModel):
    """All-reduce bus bandwidth over GPU sets with and without one GPU whose link is below its max."""

    gpu: int
    gpus_with: list[int]
    gpus_without: list[int]
    busbw_with_gbs: list[float] = Field(default_factory=list)
    busbw_without_gbs: list[float] = Field(default_factory=list)
    ratio: float | None = Field(default=None, description="median busbw with / without (below 1: the link slows it).")
    outcome: str | None = None
    verdict: str | None = None
    p_value: float | None = None
    problem: str | None = None


class ClockProbe(BaseModel):
    """One GPU's SM clock and power under load vs its max and default limit, with the active clock reasons."""

    gpu: int
    sm_clock_load_mhz: list[float] = Field(default_factory=list)
    max_sm_clock_mhz: float | None = None
    utilization_pct: list[float] = Field(default_factory=list)
    power_draw_w: list[float] = Field(default_factory=list)
    power_limit_w: float | None = None
    power_default_w: float | None = None
    app_sm_clock_mhz: float | None = Field(default=None, description="Applications (or locked) SM clock.")
    default_app_sm_clock_mhz: float | None = Field(default=None, description="The model's default applications "
                                                   "SM clock (its spec; N/A on GeForce parts).")
    reasons: list[str] = Field(default_factory=list, description="Clock-event reasons active under load.")


class ProcessProbe(BaseModel):
    """A compute process on the GPUs that is not the server, and what it uses."""

    pid: int
    name: str
    gpu: int | None = None
    bus_id: str | None = None
    used_mib: float | None = None
    sm_pct: float | None = Field(default=None, description="SM utilisation of the process (nvidia-smi pmon).")
    shares_server_gpu: bool = False


class HardwareProbe(BaseModel):
    """Targeted measurements and the causes they confirm (method 'targeted-measurement')."""

    causes: list[CauseFact] = Field(default_factory=list)
    links: list[LinkProbe] = Field(default_factory=list)
    clocks: list[ClockProbe] = Field(default_factory=list)
    processes: list[ProcessProbe] = Field(default_factory=list)
    findings: list[str] = Field(default_factory=list, description="States observed but not causes: no reference "
                                "differs in them, or the measurement shows no effect ('not measured').")
    notes: list[str] = Field(default_factory=list)

    def summary_line(self) -> str:
        conf = [c.name for c in self.causes if c.confirmed]
        head = f"{len(self.links)} link, {len(self.clocks)} clock, {len(self.processes)} process probes"
        return head + (f"; confirmed: {'; '.join(conf)}" if conf else "; no hardware cause confirmed")


def _f(v: str | None) -> float | None:
    try:
        return float(v) if v not in (None, "", "[N/A]", "N/A") else None
    except ValueError:
        return None


_Q = ["index", "pci.bus_id", "clocks.sm", "clocks.max.sm", "utilization.gpu", "power.draw", "power.limit",
      "power.default_limit", "pcie.link.gen.current", "pcie.link.gen.max", "pcie.link.width.current",
      "pcie.link.width.max", "clocks.applications.graphics"]
_R = ["clocks_event_reasons.applications_clocks_setting", "clocks_event_reasons.sw_power_cap",
      "clocks_event_reasons.hw_slowdown", "clocks_event_reasons.sw_thermal_slowdown"]
_R_OLD = [r.replace("clocks_event_reasons", "clocks_throttle_reasons") for r in _R]

# the _Q readings, the _R clock-event reasons (by their older _R_OLD names where a driver lacks those) and the
# default application clocks
_GPU_READINGS = remote_command("gpu_readings.sh")


def _read_gpus(ctx: ToolContext) -> tuple[list[dict[str, str | None]], dict[int, list[str]]]:
    res = ctx.host.run(Raw(_GPU_READINGS), check="ignore", timeout=60)
    sec = {k: "\n".join(v) for k, v in split_sections(res.stdout).items()}
    q, r, d = sec.get("q", ""), sec.get("r", ""), sec.get("d", "")
    rows = parse_query_csv(q.strip(), _Q)
    defaults = {(row.get("index") or ""): row.get("clocks.default_applications.graphics")
                for row in parse_query_csv(d.strip(), ["index", "clocks.default_applications.graphics"])}
    for row in rows:
        row["clocks.default_applications.graphics"] = defaults.get(row.get("index") or "")
    return rows, _parse_reasons(r)


_REASONS_CMD = ("nvidia-smi --query-gpu=index," + ",".join(_R) + " --format=csv,noheader 2>/dev/null || "
                "nvidia-smi --query-gpu=index," + ",".join(_R_OLD) + " --format=csv,noheader 2>&1")


def _parse_reasons(text: str) -> dict[int, list[str]]:
    """GPU index -> the clock-event reasons that are Active."""
    reasons: dict[int, list[str]] = {}
    for line in text.strip().splitlines():
        cells = [c.strip() for c in line.split(",")]
        if len(cells) == len(_R) + 1 and cells[0].isdigit():
            reasons[int(cells[0])] = [_R[i].split(".", 1)[1] for i, c in enumerate(cells[1:]) if c == "Active"]
    return reasons


def _bench(ctx: ToolContext, python: str | None) -> str | None:
    """'all_reduce_perf' when nccl-tests is on the host, else 'allreduce_bench' when a python is known, else None."""
    found = ctx.host.run(["sh", "-c", "command -v all_reduce_perf"], check="ignore")
    return "all_reduce_perf" if found.ok and found.stdout.strip() else ("allreduce_bench" if python else None)


def _busbw(ctx: ToolContext, gpus: list[int], size: int, python: str | None,
           tool_name: str | None) -> tuple[float | None, str | None]:
    """Bus bandwidth (GB/s, in place when measured) of one all-reduce benchmark over exactly these GPUs."""
    visible = f"CUDA_VISIBLE_DEVICES={','.join(str(g) for g in gpus)}"
    if tool_name == "all_reduce_perf":
        argv = ["env", visible, "all_reduce_perf", "-b", str(size), "-e", str(size), "-g", str(len(gpus)),
                "-d", "bfloat16", "-n", "20", "-w", "5"]
    elif tool_name == "allreduce_bench" and python:
        argv = ["env", visible, python, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node",
                str(len(gpus)), ctx.remote_script("allreduce_bench.py"), "--sizes", str(size), "-n", "20", "-w", "5",
                "-G", "0", "-d", "bfloat16", "--backend", "nccl"]
    else:
        return None, "no all-reduce benchmark on the host (nccl-tests' all_reduce_perf, or torch with a known python)"
    out = ctx.host.run(argv, check="ignore", timeout=300)
    if not out.ok:
        return None, f"all_reduce_perf exit {out.exit}: {(out.stderr or out.stdout).strip()[-200:]}"
    try:
        table = parse_all_reduce(out.stdout)
    except ValueError as exc:
        return None, str(exc)
    rows = [r for r in table.rows if r.size >= size] or table.rows
    half = next((h for r in rows[:1] for h in (r.in_place, r.out_of_place) if h is not None and h.busbw), None)
    return (half.busbw if half is not None else None), None


def _link_probe(ctx: ToolContext, args: ProbeInput, gpu: int, healthy: list[int], bench: str | None) -> LinkProbe:
    n = max(2, min(args.tp or 4, len(healthy), 4))
    without = healthy[:n]
    with_ = [gpu, *healthy[: n - 1]]
    probe = LinkProbe(gpu=gpu, gpus_with=with_, gpus_without=without)
    if len(without) < n or len(healthy) < n:
        probe.problem = f"not enough GPUs at full link for a {n}-GPU comparison"
        return probe
    while len(probe.busbw_with_gbs) < args.max_repeats:
        for gpus, dest in ((with_, probe.busbw_with_gbs), (without, probe.busbw_without_gbs)):
            bw, problem = _busbw(ctx, gpus, args.size_bytes, args.python, bench)  # interleaved: drifts hit both sets alike
            if bw is None:
                probe.problem = problem
                return probe
            dest.append(bw)
        if len(probe.busbw_with_gbs) < args.repeats:
            continue
        c = compare(probe.busbw_without_gbs, probe.busbw_with_gbs, unit="GB/s", higher_is_better=True)
        probe.outcome, probe.verdict, probe.p_value = c.outcome, c.verdict, c.p_value
        if c.outcome != "UNKNOWN":  # sequential: more runs only while the comparator cannot tell
            break
    probe.ratio = round(statistics.median(probe.busbw_with_gbs) / statistics.median(probe.busbw_without_gbs), 3)
    return probe


_PMON = "nvidia-smi pmon -c 1 -s u 2>&1; true"


def _pmon(ctx: ToolContext) -> dict[int, float]:
    """pid -> SM % from `nvidia-smi pmon -s u` (one sample; '-' is no sample)."""
    res = ctx.host.run(Raw(_PMON), check="ignore", timeout=60)
    out: dict[int, float] = {}
    for line in res.stdout.splitlines():
        cells = line.split()
        if line.startswith("#") or len(cells) < 4 or not cells[1].isdigit():
            continue
        sm = _f(cells[3]) if cells[3] != "-" else None
        if sm is not None:
            out[int(cells[1])] = max(out.get(int(cells[1]), 0.0), sm)
    return out


def _reference_gpus(ctx: ToolContext, good: dict[str, Any] | str | None, notes: list[str]) -> dict[int, dict]:
    """The good run's GPUs by index (nvidia-smi-ish names accepted), or {} without a readable one."""
    if not good:
        return {}
    try:
        ref = _aliases(_load(ctx, good))
    except (NoData, ToolFailed) as exc:
        notes.append(f"good-run fingerprint not read ({exc}): clocks judged against the spec and the other GPUs")
        return {}
    return {int(g.get("index", i)): g for i, g in enumerate(ref.get("gpus") or []) if isinstance(g, dict)}


def _gpus_text(cps: list[ClockProbe]) -> str:
    return ",".join(str(cp.gpu) for cp in cps)


def _ref_clock(cp: ClockProbe, ref_gpus: dict[int, dict], peers: list[ClockProbe]) -> tuple[float | None, str]:
    """The SM clock the reference reaches under load, and which reference: the good run's reading of this GPU (or of
    its first GPU), else the other GPUs of the box that are not held, else nothing (the spec's 'max' is a ceiling
    that consumer and workstation parts do not sustain, so it is no reference for a clock)."""
    r = ref_gpus.get(cp.gpu) or next(iter(ref_gpus.values()), None)
    if r is not None and _f(str(r.get("sm_clock_mhz"))) is not None:
        return _f(str(r.get("sm_clock_mhz"))), "the good run"
    free = [x for cp2 in peers for x in cp2.sm_clock_load_mhz]
    if free:
        return statistics.median(free), f"GPUs {_gpus_text(peers)} of this box"
    return None, ""


def _held(cp: ClockProbe) -> bool:
    """Application/locked clocks hold this GPU: its reason is active, or its setting is below the model's default."""
    return "applications_clocks_setting" in cp.reasons or bool(
        cp.app_sm_clock_mhz and cp.default_app_sm_clock_mhz and cp.app_sm_clock_mhz < 0.98 * cp.default_app_sm_clock_mhz)


def _capped(cp: ClockProbe, ref_gpus: dict[int, dict]) -> tuple[bool, float | None]:
    """A power limit below the default (the spec) or the good run's, and the reference limit."""
    r = ref_gpus.get(cp.gpu) or next(iter(ref_gpus.values()), None)
    ref = _f(str(r.get("power_limit_w"))) if r is not None else None
    base = ref or cp.power_default_w
    return bool(cp.power_limit_w and base and cp.power_limit_w < 0.95 * base), base


def _boost_findings(out: HardwareProbe, measured: list[ClockProbe], free: list[ClockProbe]) -> None:
    """A clock below "max" with no state that holds it is how the card boosts: a finding at most."""
    for cp in measured:
        mx = cp.max_sm_clock_mhz
        if cp in free and mx and statistics.median(cp.sm_clock_load_mhz) < 0.9 * mx:
            out.findings.append(f"GPU {cp.gpu}: SM clock {norm_value(round(statistics.median(cp.sm_clock_load_mhz)))}"
                                f" of {norm_value(mx)} MHz 'max' under load with no clock-event reason: the card's "
                                "own boost (not a cause)")


def _held_effect(kind: str, cp: ClockProbe, ref_gpus: dict[int, dict], free: list[ClockProbe],
                 findings: list[str]) -> tuple[ClockProbe, float, str] | None:
    """(GPU, its SM clock under load, the reference's name) when this held or capped GPU's state differs from the
    reference and its clock is 5 % or more below it; else None, with the finding that says why it is no cause."""
    sm = statistics.median(cp.sm_clock_load_mhz)
    ref, label = _ref_clock(cp, ref_gpus, free)
    if kind == "power-limit" and ref is None:  # the cap's reason says it holds the clock below its max
        ref, label = cp.max_sm_clock_mhz, "its max"
    differs, base = _capped(cp, ref_gpus) if kind == "power-limit" else (ref is not None, None)
    what = ("application/locked clocks" if kind == "sm-clock" else
            f"SW power cap at {norm_value(cp.power_limit_w)} W")
    if kind == "power-limit" and not differs:
        findings.append(f"GPU {cp.gpu}: {what} under load, at the model's default limit "
                        f"{norm_value(base)} W: how this card runs (not a cause)")
    elif ref is None and kind == "sm-clock":
        findings.append(f"GPU {cp.gpu}: {what} hold the SM clock at {norm_value(round(sm))} MHz; no "
                        "reference clock (no good-run reading, no other GPU free of it): not measured, "
                        "not a cause")
    elif ref is not None and sm >= 0.95 * ref:
        findings.append(f"GPU {cp.gpu}: {what}, but under load the SM clock "
                        f"{norm_value(round(sm))} MHz reaches {label}'s {norm_value(round(ref))} MHz: "
                        "measured, no effect (not a cause)")
    else:
        return (cp, sm, label)
    return None


def _clock_cause(kind: str, cps: list[ClockProbe], ref_gpus: dict[int, dict], free: list[ClockProbe]) -> CauseFact:
    """The confirmed cause of one kind (held clocks or a power cap) over the GPUs that showed its effect."""
    sm = statistics.median(x for c in cps for x in c.sm_clock_load_mhz)
    ref, label = _ref_clock(cps[0], ref_gpus, free)
    if ref is None:
        ref, label = cps[0].max_sm_clock_mhz, "its max"
    ref_text = (f"{label}'s {norm_value(round(ref))} MHz ({sm / ref - 1:+.0%})" if ref is not None else
                f"{norm_value(cps[0].max_sm_clock_mhz)} MHz max")
    if kind == "sm-clock":
        return CauseFact(
            name=f"SM clocks held at {norm_value(round(sm))} MHz on GPUs {_gpus_text(cps)} (application/locked "
            f"clocks; {label} ran at {norm_value(round(ref or 0))} MHz)", kind="hardware", key="sm-clock",
            confirmed=True, method="targeted-measurement", evidence=["probe"],
            detail=f"measured under load: SM clock {norm_value(round(sm))} MHz vs {ref_text} with the "
            "applications-clocks reason active",
            fix="sudo nvidia-smi -rgc && sudo nvidia-smi -rac (reset locked and application clocks)")
    _, base = _capped(cps[0], ref_gpus)
    return CauseFact(
        name=f"power limit {norm_value(cps[0].power_limit_w)} W of {norm_value(base)} W on GPUs "
        f"{_gpus_text(cps)}", kind="hardware", key="power-limit", confirmed=True,
        method="targeted-measurement", evidence=["probe"],
        detail=f"measured under load: SM clock {norm_value(round(sm))} MHz vs {ref_text} with the SW power "
        "cap active", fix=f"sudo nvidia-smi -pl {norm_value(base)} (if the site's power policy allows)")


def _clock_causes(out: HardwareProbe, ref_gpus: dict[int, dict]) -> list[CauseFact]:
    """A clock or power state is a cause only when (a) the reference differs in it and (b) the measurement under load
    shows its effect (the SM clock at least 5 % below the reference's); otherwise it is a finding."""
    causes: list[CauseFact] = []
    measured = [cp for cp in out.clocks if cp.sm_clock_load_mhz]
    held = [cp for cp in measured if _held(cp)]
    capped = [cp for cp in measured if "sw_power_cap" in cp.reasons]
    free = [cp for cp in measured if cp not in held and cp not in capped]
    _boost_findings(out, measured, free)
    for kind, group in (("sm-clock", held), ("power-limit", capped)):
        confirmed = [c for cp in group if (c := _held_effect(kind, cp, ref_gpus, free, out.findings)) is not None]
        if confirmed:
            causes.append(_clock_cause(kind, [c for c, _, _ in confirmed], ref_gpus, free))
    return causes


def _link(r: dict[str, str | None]) -> tuple[float, float]:
    """A GPU's current PCIe link as (generation, width)."""
    return (_f(r.get("pcie.link.gen.current")) or 0, _f(r.get("pcie.link.width.current")) or 0)


def _slow_links(gpus: dict[int, dict[str, str | None]], deltas: DeltaList | None) -> list[int]:
    """The GPUs whose link is slower than the box's best, plus those list_deltas named for their link."""
    best = max((_link(r) for r in gpus.values()), default=(0.0, 0.0))
    slow = sorted(i for i, r in gpus.items() if _link(r) < best)
    if deltas is not None:
        named = {d.source.split()[1] for d in deltas.deltas if d.name == "pcie-link" and d.source.startswith("GPU ")}
        slow = sorted(set(slow) | {int(x) for x in named if x.isdigit() and int(x) in gpus})
    return slow


def _link_cause(g: int, r: dict[str, str | None], p: LinkProbe) -> CauseFact:
    """GPU g's slow link, confirmed by the all-reduce bandwidth with vs without it."""
    return CauseFact(
        name=f"PCIe link of GPU {g} at Gen{norm_value(_f(r.get('pcie.link.gen.current')))} "
        f"x{norm_value(_f(r.get('pcie.link.width.current')))} (max Gen{norm_value(_f(r.get('pcie.link.gen.max')))} "
        f"x{norm_value(_f(r.get('pcie.link.width.max')))})",
        kind="hardware", key="pcie-link", confirmed=True, method="targeted-measurement",
        evidence=["probe"], detail=f"all-reduce bus bandwidth {p.ratio:.2f}x with GPU {g} "
        f"({', '.join(map(str, p.gpus_with))}) vs without ({', '.join(map(str, p.gpus_without))}), "
        f"p={p.p_value:.3g}", fix="reseat the GPU / check the slot and riser; `lspci -vv` LnkSta")


def _probe_links(ctx: ToolContext, args: ProbeInput, out: HardwareProbe, gpus: dict[int, dict[str, str | None]],
                 slow: list[int], bench: str | None) -> None:
    """All-reduce with vs without each slow-link GPU; a measured loss is a cause."""
    healthy = [i for i in sorted(gpus) if i not in slow]
    for g in slow:
        p = _link_probe(ctx, args, g, healthy, bench)
        out.links.append(p)
        if p.outcome == "DIFFERENT" and p.verdict == "worse":
            out.causes.append(_link_cause(g, gpus[g], p))


def _idle_clock_probe(i: int, r: dict[str, str | None]) -> ClockProbe:
    """GPU i's limits as read before the load (the readings under load are added to it)."""
    return ClockProbe(gpu=i, max_sm_clock_mhz=_f(r.get("clocks.max.sm")), power_limit_w=_f(r.get("power.limit")),
                      power_default_w=_f(r.get("power.default_limit")),
                      app_sm_clock_mhz=_f(r.get("clocks.applications.graphics")),
                      default_app_sm_clock_mhz=_f(r.get("clocks.default_applications.graphics")))


def _load_command(ctx: ToolContext, args: ProbeInput, bench: str | None, n: int, notes: list[str]) -> str:
    """The all-reduce over every GPU that loads them while the clocks are read ('true' without a benchmark)."""
    if bench == "all_reduce_perf":  # -N 0: cycles until killed, so the load outlasts the readings on any box
        return f"all_reduce_perf -b 64M -e 64M -g {n} -n 500 -w 5 -N 0"
    if bench == "allreduce_bench" and args.python:
        return (f"{shlex.quote(args.python)} -m torch.distributed.run --standalone --nproc-per-node {n} "
                f"{shlex.quote(ctx.remote_script('allreduce_bench.py'))} --sizes 64M -n 500 -w 5 -G 0")
    notes.append("no all-reduce benchmark to load the GPUs with: clocks read as the server leaves them")
    return "true"


def _add_loaded_reading(loaded: dict[int, ClockProbe], r: dict[str, str | None]) -> None:
    """One nvidia-smi row read under load: kept only when the GPU was busy (utilisation 50 % or more)."""
    idx = int(r.get("index") or -1) if (r.get("index") or "").isdigit() else -1
    cp = loaded.get(idx)
    util = _f(r.get("utilization.gpu"))
    if cp is None or util is None or util < 50:  # only readings under load say what load gets
        return
    cp.utilization_pct.append(util)
    if (sm := _f(r.get("clocks.sm"))) is not None:
        cp.sm_clock_load_mhz.append(sm)
    if (pw := _f(r.get("power.draw"))) is not None:
        cp.power_draw_w.append(pw)


def _probe_clocks(ctx: ToolContext, args: ProbeInput, out: HardwareProbe, gpus: dict[int, dict[str, str | None]],
                  bench: str | None) -> None:
    """Clocks and power under load: one load (all-reduce over every GPU) read `samples` times while it keeps every
    GPU busy, with the clock-event reasons read while it still runs (a clock or power limit shows only under load)."""
    loaded: dict[int, ClockProbe] = {i: _idle_clock_probe(i, r) for i, r in gpus.items()}
    load_gpus = ",".join(str(i) for i in sorted(gpus))
    load = _load_command(ctx, args, bench, len(gpus), out.notes)
    script = (f"CUDA_VISIBLE_DEVICES={load_gpus} {load} >/dev/null 2>&1 & LOAD=$!; "
              f"sleep {args.load_warmup_s:g}; for i in $(seq {args.samples}); do "
              "nvidia-smi --query-gpu=" + ",".join(_Q) + " --format=csv,noheader,nounits 2>&1; "
              f"[ $i -lt {args.samples} ] && sleep 1; done; echo @@r; {_REASONS_CMD}; "
              "kill $LOAD 2>/dev/null; wait $LOAD 2>/dev/null; true")  # reasons read while the load still runs
    res = ctx.host.run(Raw(script), check="ignore", timeout=120 + args.load_warmup_s + 2 * args.samples)
    sec = {k: "\n".join(v) for k, v in split_sections(res.stdout, first="loaded").items()}
    loaded_out, reasons_out = sec["loaded"], sec.get("r", "")
    for r in parse_query_csv(loaded_out.strip(), _Q):
        _add_loaded_reading(loaded, r)
    reasons = _parse_reasons(reasons_out)
    for i, cp in loaded.items():
        cp.reasons = reasons.get(i, [])
        out.clocks.append(cp)
    if not any(cp.sm_clock_load_mhz for cp in out.clocks):
        out.notes.append("no nvidia-smi reading under load (utilisation below 50 %): clocks not judged")


def _compute_apps(ctx: ToolContext) -> list[tuple[int, str, float | None, str]]:
    """(pid, name, used MiB, bus id) of every compute process on the GPUs."""
    res = ctx.host.run(Raw("nvidia-smi --query-compute-apps=pid,process_name,used_memory,gpu_bus_id "
                           "--format=csv,noheader,nounits 2>&1; true"), check="ignore", timeout=60)
    apps = []
    for line in res.stdout.splitlines():
        cells = [c.strip() for c in line.split(",")]
        if len(cells) >= 4 and cells[0].isdigit():
            apps.append((int(cells[0]), cells[1], _f(cells[2]), cells[3]))
    return apps


def _server_buses(args: ProbeInput, fp: dict[str, Any], gpus: dict[int, dict[str, str | None]],
                  apps: list[tuple[int, str, float | None, str]], server_pids: set[int]) -> set[str]:
    """The bus ids of the GPUs the server computes on: where its processes are, else (the server is stopped for the
    trials) the ones it will come back on."""
    server_bus = {b.lower()[-12:] for pid, _, _, b in apps if pid in server_pids}
    if not server_bus and args.tp:
        visible = (fp.get("worker_env") or {}).get("CUDA_VISIBLE_DEVICES") or ""
        ids = [int(x) for x in visible.split(",") if x.strip().isdigit()] or list(range(int(args.tp)))
        server_bus = {(gpus[i].get("pci.bus_id") or "").lower()[-12:] for i in ids[:int(args.tp)] if i in gpus}
    return server_bus


def _process_cause(pp: ProcessProbe) -> CauseFact:
    """A foreign process measured computing on a GPU the server uses."""
    return CauseFact(
        name=f"other GPU process {pp.name} (pid {pp.pid}) computes on GPU {pp.gpu} beside the server", kind="hardware",
        key="other-gpu-process", confirmed=True, method="targeted-measurement", evidence=["probe"],
        detail=f"it uses {norm_value(pp.sm_pct)} % of the GPU's SMs and {norm_value(pp.used_mib)} MiB; a TP step "
        "waits for the slowest rank", fix=f"move pid {pp.pid} to a GPU the server does not use (not ours to stop)")


def _probe_processes(ctx: ToolContext, args: ProbeInput, out: HardwareProbe,
                     gpus: dict[int, dict[str, str | None]]) -> None:
    """Compute processes that are not the server, with their SM share; one computing beside the server is a cause."""
    fp = args.fingerprint or {}
    server_pids = {int(p["pid"]) for p in fp.get("gpu_processes") or [] if isinstance(p, dict) and p.get("server")}
    apps = _compute_apps(ctx)
    by_bus = {(r.get("pci.bus_id") or "").lower()[-12:]: i for i, r in gpus.items()}
    server_bus = _server_buses(args, fp, gpus, apps, server_pids)
    foreign = [a for a in apps if a[0] not in server_pids]
    sm_by_pid = _pmon(ctx) if foreign else {}
    for pid, name, mib, bus in foreign:
        key = bus.lower()[-12:]
        pp = ProcessProbe(pid=pid, name=name, gpu=by_bus.get(key), bus_id=bus, used_mib=mib, sm_pct=sm_by_pid.get(pid),
                         shares_server_gpu=key in server_bus)
        out.processes.append(pp)
        if pp.shares_server_gpu and pp.sm_pct is not None and pp.sm_pct >= 5:
            out.causes.append(_process_cause(pp))
    if not server_pids:
        out.notes.append("server GPU processes unknown (no fingerprint): every compute app counted as foreign")


@tool(effect="read")
def probe_hardware(ctx: ToolContext, args: ProbeInput) -> HardwareProbe:
    """Measure what cannot be reverted: all-reduce bandwidth with vs without a GPU whose PCIe link is below its max,
    SM clocks and power under load vs max and default limit (with the active clock reasons), and the SM share of
    compute processes that are not the server. A cause is confirmed only when the measurement shows it."""
    out = HardwareProbe()
    deltas = DeltaList.model_validate(args.deltas) if args.deltas else None
    rows, _reasons = _read_gpus(ctx)
    if not rows:
        out.notes.append("nvidia-smi gave no GPUs: nothing to probe")
        return out
    gpus = {int(r.get("index") or i): r for i, r in enumerate(rows) if (r.get("index") or str(i)).isdigit()}
    slow = _slow_links(gpus, deltas)
    bench = _bench(ctx, args.python)
    _probe_links(ctx, args, out, gpus, slow, bench)
    _probe_clocks(ctx, args, out, gpus, bench)
    ref_gpus = _reference_gpus(ctx, args.good_fingerprint, out.notes)
    out.causes += _clock_causes(out, ref_gpus)
    _probe_processes(ctx, args, out, gpus)
    return out
