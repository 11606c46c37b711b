"""Real H100 servers with a plant in a phase other than verify (2026-12-06, phases-only lease): the phase named is
the plant's, from the traces of the planted server against a clean one.

- `draft-stall`: a sync + ~3 ms host sleep at the start of `draft()` (eagle_worker_v2.py), before the draft's GPU
  work, among two innocent patches. The GPU idles before the draft's first kernel: draft on the host basis.
- `clear-culprit`: ~2 ms of extra GPU work (`torch.cuda._sleep`) at the start of `_draft_extend_for_decode`:
  draft-extend on the GPU basis. The overlap scheduler hides most of it from the cycle's wall (rest -1.0 ms), which
  is a real fact about this engine, not a parser artefact.
- `no-regression`: the clean checkout, the reference. Each trace cut to its first 12 decode cycles (fixture README).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from specdoctor.parsers.sglang_trace import parse_sglang_trace
from specdoctor.stats.phases import cycle_account_line, phase_effect
from specdoctor.tools.serving.phase_times import phases_from_trace

TRACES = Path(__file__).resolve().parents[1] / "fixtures" / "sglang-0.5.17-h100" / "trace"


@pytest.fixture(scope="module")
def real():
    return {n: phases_from_trace(parse_sglang_trace((TRACES / f"{n}-TP-0.trace.json.gz").read_bytes()), 3)
            for n in ("phases-draft-stall", "phases-clear-culprit", "phases-no-regression", "clean")}


def test_a_host_stall_at_the_start_of_the_draft_is_named_draft_on_the_host_basis(real):
    eff = phase_effect(real["phases-draft-stall"], real["phases-no-regression"], "stalled vs clean")
    assert eff is not None and eff.phase == "draft" and eff.basis == "host"
    assert 2.7 < eff.delta_ms * 3 < 3.6  # ~3 ms a cycle (k = 3 draft steps), the plant's sleep
    line = cycle_account_line(real["phases-draft-stall"], real["phases-no-regression"])
    assert line is not None and "draft +3." in line and "idle before +3." in line


def test_extra_gpu_work_in_the_draft_extend_is_named_draft_extend_on_the_gpu_basis(real):
    eff = phase_effect(real["phases-clear-culprit"], real["phases-no-regression"], "padded vs clean")
    assert eff is not None and eff.phase == "draft_extend" and eff.basis == "gpu"
    assert 1.4 < eff.delta_ms < 2.2


@pytest.mark.parametrize("slow,fast", [("phases-no-regression", "phases-draft-stall"),
                                       ("phases-no-regression", "phases-clear-culprit"),
                                       ("phases-no-regression", "clean"), ("clean", "phases-no-regression")])
def test_no_phase_is_named_where_nothing_grew(real, slow: str, fast: str):
    """Must not fire: the clean server against a planted one (everything got shorter), and two clean servers of two
    leases (a day apart, the later 0.6 ms a cycle faster in the trace)."""
    assert phase_effect(real[slow], real[fast]) is None
