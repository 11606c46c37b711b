"""The subtraction experiment: all patches vs essentials only, measured, with the tree restored after."""

from __future__ import annotations

import contextlib
import dataclasses
from typing import Any, NamedTuple

from specdoctor.engine.actions import ActionOutcome, action, run_tool
from specdoctor.engine.actions.measure import measure_config, same_within
from specdoctor.engine.state import Decision, StateView
from specdoctor.errors import ToolRetry, Unresolved
from specdoctor.models import MeasuredFact, ServerFact, SubtractionFact
from specdoctor.stats.comparator import GROWING_CAP
from specdoctor.stats.comparator import GrowingArm as Looks
from specdoctor.stats.summary import summarize
from specdoctor.toolkit import ToolResult
from specdoctor.tools.checkout.bisect import Essentials, TreeIdentity
from specdoctor.tools.checkout.trial_code import tree_problem as untrusted_tree
from specdoctor.tools.checkout.trial_code import trial_code
from specdoctor.tools.checkout.trial_tree import TrialTree, prepare_source
from specdoctor.tools.checkout.worktree import restore_worktree

__all__ = ["subtract", "today_all_patches", "essential_files"]


def today_all_patches(view: StateView) -> MeasuredFact | None:
    """Today's speculative measurement when it stands for "every patch applied" with the subtraction's launch line
    and workload (your running server, or the reproduce launch from the checkout); None when it does not."""
    facts = view.run_facts
    today = facts.measure_today_workload if facts.measure_today_workload is not None else facts.measure
    spec = today.spec.model_copy(deep=True) if today is not None and today.spec is not None else None
    if spec is None or spec.error or len(spec.samples) < 3:
        return None
    if spec.label.startswith("spec (running server") and (facts.server or ServerFact()).launch != facts.launch:
        return None  # --launch names another configuration than the one your server runs
    return spec


def essential_files(view: StateView) -> list[str]:
    found = view.result("essentials", Essentials)
    return list((found.essential if found is not None else None) or view.params.essential or [])


def _trees(deps, view: StateView, repo: str, essentials: list[str], script: str | None,
           stack: contextlib.ExitStack, out: ActionOutcome) -> tuple[TrialTree | None, TrialTree | None, str | None]:
    """Build the two arms' trial trees (removed when `stack` closes); a problem instead of a tree on failure."""
    ctx = deps.tool_ctx
    try:
        everything = prepare_source(ctx, repo).changes_paths()
        all_tree = stack.enter_context(trial_code(ctx, repo, "subtract-all", everything))
        ess_tree = stack.enter_context(trial_code(ctx, repo, "subtract-essentials", essentials, script=script,
                                                  python=view.params.python))
    except (ToolRetry, Unresolved) as exc:
        return None, None, f"could not build the trial trees: {exc}"
    for t in (all_tree, ess_tree):
        out.facts.trial_trees = [*(out.facts.trial_trees or []), t.summary_line()]
        problem = untrusted_tree(t)
        if problem:
            return None, None, problem
    return all_tree, ess_tree, None


def _more_essentials(deps, view: StateView, out: ActionOutcome, ess_tree: Any, reduced: MeasuredFact,
                     confirm: list[float], runs: int, mag: float | None) -> tuple[MeasuredFact, dict[str, Any]]:
    """The confirmation was undecided at its cap with the essentials' runs the short side: relaunch the essentials
    tree (the third and last launch) and grow its runs, pooled with the first launch's, against the confirming
    trial. Undecided again stays UNKNOWN: never a difference by default, never a clearance."""
    deps.view.progress("undecided: essentials only again, for more runs")
    earlier = [float(x) for x in reduced.samples]
    looks = Looks(confirm, len(earlier) + runs, cap=len(earlier) + GROWING_CAP, magnitude=mag)  # A: all patches
    again = measure_config(deps, view, label="essentials-only-again", speculative=True, results=out.results,
                           runs=runs, tree=ess_tree, more=lambda s: looks.more(earlier + list(s)))
    if not again.samples:
        return reduced, looks.final(earlier)
    pooled = earlier + [float(x) for x in again.samples]
    s = summarize(pooled)  # median and CI of the pooled runs, not the first launch's
    merged = reduced.model_copy(update={"samples": pooled, "median": s.median, "ci_low": s.ci_low,
                                        "ci_high": s.ci_high})
    return merged, looks.final(pooled)


