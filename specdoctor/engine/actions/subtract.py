"""The subtraction experiment: all patches vs essentials only, measured, with the tree restored after."""

from __future__ import annotations

import contextlib
from typing import Any

from specdoctor.engine.actions import ActionOutcome, action, call_tool
from specdoctor.engine.actions.measure import measure_config, same_within
from specdoctor.engine.state import Decision, StateView
from specdoctor.errors import ToolRetry, Unresolved
from specdoctor.stats.comparator import GROWING_CAP
from specdoctor.stats.comparator import GrowingArm as Looks
from specdoctor.stats.summary import summarize
from specdoctor.tools.bisect import Essentials
from specdoctor.tools.trial_code import tree_problem as untrusted_tree
from specdoctor.tools.trial_code import trial_code
from specdoctor.tools.trial_tree import TrialTree, prepare_source

__all__ = ["subtract", "today_all_patches", "essential_files"]


def today_all_patches(view: StateView) -> dict[str, Any] | None:
    """Today's speculative measurement when it stands for "every patch applied" with the subtraction's launch line
    and workload (your running server, or the reproduce launch from the checkout); None when it does not."""
    today = view.get("facts.measure_today_workload") or view.get("facts.measure") or {}
    spec = today.get("spec") if isinstance(today, dict) else None
    if not isinstance(spec, dict) or spec.get("error") or len(spec.get("samples") or []) < 3:
        return None
    if str(spec.get("label") or "").startswith("spec (running server") and \
            (view.get("facts.server") or {}).get("launch") != view.get("facts.launch"):
        return None  # --launch names another configuration than the one your server runs
    return spec


def essential_files(view: StateView) -> list[str]:
    found = view.result("essentials", Essentials)
    return list((found.essential if found is not None else None) or view.params.get("essential") or [])


def _trees(deps, view: StateView, repo: str, essentials: list[str], script: str | None,
           stack: contextlib.ExitStack, out: ActionOutcome) -> tuple[TrialTree | None, TrialTree | None, str | None]:
    """Build the two arms' trial trees (removed when `stack` closes); a problem instead of a tree on failure."""
    ctx = deps.tool_ctx
    try:
        everything = prepare_source(ctx, repo).changes_paths()
        all_tree = stack.enter_context(trial_code(ctx, repo, "subtract-all", everything))
        ess_tree = stack.enter_context(trial_code(ctx, repo, "subtract-essentials", essentials, script=script,
                                                  python=view.params.get("python")))
    except (ToolRetry, Unresolved) as exc:
        return None, None, f"could not build the trial trees: {exc}"
    for t in (all_tree, ess_tree):
        out.facts.setdefault("trial_trees", []).append(t.summary_line())
        problem = untrusted_tree(t)
        if problem:
            return None, None, problem
    return all_tree, ess_tree, None


def _more_essentials(deps, view: StateView, out: ActionOutcome, ess_tree: Any, reduced: dict[str, Any],
                     confirm: list[float], runs: int, mag: float | None) -> tuple[dict[str, Any], dict[str, Any]]:
    """The confirmation was undecided at its cap with the essentials' runs the short side: relaunch the essentials
    tree (the third and last launch) and grow its runs, pooled with the first launch's, against the confirming
    trial. Undecided again stays UNKNOWN: never a difference by default, never a clearance."""
    deps.view.progress("undecided: essentials only again, for more runs")
    earlier = [float(x) for x in reduced.get("samples") or []]
    looks = Looks(confirm, len(earlier) + runs, cap=len(earlier) + GROWING_CAP, magnitude=mag)  # A: all patches
    again = measure_config(deps, view, label="essentials-only-again", speculative=True, results=out.results,
                           runs=runs, tree=ess_tree, more=lambda s: looks.more(earlier + list(s)))
    if not again.get("samples"):
        return reduced, looks.final(earlier)
    pooled = earlier + [float(x) for x in again["samples"]]
    s = summarize(pooled)  # median and CI of the pooled runs, not the first launch's
    merged = {**reduced, "samples": pooled, "median": s.median, "ci_low": s.ci_low, "ci_high": s.ci_high}
    return merged, looks.final(pooled)


