"""The NCCL lever: the sweep's winner at the cycle's own sizes, as a change of verify and the draft steps; the A/B
beside it; nothing proposed when the cycle would not notice."""

from __future__ import annotations

from specdoctor.diagnosis import Case, RunFacts
from specdoctor.diagnosis.facts import ToolOutputs
from specdoctor.diagnosis.nccl_lever import cycle_delta_ms, nccl_lever
from specdoctor.models import MeasuredFact, MeasureFacts, NcclFact
from specdoctor.tools.breakeven.breakeven import BreakevenInput, analyze
from specdoctor.tools.nccl.nccl import ConfigResult, NcclSweep, SizePoint
from specdoctor.tools.nccl.nccl_grid import CycleWeight

WEIGHTS = [CycleWeight(size=14336, phase="draft", per_cycle=4), CycleWeight(size=43008, phase="verify", per_cycle=122)]


def _row(label: str, small: float, verify: float, big: float, promote: bool) -> ConfigResult:
    env = dict(kv.split("=") for kv in label.split() if "=" in kv)
    pts = [SizePoint(size=s, latency_us=v, samples=[v * 0.98, v, v * 1.02])
           for s, v in ((14336, small), (43008, verify), (688128, big))]
    cyc = 4 * small + 122 * verify
    return ConfigResult(label=label, env={f"NCCL_{k}": v for k, v in env.items()}, points=pts, promote=promote,
                        cycle_us=cyc)


def _case(rows: list[ConfigResult], nccl: NcclFact | None = None) -> Case:
    sweep = NcclSweep(tool="all_reduce_perf", tp=8, sizes=[14336, 43008, 688128], interconnect="pcie",
                      results=rows, weights=WEIGHTS)
    be = analyze(BreakevenInput(baseline_tps=82.0, spec_tps=60.0, accept_len=1.8, verify_ms=29.0, draft_ms=0.5,
                                steps=2, overhead_ms=0.02))
    facts = RunFacts(measure=MeasureFacts(spec=MeasuredFact(median=60.0, samples=[60.0] * 5, accept_length=1.8)),
                     nccl=nccl, launch="sglang serve --model-path /m --tp 8")
    return Case(facts=facts, tools=ToolOutputs(breakeven=be, nccl_sweep=sweep))


def test_ll_at_the_cycles_sizes_is_modelled_on_verify_with_the_ab_beside_it():
    # nccl-win's shape: NCCL's own choice (Simple) costs ~25 µs more per small all-reduce, 122 per verify
    rows = [_row("default", 42.0, 44.5, 92.0, False), _row("PROTO=LL", 17.0, 20.8, 100.6, True)]
    d = cycle_delta_ms(NcclSweep(tool="x", tp=8, sizes=[], interconnect="pcie", results=rows, weights=WEIGHTS),
                       rows[1], rows[0])
    assert abs(d["verify"] - 122 * (20.8 - 44.5) / 1000) < 1e-6 and abs(d["draft"] - 4 * (17.0 - 42.0) / 1000) < 1e-6
    x = nccl_lever(_case(rows, NcclFact(best="PROTO=LL", best_gain_pct=12.0, env={"NCCL_PROTO": "LL"})))
    assert x is not None and x.kind == "nccl" and x.gain_low <= x.gain_tps <= x.gain_high
    # verify 29 → 26.1 ms: the cycle 30.0 → 27.0 ms, +11 % of 60 tok/s
    assert 5.5 < x.gain_tps < 7.5 and x.measured_tps == 7.2 and "A/B" in (x.measured_by or "")
    assert x.command is not None and x.command.startswith("env NCCL_PROTO=LL sglang serve")


def test_a_setting_that_wins_only_at_sizes_the_cycle_does_not_send_is_no_lever():
    # faster at the 672 KiB message only: a sum over sizes would pick it; the cycle does not notice it
    rows = [_row("default", 21.3, 28.4, 161.0, False), _row("PROTO=Simple", 34.9, 37.4, 85.0, True)]
    assert nccl_lever(_case(rows)) is None
    # and a winner too small to matter (2 % of the cycle's all-reduce time) is not proposed either
    rows = [_row("default", 21.3, 28.4, 161.0, False), _row("CHANNELS=16", 21.8, 27.8, 161.7, True)]
    assert nccl_lever(_case(rows)) is None
