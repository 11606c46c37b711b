"""The upstream range on a twin checkout: reference resolution, first-parent catalogue, trees at a commit."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from specdoctor.errors import Unresolved
from specdoctor.sim import SimHost, build_sandbox
from specdoctor.toolkit import ToolContext, registry
from specdoctor.tools.checkout.commit_bisect import _essential_patch, commit_tree
from specdoctor.tools.checkout.commits import pr_number
from specdoctor.tools.checkout.trial_tree import prepare_source

KIMI = "python/sglang/srt/models/kimi_k25.py"
EW = "python/sglang/srt/speculative/eagle_worker.py"


@pytest.fixture
def merge_box():
    box = build_sandbox("upstream-merge-culprit", start_server=False)
    host = SimHost(box)
    yield box, host, ToolContext(host=host, run_id="commits", auto_approve=True)
    host.close()


def _git(repo: str, *args: str) -> str:
    return subprocess.run(["git", "-C", repo, *args], capture_output=True, text=True, check=True).stdout


def test_pr_numbers_from_subjects() -> None:
    assert pr_number("[Spec] fuse verify mask (#13021)") == 13021
    assert pr_number("Merge pull request #4410 from user/branch") == 4410
    assert pr_number("Revert \"x (#1)\" (#2)") == 1  # the first one named: the reverted PR
    assert pr_number("[Docs] no number") is None


def test_catalogue_is_first_parent_with_the_merge_carrying_its_branch(merge_box) -> None:
    box, host, ctx = merge_box
    res = registry.call(ctx, "catalog_commits", {"repo": box.repo, "good_fingerprint": box.hints.good_fingerprint,
                                                 "launch": box.launch})
    assert res.ok, res.summary
    rows = res.output["commits"]
    assert len(rows) == 9 and [r["index"] for r in rows] == list(range(1, 10))
    merge = rows[5]
    assert merge["merge"] and merge["pr"] == 13070
    assert {f["path"] for f in merge["files"]} == {EW, "docs/spec_metrics.md"}
    assert merge["on_hot_path"]
    docs = rows[0]
    assert not docs["on_hot_path"] and docs["files"][0]["subsystem"] == "docs"
    # the side branch's own commit is not in the first-parent range
    assert sum("accept-length metrics" in r["subject"] for r in rows) == 1


def test_good_ref_by_date_and_by_sha(merge_box) -> None:
    box, host, ctx = merge_box
    first = _git(box.repo, "rev-list", "--first-parent", "--reverse", "HEAD").split()
    by_sha = registry.call(ctx, "catalog_commits", {"repo": box.repo, "good_ref": first[3]})
    assert by_sha.ok and len(by_sha.output["commits"]) == len(first) - 4
    # the twin's commits are 6 h apart from 2026-01-12T09:30: before 2026-01-13 00:00 lie the base and 2 commits
    by_date = registry.call(ctx, "catalog_commits", {"repo": box.repo, "good_ref": "2026-01-13"})
    assert by_date.ok and by_date.output["good"] == first[2]
    at_noon = registry.call(ctx, "catalog_commits", {"repo": box.repo, "good_ref": "2026-01-13 12:00"})
    assert at_noon.ok and at_noon.output["good"] == first[4]
    bad = registry.call(ctx, "catalog_commits", {"repo": box.repo, "good_ref": "no-such-tag"})
    assert not bad.ok and "not a commit" in bad.summary


def test_tree_at_a_commit_carries_the_essentials_or_reports_the_conflict() -> None:
    box = build_sandbox("upstream-neighbour-broken", start_server=False)
    host = SimHost(box)
    try:
        ctx = ToolContext(host=host, run_id="ctree", auto_approve=True)
        before = _git(box.repo, "status", "--porcelain")
        src = prepare_source(ctx, box.repo)
        patch, untracked = _essential_patch(ctx, src, [KIMI])
        shas = _git(box.repo, "rev-list", "--first-parent", "--reverse", "HEAD").split()
        with commit_tree(ctx, src, shas[5], patch, untracked, "ct-5") as tree:  # after the revert: applies
            text = Path(f"{tree.path}/{KIMI}").read_text()
            assert "def set_eagle3_layers_to_capture" in text and tree.head == shas[5]
            assert _git(tree.path, "rev-parse", "HEAD").strip() == shas[5]
        with pytest.raises(Unresolved, match="do not apply"):  # the line the hooks hang off was rewritten
            with commit_tree(ctx, src, shas[2], patch, untracked, "ct-2"):
                pass
        assert _git(box.repo, "status", "--porcelain") == before
        assert _git(box.repo, "rev-parse", "HEAD").strip() == shas[-1]
    finally:
        host.close()
