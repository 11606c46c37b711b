"""Break-even analysis for speculative decoding: τ*, margin, α, best k and the α a drafter needs."""

from __future__ import annotations

import math

import numpy as np
from pydantic import BaseModel, Field
from scipy.optimize import brentq

from specdoctor.errors import ToolRetry, UsageError
from specdoctor.models.breakeven import (
    BreakevenAnalysis,
    CycleTerm,
    KPrediction,
    TargetRequirement,
    TermChange,
)
from specdoctor.toolkit import ToolContext, tool

__all__ = [
    "BreakevenRun",
    "BreakevenInput",
    "BreakevenAnalysis",
    "VerifyPoint",
    "KPrediction",
    "TargetRequirement",
    "CycleTerm",
    "TermChange",
    "accept_length",
    "alpha_from_accept_length",
    "leviathan_speedup",
    "analyze",
    "breakeven",
]

_CONSISTENCY = 0.05  # relative disagreement tolerated between two ways of giving the same quantity


def accept_length(alpha: float, steps: int) -> float:
    """Expected tokens per cycle for a chain of `steps` drafts at per-token acceptance α (bonus included)."""
    if not 0.0 <= alpha <= 1.0:
        raise UsageError(f"acceptance α must be in [0, 1], got {alpha}")
    if alpha >= 1.0 - 1e-15:
        return float(steps + 1)
    return (1.0 - alpha ** (steps + 1)) / (1.0 - alpha)


def alpha_from_accept_length(tau: float, steps: int) -> float:
    """Invert τ = (1−α^(k+1))/(1−α) for α with brentq (τ is monotone in α on [0, 1])."""
    if tau < 1.0 - 1e-9 or tau > steps + 1 + 1e-9:
        raise UsageError(f"accept length {tau:g} is outside [1, steps+1 = {steps + 1}]")
    if tau <= 1.0:
        return 0.0
    if tau >= steps + 1 - 1e-12:
        return 1.0
    return float(brentq(lambda a: accept_length(a, steps) - tau, 0.0, 1.0 - 1e-15, xtol=1e-12))


def leviathan_speedup(alpha: float, gamma: int, c: float) -> float:
    """Leviathan et al. (2023) Thm 3.8: walltime improvement (1−α^(γ+1))/((1−α)(γc+1))."""
    return accept_length(alpha, gamma) / (gamma * c + 1.0)


class VerifyPoint(BaseModel):
    """One measured verify cost: how long a target forward over N draft tokens took."""

    draft_tokens: int = Field(ge=1, description="Tokens verified per request (num_draft_tokens).")
    verify_ms: float = Field(gt=0, description="Verify forward time per cycle at that N, ms.")


class BreakevenRun(BaseModel):
    """One run's measurements; any consistent subset works (see `analyze`)."""

    baseline_tps: float | None = Field(default=None, gt=0, description="Plain-decode (no speculation) tok/s.")
    decode_ms: float | None = Field(default=None, gt=0, description="Plain-decode time per token (TPOT), ms.")
    spec_tps: float | None = Field(default=None, gt=0, description="Speculative-decoding tok/s.")
    accept_len: float | None = Field(default=None, ge=1, description="Measured accept length τ incl. the bonus token.")
    verify_ms: float | None = Field(default=None, gt=0, description="Target verify forward per cycle, ms.")
    draft_ms: float | None = Field(default=None, ge=0, description="One draft step, ms.")
    steps: int | None = Field(default=None, ge=1, le=64, description="Draft steps k per cycle.")
    draft_tokens: int | None = Field(default=None, ge=1, description="Tokens verified per cycle (N); k+1 for a chain.")
    overhead_ms: float | None = Field(default=None, ge=0, description="Per-cycle overhead (sampling, tree, syncs), ms.")
    verify_points: list[VerifyPoint] = Field(default_factory=list,
                                             description="Extra (N, verify ms) points: two or more make t_verify linear in N.")