@action("disrupt")
def subtract(deps, view: StateView, step, args: dict[str, Any]) -> ActionOutcome:
    """Measure all patches vs only the essentials (+ the patch script), each in its own trial tree, and compare."""
    out = ActionOutcome()
    repo = view.params.get("repo")
    backup_id = view.get("facts.backup_id")
    if not backup_id:
        out.status, out.summary = "error", "no backup of the working tree: refusing to stash"
        out.decisions.append(Decision(step=step.id, title=step.title, status="error", checked="backup exists",
                                      found="no backup", decided="skipped the subtraction",
                                      why="every mutation is backed up first"))
        return out
    ambiguous: list[str] = []
    applied: list[str] = []
    essentials_verified = False
    tree_problem: str | None = None
    essentials = essential_files(view)
    script = view.params.get("patch_script")
    full: dict[str, Any] = {}
    reduced: dict[str, Any] = {}
    comparison: dict[str, Any] = {}
    notes: list[str] = []
    reused = today_all_patches(view)
    runs = int(view.params.get("runs", 5))
    try:
        with contextlib.ExitStack() as trees:
            # Two trial trees (the user's checkout is only read): every change, and essentials (+ the patch script).
            all_tree, ess_tree, tree_problem = _trees(deps, view, str(repo), essentials, script, trees, out)
            if ess_tree is not None:
                applied += list(ess_tree.applied_files) + ([f"script {script}"] if script and
                                                           ess_tree.script_exit == 0 else [])
                ambiguous += [a.line for a in ess_tree.ambiguous]
                if script and ess_tree.script_exit is None:
                    ambiguous.append("patch script did not run")
                essentials_verified = bool(essentials) and sorted(ess_tree.applied_files) == sorted(essentials)
            if all_tree is not None and ess_tree is not None:
                # Every patch applied is today's configuration: its measurement (your running server, or the
                # reproduce launch) is reused, so one launch decides unless the two differ.
                if reused is not None:
                    full = reused
                    notes.append(f"all patches: today's measurement reused ({reused.get('label') or 'spec'}, "
                                 f"{len(reused['samples'])} runs), no launch")
                else:
                    deps.view.progress("measuring with all patches applied")
                    full = measure_config(deps, view, label="all-patches", speculative=True, results=out.results,
                                          runs=runs, tree=all_tree)
                if full.get("samples"):
                    deps.view.progress("measuring with essential patches only (sequential looks on one server)")
                    mag = same_within(view, "spec", full["samples"])
                    looks = Looks(full["samples"], runs, magnitude=mag)
                    reduced = measure_config(deps, view, label="essentials-only", speculative=True,
                                             results=out.results, runs=runs, tree=ess_tree, more=looks.more)
                    comparison = looks.final(reduced.get("samples") or [])
                if reused is not None and reduced.get("samples") and comparison.get("outcome") in ("DIFFERENT", "UNKNOWN"):
                    # A difference sends the run into bisection: confirm it trial against trial, so that nothing
                    # the trial launch does differently from your server (its environment) is taken for a patch.
                    # Undecided at the cap, today's reused runs are the short side: the same launch adds them.
                    deps.view.progress("confirming with all patches in a trial tree")
                    looks = Looks(reduced["samples"], runs, flip=True, magnitude=mag)
                    confirm = measure_config(deps, view, label="all-patches", speculative=True,
                                             results=out.results, runs=runs, tree=all_tree, more=looks.more)
                    if confirm.get("samples"):
                        first = comparison
                        full, comparison = confirm, looks.final(confirm["samples"])
                        notes.append(f"all patches in a trial tree {comparison.get('median_a', 0):.1f} tok/s "
                                     f"(your server {first.get('median_a', 0):.1f}) vs essentials only: "
                                     f"{comparison.get('outcome')}")
                        if comparison.get("outcome") == "UNKNOWN":
                            reduced, comparison = _more_essentials(deps, view, out, ess_tree, reduced,
                                                                   confirm["samples"], runs, mag)
                            notes.append(f"essentials only relaunched for more runs ({len(reduced['samples'])} "
                                         f"in all): {comparison.get('outcome')}")
                    else:
                        comparison = {**comparison, "outcome": "UNRESOLVED"}
                        notes.append("the confirming trial with all patches could not be measured: "
                                     f"{confirm.get('error')}")
    finally:
        # A safety net only: the trials ran in their own trees, so this finds nothing to put back.
        restored = call_tool(deps, "restore_worktree", {"repo": repo, "backup_id": backup_id}, out.results,
                             key="restore_after_subtract")
    outcome = comparison.get("outcome", "UNRESOLVED" if (full.get("error") or reduced.get("error")) else "UNKNOWN")
    # A patch script that says SKIP/WARN leaves the trial's tree in doubt, unless the essentials were also
    # applied from the backup and verified file by file (then the script's output is evidence, not the tree).
    trusted = not ambiguous or essentials_verified
    if not trusted or tree_problem:
        outcome = "UNRESOLVED"  # a trial on a tree we cannot vouch for is never counted as good or bad
    out.facts["subtraction"] = {"outcome": outcome, "comparison": comparison, "problem": tree_problem, "all_patches": full,
                                "essentials_only": reduced, "applied": applied, "ambiguous": ambiguous,
                                "notes": notes, "restored": restored.ok, "restore": restored.output}
    out.summary = (f"all patches {full.get('median', float('nan')):.1f} vs essentials only "
                   f"{reduced.get('median', float('nan')):.1f} tok/s → {outcome}"
                   + (f"; {len(ambiguous)} ambiguous patch-script lines" if ambiguous else "")
                   + "".join(f"; {n}" for n in notes))
    out.status = "ok" if restored.ok and outcome != "UNRESOLVED" else ("error" if not restored.ok else "unresolved")
    improved = comparison.get("verdict") == "better"  # removing the patches made it faster
    decided = ("bisect the non-essential patches" if outcome == "DIFFERENT" and improved else
               "the patches make it faster, not slower: nothing to bisect" if outcome == "DIFFERENT" else
               f"trial unresolved: {tree_problem}" if tree_problem else
               "trial unresolved: the patch script's output is ambiguous and the tree could not be verified"
               if outcome == "UNRESOLVED" and not trusted else
               "the local patches do not explain the numbers; do not bisect")
    out.decisions.append(Decision(
        step=step.id, title=step.title, status=out.status,
        checked="speculative tok/s with all patches vs with only the essential patches "
                f"({', '.join(applied) or 'none'})", found=out.summary, decided=decided,
        why=("comparator DIFFERENT (p ≤ 0.01)" if outcome == "DIFFERENT" else f"comparator {outcome}")
        + ("; ambiguous patch-script output: " + " | ".join(ambiguous) if ambiguous else "")
        + ("; the essential patches were applied from the backup and verified, so the trial stands"
           if ambiguous and trusted else ""),
        evidence=out.commands(60)))
    return out
