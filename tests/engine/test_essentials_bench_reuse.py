"""The essentials search benchmarks its two boundary launches (every patch, no patch) while they are up, and the
subtraction takes those runs instead of launching the very same tree again — only the same code, only when the runs
decide. On the real H100 the code-regression story launched both trees twice (≈ 100 s of a 765 s run)."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from types import SimpleNamespace

import pytest

from specdoctor.engine.actions.subtract import _Arms, _searched, _Step
from specdoctor.engine.runner import InvestigateOptions, investigate
from specdoctor.engine.state import StateView
from specdoctor.sim import SimHost, build_sandbox, load_scenario
from specdoctor.stats.comparator import GrowingArm
from specdoctor.tools.checkout.bisect import Essentials, TreeIdentity, Trial
from specdoctor.tools.checkout.trial_tree import TrialTree


@pytest.fixture(autouse=True)
def _home(tmp_path, monkeypatch):
    monkeypatch.setenv("SPECDOCTOR_HOME", str(tmp_path / "home"))


def _run(name: str, tmp_path: Path) -> dict:
    root = Path(tempfile.mkdtemp(prefix=f"reuse-{name}-"))
    os.chmod(root, 0o777)
    host = SimHost(build_sandbox(load_scenario(name), root))
    try:
        out = investigate(InvestigateOptions(host=f"sim:{name}", yes=True, out=str(tmp_path / "out")), host=host)
    finally:
        host.close()
    return json.loads(Path(out.files["json"]).read_text())


def _launched(report: dict, label: str) -> int:
    return sum(f'"label": "{label}"' in c["command"] for c in report["commands"] if "launch_server" in c["command"])


def _decision(report: dict, step: str) -> dict:
    return next(d for d in report["decisions"] if d["step"] == step)


def test_no_essential_and_no_script_launches_each_tree_once(tmp_path):
    """The essentials search launches only the no-patch tree when HEAD alone starts (#46: every patch decided
    nothing there); the subtraction takes its runs, and launches every patch once to confirm the difference. Two
    launches for the two trees, as when the search benchmarked both: no tree launched twice."""
    report = _run("decode-regression", tmp_path)
    assert report["verdict"] == "code-regression", report["summary"]
    assert "(search, 1 launches, 1 benchmarked for the subtraction)" in _decision(report, "essentials")["found"]
    found = _decision(report, "subtract")["found"]
    assert "DIFFERENT" in found and "essentials only: the essentials search's launch of the same tree measured" in found
    assert _launched(report, "essentials-only") == 0 and _launched(report, "all-patches") == 1
    culprits = [x["path"] for x in report["suspects"] if x["bisection"] == "culprit"]
    assert culprits == ["python/sglang/srt/models/llama.py"], culprits  # the scenario's truth


def test_a_patch_script_keeps_the_essentials_tree_launched(tmp_path):
    """Must not fire: the subtraction's essentials tree ran the patch script, the search's no-patch tree did not —
    different code, so it is launched; the all-patches confirmation (no script in either) may still be spared."""
    report = _run("shell-script-warn", tmp_path)
    assert report["verdict"] == "code-regression", report["summary"]
    assert _launched(report, "essentials-only") == 1
    assert "essentials only: the essentials search's launch" not in _decision(report, "subtract")["found"]


# -- the rule itself, without a run ---------------------------------------------------------------------------
def _tree(files: list[str], *, script: bool = False, head: str = "abc123") -> TrialTree:
    return TrialTree(name="t", path="/t", head=head, pythonpath="/t/python", applied_files=files,
                     applied_hunks={f: [1] for f in files}, script_exit=0 if script else None)


def _essentials(samples: list[float], files: list[str], *, bench: bool = True) -> Essentials:
    trial = Trial(patches=files, outcome="starts", purpose="no patches" if not files else "all patches",
                  tree=TreeIdentity.of(_tree(files)) if bench else None,
                  benchmark={"samples": samples, "median": sorted(samples)[len(samples) // 2]} if bench else None)
    return Essentials(essential=[], source="search", launches=2, trials=[trial])


def _step(found: Essentials) -> _Step:
    stored = {"tool": "find_essential_patches", "status": "ok", "summary": found.summary_line(),
              "output": found.model_dump(mode="json")}
    view = StateView({"params": {}, "facts": {}, "results": {"essentials": stored}})
    return _Step(deps=SimpleNamespace(view=None), view=view, out=SimpleNamespace(results={}), runs=5)


FAST = [100.0, 101.0, 99.5, 100.4, 100.2]
SLOW = [80.0, 80.5, 79.6, 80.2, 80.9]


def test_the_same_tree_decided_is_reused():
    arms = _Arms()
    got = _searched(_step(_essentials(FAST, [])), arms, _tree([]), GrowingArm(SLOW, 5), "essentials only")
    assert got is not None and got.samples == FAST and "no launch" in arms.notes[-1]


@pytest.mark.parametrize("case", ["script", "other files", "other head", "not benchmarked", "undecided"])
def test_anything_but_the_same_code_decided_is_launched(case):
    found = _essentials(FAST if case != "undecided" else [100.0, 60.0, 140.0], [], bench=case != "not benchmarked")
    tree = {"script": _tree([], script=True), "other files": _tree(["python/sglang/x.py"]),
            "other head": _tree([], head="def456")}.get(case, _tree([]))
    arms = _Arms()
    assert _searched(_step(found), arms, tree, GrowingArm(SLOW, 5), "essentials only") is None
    assert ("undecided" in arms.notes[-1]) if case == "undecided" else not arms.notes


def test_start_only_search_leaves_nothing_to_reuse():
    """bench_runs=0 (the tool called on its own, or by a caller that wants only starts): no benchmark, no reuse."""
    found = _essentials(FAST, [], bench=False)
    assert found.measured(TreeIdentity.of(_tree([]))) is None
    assert "benchmarked" not in found.summary_line()