@dataclasses.dataclass
class _Arms:
    """What the subtraction learns while its trial trees exist: applied files, both arms, their comparison."""

    ambiguous: list[str] = dataclasses.field(default_factory=list)
    applied: list[str] = dataclasses.field(default_factory=list)
    essentials_verified: bool = False
    searched_none: bool = False
    tree_problem: str | None = None
    full: MeasuredFact = dataclasses.field(default_factory=MeasuredFact)
    reduced: MeasuredFact = dataclasses.field(default_factory=MeasuredFact)
    comparison: dict[str, Any] = dataclasses.field(default_factory=dict)
    notes: list[str] = dataclasses.field(default_factory=list)


class _Step(NamedTuple):
    """The inputs every measurement of the subtraction shares."""

    deps: Any
    view: StateView
    out: ActionOutcome
    runs: int


SEARCHED_NOTE = "the essentials search's launch of the same tree measured"
"""The note for a tree taken from the essentials search instead of launched (one per tree; benchmarks count it)."""


def _searched(s: _Step, arms: _Arms, tree: TrialTree, looks: Looks, what: str) -> MeasuredFact | None:
    """The essentials search's benchmark of this very tree (same HEAD, files and hunks, no script), when it decides
    the comparison at its look: the launch it would take is spared. Undecided, the tree is launched as before, so
    that the sequential looks can grow on one server."""
    found = s.view.result("essentials", Essentials)
    bench = found.measured(TreeIdentity.of(tree)) if found is not None else None
    if bench is None:
        return None
    samples = [float(x) for x in bench["samples"]]
    # Undecided at the looks' cap, the runs stand: a launch of the same tree would take the same looks again
    # (the essentials search grew them on its server against today's runs, find_essential_patches' bench_against).
    if looks.final(samples).get("outcome") == "UNKNOWN" and looks.more(samples) > 0:
        arms.notes.append(f"{what}: the essentials search's benchmark of the same tree was undecided "
                          f"({len(samples)} runs), so it was launched for more")
        return None
    undecided = " (undecided at the cap)" if looks.final(samples).get("outcome") == "UNKNOWN" else ""
    arms.notes.append(f"{what}: {SEARCHED_NOTE} ({len(samples)} runs{undecided}), no launch")
    return MeasuredFact.model_validate(bench)


@action("disrupt")
def subtract(deps, view: StateView, step, args: dict[str, Any]) -> ActionOutcome:
    """Measure all patches vs only the essentials (+ the patch script), each in its own trial tree, and compare."""
    out = ActionOutcome()
    repo = view.params.repo
    backup_id = view.run_facts.backup_id
    if not backup_id:
        out.status, out.summary = "error", "no backup of the working tree: refusing to stash"
        out.decisions.append(Decision(step=step.id, title=step.title, status="error", checked="backup exists",
                                      found="no backup", decided="skipped the subtraction",
                                      why="every mutation is backed up first"))
        return out
    # a search that found no essential patch launched the server without any: none can be missing from a tree
    found = view.result("essentials", Essentials)
    arms = _Arms(searched_none=found is not None and not found.essential)
    essentials = essential_files(view)
    script = view.params.patch_script
    reused = today_all_patches(view)
    runs = int(view.params.runs)
    try:
        with contextlib.ExitStack() as trees:
            # Two trial trees (the user's checkout is only read): every change, and essentials (+ the patch script).
            all_tree, ess_tree, arms.tree_problem = _trees(deps, view, str(repo), essentials, script, trees, out)
            if ess_tree is not None:
                _note_essentials_tree(arms, ess_tree, essentials, script)
            if all_tree is not None and ess_tree is not None:
                _measure_arms(_Step(deps, view, out, runs), arms, all_tree, ess_tree, reused)
    finally:
        # A safety net only: the trials ran in their own trees, so this finds nothing to put back.
        restored = run_tool(deps, restore_worktree, {"repo": repo, "backup_id": backup_id}, out.results,
                            key="restore_after_subtract").result
    _conclude(out, step, arms, restored)
    return out