class BreakevenInput(BreakevenRun):
    """Arguments of breakeven: a run, optional targets, and optionally the good run to compare with."""

    target_speedups: list[float] = Field(default_factory=lambda: [1.0, 1.2, 1.5],
                                         description="Speedups over baseline to compute the required α/τ for.")
    max_steps: int = Field(default=8, ge=1, le=32, description="Predict tok/s for k = 1..max_steps.")
    reference: BreakevenRun | None = Field(default=None, description="The good run, to say which term moved.")
    phases_source: str | None = Field(default=None, description="Where verify/draft/overhead ms were measured "
                                      "(phase_times' source), carried into the analysis.")


class _Resolved(BaseModel):
    decode_ms: float
    baseline_tps: float
    steps: int | None
    draft_ms: float | None
    verify_ms: float | None
    overhead_ms: float
    cycle_components: float | None
    cycle_throughput: float | None
    tau: float | None
    spec_tps: float | None

    @property
    def cycle(self) -> float:
        """The cycle the server really runs (τ / spec tok/s, host time included) when measured, else the phases."""
        c = self.cycle_throughput if self.cycle_throughput is not None else self.cycle_components
        assert c is not None
        return c

    @property
    def host_ms(self) -> float:
        """Measured cycle time the profiled phases do not cover (host time: scheduling, sampling, syncs, stalls)."""
        if self.cycle_components is None or self.cycle_throughput is None:
            return 0.0
        return max(self.cycle_throughput - self.cycle_components, 0.0)

    def terms(self) -> dict[str, float]:
        if self.cycle_components is None:
            return {"cycle": self.cycle}
        out = {"draft": (self.steps or 0) * (self.draft_ms or 0.0), "verify": self.verify_ms or 0.0,
               "overhead": self.overhead_ms}
        return {**out, "host": self.host_ms} if self.host_ms > 0 else out


def _close(a: float, b: float) -> bool:
    return abs(a - b) <= _CONSISTENCY * max(abs(a), abs(b))


def _decode_ms(run: BreakevenRun, who: str) -> float:
    """Plain-decode time per token, ms, from --decode-ms or --baseline-tps (both given: they must agree)."""
    if run.decode_ms is None and run.baseline_tps is None:
        raise UsageError(f"{who}need the plain-decode speed: --baseline-tps or --decode-ms")
    if run.decode_ms is not None and run.baseline_tps is not None and not _close(run.decode_ms, 1000.0 / run.baseline_tps):
        raise UsageError(f"{who}--decode-ms {run.decode_ms:g} and --baseline-tps {run.baseline_tps:g} disagree "
                         f"(1000/{run.baseline_tps:g} = {1000.0 / run.baseline_tps:.2f} ms)")
    return run.decode_ms if run.decode_ms is not None else 1000.0 / run.baseline_tps  # type: ignore[operator]


def _draft_steps(run: BreakevenRun, who: str, notes: list[str]) -> int | None:
    """Draft steps k: given, else draft tokens − 1 (chain drafting); refuses per-step inputs that lack it."""
    steps = run.steps
    if steps is None and run.draft_tokens is not None and run.draft_tokens >= 2:
        steps = run.draft_tokens - 1
        notes.append(f"{who}steps k = draft tokens − 1 = {steps} (chain drafting, topk 1)")
    if run.draft_ms is not None and steps is None:
        raise UsageError(f"{who}--draft-ms is per draft step: give --steps (or --draft-tokens)")
    if run.overhead_ms is not None and run.verify_ms is None:
        raise UsageError(f"{who}--overhead-ms is a cycle component: give --verify-ms too")
    return steps


