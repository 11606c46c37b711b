"""Empirical break-even: relaunch with SGLANG_SIMULATE_ACC_LEN over a grid and find where tok/s crosses baseline."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
from pydantic import BaseModel, Field

from specdoctor.errors import ToolFailed, Unresolved
from specdoctor.toolkit import ToolContext, registry, tool
from specdoctor.tools.serving.trial import LaunchConfig, measure, trial

__all__ = ["EmpiricalInput", "EmpiricalPoint", "EmpiricalBreakeven", "breakeven_empirical", "call_tool",
           "crossing"]


class EmpiricalInput(BaseModel):
    """Arguments of breakeven_empirical."""

    command: str = Field(description="The engine's launch line with speculative decoding on.")
    python: str | None = Field(default=None, description="Python on the host that runs SGLang.")
    cwd: str | None = None
    port: int | None = None
    accept_lens: list[float] = Field(default_factory=lambda: [1.5, 2.0, 2.5, 3.0, 3.5],
                                     description="Values of SGLANG_SIMULATE_ACC_LEN to force, one launch each.")
    baseline_tps: float | None = Field(default=None, gt=0,
                                       description="Known baseline tok/s; measured without speculation when omitted.")
    runs: int = Field(default=3, ge=1, le=50)
    requests_per_run: int = Field(default=4, ge=1)
    max_new_tokens: int = Field(default=128, ge=1)
    warmup_runs: int = Field(default=1, ge=0)
    timeout_s: float = Field(default=900, gt=0)


class EmpiricalPoint(BaseModel):
    """One forced accept length and what the server did with it."""

    accept_len_set: float
    accept_len_measured: float | None = None
    tps: float
    ci_low: float | None = None
    ci_high: float | None = None
    samples: list[float] = Field(default_factory=list)
    model_tps: float = Field(description="tok/s the linear cycle model predicts at this τ.")


class EmpiricalBreakeven(BaseModel):
    """Measured tok/s against forced accept length, next to the model's line, and where each crosses baseline."""

    baseline_tps: float
    baseline_measured: bool
    baseline_samples: list[float] = Field(default_factory=list)
    points: list[EmpiricalPoint]
    cycle_ms_fit: float = Field(description="Cycle time fitted through the origin: tps = 1000·τ/cycle.")
    tau_star_model: float = Field(description="baseline_tps · cycle / 1000: the model's break-even τ.")
    tau_star_measured: float | None = Field(description="Where the measured curve crosses baseline (interpolated).")
    notes: list[str] = Field(default_factory=list)

    def summary_line(self) -> str:
        meas = f"{self.tau_star_measured:.2f}" if self.tau_star_measured is not None else "outside the grid"
        return f"measured break-even τ {meas} vs model τ* {self.tau_star_model:.2f} (baseline {self.baseline_tps:.1f} tok/s)"


def call_tool(ctx: ToolContext, name: str, args: dict[str, Any]) -> dict[str, Any]:
    """Call another tool by name (inside an approved disruptive call) and return its output, or raise."""
    inner = dataclasses.replace(ctx, auto_approve=True)
    res = registry.call(inner, name, args)
    if res.status == "unresolved":
        raise Unresolved(f"{name}: {res.summary}", output=None)
    if res.status != "ok" or res.output is None:
        raise ToolFailed(f"{name} {res.status}: {res.summary}")
    return res.output


def crossing(xs: list[float], ys: list[float], level: float) -> float | None:
    """First x where the piecewise-linear curve (xs sorted) crosses `level` from below; None if it never does."""
    for i in range(len(xs) - 1):
        x0, y0, x1, y1 = xs[i], ys[i], xs[i + 1], ys[i + 1]
        if y0 < level <= y1 and y1 != y0:
            return x0 + (level - y0) * (x1 - x0) / (y1 - y0)
    return None