def _note_essentials_tree(arms: _Arms, ess_tree: TrialTree, essentials: list[str], script: str | None) -> None:
    """What the essentials tree really holds: the files applied, the script's doubtful lines, verified or not.
    Verified: every essential patch applied from the backup — or none needed, as measured by the essentials search
    (the server started without any), so a doubtful script line cannot have left one out."""
    arms.applied += list(ess_tree.applied_files) + ([f"script {script}"] if script and
                                                    ess_tree.script_exit == 0 else [])
    arms.ambiguous += [a.line for a in ess_tree.ambiguous]
    if script and ess_tree.script_exit is None:
        arms.ambiguous.append("patch script did not run")
    arms.essentials_verified = (bool(essentials) or arms.searched_none) and \
        sorted(ess_tree.applied_files) == sorted(essentials)


def _measure_arms(s: _Step, arms: _Arms, all_tree: TrialTree, ess_tree: TrialTree,
                  reused: MeasuredFact | None) -> None:
    """All patches (today's measurement reused, else launched), then essentials only in sequential looks; a
    difference against the reused measurement is confirmed trial against trial."""
    mag: float | None = None
    # Every patch applied is today's configuration: its measurement (your running server, or the
    # reproduce launch) is reused, so one launch decides unless the two differ.
    if reused is not None:
        arms.full = reused
        arms.notes.append(f"all patches: today's measurement reused ({reused.label or 'spec'}, "
                          f"{len(reused.samples)} runs), no launch")
    else:
        s.deps.view.progress("measuring with all patches applied")
        arms.full = measure_config(s.deps, s.view, label="all-patches", speculative=True, results=s.out.results,
                                   runs=s.runs, tree=all_tree)
    if arms.full.samples:
        s.deps.view.progress("measuring with essential patches only (sequential looks on one server)")
        mag = same_within(s.view, "spec", arms.full.samples)
        looks = Looks(arms.full.samples, s.runs, magnitude=mag)
        arms.reduced = _searched(s, arms, ess_tree, looks, "essentials only") or \
            measure_config(s.deps, s.view, label="essentials-only", speculative=True, results=s.out.results,
                           runs=s.runs, tree=ess_tree, more=looks.more)
        if arms.reduced.samples:
            arms.comparison = looks.final(arms.reduced.samples)
        else:  # it did not start or serve (a launch beside a server that fills the cards): nothing to compare
            arms.comparison = {"outcome": "UNRESOLVED"}
            arms.notes.append(f"essentials only could not be measured: {arms.reduced.error}")
    if reused is not None and arms.reduced.samples and \
            arms.comparison.get("outcome") in ("DIFFERENT", "UNKNOWN"):
        _confirm_in_trial(s, arms, all_tree, ess_tree, mag)


def _confirm_in_trial(s: _Step, arms: _Arms, all_tree: TrialTree, ess_tree: TrialTree, mag: float | None) -> None:
    """A difference sends the run into bisection: confirm it trial against trial, so that nothing the trial launch
    does differently from your server (its environment) is taken for a patch. Undecided at the cap, today's reused
    runs are the short side: the same launch adds them."""
    s.deps.view.progress("confirming with all patches in a trial tree")
    looks = Looks(arms.reduced.samples, s.runs, flip=True, magnitude=mag)
    confirm = _searched(s, arms, all_tree, looks, "all patches in a trial tree") or \
        measure_config(s.deps, s.view, label="all-patches", speculative=True, results=s.out.results, runs=s.runs,
                       tree=all_tree, more=looks.more)
    if not confirm.samples:
        arms.comparison = {**arms.comparison, "outcome": "UNRESOLVED"}
        arms.notes.append(f"the confirming trial with all patches could not be measured: {confirm.error}")
        return
    first = arms.comparison
    arms.full, arms.comparison = confirm, looks.final(confirm.samples)
    arms.notes.append(f"all patches in a trial tree {arms.comparison.get('median_a', 0):.1f} tok/s "
                      f"(your server {first.get('median_a', 0):.1f}) vs essentials only: "
                      f"{arms.comparison.get('outcome')}")
    if arms.comparison.get("outcome") == "UNKNOWN":
        arms.reduced, arms.comparison = _more_essentials(s.deps, s.view, s.out, ess_tree, arms.reduced,
                                                         confirm.samples, s.runs, mag)
        arms.notes.append(f"essentials only relaunched for more runs ({len(arms.reduced.samples)} "
                          f"in all): {arms.comparison.get('outcome')}")


