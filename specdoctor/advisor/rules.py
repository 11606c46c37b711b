"""The rules advisor: deterministic verdict and game plan from the run's evidence (offline, no LLM).

It reads tool results through their output models (`view.latest(Model)`) and action facts through the
fact models of `specdoctor.models`; it never guesses dict keys.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from specdoctor.advisor.causes import non_revertible_causes
from specdoctor.models import (
    AttributionFact,
    BreakevenAnalysis,
    CauseFact,
    ClaimFact,
    Claims,
    FingerprintDiff,
    MeasuredFact,
    MeasureFacts,
    NcclFact,
    StateReader,
    SubtractionFact,
    TargetRequirement,
    TopologyFact,
)
from specdoctor.tools.gates import Gate, GateScan

__all__ = ["Verdict", "PlanAction", "decide_verdict", "game_plan", "VerdictName", "cause_line"]

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
    command: str | None = Field(default=None, description="The exact command or edit that carries it out.")
    confirmed: bool = Field(default=False, description="Fixes a cause that trials or measurements confirmed.")


_COST = {"code": "low (revert one patch, one relaunch)", "env": "low (one edit, one relaunch)",
         "launch-flag": "low (one relaunch)", "software": "medium (pin or reinstall a package, one relaunch)",
         "hardware": "medium (an admin action on the box, then a relaunch)", "acceptance": "medium (one relaunch)",
         "workload": "none (compare like with like)"}


def _cause_actions(v: StateReader) -> list[PlanAction]:
    """One action per confirmed cause: its fix, with the gain its trial measured (or none, said so)."""
    att = _attribution(v)
    out: list[PlanAction] = []
    seen: set[str] = set()
    for c in att.confirmed():
        if c.fix and c.fix in seen:
            continue  # members of one interacting set share a fix
        seen.add(c.fix or c.name)
        gain = -c.effect_tps if c.effect_tps is not None else None
        ci = (f" [{-c.ci_high:+.1f}, {-c.ci_low:+.1f}]" if c.ci_low is not None and c.ci_high is not None else "")
        verb = "Revert" if c.kind == "code" else "Fix"
        out.append(PlanAction(
            title=f"{verb} {c.name}",
            expected_gain=f"{gain:+.1f} tok/s{ci} (measured by {c.method})" if gain is not None
            else "back toward the reference figure (not measured on its own)",
            gain_tps=gain, basis="measured" if gain is not None else "none", cost=_COST.get(c.kind, "low"),
            risk="low", command=c.fix, detail=c.detail, confirmed=True))
    return out


def _enabled_gates(v: StateReader) -> list[Gate]:
    scan = v.latest(GateScan)
    return [g for g in scan.gates if g.state == "ENABLED-at-runtime"] if scan else []


def _median(m: MeasuredFact | None) -> float | None:
    return m.median if m is not None else None


def _attribution(v: StateReader) -> AttributionFact:
    """The attribute step's fact plus the causes that need no trial (a playbook without that step, or a fact written
    before the bisection or the NCCL promotion): the bisection, targeted measurements and /proc always count."""
    fact = v.fact("attribution", AttributionFact) or AttributionFact()
    seen = {(c.kind, c.key) for c in fact.causes}
    extra = [c for c in non_revertible_causes(v) if (c.kind, c.key) not in seen]
    return fact.model_copy(update={"causes": [*fact.causes, *extra]}) if extra else fact


def _tps(x: float | None) -> str:
    return "?" if x is None else f"{x:+.1f}".replace("-", "−")


def cause_line(c: CauseFact, att: AttributionFact) -> str:
    """'NCCL_P2P_DISABLE=1 set by sitecustomize.py: −6.2 tok/s [−7.0, −5.4] of −6.3' (what is known of it; "of the
    gap" only when the effect was measured on the gap's own figure)."""
    if c.effect_tps is None:
        how = {"targeted-measurement": "measured directly", "bisection": "isolated by bisection",
               "revert-trial": "reverted in a trial", "workload-rerun": "re-measured with the good run's workload"}
        return f"{c.name} ({c.detail or how[c.method]})"
    ci = (f" [{_tps(c.ci_low)}, {_tps(c.ci_high)}]" if c.ci_low is not None and c.ci_high is not None else "")
    gap = _gap(att) if c.metric == att.metric else None
    of = f" of {_tps(gap)}" if gap is not None else ""
    which = "" if c.metric == "spec" else f" ({c.metric})"
    return f"{c.name}: {_tps(c.effect_tps)} tok/s{ci}{of}{which}"


def _gap(att: AttributionFact) -> float | None:
    if att.reference_tps is None or att.measured_tps is None:
        return None
    return att.measured_tps - att.reference_tps


def _claim_median(c: ClaimFact, measure: MeasureFacts, key: str) -> float | None:
    """Today's figure the claim was judged against (its basis), else the benchmark's median."""
    return c.median if c.median is not None else _median(getattr(measure, key, None))


def _basis(c: ClaimFact) -> str:
    return ", prefill excluded" if c.basis == "decode" else ""


def _not_reproduced_words(claims: dict[str, ClaimFact], measure: MeasureFacts, *, capital: bool = False) -> str:
    """'the claimed speculative 84 tok/s (measured 77.7) and baseline 41.7 tok/s (measured 38.8)'."""
    words = {"spec": "speculative", "baseline": "baseline"}
    parts = []
    for k, c in claims.items():
        med = _claim_median(c, measure, k)
        parts.append(f"{words.get(k, k)} {c.claimed:g} tok/s (measured today: "
                     f"{'?' if med is None else f'{med:.1f}'}{_basis(c)})" if c.claimed is not None else k)
    return ("The" if capital else "the") + " claimed " + " and ".join(parts)


def decide_verdict(v: StateReader) -> Verdict:
    """The verdict follows the measured attribution: code → code-regression, configuration/software/hardware →
    environment, nothing and the claims not reproduced → baseline-not-reproducible; unmeasured → inconclusive."""
    measure = v.fact("measure", MeasureFacts) or MeasureFacts()
    claims = (v.fact("claims", Claims) or Claims({})).root
    sub = v.fact("subtraction", SubtractionFact) or SubtractionFact()
    att = _attribution(v)
    confirmed = att.confirmed()
    code = [c for c in confirmed if c.kind == "code"]
    env = [c for c in confirmed if c.kind != "code"]
    culprits = list(dict.fromkeys(c.key for c in code))
    enabled = _enabled_gates(v)
    reasons: list[str] = []
    env_lines = [cause_line(c, att) for c in env]
    if culprits:  # the bisection measured its own references, so this stands without a reproduce step
        reasons.append(f"bisection isolated {', '.join(culprits)} (comparator DIFFERENT; confirmed both ways: "
                       "alone on the essentials it is slow, every other patch without it is fast)")
        reasons += [cause_line(c, att) for c in code if c.effect_tps is not None]
        reasons += [f"also an environment cause: {line}" for line in env_lines]
        for g in enabled:
            reasons.append(f"gate {g.name} is ENABLED at runtime in the server's workers "
                           f"although its default is {g.default}")
        also = f"; the environment adds to it: {'; '.join(c.name for c in env)}" if env else ""
        return Verdict(verdict="code-regression", confidence=0.9 if not env else 0.85, culprits=culprits,
                       reasons=reasons,
                       sentence=f"A local patch regressed speculative decoding: {', '.join(culprits)}{also}.")
    measured_any = any(m is not None and m.measured for m in (measure.baseline, measure.spec, sub.all_patches,
                                                              sub.essentials_only))
    if not measured_any:
        return Verdict(verdict="inconclusive", confidence=0.2, sentence="Nothing could be measured on the box, "
                       "so no regression can be confirmed or ruled out.", reasons=["no throughput measurement"])
    failed = [f"{k}: {m.error}" for k, m in measure.items() if m.error]
    missing = [k for k in (v.params.get("expect") or {}) if k not in claims]
    if failed or missing:
        return Verdict(verdict="inconclusive", confidence=0.3,
                       reasons=[f"measurement failed: {f}" for f in failed]
                       + [f"claimed {k} could not be compared (no measurement)" for k in missing],
                       sentence="Part of what was claimed could not be measured, so no verdict is possible yet.")
    different = {k: c for k, c in claims.items() if c.not_reached}  # faster than claimed reproduces the claim
    unknown = {k: c for k, c in claims.items() if c.outcome == "UNKNOWN"}
    if env:
        reasons += env_lines
        if att.restored is not None:
            reasons.append("reverting the confirmed causes " + ("reaches" if att.restored else "does not reach")
                           + f" the {att.reference_label} figure")
        if att.candidates:
            reasons.append(f"also tested, unresolved (not causes): {', '.join(att.candidates)}")
        diff = v.latest(FingerprintDiff)
        if diff is not None and diff.changes:
            reasons.append(f"fingerprint diff vs the good run, first change: {diff.changes[0]}")
        measured_causes = [c for c in env if c.effect_tps is not None]
        conf = 0.9 if measured_causes and (att.restored is not False) else 0.8 if measured_causes else 0.75
        return Verdict(verdict="environment", confidence=conf, reasons=reasons,
                       sentence="The environment changed, not the code: " + "; ".join(env_lines) + ".")
    # With every claim reproduced, a subtraction difference that no bisection confirmed does not unsettle them.
    if sub.made_faster and (different or unknown or not claims):
        reasons.append("removing the non-essential patches made it faster, but no culprit was isolated")
        return Verdict(verdict="inconclusive", confidence=0.4, reasons=reasons,
                       sentence="The local patches change the numbers, but the bisection did not pin the cause; "
                                "see the trials.")
    if different and att.candidates:
        reasons += [f"claimed {k} {c.claimed} is DIFFERENT from today's measurement" for k, c in different.items()]
        reasons.append(f"revert trials could not decide for: {', '.join(att.candidates)} (candidates, not causes)")
        return Verdict(verdict="inconclusive", confidence=0.4, reasons=reasons,
                       sentence=f"{_not_reproduced_words(different, measure)} were not reproduced; the differences "
                                f"{', '.join(att.candidates)} may explain it, but the trials could not decide.")
    if different and sub.outcome in ("UNKNOWN", "UNRESOLVED"):
        # The local patches were tested and not cleared: they stay candidates, never exonerated by default.
        why = sub.problem or ("the comparator could not decide" if sub.outcome == "UNKNOWN" else
                              "the trial could not be trusted")
        reasons += [f"claimed {k} {c.claimed} is DIFFERENT from today's measurement" for k, c in different.items()]
        reasons.append(f"subtraction {sub.outcome}: {why}; the local patches are candidates, not cleared")
        return Verdict(verdict="inconclusive", confidence=0.4, reasons=reasons,
                       sentence=f"{_not_reproduced_words(different, measure, capital=True)} were not reproduced; "
                                "removing the local patches neither clearly restored speed nor clearly changed "
                                f"nothing ({why}), so they stay candidates: rerun with more runs (--param runs=10).")
    if different:
        for k, c in different.items():
            med = _claim_median(c, measure, k)
            reasons.append(f"claimed {k} {c.claimed} is DIFFERENT from measured "
                           f"{med if med is not None else float('nan'):.1f} tok/s{_basis(c)}")
        if sub.outcome == "SAME":
            reasons.append("removing every non-essential patch changes nothing (comparator SAME)")
            conf = 0.9
        else:
            reasons.append(f"subtraction outcome: {sub.outcome or 'not run'}")
            conf = 0.7 if sub.outcome == "DIFFERENT" else 0.6 if sub.outcome in (None, "UNKNOWN") else 0.5
        if att.untested:
            reasons += [f"not tested: {u}" for u in att.untested]
            conf = min(conf, 0.7)
        return Verdict(verdict="baseline-not-reproducible", confidence=conf, reasons=reasons,
                       sentence=f"{_not_reproduced_words(different, measure, capital=True)} were not reproduced on this box today, "
                                "and no difference that a trial reverted (local patches, variables, launch flags) "
                                "explains the gap: no code regressed.")
    if claims and not unknown:
        if sub.made_faster:
            reasons.append("removing the non-essential patches measured faster, but no patch was confirmed by the "
                           "bisection (candidates at most): the claims hold either way")
        reasons += [(f"claimed {k} {c.claimed} is within noise of the measurement" if c.outcome == "SAME" else
                     f"claimed {k} {c.claimed} is exceeded today ({(c.pct_change or 0.0):+.1f} %)")
                    + (" with the prefill excluded (end to end it reads "
                       f"{c.end_to_end.median:.1f}, {c.end_to_end.pct_change:+.1f} %: the claim's definition)"
                       if c.basis == "decode" and c.end_to_end is not None and c.end_to_end.median is not None
                       and c.end_to_end.pct_change is not None else "") for k, c in claims.items()]
        return Verdict(verdict="no-regression", confidence=0.85, reasons=reasons,
                       sentence="The box performs as claimed: no regression.")
    if unknown:
        reasons += [f"comparator could not decide for {k} within its cap" for k in unknown]
    if att.candidates:
        reasons.append(f"candidates (unresolved, not causes): {', '.join(att.candidates)}")
    return Verdict(verdict="inconclusive", confidence=0.3, reasons=reasons or ["no claims to compare with"],
                   sentence="The evidence does not support a verdict; see the measurements and findings.")


def game_plan(v: StateReader, verdict: Verdict) -> list[PlanAction]:
    """Ranked next actions, each with expected gain and its basis, cost and risk."""
    actions: list[PlanAction] = []
    measure = v.fact("measure", MeasureFacts) or MeasureFacts()
    base, spec = _median(measure.baseline), _median(measure.spec)
    actions += _cause_actions(v)
    if verdict.verdict == "code-regression":
        for g in _enabled_gates(v):
            actions.append(PlanAction(title=f"Unset {g.name} in the server's environment (default {g.default})",
                                      expected_gain="part of the culprit's cost",
                                      basis="none", cost="low", risk="low", command=f"unset {g.name}",
                                      detail="the gate is enabled in the running workers (/proc/PID/environ)"))
    nccl = v.fact("nccl", NcclFact) or NcclFact()
    # A confirmed cause whose fix is this very setting already says it (with its measured share): once is enough.
    covered = any(a.command and all(f"{k}={val}" in a.command for k, val in (nccl.env or {}).items())
                  and all(f"-u {n}" in a.command for n in nccl.unset) for a in actions if a.confirmed)
    if nccl.best and (nccl.env or nccl.unset) and not covered:
        pct = nccl.best_gain_pct
        gain = spec * pct / 100.0 if pct is not None and spec else None
        what = " and ".join(x for x in (
            ("remove " + ", ".join(nccl.unset) + " from the workers' environment") if nccl.unset else "",
            ("set " + " ".join(f"{k}={val}" for k, val in (nccl.env or {}).items()) + " where the workers inherit it")
            if nccl.env else "") if x)
        actions.append(PlanAction(
            title=what[:1].upper() + what[1:],
            expected_gain=f"+{pct:.1f} % tok/s end to end" if pct is not None else "measured end to end",
            gain_tps=gain, basis="measured", cost="low",
            risk="medium (NCCL debugging knobs; revisit on NCCL upgrade)",
            detail="compared end to end with what the workers run now (A/B, propagation proven in every worker)"))
    be = v.latest(BreakevenAnalysis)
    if spec is not None and base is not None and be is not None and (be.accept_len is None
                                                                      or be.accept_len < be.tau_star * 1.2):
        actions += _drafter_actions(be, base, spec)
    scan = v.latest(GateScan)
    sglang_gates = {g.name for g in scan.sglang_gates} if scan else set()
    topo = v.fact("topology", TopologyFact) or TopologyFact()
    if "SGLANG_ENABLE_PCIE_IPC_ALLREDUCE" in sglang_gates and topo.interconnect == "pcie":
        actions.append(PlanAction(
            title="Try SGLang's PCIe all-reduce gate SGLANG_ENABLE_PCIE_IPC_ALLREDUCE=1 (off by default)",
            expected_gain="TPOT −36 % in SGLang's own TP8 PCIe measurement (21.14 → 13.62 ms)",
            basis="modelled", cost="low (one relaunch)", risk="medium (prefill-sized workspace hurt TTFT by 66 %)",
            detail="NCCL carries every TP all-reduce on PCIe TP>2; the gate exists in this SGLang's environ.py"))
    spec_findings = measure.spec.finding_texts() if measure.spec else []
    if v.get("facts.cuda_graph_off") or any("CUDA graph" in f for f in spec_findings):
        actions.append(PlanAction(
            title="Check why verify does not replay a CUDA graph (decode log says `cuda graph: False`)",
            expected_gain="verify launch overhead", basis="none", cost="low", risk="low",
            detail="batch size above the captured max bs, --disable-cuda-graph, or a width mismatch"))
    actions.append(PlanAction(
        title="Record an environment fingerprint with every benchmark figure from now on",
        expected_gain="claims that can be re-checked", basis="none", cost="none", risk="none",
        detail="`specdoctor investigate --playbook breakeven` or the fingerprint tool stores it"))
    # Confirmed, measured fixes first by measured gain; modelled actions after them (a model's big number never
    # outranks a fix a trial measured), labelled as modelled; actions with no gain estimate last.
    order = {"measured": 0, "modelled": 1, "none": 2}
    for a in actions:
        if a.basis == "modelled" and not a.expected_gain.startswith("modelled"):
            a.expected_gain = f"modelled: {a.expected_gain}"
        a.cost = a.cost or "unknown"
    # Fixes of confirmed causes first (by measured gain; one whose share was not measured alone after those), then
    # other measured actions, then models: serving without speculation never hides the fix of what broke it.
    ranked = sorted(actions[:-1], key=lambda a: (not a.confirmed, order[a.basis], -(a.gain_tps or 0.0)))
    return ranked + actions[-1:]


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
