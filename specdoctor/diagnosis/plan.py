"""The game plan: ranked next actions, each with its expected gain and the basis of that number, cost and risk.

Fixes of confirmed causes come first (by measured gain); then the actions cheap to try (a relaunch, an edit), by
expected gain — measured or modelled by the what-if levers (`levers.py`), each with its range; then the expensive
ones (training a drafter); then those without a gain estimate. The last action (record a fingerprint) always closes
the list.
"""

from __future__ import annotations

from specdoctor.diagnosis.attribution import attribution
from specdoctor.diagnosis.facts import Case
from specdoctor.diagnosis.levers import Lever, levers
from specdoctor.diagnosis.outcome import ModelledGain, PlanAction, Verdict
from specdoctor.diagnosis.verdict import enabled_gates
from specdoctor.models import (
    CAUSE_KINDS,
    BreakevenAnalysis,
    MeasuredFact,
    MeasureFacts,
    NcclFact,
    TargetRequirement,
    TopologyFact,
)

__all__ = ["game_plan"]


def _median(m: MeasuredFact | None) -> float | None:
    return m.median if m is not None else None


def _cause_actions(case: Case) -> list[PlanAction]:
    """One action per confirmed cause: its fix, with the gain its trial measured (or none, said so). The members of
    a set confirmed together (`together`: one trial reverted them all) are one action, their fixes joined: the set's
    effect is one gain, not one per member."""
    att = attribution(case)
    out: list[PlanAction] = []
    seen: set[str] = set()
    sets: dict[tuple[str, frozenset[str]], PlanAction] = {}  # (metric, members) -> the set's one action
    for c in att.confirmed():
        if c.fix and c.fix in seen:
            continue  # members of one interacting set share a fix
        seen.add(c.fix or c.name)
        same = sets.get(c.set_key) if c.set_key else None
        if same is not None:
            same.title = f"{same.title} + {c.name}"
            same.command = " && ".join(x for x in (same.command, c.fix) if x) or None
            continue
        gain = -c.effect_tps if c.effect_tps is not None else None
        ci = (f" [{-c.ci_high:+.1f}, {-c.ci_low:+.1f}]" if c.ci_low is not None and c.ci_high is not None else "")
        verb = "Revert" if c.kind == "code" else "Fix"
        out.append(PlanAction(
            title=f"{verb} {c.name}",
            expected_gain=f"{gain:+.1f} tok/s{ci} (measured by {c.method})" if gain is not None
            else "back toward the reference figure (not measured on its own)",
            gain_tps=gain, basis="measured" if gain is not None else "none", cost=CAUSE_KINDS[c.kind].fix_cost,
            risk="low", command=c.fix, detail=c.detail, confirmed=True))
        if c.set_key:
            sets[c.set_key] = out[-1]
    return out


def _gate_actions(case: Case, verdict: Verdict) -> list[PlanAction]:
    """With a code regression, every gate the workers run enabled against its default is part of the culprit's cost."""
    if verdict.verdict != "code-regression":
        return []
    return [PlanAction(title=f"Unset {g.name} in the server's environment (default {g.default})",
                       expected_gain="part of the culprit's cost",
                       basis="none", cost="low", risk="low", command=f"unset {g.name}",
                       detail="the gate is enabled in the running workers (/proc/PID/environ)")
            for g in enabled_gates(case)]


def _nccl_action(case: Case, spec: float | None, so_far: list[PlanAction]) -> list[PlanAction]:
    """The NCCL sweep's winner, unless a confirmed cause's fix is this very setting (with its measured share)."""
    nccl = case.facts.nccl or NcclFact()
    covered = any(a.command and all(f"{k}={val}" in a.command for k, val in (nccl.env or {}).items())
                  and all(f"-u {n}" in a.command for n in nccl.unset) for a in so_far if a.confirmed)
    if not nccl.best or not (nccl.env or nccl.unset) or covered:
        return []
    pct = nccl.best_gain_pct
    gain = spec * pct / 100.0 if pct is not None and spec else None
    what = " and ".join(x for x in (
        ("remove " + ", ".join(nccl.unset) + " from the workers' environment") if nccl.unset else "",
        ("set " + " ".join(f"{k}={val}" for k, val in (nccl.env or {}).items()) + " where the workers inherit it")
        if nccl.env else "") if x)
    return [PlanAction(
        title=what[:1].upper() + what[1:],
        expected_gain=f"+{pct:.1f} % tok/s end to end" if pct is not None else "measured end to end",
        gain_tps=gain, basis="measured", cost="low", lever="nccl",
        risk="medium (NCCL debugging knobs; revisit on NCCL upgrade)",
        detail="compared end to end with what the workers run now (A/B, propagation proven in every worker)")]