def _cycles(run: BreakevenRun, steps: int | None, overhead: float, who: str,
            notes: list[str]) -> tuple[float | None, float | None]:
    """The cycle time from its components and from τ/spec_tps (either may be missing, not both)."""
    cyc_c = None
    if run.verify_ms is not None:
        if run.draft_ms is None:
            notes.append(f"{who}draft time not given: the cycle counts verify{' + overhead' if overhead else ''} only")
        cyc_c = (steps or 0) * (run.draft_ms or 0.0) + run.verify_ms + overhead
    cyc_t = None
    if run.spec_tps is not None and run.accept_len is not None:
        cyc_t = 1000.0 * run.accept_len / run.spec_tps
    if cyc_c is None and cyc_t is None:
        if run.spec_tps is not None:
            raise UsageError(f"{who}with --spec-tps the break-even also needs the measured accept length: --accept-len")
        raise UsageError(f"{who}not enough to compute the break-even: give --spec-tps with --accept-len, "
                         "or --verify-ms (with --draft-ms and --steps)")
    if cyc_c is not None and cyc_t is not None and not _close(cyc_c, cyc_t):
        notes.append(f"{who}cycle from the profiled phases {cyc_c:.2f} ms differs from the measured cycle τ/spec_tps "
                     f"{cyc_t:.2f} ms: τ* and the model for other k use the measured cycle "
                     + (f"({cyc_t - cyc_c:.2f} ms a cycle outside the profiled phases: host time)" if cyc_t > cyc_c
                        else "(the phases were profiled on other runs, or noise)"))
    return cyc_c, cyc_t


def _resolve(run: BreakevenRun, notes: list[str], label: str = "") -> _Resolved:
    """Turn any consistent subset of measurements into decode time, cycle time and τ; refuse contradictions."""
    who = f"{label}: " if label else ""
    decode = _decode_ms(run, who)
    steps = _draft_steps(run, who, notes)
    overhead = run.overhead_ms or 0.0
    cyc_c, cyc_t = _cycles(run, steps, overhead, who, notes)
    spec = run.spec_tps
    return _Resolved(decode_ms=decode, baseline_tps=1000.0 / decode, steps=steps, draft_ms=run.draft_ms,
                     verify_ms=run.verify_ms, overhead_ms=overhead, cycle_components=cyc_c, cycle_throughput=cyc_t,
                     tau=run.accept_len, spec_tps=spec)


def _verify_model(run: BreakevenRun, r: _Resolved, steps: int) -> tuple[str, float, float]:
    """t_verify(N) = a + b·N: constant (b = 0) with one point, least squares when two or more N are known."""
    pts = {p.draft_tokens: p.verify_ms for p in run.verify_points}
    if r.verify_ms is not None:
        pts.setdefault(run.draft_tokens or steps + 1, r.verify_ms)
    if len(pts) >= 2:
        n = np.array(sorted(pts), dtype=float)
        t = np.array([pts[int(x)] for x in n])
        b, a = np.polyfit(n, t, 1)
        return f"linear in draft tokens: t_verify(N) = {a:.3f} + {b:.3f}·N ms (fit to {len(pts)} points)", float(a), float(b)
    v = r.verify_ms if r.verify_ms is not None else 0.0
    return (f"constant: t_verify = {v:.3f} ms for every k (memory-bound verify; give two --verify-point "
            "values to make it linear in N)"), v, 0.0


def _predict(r: _Resolved, alpha: float, a: float, b: float, max_steps: int) -> list[KPrediction]:
    out = []
    for k in range(1, max_steps + 1):
        n = k + 1
        cyc = k * (r.draft_ms or 0.0) + max(a + b * n, 1e-9) + r.overhead_ms + r.host_ms
        tau = accept_length(alpha, k)
        tps = 1000.0 * tau / cyc
        out.append(KPrediction(steps=k, draft_tokens=n, accept_len=round(tau, 4), cycle_ms=round(cyc, 4),
                               tps=round(tps, 3), speedup=round(tps / r.baseline_tps, 4)))
    return out


