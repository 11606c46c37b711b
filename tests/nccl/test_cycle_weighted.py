"""The NCCL sweep ranks settings at the cycle's own sizes and counts, never by a plain sum over sizes: where the two
rankings disagree, the sweep's pick and the report's table follow the cycle."""

from __future__ import annotations

from specdoctor.engine.report_builder import nccl_section_of
from specdoctor.report.markdown import render_markdown
from specdoctor.report.model import Report, RunMeta
from specdoctor.toolkit import registry
from specdoctor.tools.nccl.nccl import NcclSweep
from specdoctor.tools.nccl.nccl_grid import cycle_weights, message_sizes

# hidden 7168, 3 draft tokens (k = 2), batches 1 and 480: the batch-1 cycle sends 14 and 42 KiB; the 480-batch sizes
# (6.9 and 20.6 MB) are what a plain sum over sizes is dominated by
ROLES = message_sizes(7168, 3, [1, 480])
SIZES = [m.bytes for m in ROLES]


def _sweep(ctx, **kw) -> NcclSweep:
    ctx.host.base_env["FAKE_NCCL_BW"] = "Simple:60000"  # Simple: slower at small sizes, far faster at large ones
    args = {"sizes": SIZES, "tp": 2, "interconnect": "pcie", "nccl_version": "2.21.5", "repeats": 5, "graph": 10,
            "grid": {"NCCL_PROTO": [None, "LL", "Simple"]}, "finalists": 2, **kw}
    res = registry.call(ctx, "nccl_sweep", args)
    assert res.ok, res.summary
    return NcclSweep.model_validate(res.output)


def test_weights_count_only_the_cycles_own_sizes():
    w = {x.size: x for x in cycle_weights(ROLES, per_forward=122, steps=2, batch=1)}
    assert set(w) == {7168 * 2, 3 * 7168 * 2}
    assert w[3 * 7168 * 2].per_cycle == 122 and w[3 * 7168 * 2].phase == "verify"
    assert w[7168 * 2].per_cycle == 4 and w[7168 * 2].phase == "draft"
    # without speculation a plain decode forward sends the decode size, per_forward times
    assert [(x.size, x.per_cycle) for x in cycle_weights(ROLES, 122, None, 1)] == [(14336, 122.0)]


def test_summed_and_cycle_weighted_rankings_disagree_and_the_cycle_wins(perf_ctx):
    plain = _sweep(perf_ctx)
    # unweighted: Simple is "better" at the large sizes, so it is promoted, and a sum over sizes ranks it first
    assert not plain.weights and "PROTO=Simple" in plain.promoted
    summed = sorted(nccl_section_of(plain, None).rows, key=lambda x: sum(p.latency_us for p in x.points))
    assert summed[0].config == "PROTO=Simple"
    cycle = _sweep(perf_ctx, per_forward=122, steps=2, size_roles=[m.model_dump() for m in ROLES])
    by = {r.label: r for r in cycle.results}
    assert cycle.best == "PROTO=LL" and "PROTO=Simple" not in cycle.promoted
    assert by["PROTO=LL"].cycle_us < by["default"].cycle_us < by["PROTO=Simple"].cycle_us
    assert sum(p.latency_us for p in by["PROTO=Simple"].points) < sum(p.latency_us for p in by["PROTO=LL"].points)
    assert any("cycle's own sizes" in n for n in cycle.notes)
    # the report's table: ranked by time per cycle, and "(promoted …)" only for what ran in the A/B (none here)
    section = nccl_section_of(cycle, None)
    md = render_markdown(Report(verdict="no-regression", meta=RunMeta(), nccl=section))
    part = md.split("## NCCL sweep", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in part.splitlines() if line.startswith("| PROTO=") or line.startswith("| default")]
    assert "| config | µs per cycle |" in part and "(promoted to the A/B)" not in part
    assert rows[0].startswith("| PROTO=LL") and rows[-1].startswith("| PROTO=Simple")
    assert section.weighting and "122 × 43008 B (verify)" in section.weighting
    order = sorted(section.rows, key=lambda x: x.cycle_us or 0.0)
    assert order[0].config == "PROTO=LL" and order[-1].config == "PROTO=Simple"
    assert not any(x.promoted for x in section.rows)