def _breakeven_actions(case: Case, base: float | None, spec: float | None) -> list[PlanAction]:
    """Drafter work when the measured acceptance sits below (or near) the break-even τ*."""
    be = case.tools.breakeven
    if spec is None or base is None or be is None or not (be.accept_len is None or be.accept_len < be.tau_star * 1.2):
        return []
    return _drafter_actions(be, base, spec)


def _pcie_gate_action(case: Case) -> list[PlanAction]:
    scan = case.tools.gates
    engine_gates = {g.name for g in scan.engine_gates} if scan else set()
    topo = case.facts.topology or TopologyFact()
    if "SGLANG_ENABLE_PCIE_IPC_ALLREDUCE" not in engine_gates or topo.interconnect != "pcie":
        return []
    return [PlanAction(
        title="Try SGLang's PCIe all-reduce gate SGLANG_ENABLE_PCIE_IPC_ALLREDUCE=1 (off by default)",
        expected_gain="TPOT −36 % in SGLang's own TP8 PCIe measurement (21.14 → 13.62 ms)",
        basis="modelled", cost="low (one relaunch)", risk="medium (prefill-sized workspace hurt TTFT by 66 %)",
        detail="NCCL carries every TP all-reduce on PCIe TP>2; the gate exists in this SGLang's environ.py")]


def _cuda_graph_action(case: Case, measure: MeasureFacts, found: list[Lever]) -> list[PlanAction]:
    """Verify runs eager but the run lacks what the what-if model needs (phase times): the check, without a gain."""
    spec_findings = measure.spec.finding_texts() if measure.spec else []
    if not (case.facts.cuda_graph_off or any("CUDA graph" in f for f in spec_findings)):
        return []
    if any(x.kind in ("verify-graph", "cuda-graph") for x in found):
        return []
    return [PlanAction(
        title="Check why verify does not replay a CUDA graph (decode log says `cuda graph: False`)",
        expected_gain="verify launch overhead", basis="none", cost="low", risk="low",
        detail="batch size above the captured max bs, --disable-cuda-graph, or a width mismatch")]


_FINGERPRINT_ACTION = PlanAction(
    title="Record an environment fingerprint with every benchmark figure from now on",
    expected_gain="claims that can be re-checked", basis="none", cost="none", risk="none",
    detail="`specdoctor investigate --playbook breakeven` or the fingerprint tool stores it")


def _cheap(cost: str) -> bool:
    """A relaunch or an edit (minutes of the box), not training a drafter (GPU days)."""
    c = cost.lower()
    return c.startswith(("none", "low", "minutes")) or "one relaunch" in c


def _ranked(actions: list[PlanAction]) -> list[PlanAction]:
    """Fixes of confirmed causes first (by measured gain; one whose share was not measured alone after those: a
    model's big number never outranks a fix a trial measured), then the actions cheap to try by expected gain —
    measured or modelled, so the biggest cheap lever leads —, then the expensive ones, then those with no gain
    estimate; a model is labelled as modelled."""
    for a in actions:
        if a.basis == "modelled" and not a.expected_gain.startswith("modelled"):
            a.expected_gain = f"modelled: {a.expected_gain}"
        a.cost = a.cost or "unknown"

    def key(a: PlanAction) -> tuple[bool, bool, bool, float]:
        has_gain = a.gain_tps is not None and a.basis != "none"
        return (not a.confirmed, not has_gain, not _cheap(a.cost), -(a.gain_tps or 0.0))

    return sorted(actions, key=key)


def _modelled(x: Lever) -> ModelledGain:
    return ModelledGain(point=round(x.gain_tps, 2), low=round(x.gain_low, 2), high=round(x.gain_high, 2),
                        assumptions=list(x.assumptions))


