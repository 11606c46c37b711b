"""The cycle adds up: a phase is named only when its growth carries the cycle's own growth (trace wall per cycle)."""

from __future__ import annotations

import random

from specdoctor.models.phases import PhaseTimes
from specdoctor.stats.phases import cycle_account_line, phase_effect, phase_stat


def _s(level: float, seed: int, sd: float = 0.01):
    rng = random.Random(seed)
    return phase_stat([level + rng.gauss(0, sd) for _ in range(12)], "profiler trace")


def _times(draft: float, verify: float, dext: float, wall: float, rest: float, seed: int) -> PhaseTimes:
    return PhaseTimes(source="profiler-gpu", steps=3, draft_cycle_ms=_s(draft, seed), draft_ms=_s(draft / 3, seed + 1),
                      verify_ms=_s(verify, seed + 2), draft_extend_ms=_s(dext, seed + 3), wall_ms=_s(wall, seed + 4),
                      rest_ms=_s(rest, seed + 5), idle_before_ms={"draft": _s(0.2, seed + 6)})


def test_a_small_gpu_move_is_not_named_when_the_cycle_grew_far_more_outside_it():
    # the real H100 shape before the stall was read: draft-extend +0.7 ms of GPU, the cycle +3.7 ms
    fast = _times(1.8, 1.8, 1.2, 8.0, 1.0, 1)
    slow = _times(1.8, 1.8, 1.9, 11.7, 4.0, 100)
    assert phase_effect(slow, fast, "arms") is None
    line = cycle_account_line(slow, fast)
    assert line is not None and line.startswith("cycle +3.7") and "rest +3.0" in line and "draft-extend +0.70" in line


def test_a_phase_that_carries_the_cycles_growth_is_still_named():
    fast = _times(1.8, 1.8, 1.2, 8.0, 1.0, 1)
    slow = _times(1.8, 4.8, 1.2, 11.0, 1.0, 100)
    eff = phase_effect(slow, fast, "arms")
    assert eff is not None and eff.phase == "verify" and abs(eff.delta_ms - 3.0) < 0.05


def test_the_cycle_line_shows_the_engines_phases_only():
    """vLLM has no draft-extend: its cycle line never shows one (+0.00); SGLang's and older records still do."""
    fast = _times(1.8, 1.8, 1.2, 8.0, 1.0, 1)
    slow = _times(1.8, 4.8, 1.2, 11.0, 1.0, 100)
    old = cycle_account_line(slow, fast)
    assert old is not None and "draft-extend" in old and "sample" not in old  # no phases recorded: as before
    sglang = [fast.model_copy(update={"phases": ["draft", "verify", "draft_extend"]}),
              slow.model_copy(update={"phases": ["draft", "verify", "draft_extend"]})]
    assert cycle_account_line(sglang[1], sglang[0]) == old
    vllm = {"phases": ["draft", "verify", "sample"], "draft_extend_ms": None}
    vf = fast.model_copy(update={**vllm, "sample_ms": _s(0.3, 7)})
    vs = slow.model_copy(update={**vllm, "sample_ms": _s(0.3, 8)})
    line = cycle_account_line(vs, vf)
    assert line is not None and "draft-extend" not in line and "sample +0.00" in line and "verify +3.00" in line, line
