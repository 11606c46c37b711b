"""nccl_promote compares with what the workers run now; 'unset' and 'as in the good run' are always candidates."""

from __future__ import annotations

import random
import socket

from specdoctor.host import open_host
from specdoctor.toolkit import ToolContext, registry
from specdoctor.tools.nccl.nccl_promote import NcclPromotion, PromotedResult, _simplest_equivalent


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _promote(host, current: dict[str, str], good: dict[str, str] | None, runs: int = 5) -> dict:
    ctx = ToolContext(host=host, run_id="promote-ref", auto_approve=True)
    res = registry.call(ctx, "nccl_promote", {"command": host.hints.launch, "candidates": [], "current": current,
                                              "good": good, "port": _free_port(), "runs": runs})
    assert res.ok, res.summary
    return res.output


def test_reference_is_the_workers_setting_and_the_good_run_is_a_candidate(free_gpus):
    # the workers run a forced NCCL_PROTO=Simple; the good run had LL: the old promotion compared with "unset"
    # only and never tried the good run's setting
    with open_host("sim:single-culprit") as host:
        free_gpus(host)  # the user's Kimi K2.5 fills the eight cards
        out = _promote(host, {"NCCL_PROTO": "Simple"}, {"NCCL_PROTO": "LL"})
    assert "NCCL_PROTO=Simple" in out["reference"] and out["reference_env"] == {"NCCL_PROTO": "Simple"}
    by_label = {r["label"]: r for r in out["results"]}
    assert set(by_label) == {"remove NCCL_PROTO", "as in the good run (NCCL_PROTO=LL)"}
    removed = by_label["remove NCCL_PROTO"]
    assert removed["propagated"] and removed["unset"] == ["NCCL_PROTO"]
    assert all(p["workers"] and all(v is None for v in p["workers"].values()) for p in removed["propagation"])
    # NCCL left alone picks LL for these sizes on this box, so removing the forced Simple is as good as the good
    # run's LL: the simplest of the two is recommended once the comparator cannot tell them apart
    assert out["best"] in ("remove NCCL_PROTO", "as in the good run (NCCL_PROTO=LL)")
    assert out["best_env"] == {} and out["best_unset"] == ["NCCL_PROTO"] if out["best"].startswith("remove") \
        else out["best_env"] == {"NCCL_PROTO": "LL"}
    assert out["best_gain_pct"] > 3


def test_removing_a_variable_that_helps_is_not_recommended(free_gpus):
    # must not fire: on this box NCCL left alone picks Simple; the workers' LL is what makes them fast
    with open_host("sim:nccl-win") as host:
        free_gpus(host)
        helps = _promote(host, {"NCCL_PROTO": "LL"}, None)
    removed = next(r for r in helps["results"] if r["label"] == "remove NCCL_PROTO")
    assert removed["pct_change"] < -5
    assert helps["best"] is None and helps["best_unset"] == []


def _result(label: str, env: dict[str, str], samples: list[float], unset: list[str] | None = None):
    return PromotedResult(label=label, env=env, unset=unset or [], propagated=True, samples=samples)


def test_simplest_setting_the_comparator_calls_same_as_the_best_is_recommended():
    rng = random.Random(7)
    current = _result("current", {"NCCL_ALGO": "Ring"}, [rng.gauss(60, 0.4) for _ in range(12)])
    same = _result("remove NCCL_ALGO", {}, [rng.gauss(60, 0.4) for _ in range(12)], ["NCCL_ALGO"])
    out = NcclPromotion()
    assert _simplest_equivalent(current, [same, current], out) is same  # "remove this variable"
    assert "remove NCCL_ALGO" in out.notes[0]
    slower = _result("remove NCCL_ALGO", {}, [58.0, 61.5, 57.2, 60.9, 58.4], ["NCCL_ALGO"])  # undecided: keep it
    assert _simplest_equivalent(current, [slower, current], NcclPromotion()) is current
