"""The plan's expectation, re-estimated from what the run knows at each point (#46: an honest plan before consent).

The first plan (the `plan` step) knows the local changes, the identity digests and the claims on the running server.
By the time the user is asked to stop the server the reads have found more: every difference from the good run
(`list_deltas` needs no launch), the NCCL sweep's winners, the upstream commits. After the stop, reproduce says
whether the gap is real. Each of these re-estimates the launches *expected*, by the playbook's own costs:

- one cause is expected, the most specific difference the reads show, in this order: the claims' workload is not
  today's (the figures are re-read, nothing searched), a hardware state a targeted read measures (link, clocks,
  power, another process: no launch explains it), HEAD moved since the good run (the commits since), a flag or
  variable that differs from the good run (revert trials), else the local patches. Only that cause's search is
  expected in full; the others keep their entry launches (the essentials search's no-patch tree, the subtraction's
  launch, the commit bisection's two ends, the all-reverted trial);
- a patch search over P patches costs 2⌈log2 P⌉ (one culprit: the slow/fast search, or the effect search's
  2⌈log2 P⌉ + 2 when it must run), a commit bisection over C commits 2 + ⌈log2 C⌉, a revert search over D
  differences 2 + ⌈log2 D⌉ (everything reverted, the confirmation's other arm — none for a lone difference —, the
  halving); the confirmed cause's phase profile is taken on its confirming trials' own servers
  (tools.arm_profiles), so it is expected to cost no launch (its 2 stay in the cap, for an arm no trial could
  profile);
- the NCCL promotion launches the current setting and each candidate once; NCCL variables are its to settle, so the
  revert search expects only the other differences;
- nothing to explain (every claim judged held) expects no explaining launch at all.

Pure: the action gathers the facts (engine/actions/replan.py). A cap (`launches`) only grows, where the first plan
could not know it (the revert search over the listed differences, the promotion's candidates).
"""

from __future__ import annotations

import math
from typing import Literal

from pydantic import BaseModel, Field

from specdoctor.models.delta import Delta, DeltaList
from specdoctor.tools.serving.plan import PlannedPhase

__all__ = ["Cause", "PlanFacts", "facts_from_deltas", "expected_cause", "revise_phases", "revert_search_expected"]

Cause = Literal["none", "workload", "hardware", "commits", "config", "code", "unknown"]
Stage = Literal["first", "consent", "revised"]
_PROFILE = 2  # the confirmed cause's phase profile at worst: both arms launched (no trial could profile them)
_PROFILE_EXPECTED = 0  # both arms are expected to be profiled on their own trials while up (tools.arm_profiles)


def _log2(n: int) -> int:
    return math.ceil(math.log2(n)) if n > 1 else 0


class PlanFacts(BaseModel):
    """What a re-estimate reads: counts and flags only, each from a step's typed result."""

    stage: Stage = "consent"
    changed: int = Field(default=0, ge=0, description="Changed files of the checkout (the patch search's P).")
    code_open: bool = Field(default=False, description="The checkout has changes whose digest is not the good "
                            "run's: the code steps may run.")
    essential_given: bool = False
    gap: bool = Field(default=True, description="A gap to explain: a claim not reached on the running server (or "
                      "none judged), after reproduce the measured gap.")
    commits: int = Field(default=0, ge=0, description="Upstream commits since the good run's commit.")
    config_suspects: list[str] = Field(default_factory=list, description="Flags and variables that differ from the "
                                       "good run and a relaunch can revert (engine-forced ones aside).")
    nccl_suspects: list[str] = Field(default_factory=list, description="Those of them the NCCL promotion tries.")
    hardware: list[str] = Field(default_factory=list, description="High-impact hardware differences a targeted read "
                                "measures (link, clocks, power, other GPU processes).")
    workload: list[str] = Field(default_factory=list, description="High-impact workload differences: the claims were "
                                "measured on another workload.")
    config_known: bool = Field(default=False, description="The differences were listed (list_deltas ran); "
                               "otherwise the identity digests stand in for them.")
    config_differs: bool = Field(default=False, description="Identity: the launch line or the workers' variables "
                                 "differ from the good run's.")
    launch_unknown: bool = Field(default=True, description="Identity: no good run's launch line to compare with.")
    promote_launches: int | None = Field(default=None, ge=0, description="The NCCL promotion's launches (None: "
                                         "unknown before the sweep ran).")
    workload_judged: bool = Field(default=False, description="The claims were judged on the recorded workload "
                                  "(your running server measured with it): its difference explains no gap left.")
    control_running: bool = Field(default=False, description="Today's speculative figure is your running server's, "
                                  "not a trial launch's: a lone difference's revert search replicates its other arm.")


def facts_from_deltas(facts: PlanFacts, deltas: DeltaList | None) -> PlanFacts:
    """`facts` with the differences list_deltas found (None: unchanged)."""
    if deltas is None:
        return facts
    good = [d for d in deltas.deltas if d.reference_label == "good run"]
    config = [d for d in deltas.revertible() if d.kind in ("env", "launch-flag") and d.reference_label == "good run"
              and d.source != "engine-forced"]  # the engine sets these itself at every start: not a user's change
    return facts.model_copy(update={
        "config_known": True,
        "config_suspects": [d.name for d in config],
        "nccl_suspects": [d.name for d in config if d.kind == "env" and d.name.startswith("NCCL_")
                          and _relaunch_sets(d)],
        "hardware": [d.name for d in good if d.kind == "hardware" and d.impact == "high"]
        + [d.name for d in deltas.deltas if d.kind == "hardware" and d.impact == "high" and d.reference_label != "good run"],
        "workload": [d.name for d in good if d.kind == "workload" and d.impact == "high"]})


