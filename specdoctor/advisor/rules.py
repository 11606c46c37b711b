"""The rules advisor: deterministic verdict and game plan from the run's evidence (offline, no LLM)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from specdoctor.engine.state import StateView, pick

__all__ = ["Verdict", "PlanAction", "decide_verdict", "game_plan", "VerdictName"]

VerdictName = Literal["no-regression", "code-regression", "environment", "baseline-not-reproducible", "inconclusive"]


class Verdict(BaseModel):
    """The conclusion with its confidence and the chain of evidence that led there."""

    verdict: VerdictName
    confidence: float = Field(ge=0, le=1)
    sentence: str
    culprits: list[str] = Field(default_factory=list)
    reasons: list[str] = Field(default_factory=list)
    llm_made: bool = False


class PlanAction(BaseModel):
    """One ranked next action of the game plan."""

    title: str
    expected_gain: str
    gain_tps: float | None = Field(default=None, description="Expected gain in tok/s when it can be put as a number.")
    basis: Literal["measured", "modelled", "none"] = "modelled"
    cost: str = ""
    risk: str = ""
    detail: str = ""



def _enabled_gates(v: StateView) -> list[dict[str, Any]]:
    gates = pick(v.output("gates") or {}, "gates", default=[]) or []
    return [g for g in gates if "ENABLED" in str(g.get("state", "")).upper()]


def _dropped_vars(v: StateView) -> list[str]:
    rows = pick(v.output("propagation") or {}, "rows", "variables", default=[]) or []
    return [r.get("name") for r in rows if "dropped" in str(r.get("status", ""))]


def _culprits(v: StateView) -> tuple[list[str], bool]:
    """Culprits the bisection isolated (and whether a trial confirmed them); an unresolved search names none."""
    out = v.output("bisect") or {}
    if out.get("verdict") not in ("culprit", "interaction"):
        return [], False
    return list(pick(out, "culprits", default=[]) or []), bool(out.get("confirmed"))


def decide_verdict(v: StateView) -> Verdict:
    """Rules in order of strength of evidence; anything unmeasured ends as `inconclusive`."""
    measure = v.get("facts.measure") or {}
    claims = v.get("facts.claims") or {}
    sub = v.get("facts.subtraction") or {}
    culprits, confirmed = _culprits(v)
    enabled = _enabled_gates(v)
    dropped = _dropped_vars(v)
    reasons: list[str] = []
    base, spec = measure.get("baseline") or {}, measure.get("spec") or {}
    if culprits:  # the bisection measured its own references, so this stands without a reproduce step
        reasons.append(f"bisection isolated {', '.join(culprits)} (comparator DIFFERENT"
                       + (", confirmed by its own trial)" if confirmed else ", not confirmed by a separate trial)"))
        for g in enabled:
            reasons.append(f"gate {g.get('name')} is ENABLED at runtime in the server's workers "
                           f"although its default is {g.get('default')}")
        return Verdict(verdict="code-regression", confidence=0.9 if confirmed else 0.7, culprits=culprits,
                       reasons=reasons,
                       sentence=f"A local patch regressed speculative decoding: {', '.join(culprits)}.")
    measured_any = any(x.get("median") is not None for x in (base, spec, sub.get("all_patches") or {},
                                                              sub.get("essentials_only") or {}))
    if not measured_any:
        return Verdict(verdict="inconclusive", confidence=0.2, sentence="Nothing could be measured on the box, "
                       "so no regression can be confirmed or ruled out.", reasons=["no throughput measurement"])
    failed = [f"{k}: {m.get('error')}" for k, m in measure.items() if isinstance(m, dict) and m.get("error")]
    missing = [k for k in (v.params.get("expect") or {}) if k not in claims]
    if failed or missing:
        return Verdict(verdict="inconclusive", confidence=0.3,
                       reasons=[f"measurement failed: {f}" for f in failed]
                       + [f"claimed {k} could not be compared (no measurement)" for k in missing],
                       sentence="Part of what was claimed could not be measured, so no verdict is possible yet.")
    if dropped:
        reasons.append(f"{', '.join(dropped)} set in the launch shell/parent but absent in every worker")
        diff = v.output("fingerprint_diff") or {}
        changes = pick(diff, "changes", default=[]) or []
        if changes:
            reasons.append(f"fingerprint diff vs the good run, first change: {changes[0]}")
        return Verdict(verdict="environment", confidence=0.85, reasons=reasons,
                       sentence=f"The environment changed, not the code: {', '.join(dropped)} no longer reach "
                                "the TP workers.")
    different = {k: c for k, c in claims.items() if c.get("outcome") == "DIFFERENT"}
    unknown = {k: c for k, c in claims.items() if c.get("outcome") == "UNKNOWN"}
    sub_outcome = sub.get("outcome")
    if sub_outcome == "DIFFERENT" and (sub.get("comparison") or {}).get("verdict") == "better":
        reasons.append("removing the non-essential patches made it faster, but no culprit was isolated")
        return Verdict(verdict="inconclusive", confidence=0.4, reasons=reasons,
                       sentence="The local patches change the numbers, but the bisection did not pin the cause; "
                                "see the trials.")
    if different:
        for k, c in different.items():
            reasons.append(f"claimed {k} {c.get('claimed')} is DIFFERENT from measured "
                           f"{pick(measure.get(k), 'median', default=float('nan')):.1f} tok/s")
        if sub_outcome == "SAME":
            reasons.append("removing every non-essential patch changes nothing (comparator SAME)")
            conf = 0.9
        else:
            reasons.append(f"subtraction outcome: {sub_outcome or 'not run'}")
            conf = 0.7 if sub_outcome == "DIFFERENT" else 0.6 if sub_outcome in (None, "UNKNOWN") else 0.5
        return Verdict(verdict="baseline-not-reproducible", confidence=conf, reasons=reasons,
                       sentence="No code regressed: the earlier figures are not reproducible on this box, "
                                "and the local patches do not change the numbers.")
    if claims and not unknown:
        reasons += [f"claimed {k} {c.get('claimed')} is within noise of the measurement" for k, c in claims.items()]
        return Verdict(verdict="no-regression", confidence=0.85, reasons=reasons,
                       sentence="The box performs as claimed: no regression.")
    if unknown:
        reasons += [f"comparator could not decide for {k} within its cap" for k in unknown]
    return Verdict(verdict="inconclusive", confidence=0.3, reasons=reasons or ["no claims to compare with"],
                   sentence="The evidence does not support a verdict; see the measurements and findings.")


def game_plan(v: StateView, verdict: Verdict) -> list[PlanAction]:
    """Ranked next actions, each with expected gain and its basis, cost and risk."""
    actions: list[PlanAction] = []
    measure = v.get("facts.measure") or {}
    base = pick(measure.get("baseline"), "median")
    spec = pick(measure.get("spec"), "median")
    be = v.output("breakeven") or {}
    tau = pick(be, "accept_len", "accept_length", "tau")
    tau_star = pick(be, "tau_star", "breakeven_accept_length")
    targets = pick(be, "targets", "alpha_needed", default=[]) or []
    if verdict.verdict == "code-regression":
        sub = v.get("facts.subtraction") or {}
        full = pick(sub.get("all_patches"), "median")
        ess = pick(sub.get("essentials_only"), "median")
        gain = (ess - full) if (full is not None and ess is not None) else None
        actions.append(PlanAction(
            title=f"Revert or fix {', '.join(verdict.culprits)}",
            expected_gain=f"+{gain:.1f} tok/s" if gain is not None else "restores the pre-patch throughput",
            gain_tps=gain, basis="measured" if gain is not None else "none", cost="low (one patch)", risk="low",
            detail="measured as essentials-only vs all patches in this run"))
        for g in _enabled_gates(v):
            actions.append(PlanAction(title=f"Unset {g.get('name')} in the server's environment (default "
                                            f"{g.get('default')})", expected_gain="part of the culprit's cost",
                                      basis="none", cost="low", risk="low",
                                      detail="the gate is enabled in the running workers (/proc/PID/environ)"))
    dropped = _dropped_vars(v)
    if dropped:
        actions.append(PlanAction(
            title=f"Make the launcher pass {', '.join(dropped)} to the TP workers",
            expected_gain="back to the good run's figures", basis="none", cost="low", risk="low",
            detail="set them in the launch environment the workers inherit (not sitecustomize.py); verify in "
                   "/proc/<worker>/environ"))
    nccl = v.get("facts.nccl") or {}
    if nccl.get("best") and nccl.get("env"):
        pct = nccl.get("best_gain_pct")
        spec_now = pick(measure.get("spec"), "median")
        gain = spec_now * pct / 100.0 if isinstance(pct, (int, float)) and spec_now else None
        actions.append(PlanAction(
            title="Set " + " ".join(f"{k}={val}" for k, val in nccl["env"].items()) + " where the workers inherit it",
            expected_gain=f"+{pct:.1f} % tok/s end to end" if isinstance(pct, (int, float)) else "measured end to end",
            gain_tps=gain, basis="measured", cost="low",
            risk="medium (NCCL debugging knobs; revisit on NCCL upgrade)",
            detail="promoted from the NCCL sweep and confirmed by an end-to-end A/B"))
    if spec is not None and base is not None and tau_star is not None and (tau is None or tau < tau_star * 1.2):
        reachable = [t for t in targets if isinstance(t, dict) and pick(t, "alpha_needed", "alpha") is not None]
        even = next((t for t in reachable if abs(pick(t, "speedup", default=0) - 1.0) < 1e-6), None)
        # The goal worth training for is a real speedup (1.2× when asked), even if it needs more draft steps.
        goal = next((t for t in targets if isinstance(t, dict) and abs(pick(t, "speedup", default=0) - 1.2) < 1e-6),
                    None) or max((t for t in targets if isinstance(t, dict)),
                                 key=lambda t: pick(t, "speedup", default=0), default=None)
        best = goal
        title = "Improve the drafter's acceptance (fine-tune the draft head on the served model's outputs)"
        if even:
            title += (f": τ ≥ {pick(even, 'tau_needed', 'tau'):.2f} (α ≥ {pick(even, 'alpha_needed', 'alpha'):.2f}) "
                      "just to break even")
        if best and best is not even:
            a_best = pick(best, "alpha_needed", "alpha")
            title += (f"; τ ≥ {pick(best, 'tau_needed', 'tau'):.2f} "
                      + (f"(α ≥ {a_best:.2f}) " if a_best is not None else "(needs more draft steps) ")
                      + f"for {pick(best, 'speedup'):g}×")
        speedup = pick(best, "speedup", default=1.0) if best else 1.0
        target_tps = base * speedup
        unreachable = [t for t in targets if isinstance(t, dict) and pick(t, "alpha_needed", "alpha") is None
                       and t is not best]
        actions.append(PlanAction(
            title=title,
            expected_gain=f"+{target_tps - spec:.1f} tok/s vs today's speculative ({speedup:g}× baseline)",
            gain_tps=target_tps - spec, basis="modelled", cost="high (training data + GPU days)", risk="low",
            detail=f"break-even τ* = {tau_star:.2f} vs measured τ = {tau if tau is not None else float('nan'):.2f}; "
                   "below τ* speculation is slower than plain decoding"
                   + ("; " + ", ".join(f"{pick(t, 'speedup'):g}× needs τ {pick(t, 'tau_needed', 'tau'):.2f}, "
                                        "out of reach at this k (more draft steps)" for t in unreachable)
                      if unreachable else "")))
        if spec < base:
            actions.append(PlanAction(
                title="Serve without speculation until the drafter clears break-even",
                expected_gain=f"+{base - spec:.1f} tok/s now", gain_tps=base - spec, basis="measured",
                cost="none", risk="none", detail="baseline measured faster than speculative in this run"))
    catalog = v.output("gates") or {}
    sglang_gates = {g.get("name") for g in pick(catalog, "sglang_gates", "catalog", default=[]) or []
                    if isinstance(g, dict)}
    topo = v.get("facts.topology") or {}
    if "SGLANG_ENABLE_PCIE_IPC_ALLREDUCE" in sglang_gates and topo.get("interconnect") == "pcie":
        actions.append(PlanAction(
            title="Try SGLang's PCIe all-reduce gate SGLANG_ENABLE_PCIE_IPC_ALLREDUCE=1 (off by default)",
            expected_gain="TPOT −36 % in SGLang's own TP8 PCIe measurement (21.14 → 13.62 ms)",
            basis="modelled", cost="low (one relaunch)", risk="medium (prefill-sized workspace hurt TTFT by 66 %)",
            detail="NCCL carries every TP all-reduce on PCIe TP>2; the gate exists in this SGLang's environ.py"))
    if v.get("facts.cuda_graph_off") or any("CUDA graph" in str(f) for f in
                                             pick(measure.get("spec"), "findings", default=[]) or []):
        actions.append(PlanAction(
            title="Check why verify does not replay a CUDA graph (decode log says `cuda graph: False`)",
            expected_gain="verify launch overhead", basis="none", cost="low", risk="low",
            detail="batch size above the captured max bs, --disable-cuda-graph, or a width mismatch"))
    actions.append(PlanAction(
        title="Record an environment fingerprint with every benchmark figure from now on",
        expected_gain="claims that can be re-checked", basis="none", cost="none", risk="none",
        detail="`specdoctor investigate --playbook breakeven` or the fingerprint tool stores it"))
    order = {"measured": 0, "modelled": 1, "none": 2}
    ranked = sorted(actions[:-1], key=lambda a: (-(a.gain_tps or 0.0), order[a.basis]))
    return ranked + actions[-1:]
