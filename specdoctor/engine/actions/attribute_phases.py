"""A confirmed cause's phase: its confirming comparison's two arms, profiled on the revert trials that ran them.

The attribution's trials are profiled while up when their kept set may be an arm (tools.arm_profiles); an arm no trial
profiled is launched once more to be profiled (the behaviour before #46, kept as the fallback).
"""

from __future__ import annotations

from typing import Any

from specdoctor.engine.actions import ActionOutcome
from specdoctor.engine.state import Decision
from specdoctor.models.phases import PhaseEffect, PhaseTimes
from specdoctor.tools.checkout.bisect import arms_phase_effect
from specdoctor.tools.serving.arm_profiles import ArmProfiler, ArmProfiles, profiled_how

__all__ = ["profiled_arms", "cause_phase_effect"]


def profiled_arms(arms: ArmProfiles, slow: list[str], fast: list[str], cause: list[str]
                   ) -> tuple[list[str], list[str]]:
    """The confirming comparison whose two arms trials profiled while up: today's values of the round (`slow`) vs
    the cause reverted from them (`fast`), else the other way it was confirmed — the cause alone kept vs everything
    reverted — else (`slow`, `fast`), each arm no trial profiled launched once more."""
    if not (arms.has(slow) and arms.has(fast)) and arms.has(cause) and arms.has([]):
        return list(cause), []
    return slow, fast


def _earlier(arms: ArmProfiles, slow: list[str], fast: list[str]) -> str:
    """Say so when an arm came from a launch before the search (the reproduce step's, of today's configuration)."""
    if any(frozenset(a) in arms.seeded for a in (slow, fast)):
        return "; today's arm: the reproduce step's launch, profiled while up"
    return ""


def cause_phase_effect(deps: Any, step: Any, out: ActionOutcome, slow: list[str], fast: list[str],
                       arms_profiles: ArmProfiles, relaunch: ArmProfiler, i: int, n: int) -> PhaseEffect | None:
    """Profile both arms of one cause's confirming comparison (today's values of `slow` vs `fast` kept, the rest
    reverted: speculative or plain servers, as the trials measured) and name the phase it moves (a plain server's
    only phase is its decode step); an arm a trial profiled while up costs nothing, another is launched once more.
    None, with a decision saying why, when an arm cannot be profiled or no phase moved: no phase effect is claimed
    then."""
    first = len(out.commands(10**6))
    deps.view.progress(f"phase profile of cause {i + 1}/{n}: both arms of its confirming comparison")
    arms = f"kept {', '.join(slow) or 'nothing'} vs kept {', '.join(fast) or 'nothing'}"
    launched: list[str] = []

    def launch(kept: list[str], label: str) -> tuple[PhaseTimes | None, str]:
        launched.append(label)
        return relaunch(kept, label)

    before = arms_profiles.used
    prof = arms_profiles.profiler(launch)
    eff, found, profiled = arms_phase_effect(slow, fast, lambda kept, arm: prof(kept, f"phases{i + 1}{arm}"), arms)
    out.decisions.append(Decision(
        step=step.id, title=step.title, checked=f"phase times (engine profiler) on both arms of the confirming "
        f"comparison: {arms} ({profiled_how(arms_profiles.used - before, len(launched))}"
        f"{_earlier(arms_profiles, slow, fast)})", found=found,
        decided=f"phase effect: {eff.phase}" if eff else "no phase effect claimed",
        why="a cause's phase is the one its confirming arms differ in (CI excludes 0, at least 5 % of the phase)",
        status="ok" if profiled else "unresolved", evidence=out.commands(10**6)[first:][:40]))
    return eff
