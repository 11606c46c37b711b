"""Working-tree states through a full `investigate` on the twin (subtraction and bisection), manifests compared.

The states of tests/repo/states.py are put into a scenario's checkout (their example paths swapped for tracked
files no patch touches), the checkout's manifest is taken, a whole `investigate` runs on the twin, and the
manifest is taken again: identical every time, the run's own proof (facts.checkout_proof) agreeing, no trial
tree left behind. Used by tests/reliability/test_investigate_states.py and benchmarks/reliability_report.py.
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from specdoctor.host.base import Host
from specdoctor.toolkit import ToolContext

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "repo"))

from states import EXAMPLE_PATHS, apply_states  # noqa: E402

from specdoctor.tools.checkout.manifest import take_manifest  # noqa: E402

__all__ = ["StateInvestigation", "spare_tracked", "investigate_states", "report_steps"]


@dataclass
class StateInvestigation:
    """One full run on a checkout in the given states."""

    states: list[str]
    identical: bool = False
    proof_identical: bool | None = None
    subtracted: bool = False
    bisected: bool = False
    verdict: str | None = None
    trees_left: list[str] = field(default_factory=list)
    differences: list[str] = field(default_factory=list)
    seconds: float = 0.0
    error: str | None = None


def spare_tracked(host: Host, repo: str, n: int = len(EXAMPLE_PATHS)) -> dict[str, str]:
    """EXAMPLE_PATHS → tracked files of `repo` that its local changes leave alone (never a package __init__)."""
    tracked = host.run(["git", "-C", repo, "ls-files"]).stdout.split()
    changed = set(host.run(["git", "-C", repo, "diff", "--name-only", "HEAD"]).stdout.split())
    spare = sorted(p for p in tracked if p not in changed and not p.endswith("__init__.py"))
    if len(spare) < n:
        raise AssertionError(f"{repo} has only {len(spare)} untouched tracked files")
    return dict(zip(EXAMPLE_PATHS, spare[:n], strict=True))


def report_steps(report: dict) -> dict[str, dict]:
    """The report's decisions by step (the last one of a step wins: cleanup has several)."""
    return {f"{d.get('step')}:{d.get('tool') or ''}": d for d in report.get("decisions", [])}


def investigate_states(host: Host, repo: str, states: list[str], out: Path) -> StateInvestigation:
    """Put `repo` (a sandbox's checkout, `host` its open SimHost) in `states`, run investigate, compare manifests."""
    from specdoctor.engine.runner import InvestigateOptions, investigate

    res = StateInvestigation(states=list(states))
    apply_states(host, repo, states, paths=spare_tracked(host, repo))
    ctx = ToolContext(host=host, run_id="states-check")
    before = take_manifest(ctx, repo)
    t0 = time.monotonic()
    try:
        outcome = investigate(InvestigateOptions(host=host.name, yes=True, out=str(out)), host=host)
    except Exception as exc:  # noqa: BLE001 - a campaign records the failure and goes on
        res.error = f"{type(exc).__name__}: {exc}"[:300]
        outcome = None
    res.seconds = time.monotonic() - t0
    diff = before.diff(take_manifest(ctx, repo))
    res.identical, res.differences = diff.same, diff.differences[:10]
    if outcome is not None:
        report = json.loads((out / "report.json").read_text())
        steps = report_steps(report)
        res.verdict = report.get("verdict")
        res.subtracted = steps.get("subtract:", {}).get("status") == "ok"
        res.bisected = steps.get("bisect:bisect_patches", {}).get("status") == "ok"
        proof = steps.get("cleanup:checkout_manifest")
        res.proof_identical = None if proof is None else proof.get("status") == "ok"
        trees = f"{ctx.state_dir}/trees/{outcome.run_id}"
        res.trees_left = [ln for ln in host.run(["sh", "-c", 'ls -A "$1" 2>/dev/null', "ls", trees],
                                                check="ignore").stdout.split() if ln]
    return res