def _targets(inp: BreakevenInput, r: _Resolved, steps: int, model: tuple[float, float] | None) -> list[TargetRequirement]:
    out = []
    tau_star = r.cycle / r.decode_ms
    for s in inp.target_speedups:
        if s <= 0:
            raise UsageError(f"target speedup must be positive, got {s:g}")
        need = s * tau_star
        alpha = alpha_from_accept_length(max(need, 1.0), steps) if need <= steps + 1 else None
        req = TargetRequirement(speedup=s, steps=steps, tau_needed=round(need, 4),
                                alpha_needed=None if alpha is None else round(alpha, 4))
        if model is not None:
            a, b = model
            best: tuple[float, int] | None = None
            for k in range(1, inp.max_steps + 1):
                cyc = k * (r.draft_ms or 0.0) + max(a + b * (k + 1), 1e-9) + r.overhead_ms + r.host_ms
                t_need = s * cyc / r.decode_ms
                if t_need <= k + 1:
                    al = alpha_from_accept_length(max(t_need, 1.0), k)
                    if best is None or al < best[0]:
                        best = (al, k)
            if best is not None:
                req.best_steps, req.alpha_at_best = best[1], round(best[0], 4)
        out.append(req)
    return out


def _changes(good: _Resolved, bad: _Resolved) -> list[TermChange]:
    """Exact decomposition: τ*_bad − τ*_good = Σ Δterm/D_bad + C_good·(1/D_bad − 1/D_good)."""
    gt, bt = good.terms(), bad.terms()
    if set(gt) != set(bt):
        gt, bt = {"cycle": good.cycle}, {"cycle": bad.cycle}
    out = [TermChange(name=k, before_ms=round(gt[k], 4), after_ms=round(bt[k], 4), delta_ms=round(bt[k] - gt[k], 4),
                      delta_tau_star=round((bt[k] - gt[k]) / bad.decode_ms, 4)) for k in gt]
    out.append(TermChange(name="decode", before_ms=round(good.decode_ms, 4), after_ms=round(bad.decode_ms, 4),
                          delta_ms=round(bad.decode_ms - good.decode_ms, 4),
                          delta_tau_star=round(good.cycle * (1 / bad.decode_ms - 1 / good.decode_ms), 4)))
    return out