def _outcome(arms: _Arms) -> tuple[str, bool]:
    """The comparator's outcome, UNRESOLVED on a tree we cannot vouch for; and whether the tree is trusted."""
    outcome = arms.comparison.get("outcome", "UNRESOLVED" if (arms.full.error or arms.reduced.error) else "UNKNOWN")
    # A patch script that says SKIP/WARN leaves the trial's tree in doubt, unless the essentials were also
    # applied from the backup and verified file by file (then the script's output is evidence, not the tree).
    trusted = not arms.ambiguous or arms.essentials_verified
    if not trusted or arms.tree_problem:
        outcome = "UNRESOLVED"  # a trial on a tree we cannot vouch for is never counted as good or bad
    return outcome, trusted


def _conclude(out: ActionOutcome, step, arms: _Arms, restored: ToolResult) -> None:
    """The subtraction fact, summary, status and decision, once the trees are gone and the worktree checked."""
    outcome, trusted = _outcome(arms)
    full, reduced, ambiguous = arms.full, arms.reduced, arms.ambiguous
    out.facts.subtraction = SubtractionFact.model_validate({
        "outcome": outcome, "comparison": arms.comparison, "problem": arms.tree_problem, "all_patches": full,
        "essentials_only": reduced, "applied": arms.applied, "ambiguous": ambiguous, "notes": arms.notes,
        "restored": restored.ok, "restore": restored.output})
    out.summary = (f"all patches {_median(full):.1f} vs essentials only {_median(reduced):.1f} tok/s → {outcome}"
                   + (f"; {len(ambiguous)} ambiguous patch-script lines" if ambiguous else "")
                   + "".join(f"; {n}" for n in arms.notes))
    out.status = "ok" if restored.ok and outcome != "UNRESOLVED" else ("error" if not restored.ok else "unresolved")
    out.decisions.append(Decision(
        step=step.id, title=step.title, status=out.status,
        checked="speculative tok/s with all patches vs with only the essential patches "
                f"({', '.join(arms.applied) or 'none'})", found=out.summary,
        decided=_decided(outcome, arms, trusted),
        why=("comparator DIFFERENT (p ≤ 0.01)" if outcome == "DIFFERENT" else f"comparator {outcome}")
        + ("; ambiguous patch-script output: " + " | ".join(ambiguous) if ambiguous else "")
        + (("; the essentials search found none (the server started without any patch), so the trial stands"
            if arms.searched_none else
            "; the essential patches were applied from the backup and verified, so the trial stands")
           if ambiguous and trusted else ""),
        evidence=out.commands(60)))


def _median(m: MeasuredFact) -> float:
    return m.median if m.median is not None else float("nan")


def _decided(outcome: str, arms: _Arms, trusted: bool) -> str:
    """What the outcome decides: bisect only when removing the patches made it faster."""
    improved = arms.comparison.get("verdict") == "better"  # removing the patches made it faster
    return ("bisect the non-essential patches" if outcome == "DIFFERENT" and improved else
            "the patches make it faster, not slower: nothing to bisect" if outcome == "DIFFERENT" else
            f"trial unresolved: {arms.tree_problem}" if arms.tree_problem else
            "trial unresolved: the patch script's output is ambiguous and the tree could not be verified"
            if outcome == "UNRESOLVED" and not trusted else
            "the local patches do not explain the numbers; do not bisect")
