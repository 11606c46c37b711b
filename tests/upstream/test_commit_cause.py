"""A confirmed upstream commit is a code cause in the one attribution: the verdict names it, the plan reverts it."""

from __future__ import annotations

from specdoctor.diagnosis import Case, diagnose
from specdoctor.diagnosis.facts import ToolOutputs
from specdoctor.models import CAUSE_KINDS
from specdoctor.tools.checkout.commit_bisect import CommitBisectResult, CulpritCommit

SHA = "cca3df4e20" + "0" * 30


def _result(culprits: list[CulpritCommit]) -> CommitBisectResult:
    return CommitBisectResult(verdict="culprit" if culprits else "no-change", good="a" * 40, head="b" * 40,
                              commits=10, culprits=culprits, launches=6, bound=6)


def _culprit(merge: bool = False) -> CulpritCommit:
    return CulpritCommit(index=5, sha=SHA, subject="[Spec] report per-verify accept histogram in metrics (#13021)",
                         pr=13021, merge=merge, files=["python/sglang/srt/speculative/eagle_worker.py"],
                         parent="d" * 40, effect_tps=-8.6, ci_low=-13.1, ci_high=-5.3,
                         comparison="DIFFERENT: 60 -> 51.2 tok/s")


def test_a_confirmed_commit_decides_code_regression_and_is_reverted() -> None:
    d = diagnose(Case(tools=ToolOutputs(commit_bisect=_result([_culprit()])), repo="/srv/sglang"))
    assert d.verdict.verdict == "code-regression"
    assert "an upstream commit: cca3df4e20" in d.verdict.sentence and "#13021" in d.verdict.sentence
    assert d.verdict.culprits == []  # culprits are local patch files; the commit is in the attribution
    fixes = [a.command for a in d.plan if a.command and "revert" in a.command]
    assert fixes == ["git -C /srv/sglang revert --no-edit cca3df4e2000"]
    assert CAUSE_KINDS["commit"].report == "code"


def test_a_merge_is_reverted_against_its_first_parent() -> None:
    d = diagnose(Case(tools=ToolOutputs(commit_bisect=_result([_culprit(merge=True)]))))
    assert any(a.command and a.command.endswith("revert --no-edit cca3df4e2000 -m 1") for a in d.plan)


def test_no_commit_named_when_the_range_is_not_slower() -> None:
    d = diagnose(Case(tools=ToolOutputs(commit_bisect=_result([]))))
    assert d.verdict.verdict != "code-regression"
    assert not any(a.command and "revert" in a.command for a in d.plan)