def analyze(inp: BreakevenInput) -> BreakevenAnalysis:
    """The whole break-even analysis; raises UsageError (one line) on missing or contradictory input."""
    notes: list[str] = []
    r = _resolve(inp, notes)
    tau_star = r.cycle / r.decode_ms
    steps = r.steps
    assumed = False
    if steps is None:
        steps = max(1, math.ceil(max(r.tau or 0.0, tau_star) - 1e-9) - 1)
        assumed = True
        notes.append(f"steps not given: assumed k = {steps}, the smallest k whose k+1 tokens can reach "
                     f"max(τ, τ*); pass --steps for exact α")
    if r.tau is not None and r.tau > steps + 1 + 1e-9:
        raise UsageError(f"accept length {r.tau:g} cannot exceed steps + 1 = {steps + 1}")
    res = BreakevenAnalysis(
        decode_ms=round(r.decode_ms, 4), baseline_tps=round(r.baseline_tps, 3), cycle_ms=round(r.cycle, 4),
        cycle_source="throughput" if r.cycle_throughput is not None else "components", tau_star=round(tau_star, 4),
        host_ms=round(r.host_ms, 4),
        tau_star_components=None if r.cycle_components is None else round(r.cycle_components / r.decode_ms, 4),
        tau_star_shortcut=None if r.cycle_throughput is None else round(r.cycle_throughput / r.decode_ms, 4),
        accept_len=r.tau, steps=steps, steps_assumed=assumed, draft_ms=r.draft_ms, verify_ms=r.verify_ms,
        overhead_ms=r.overhead_ms, phase_source=inp.phases_source if r.cycle_components is not None else None,
        notes=notes)
    if r.tau is not None:
        res.margin = round(r.tau - tau_star, 4)
        res.alpha = round(alpha_from_accept_length(r.tau, steps), 4)
        if r.spec_tps is not None:
            res.spec_tps = r.spec_tps
        else:
            res.spec_tps, res.spec_tps_predicted = round(1000.0 * r.tau / r.cycle, 3), True
        res.speedup = round(res.spec_tps / r.baseline_tps, 4)
    model = None
    if r.cycle_components is not None:
        desc, a, b = _verify_model(inp, r, steps)
        res.verify_model, model = desc, (a, b)
        if res.alpha is not None:
            res.predictions = _predict(r, alpha_from_accept_length(r.tau or 1.0, steps), a, b, inp.max_steps)
            res.best_steps = max(res.predictions, key=lambda p: p.tps).steps
        else:
            notes.append("no accept length: give --accept-len to predict tok/s for other k")
    else:
        res.verify_model = "unknown: only the total cycle time is known (give --verify-ms/--draft-ms to predict other k)"
    res.targets = _targets(inp, r, steps, model)
    terms = r.terms()
    total = sum(terms.values()) or 1.0
    res.terms = [CycleTerm(name=k, ms=round(v, 4), share=round(v / total, 4)) for k, v in terms.items()]  # type: ignore[arg-type]
    if r.cycle_components is not None:
        res.dominant_term = max(terms, key=lambda k: terms[k])
    if inp.reference is not None:
        good = _resolve(inp.reference, notes, "reference")
        res.changes = _changes(good, r)
        res.moved_term = max(res.changes, key=lambda c: abs(c.delta_tau_star)).name
        if good.tau is not None and r.tau is not None and not _close(good.tau, r.tau):
            notes.append(f"accept length moved too: {good.tau:g} → {r.tau:g}")
    if r.tau is not None and res.tau_star_components is not None and r.cycle_throughput is not None:
        res.model_disagrees = (r.tau >= res.tau_star_components) != (r.tau >= tau_star)
    res.verdict = _verdict(res)
    return res


def _verdict(a: BreakevenAnalysis) -> str:
    head = f"τ* = {a.tau_star:.2f}"
    if a.accept_len is None:
        return f"{head}: a drafter must accept more than {a.tau_star:.2f} tokens per cycle to beat {a.baseline_tps:.1f} tok/s"
    word = "loses" if (a.margin or 0) < 0 else "wins"
    if a.spec_tps_predicted:  # "wins" is a measurement's word: a modelled figure says what it is
        word = f"{word} in the model (speculative tok/s not measured)"
    alpha = f", α = {a.alpha:.2f}" if a.alpha is not None else ""
    moved = f"; moved: {a.moved_term}" if a.moved_term else ""
    out = (f"speculation {word}: τ = {a.accept_len:.2f} vs {head} (margin {a.margin:+.2f}, "
           f"speedup {a.speedup:.2f}×{alpha}){moved}")
    if a.model_disagrees and a.tau_star_components is not None:
        model = "win" if (a.accept_len or 0) >= a.tau_star_components else "lose"
        out += (f"; the profiled phases alone (τ* {a.tau_star_components:.2f}) say it would {model}: model and "
                f"measurement disagree, {a.host_ms:.2f} ms a cycle is outside the profiled phases")
    return out


@tool(effect="read")
def breakeven(ctx: ToolContext, args: BreakevenInput) -> BreakevenAnalysis:
    """Break-even accept length τ* for speculative decoding, the margin, α, best k and the α a drafter needs.

    Pure arithmetic on the measurements given (no host commands): τ* = (k·t_draft + t_verify + overhead)/t_decode,
    or the shortcut τ* = τ_obs · baseline_tps / spec_tps when only two throughputs and τ are known.
    """
    try:
        return analyze(args)
    except UsageError as exc:
        raise ToolRetry(str(exc)) from None
