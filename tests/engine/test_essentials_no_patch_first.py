"""The essentials search launches the no-patch tree first and every patch only when HEAD alone does not start: a
server that starts with no patch already answers "which patches are essential?" (none), so the every-patch launch
decided nothing there (#46). Must not fire: where a patch is essential, every patch is still launched (the
search's upper boundary) and the essential patch found."""

from __future__ import annotations

import pytest

from specdoctor.host import open_host
from specdoctor.sim.ports import free_port
from specdoctor.toolkit import ToolContext, registry


def _essentials(name: str, free_gpus) -> dict:
    with open_host(f"sim:{name}") as host:
        free_gpus(host)  # the user's server fills the cards: a trial does not fit beside it
        # a port of the twin's range: a fixed one in the kernel's ephemeral range was once taken by an outgoing
        # connection of another test ("port 41779 is busy")
        ctx = ToolContext(host=host, run_id="essentials", auto_approve=True)
        res = registry.call(ctx, "find_essential_patches", {"repo": host.hints.repo, "launch": host.hints.launch,
                                                            "python": host.hints.python, "port": free_port()})
        assert res.ok, res.summary
        return res.output


def test_no_essential_patch_costs_one_launch(free_gpus):
    out = _essentials("decode-regression", free_gpus)
    assert out["essential"] == [] and out["launches"] == 1
    assert [t["purpose"] for t in out["trials"]] == ["no patches"]


@pytest.mark.parametrize("name", ["seed"])
def test_an_essential_patch_still_launches_every_patch(name, free_gpus):
    out = _essentials(name, free_gpus)
    purposes = [t["purpose"] for t in out["trials"]]
    assert purposes[:2] == ["no patches", "all patches"], purposes
    assert out["trials"][0]["outcome"] == "fails" and out["trials"][1]["outcome"] == "starts"
    assert out["essential"] == ["python/sglang/srt/models/kimi_k25.py"]
