"""Checkout states campaign: every awkward working-tree state through the trial-tree path and the in-place path.

For each state (tests/repo/states.py) a fresh checkout is built on the given host; its file-level manifest is
taken; trial trees are built (all changes; one hunk + one file + the patch script), used (sglang origin) and
removed; the manifest must be identical. The same state then goes through today's in-place path (backup →
stash_all → restore) and the manifest must name what that path changed. Used by the benchmark.
"""

from __future__ import annotations

import itertools
import sys
from dataclasses import dataclass, field
from pathlib import Path

from specdoctor.host.base import Host
from specdoctor.toolkit import ToolContext, registry

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "repo"))

from states import IN_PLACE_LOSES, STATES, build_state  # noqa: E402

from specdoctor.tools.checkout.manifest import take_manifest  # noqa: E402

__all__ = ["StateRun", "run_state_campaign"]

_n = itertools.count()
_SCRIPT = "import sys, os\nopen(os.path.join(sys.argv[1], 'TRIAL_MARK'), 'w').write('x')\nprint('patched')\n"


@dataclass
class StateRun:
    """Per campaign: states tried, identical after the trial-tree path, and what the in-place path did."""

    tried: int = 0
    identical: int = 0
    in_place_changed: int = 0
    in_place_caught: int = 0
    expected_in_place_losses: int = 0
    exact_tried: int = 0
    exact_identical: int = 0
    differences: dict[str, list[str]] = field(default_factory=dict)


def run_state_campaign(host: Host, workdir: str, states: list[str] | None = None) -> StateRun:
    """Run every state (or `states`) on `host` under `workdir`; never raises for one state's failure."""
    out = StateRun()
    script = f"{workdir}/trial-patch-{next(_n)}.py"
    host.put(_SCRIPT.encode(), script)
    for name in states or sorted(STATES):
        repo = f"{workdir}/state-{name}-{next(_n)}"
        build_state(host, repo, name)
        ctx = ToolContext(host=host, run_id=f"states{next(_n)}", auto_approve=True)
        out.tried += 1
        before = take_manifest(ctx, repo)
        try:
            a = registry.call(ctx, "build_trial_tree", {"repo": repo, "name": "every", "all_changes": True})
            b = registry.call(ctx, "build_trial_tree", {
                "repo": repo, "name": "some", "hunks": {"python/sglang/srt/models/kimi_k25.py": [0]},
                "files": ["python/sglang/srt/layers/moe/topk.py"], "script": script, "script_args": [repo]})
            for r in (a, b):
                if r.ok:
                    registry.call(ctx, "engine_origin", {"env": {"PYTHONPATH": r.output["pythonpath"]},
                                                         "expect_under": r.output["path"]})
            registry.call(ctx, "remove_trial_tree", {})
        finally:
            d = before.diff(take_manifest(ctx, repo))
        ok = d.same and a.ok and b.ok and not b.output["outside_writes"]
        out.identical += int(ok)
        if not ok:
            out.differences[name] = d.differences[:5] + ([] if a.ok and b.ok else [a.summary, b.summary])
        # the in-place path, first with a first-round backup (git's view only): the manifest must name the change
        before = take_manifest(ctx, repo)
        out.expected_in_place_losses += int(name in IN_PLACE_LOSES)
        legacy = registry.call(ctx, "backup_worktree", {"repo": repo, "backup_id": f"legacy-{next(_n)}"})
        if legacy.ok:
            for f in ("manifest.json", "exact.tar", "index.raw"):
                host.run(["rm", "-f", "--", f"{legacy.output['dir']}/{f}"])
            registry.call(ctx, "stash_all", {"repo": repo, "backup_id": legacy.output["backup_id"]})
            registry.call(ctx, "restore_worktree", {"repo": repo, "backup_id": legacy.output["backup_id"]})
            after = take_manifest(ctx, repo)
            changed = not before.diff(after).same
            out.in_place_changed += int(changed)
            out.in_place_caught += int(changed and bool(before.diff(after).differences))
        # ... then with this round's exact backup, on a fresh copy of the state: identical path for path
        repo2 = f"{repo}-exact"
        build_state(host, repo2, name)
        before = take_manifest(ctx, repo2)
        ctx2 = ToolContext(host=host, run_id=f"states{next(_n)}", auto_approve=True)
        if registry.call(ctx2, "stash_all", {"repo": repo2}).ok:
            out.exact_tried += 1
            r = registry.call(ctx2, "restore_worktree", {"repo": repo2})
            out.exact_identical += int(r.ok and before.diff(take_manifest(ctx2, repo2)).same)
    return out