def _lever_actions(case: Case, found: list[Lever], so_far: list[PlanAction]) -> list[PlanAction]:
    """Each lever: beside the action that already carries it (a confirmed cause's fix, the NCCL A/B) its model is
    added there, modelled next to measured; otherwise it is an action of its own, modelled, with its range."""
    out = []
    for x in found:
        home = next((a for a in so_far if x.measured_by and (x.measured_by in a.title or (
            x.kind == "nccl" and a.lever == "nccl"))), None)
        if home is not None:
            home.modelled, home.measured_gain_tps, home.lever = _modelled(x), x.measured_tps, x.kind
            home.detail = (home.detail + "; " if home.detail else "") + (
                f"what-if model: {x.range_text()} ({'; '.join(x.assumptions)})")
            continue
        out.append(PlanAction(
            title=x.title, expected_gain=f"{x.range_text()} on {x.today_tps:.1f} tok/s today",
            gain_tps=x.gain_tps, basis="modelled", cost=x.cost, risk=x.risk, command=x.command,
            detail="; ".join(x.assumptions + _breakeven_after(case, x)), lever=x.kind, modelled=_modelled(x),
            measured_gain_tps=x.measured_tps))
    return out


def _breakeven_after(case: Case, x: Lever) -> list[str]:
    """What a lever that shortens the cycle does to the break-even τ* (the acceptance the drafter needs)."""
    be = case.tools.breakeven
    if be is None or be.accept_len is None or x.kind not in ("verify-graph", "cuda-graph") or x.today_tps <= 0:
        return []
    cycle = be.cycle_ms * x.today_tps / (x.today_tps + x.gain_tps)
    tau = cycle / be.decode_ms
    word = "clears" if be.accept_len > tau else "still misses"
    return [f"break-even τ* {be.tau_star:.2f} → about {tau:.2f}: the measured τ {be.accept_len:.2f} {word} it"]


def game_plan(case: Case, verdict: Verdict) -> list[PlanAction]:
    """Ranked next actions, each with expected gain and its basis, cost and risk."""
    measure = case.facts.measure or MeasureFacts()
    base, spec = _median(measure.baseline), _median(measure.spec)
    found = levers(case)
    actions = _cause_actions(case) + _gate_actions(case, verdict)
    actions += _nccl_action(case, spec, actions)
    actions += _lever_actions(case, found, actions)
    actions += _breakeven_actions(case, base, spec) + _pcie_gate_action(case) + _cuda_graph_action(case, measure, found)
    return _ranked(actions) + [_FINGERPRINT_ACTION.model_copy()]


def _drafter_actions(be: BreakevenAnalysis, base: float, spec: float) -> list[PlanAction]:
    """Train the drafter to clear break-even (and a real speedup); serve without speculation meanwhile."""
    targets = be.targets
    even = next((t for t in targets if t.alpha_needed is not None and abs(t.speedup - 1.0) < 1e-6), None)
    # The goal worth training for is a real speedup (1.2× when asked), even if it needs more draft steps.
    best: TargetRequirement | None = next((t for t in targets if abs(t.speedup - 1.2) < 1e-6), None) or max(
        targets, key=lambda t: t.speedup, default=None)
    title = "Improve the drafter's acceptance (fine-tune the draft head on the served model's outputs)"
    if even is not None:
        title += f": τ ≥ {even.tau_needed:.2f} (α ≥ {even.alpha_needed:.2f}) just to break even"
    if best is not None and best is not even:
        title += (f"; τ ≥ {best.tau_needed:.2f} "
                  + (f"(α ≥ {best.alpha_needed:.2f}) " if best.alpha_needed is not None else "(needs more draft steps) ")
                  + f"for {best.speedup:g}×")
    speedup = best.speedup if best is not None else 1.0
    target_tps = base * speedup
    unreachable = [t for t in targets if t.alpha_needed is None and t is not best]
    tau = be.accept_len
    out = [PlanAction(
        title=title,
        expected_gain=f"+{target_tps - spec:.1f} tok/s vs today's speculative ({speedup:g}× baseline)",
        gain_tps=target_tps - spec, basis="modelled", cost="high (training data + GPU days)", risk="low",
        detail=f"break-even τ* = {be.tau_star:.2f} vs measured τ = {tau if tau is not None else float('nan'):.2f}; "
               "below τ* speculation is slower than plain decoding"
               + ("; " + ", ".join(f"{t.speedup:g}× needs τ {t.tau_needed:.2f}, out of reach at this k "
                                   "(more draft steps)" for t in unreachable) if unreachable else ""))]
    if spec < base:
        out.append(PlanAction(
            title="Serve without speculation until the drafter clears break-even",
            expected_gain=f"+{base - spec:.1f} tok/s now", gain_tps=base - spec, basis="measured",
            cost="none", risk="none", detail="baseline measured faster than speculative in this run"))
    return out