def _relaunch_sets(d: Delta) -> bool:
    """The promotion's relaunches can try this variable's values: it was lost (a candidate sets it back), or the
    launch line or its shell sets it. One a file sets at every start (sitecustomize.py, a .pth hook, nccl.conf, a
    launcher script, a shell profile) comes back in every relaunch: only a revert trial can test it."""
    return d.current is None or d.source in ("launch line", "launch shell")


def _config_left(f: PlanFacts) -> list[str]:
    """The config suspects a revert search is expected to test: those the NCCL promotion does not settle."""
    settled = set(f.nccl_suspects) if f.promote_launches else set()
    return [n for n in f.config_suspects if n not in settled]


def expected_cause(f: PlanFacts) -> Cause:
    """The one cause the plan expects: the most specific difference the reads show (the module doc's order)."""
    if not f.gap:
        return "none"
    if f.workload and not f.workload_judged:  # judged like for like, a gap left is not the workload's
        return "workload"
    if f.hardware:
        return "hardware"
    if f.commits:
        return "commits"
    if (f.config_known and f.config_suspects) or (not f.config_known and f.config_differs):
        return "config"
    return "code" if f.code_open else "unknown"


def revert_search_expected(d: int, control_running: bool = False) -> int:
    """A revert search over d differences when reverting them restores the speed: everything reverted, the other
    arm of the confirmation, ⌈log2 d⌉ halvings; the cause's phase profile comes from those trials. A lone
    difference's other arm is today's configuration, which the reproduce launch measured already (the attribution's
    usual baseline figure): not launched again (attribute.py `_Search._lone_measured`) — unless today's figure is
    your running server's (`control_running`), which a trial does not stand in for."""
    return (1 if d == 1 and not control_running else 2) + _log2(d) + _PROFILE_EXPECTED if d > 0 else 0


def _patch_search(p: int) -> int:
    """As engine.actions.plan.bisect_expected: one culprit among P patches, its phase profile from its trials."""
    return 2 * _log2(p) if p > 0 else 0


def revise_phases(phases: list[PlannedPhase], f: PlanFacts) -> tuple[list[PlannedPhase], list[str]]:
    """Every phase with its launches expected under `f` (a cap grows to what the new facts can cost, never shrinks),
    and one line per rule that decided."""
    cause = expected_cause(f)
    why = [f"expected cause: {_CAUSE_WORDS[cause]}"]
    out: list[PlannedPhase] = []
    for ph in phases:
        exp = _expected(ph, f, cause)
        out.append(ph.model_copy(update={"expected": None if exp is None else float(exp),
                                         "launches": max(ph.launches, math.ceil(exp or 0), _cap(ph, f))}))
    if f.promote_launches:
        why.append(f"NCCL promotion: {f.promote_launches} launches (the current setting and each candidate once)")
    left = _config_left(f)
    if cause == "config":
        settled = [n for n in f.config_suspects if n not in left]
        why.append(f"revert search over {len(left)} difference(s) ({', '.join(left[:6]) or 'none'})"
                   + (f"; the NCCL promotion's to settle: {', '.join(settled[:6])}" if settled else ""))
    return out, why


def _cap(ph: PlannedPhase, f: PlanFacts) -> int:
    """A cap the first plan could not know: the revert search over the listed differences one at a time, the
    promotion's candidates."""
    if ph.step == "attribute" and f.config_known:  # one at a time once there are two or more
        d = len(_config_left(f))
        return 2 + (d if d > 1 else 0) + _PROFILE
    if ph.step == "nccl_promote":
        return f.promote_launches or 0
    return 0


def _expected(ph: PlannedPhase, f: PlanFacts, cause: Cause) -> float | None:
    """One phase's expectation (None: its cap, e.g. reproduce and the restart, which always run)."""
    explain = f.gap and cause != "workload"  # a workload difference: the figures are re-read, nothing searched
    if ph.step in ("reproduce", "restart"):
        return None
    if ph.step == "essentials":  # the no-patch tree, benchmarked for the subtraction (every patch: only if it fails)
        return 1 if explain and f.code_open else 0
    if ph.step == "subtract":  # the essentials-only tree (unless benchmarked), + 1 to confirm or decide
        return (1 + (1 if f.essential_given else 0)) if explain and f.code_open else 0
    if ph.step == "bisect":
        return _patch_search(f.changed) if cause == "code" else 0
    if ph.step == "bisect_commits":  # HEAD against the good commit always; the search only if the commits are it
        return (ph.launches - _PROFILE + _PROFILE_EXPECTED if cause == "commits" else 2) if explain and f.commits else 0
    if ph.step == "nccl_promote":
        return (f.promote_launches or 0) if explain else 0
    if ph.step == "attribute":
        if not explain or cause == "hardware":
            return 0
        if cause == "config":
            left = _config_left(f)
            return revert_search_expected(len(left), f.control_running) if left else 1
        # the all-reverted trial, when something a relaunch can revert differs (or no good run says otherwise)
        return 1 if (f.config_suspects or f.nccl_suspects or f.launch_unknown or f.config_differs) else 0
    return ph.expected


_CAUSE_WORDS: dict[Cause, str] = {
    "none": "none (every claim judged held): no explaining launch",
    "workload": "the claims' workload is not today's: the figures are re-read, nothing searched",
    "hardware": "a hardware state a targeted read measures (no launch explains it)",
    "commits": "the upstream commits since the good run (HEAD moved)",
    "config": "a flag or variable that differs from the good run",
    "code": "the local patches",
    "unknown": "nothing that differs is known: only the entry trials",
}
