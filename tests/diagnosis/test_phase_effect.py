"""A confirmed cause's phase effect: the phase its confirming arms differ in, with a CI; none when no phase moved."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from specdoctor.engine.actions.attribute import search_deltas
from specdoctor.models.phases import PhaseTimes
from specdoctor.parsers.sglang_trace import parse_sglang_trace
from specdoctor.stats.phases import phase_effect, phase_stat
from specdoctor.tools.checkout.bisect import confirmed_phase_effect
from specdoctor.tools.serving.phase_times import phases_from_trace
from tests.diagnosis.test_attribute_search import Box


def _times(draft: float, verify: float, seed: int, n: int = 120, sd: float = 0.01) -> PhaseTimes:
    """A profiled arm: n cycles of draft (per step, k=3) and verify ms with relative noise `sd`."""
    rng = random.Random(seed)

    def stat(ms: float):
        return phase_stat([ms * (1 + rng.gauss(0, sd)) for _ in range(n)], "profiler trace, GPU time")

    return PhaseTimes(source="profiler-gpu", steps=3, cycles=n, draft_ms=stat(draft), verify_ms=stat(verify),
                      draft_extend_ms=stat(0.02))


def test_a_verify_only_slowdown_is_attributed_to_verify_with_a_ci_that_excludes_zero():
    eff = phase_effect(_times(1.1, 48.8, 1), _times(1.1, 42.8, 2), "culprit vs rest")
    assert eff is not None and eff.phase == "verify" and eff.per == "cycle"
    assert 5.7 < eff.delta_ms < 6.3 and 0 < eff.ci[0] <= eff.delta_ms <= eff.ci[1]
    assert eff.source == "profiler-gpu: culprit vs rest"
    assert {d.phase: d.moved for d in eff.phases} == {"draft": False, "verify": True, "draft_extend": False}
    assert eff.line().startswith("verify +6.")


def test_a_draft_only_slowdown_is_draft_never_verify():
    eff = phase_effect(_times(3.1, 42.8, 3), _times(1.1, 42.8, 4), "")
    assert eff is not None and eff.phase == "draft" and eff.per == "step" and 1.9 < eff.delta_ms < 2.1
    assert not next(d for d in eff.phases if d.phase == "verify").moved


def test_no_phase_effect_is_claimed_when_no_phase_moved_material():
    assert phase_effect(_times(1.1, 42.8, 5), _times(1.1, 42.8, 6)) is None
    # A shift the CI resolves (many cycles, little noise) but under 5 % of the phase: launch-to-launch drift, not a
    # cause's phase.
    assert phase_effect(_times(1.1, 43.4, 7, n=2000, sd=0.002), _times(1.1, 42.8, 8, n=2000, sd=0.002)) is None
    assert phase_effect(None, _times(1.1, 42.8, 9)) is None


def test_the_bisection_profiles_the_culprits_alone_as_the_slow_arm_and_every_other_patch_as_the_fast():
    asked: list[tuple[list[str], str]] = []

    def prof(subset: list[str], label: str):
        asked.append((subset, label))
        return (_times(1.1, 48.8, 10) if "verify.py" in subset else _times(1.1, 42.8, 11)), ""

    eff, notes = confirmed_phase_effect(["verify.py"], ["a.py", "verify.py", "b.py"], prof)
    assert asked == [(["verify.py"], "culprits"), (["a.py", "b.py"], "rest")]
    assert eff is not None and eff.phase == "verify" and eff.delta_ms > 5 and "verify +" in notes[0]


def test_an_arm_that_cannot_be_profiled_claims_no_phase():
    eff, notes = confirmed_phase_effect(["v.py"], ["v.py", "a.py"], lambda s, label: (None, "no trace"))
    assert eff is None and "no trace" in notes[0] and "no phase effect claimed" in notes[0]


def test_the_revert_search_records_each_cause_s_confirming_arms():
    names = ["NCCL_P2P_DISABLE", "NCCL_IB_DISABLE", "OMP_NUM_THREADS"]
    box = Box(lambda kept: 8.0 if "NCCL_P2P_DISABLE" in kept else 0.0)
    out = search_deltas(names, box.run, box.control(names))
    assert out.arms == [(names, ["NCCL_IB_DISABLE", "OMP_NUM_THREADS"])]  # today vs exactly it reverted


def test_plain_servers_phase_is_their_decode_step_and_a_derived_decode_is_never_compared():
    rng = random.Random(12)

    def plain(ms: float, source: str = "profiler trace, GPU time of step[DECODE bs=1]") -> PhaseTimes:
        return PhaseTimes(source="profiler-gpu", decode_ms=phase_stat([ms * (1 + rng.gauss(0, 0.01))
                                                                       for _ in range(80)], source))

    eff = phase_effect(plain(40.5), plain(36.0))
    assert eff is not None and eff.phase == "decode" and eff.per == "step" and 4.2 < eff.delta_ms < 4.8
    assert phase_effect(plain(40.5, "derived: 1000 / baseline tok/s"), plain(36.0, "derived: …")) is None


def _host(t: PhaseTimes, verify_host: float, seed: int) -> PhaseTimes:
    """The same arm with each range's host-only time (after its GPU work): verify's `verify_host`, the rest 0."""
    rng = random.Random(seed)
    for name in ("draft_ms", "verify_ms", "draft_extend_ms"):
        s = getattr(t, name)
        base = verify_host if name == "verify_ms" else 0.0
        s.host_samples = [max(base * (1 + rng.gauss(0, 0.02)), 0.0) for _ in s.samples]
    return t


def test_a_host_stall_in_verify_is_verify_on_the_host_basis_when_no_gpu_time_moved():
    """The real H200 code-regression patch (a sync and a sleep in verify): the GPU projection showed no phase
    moving. Its host-only time in verify says +4 ms per cycle."""
    eff = phase_effect(_host(_times(1.1, 42.8, 11), 4.0, 1), _host(_times(1.1, 42.8, 12), 0.0, 2), "patch vs rest")
    assert eff is not None and eff.phase == "verify" and eff.basis == "host" and 3.8 < eff.delta_ms < 4.2
    assert "host time" in eff.line() and "no phase's GPU time grew" in eff.source
    assert {(d.phase, d.basis): d.moved for d in eff.phases}[("verify", "gpu")] is False


def test_gpu_time_decides_first_and_the_host_basis_never_reads_a_cpu_only_trace():
    # a GPU slowdown moves the host time of the phase that waits for it too: the GPU phase is the one named
    eff = phase_effect(_host(_times(1.1, 48.8, 13), 3.0, 3), _host(_times(1.1, 42.8, 14), 0.0, 4))
    assert eff is not None and eff.basis == "gpu" and 5.7 < eff.delta_ms < 6.3
    slow, fast = _host(_times(1.1, 42.8, 15), 4.0, 5), _host(_times(1.1, 42.8, 16), 0.0, 6)
    slow.source = fast.source = "profiler-cpu"  # no GPU events: the samples are already CPU ranges
    assert phase_effect(slow, fast) is None
    assert phase_effect(_host(_times(1.1, 42.8, 17), 0.0, 7), _host(_times(1.1, 42.8, 18), 0.0, 8)) is None


REAL = Path(__file__).resolve().parents[1] / "fixtures"


def _real(path: Path) -> PhaseTimes:
    return phases_from_trace(parse_sglang_trace(path.read_bytes()), 3)


@pytest.mark.parametrize("gpu, slow, fast", [
    # the same lease, both without Python stacks: the stall also moved draft-extend's GPU time (+0.5 ms)
    ("h100", "sglang-0.5.17-h100/trace/stalled-TP-0.trace.json.gz", "sglang-0.5.17-h100/trace/clean-TP-0.trace.json.gz"),
    # two leases, the clean one with Python stacks: every GPU phase of the stalled server read shorter
    ("h200", "sglang-0.5.17-h200/trace/stalled-1796415895.358067-TP-0.trace.json.gz",
     "sglang-0.5.17-h200/trace/spec-1796176826.4640355-TP-0.trace.json.gz")])
def test_a_real_host_stall_before_verify_is_verify_on_the_host_basis_on_both_gpus(gpu, slow, fast):
    """The real code-regression patch (a host sync + 4 ms sleep before verify's forward), profiled on two GPU models:
    12 cycles of each trace. Before, the H100 pair named draft-extend (+0.5 ms of GPU time, a side effect of the idle
    GPU) and the H200 pair draft-extend -1.5 ms (a phase that got shorter)."""
    eff = phase_effect(_real(REAL / slow), _real(REAL / fast), "stalled vs clean")
    assert eff is not None and eff.phase == "verify" and eff.basis == "host", (gpu, eff)
    assert 2.5 < eff.delta_ms < 5.5 and eff.ci[0] > 0


def test_a_gpu_slowdown_stays_gpu_when_the_waiting_host_moves_as_much_or_somewhat_more():
    """Must not fire: a GPU slowdown of 6 ms makes the host wait about as long (here up to 1.5x, noise and a sync
    moving): the GPU phase is named, never the waiting range."""
    for wait in (6.0, 9.0):
        eff = phase_effect(_host(_times(1.1, 48.8, 21), wait, 9), _host(_times(1.1, 42.8, 22), 0.0, 10))
        assert eff is not None and eff.phase == "verify" and eff.basis == "gpu", wait


def test_a_phase_that_got_shorter_in_the_slow_arm_is_never_named():
    """A slowdown's phase is one that grew: verify shorter in the slow arm (another launch's drift, a side effect)
    names nothing; with a draft that grew as well, the draft is named."""
    assert phase_effect(_times(1.1, 36.8, 23), _times(1.1, 42.8, 24)) is None
    eff = phase_effect(_times(1.4, 36.8, 25), _times(1.1, 42.8, 26))
    assert eff is not None and eff.phase == "draft" and eff.delta_ms > 0


def test_a_range_that_was_almost_empty_growing_is_not_a_phase_effect():
    """The twin's one-GPU story with fewer draft steps (tests/diagnosis/test_plan_bound_tp1.py): each draft step's
    host time went 0.003 → 0.010 ms — moved, material for that range, 0.1 % of a 5.5 ms cycle — and was named the
    cause's phase. Under CYCLE_PCT of the fast cycle nothing is named; the same growth in a short cycle still is."""
    def arm(host: float, seed: int, verify: float = 5.4) -> PhaseTimes:
        rng = random.Random(seed)
        n = 200

        def stat(ms: float, h: float):
            return phase_stat([ms * (1 + rng.gauss(0, 0.005)) for _ in range(n)], "profiler trace, GPU time",
                              host=[h * (1 + rng.gauss(0, 0.01)) for _ in range(n)])
        return PhaseTimes(source="profiler-gpu", steps=3, cycles=n, draft_ms=stat(0.15, host),
                          verify_ms=stat(verify, 0.2), draft_extend_ms=stat(0.02, 0.2))

    assert phase_effect(arm(0.010, 1), arm(0.0033, 2)) is None
    short = phase_effect(arm(0.010, 3, verify=0.2), arm(0.0033, 4, verify=0.2))  # a 0.67 ms cycle: 3 % of it
    assert short is not None and short.phase == "draft" and short.basis == "host"
