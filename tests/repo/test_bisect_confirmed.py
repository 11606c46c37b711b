"""bisect_patches on the twin: a culprit set is named only when both trials were measured, never inferred."""

from __future__ import annotations

from pathlib import Path

from specdoctor.host import open_host
from specdoctor.sim.ports import free_port
from specdoctor.toolkit import ToolContext, registry

HERE = Path(__file__).parent / "scenarios"
SYNC = "python/sglang/srt/speculative/eagle_worker.py"
CAST = "python/sglang/srt/layers/attention/flashinfer_mla_backend.py"
LOG = "python/sglang/srt/entrypoints/engine.py"


def _bisect(scenario: str, run_id: str, free_gpus) -> dict:
    with open_host(f"sim:{HERE / scenario}") as host:
        free_gpus(host)  # the user's server fills the cards
        ctx = ToolContext(host=host, run_id=run_id, auto_approve=True)
        res = registry.call(ctx, "bisect_patches", {
            "repo": host.hints.repo, "launch": host.hints.launch, "python": host.hints.python,
            "essential": ["kimi_k25.py"], "order": [SYNC, CAST, LOG], "port": free_port()})
        assert res.ok, res.summary
        assert res.output["restored"]
        return res.output


def _outcomes(out: dict) -> dict[frozenset[str], str]:
    return {frozenset(t["subset"]): t["outcome"] for t in out["search"]}


def test_unresolved_single_file_trial_names_no_culprit(free_gpus):
    # eagle_worker.py alone cannot start (it needs the other patch): its trial is unresolved and the other half
    # is fast. The old search blamed eagle_worker.py ("inferred among them"); now: unresolved, candidates.
    out = _bisect("interacting-pair-unstartable.yaml", "bisect-unresolved", free_gpus)
    assert _outcomes(out)[frozenset({SYNC})] == "unresolved"
    assert out["culprits"] == [] and out["verdict"] == "unresolved" and not out["confirmed"]
    assert SYNC in out["candidates"] and CAST in out["candidates"]
    assert not any("inferred among them" in n for n in out["notes"])


def test_two_interacting_patches_both_named_confirmed_both_ways(free_gpus):
    out = _bisect("interacting-pair.yaml", "bisect-pair", free_gpus)
    assert out["verdict"] == "interaction" and sorted(out["culprits"]) == sorted([SYNC, CAST]) and out["confirmed"]
    seen = _outcomes(out)
    assert seen[frozenset({SYNC, CAST})] == "regressed"  # the pair alone reproduces
    assert seen[frozenset({LOG})] == "same"              # everything but the pair is fast
    assert seen[frozenset({SYNC})] == "same" and seen[frozenset({CAST})] == "same"  # each is needed