def _measure(ctx: ToolContext, args: EmpiricalInput, label: str, env: dict[str, str], drop_spec: bool,
             command: str | list[str] | None = None) -> dict:
    config = LaunchConfig(command=command if command is not None else args.command, env=env, speculative=not drop_spec, label=label,
                          timeout_s=args.timeout_s, python=args.python, cwd=args.cwd, port=args.port)
    ctx.say(f"launching server ({label})")
    with trial(ctx, config) as handle:
        m = measure(handle, runs=args.runs, requests_per_run=args.requests_per_run,
                    max_new_tokens=args.max_new_tokens, warmup_runs=args.warmup_runs, label=label)
    return m.model_dump(mode="json")


@tool(effect="disrupt")
def breakeven_empirical(ctx: ToolContext, args: EmpiricalInput) -> EmpiricalBreakeven:
    """Relaunch the server with the accept length forced over a grid, measure tok/s, and find the measured break-even.

    Real SGLang forces it with SGLANG_SIMULATE_ACC_LEN, vLLM 0.26 with its speculative config's synthetic rejection
    sampling (`synthetic_acceptance_length`), so tok/s against τ traces the cycle cost directly.
    The model line is tps = 1000·τ/cycle fitted through the origin; its break-even is baseline·cycle/1000.
    """
    if len(args.accept_lens) < 2:
        raise Unresolved("need at least two accept lengths to draw a curve")
    notes: list[str] = []
    base_samples: list[float] = []
    if args.baseline_tps is None:
        b = _measure(ctx, args, "baseline", {}, True)
        baseline, base_samples = float(b["median"]), [float(x) for x in b.get("samples", [])]
    else:
        baseline = args.baseline_tps
    engine = ctx.engine_for(args.command)
    knob = engine.simulate_accept_env  # SGLang: a variable; vLLM 0.26: speculative-config keys (force_accept_argv)
    if knob is None and engine.force_accept_argv(args.command, 2.0) is None:
        raise Unresolved("this inference engine has no way to force the accept length")
    raw = []
    for acc in sorted(args.accept_lens):
        if knob is not None:
            m = _measure(ctx, args, f"acc-{acc:g}", {knob: f"{acc:g}"}, False)
        else:
            m = _measure(ctx, args, f"acc-{acc:g}", {}, False, command=engine.force_accept_argv(args.command, acc))
        measured = m.get("accept_length")
        if measured is not None and abs(float(measured) - acc) > 0.25 * acc:
            notes.append(f"forced τ {acc:g} but the server reported {float(measured):.2f}: the variable may not have "
                         "reached the workers")
        raw.append((acc, measured, m))
    taus = np.array([float(m) if m is not None else a for a, m, _ in raw])
    tps = np.array([float(m["median"]) for _, _, m in raw])
    slope = float(np.dot(taus, tps) / np.dot(taus, taus))  # least squares through the origin
    if slope <= 0:
        raise Unresolved("measured tok/s do not grow with τ; no cycle time can be fitted")
    points = [EmpiricalPoint(accept_len_set=a, accept_len_measured=None if mm is None else float(mm),
                             tps=float(m["median"]), ci_low=m.get("ci_low"), ci_high=m.get("ci_high"),
                             samples=[float(x) for x in m.get("samples", [])], model_tps=round(slope * t, 3))
              for (a, mm, m), t in zip(raw, taus, strict=True)]
    cross = crossing([float(t) for t in taus], [float(y) for y in tps], baseline)
    if cross is None:
        side = "above" if tps[0] >= baseline else "below"
        notes.append(f"the measured curve stays {side} baseline over the grid; widen accept_lens")
    return EmpiricalBreakeven(baseline_tps=round(baseline, 3), baseline_measured=args.baseline_tps is None,
                              baseline_samples=base_samples, points=points, cycle_ms_fit=round(1000.0 / slope, 4),
                              tau_star_model=round(baseline / slope, 4),
                              tau_star_measured=None if cross is None else round(cross, 4), notes=notes)
