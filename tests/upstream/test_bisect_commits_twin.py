"""bisect_commits end to end on the twin: the culprit's neighbour cannot start; the user's checkout is only read."""

from __future__ import annotations

import subprocess

from specdoctor.host import open_host
from specdoctor.toolkit import ToolContext, registry


def _git(repo: str, *args: str) -> str:
    return subprocess.run(["git", "-C", repo, *args], capture_output=True, text=True, check=True).stdout


def test_culprit_named_past_a_commit_that_cannot_start(free_gpus) -> None:
    with open_host("sim:upstream-neighbour-broken") as host:
        free_gpus(host)
        repo = host.hints.repo
        before = (_git(repo, "rev-parse", "HEAD"), _git(repo, "status", "--porcelain"), _git(repo, "diff"))
        ctx = ToolContext(host=host, run_id="bisect-commits", auto_approve=True)
        res = registry.call(ctx, "bisect_commits", {
            "repo": repo, "launch": host.hints.launch, "python": host.hints.python,
            "essential": ["python/sglang/srt/models/kimi_k25.py"], "good_fingerprint": host.hints.good_fingerprint,
            "trial_port": 41783, "phases": False})
        assert res.ok, res.summary
        out = res.output
        assert [c["subject"] for c in out["culprits"]] == ["[Spec] report per-verify accept histogram in metrics "
                                                            "(#13021)"]
        cul = out["culprits"][0]
        assert cul["files"] == ["python/sglang/srt/speculative/eagle_worker.py"] and cul["effect_tps"] < 0
        assert cul["ci_high"] < 0 and cul["parent"] == _git(repo, "rev-parse", f"{cul['sha']}^1").strip()
        # its child (the scheduler import typo) cannot start: skipped with its traceback's error, never judged
        skipped = {s["subject"]: s["why"] for s in out["skipped"]}
        assert skipped and all("does not start" in w or "do not apply" in w for w in skipped.values())
        assert any("ModuleNotFoundError" in w for w in skipped.values())
        assert out["launches"] <= out["bound"] + len(out["skipped"])
        assert (_git(repo, "rev-parse", "HEAD"), _git(repo, "status", "--porcelain"), _git(repo, "diff")) == before
