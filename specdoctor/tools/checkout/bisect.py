"""Disruptive repo tools: find the patches the server needs to start, and bisect the rest to the slow culprit(s)."""

from __future__ import annotations

import dataclasses
import itertools
import statistics
from collections.abc import Callable
from typing import Any, Literal

from pydantic import BaseModel, Field
from scipy.stats import norm

from specdoctor.errors import ToolFailed, ToolRetry, Unresolved
from specdoctor.models.phases import PhaseEffect, PhaseTimes
from specdoctor.stats.comparator import GrowingArm
from specdoctor.stats.ddmin import (
    CachedOracle,
    Outcome,
    SearchResult,
    TrialRecord,
    classify,
    isolate,
    prefix_search,
)
from specdoctor.stats.nearer import POWER_Z, level_at, midpoint_looks, midpoint_z, side_of_midpoint
from specdoctor.stats.phases import cycle_account_line, phase_deltas, phase_effect
from specdoctor.stats.summary import summarize
from specdoctor.toolkit import ToolContext, registry, tool
from specdoctor.tools.checkout.bisect_effects import CulpritEffect, culprit_effects, effects_search
from specdoctor.tools.checkout.trial_code import WrongTree, check_origin, in_tree, tree_problem, trial_code
from specdoctor.tools.checkout.trial_tree import TrialTree
from specdoctor.tools.checkout.worktree import Backup, ensure_backup, restore
from specdoctor.tools.serving.arm_profiles import ArmProfiler, ArmProfiles, confirming_arm, profiled_how
from specdoctor.tools.serving.trial import LaunchConfig, LaunchFailed, MeasureFailed, profile, profiled, trial
from specdoctor.tools.serving.trial import measure as measure_

__all__ = ["EssentialInput", "Essentials", "BisectInput", "BisectResult", "Trial", "TreeIdentity", "Bench",
           "find_essential_patches",
           "bisect_patches", "search_patches", "sequential_trial", "confirmed_phase_effect", "arms_phase_effect"]


_TREE_IDS = itertools.count(1)


class TreeIdentity(BaseModel):
    """Enough of a trial tree to tell whether another tree holds the same code: HEAD, the files and hunks taken
    from the user's changes, and whether a patch script ran in it."""

    head: str
    files: list[str] = Field(default_factory=list)
    hunks: dict[str, list[int]] = Field(default_factory=dict)
    script: bool = False

    @classmethod
    def of(cls, tree: TrialTree) -> TreeIdentity:
        return cls(head=tree.head, files=sorted(tree.applied_files), hunks=dict(tree.applied_hunks),
                   script=tree.script_exit is not None)


class Bench(BaseModel):
    """A benchmark to run on a start-only trial while its server is up (one look, warm-up first)."""

    runs: int = Field(ge=3)
    requests_per_run: int = Field(default=3, ge=1)
    max_new_tokens: int = Field(default=128, ge=2)
    against: list[float] = Field(default_factory=list, description="Runs of the arm this tree will be compared with "
                                 "(today's, every patch applied): while undecided, more runs on the same server, "
                                 "in the subtraction's own looks (stats.comparator.GrowingArm).")


class Trial(BaseModel):
    """One server launch: which patches, what came out, and why when it could not be judged."""

    patches: list[str]
    outcome: str = Field(description="regressed / same / unresolved (bisect); starts / fails / unresolved.")
    cause: str | None = None
    samples: list[float] = Field(default_factory=list)
    median: float | None = None
    purpose: str = ""
    tree: TreeIdentity | None = Field(default=None, description="What the trial's tree held (a start-only trial "
                                      "that was also benchmarked: a later step may reuse it for the same tree).")
    benchmark: dict[str, Any] | None = Field(default=None, description="The benchmark of a start-only trial "
                                             "(BenchmarkResult fields), when one was asked for.")


class _Runner:
    """Runs trials for one tool call: apply → launch → (measure) → stop, recording everything."""

    def __init__(self, ctx: ToolContext, repo: str, launch: str, python: str | None, port: int | None,
                 backup: Backup, essential: list[str], env: dict[str, str] | None = None,
                 arms: ArmProfiles | None = None):
        self.ctx = dataclasses.replace(ctx, auto_approve=True)  # this disruptive call was approved as a whole
        self.repo, self.launch, self.python, self.port = repo, launch, python, port
        self.backup, self.essential = backup, essential
        self.env = dict(env or {})
        self.trials: list[Trial] = []
        self.launches = 0
        self.profiled = 0
        self.arms = arms or ArmProfiles()

    def run(self, subset: list[str], purpose: str, measure: dict[str, Any] | None,
            judge: Judge | None = None, bench: Bench | None = None) -> Trial:
        rec = Trial(patches=subset, outcome="unresolved", purpose=purpose)
        self.trials.append(rec)
        try:
            # The trial's own tree: HEAD + the essentials + this subset; the user's checkout is only read.
            with trial_code(self.ctx, self.repo, f"trial-{next(_TREE_IDS)}", self.essential + subset) as tree:
                problem = tree_problem(tree)
                if problem:
                    rec.cause = problem
                    return rec
                return self._launch(rec, tree, measure, judge, bench)
        except ToolRetry as exc:
            rec.cause = f"patch: {exc}"
            return rec
        except Unresolved as exc:  # a conflict: recorded, never counted good or bad
            rec.cause = f"patch conflict: {exc}"
            return rec

    def _launch(self, rec: Trial, tree: TrialTree, measure: dict[str, Any] | None, judge: Any,
                bench: Bench | None = None) -> Trial:
        self.launches += 1
        config = in_tree(LaunchConfig(command=self.launch, python=self.python, port=self.port, env=self.env,
                                      label=f"trial-{len(self.trials)}"), tree)
        try:
            with trial(self.ctx, config) as handle:
                check_origin(handle, tree)
                if measure is None:
                    rec.outcome = "starts"
                    if bench is not None:
                        self._bench(rec, tree, handle, bench)
                    return rec

                def more(n: int) -> list[float]:
                    m = measure_(handle, runs=n, requests_per_run=measure["requests_per_run"],
                                 max_new_tokens=measure["max_new_tokens"], label=rec.purpose[:40],
                                 warmup_runs=0 if rec.samples else 1)
                    return [float(x) for x in m.samples]

                sequential_trial(rec, more, midpoint_looks(measure["runs"], measure["max_runs"]), judge)
                if rec.samples:  # an arm a confirmation may need: profiled now, before this server stops
                    self.arms.take(rec.patches, rec.purpose, handle, requests_per_run=measure["requests_per_run"],
                                   max_new_tokens=measure["max_new_tokens"], key=f"phases_trial_{len(self.trials)}",
                                   outcome=rec.outcome)
        except LaunchFailed as exc:
            rec.outcome = "fails" if measure is None else "unresolved"
            rec.cause = f"server did not start: {exc.result.summary}"[:400]
            return rec
        except MeasureFailed as exc:
            rec.cause = f"benchmark failed: {exc.result.summary}"[:400]
            return rec
        except WrongTree as exc:  # measured code we cannot vouch for: never counted
            rec.cause = str(exc)[:400]
            return rec
        rec.median = statistics.median(rec.samples) if rec.samples else None
        return rec

    @staticmethod
    def _bench(rec: Trial, tree: TrialTree, handle: Any, bench: Bench) -> None:
        """Benchmark a server that has started while it is up: the launch is paid already, and a later step that
        would build the same tree can take this measurement instead of a launch of its own. A failed benchmark
        leaves the start standing (this trial asked only that)."""
        try:
            m = measure_(handle, runs=bench.runs, requests_per_run=bench.requests_per_run,
                         max_new_tokens=bench.max_new_tokens, label=rec.purpose[:40], warmup_runs=1)
        except MeasureFailed as exc:
            rec.cause = f"started; benchmark failed: {exc.result.summary}"[:400]
            return
        rec.tree = TreeIdentity.of(tree)
        rec.benchmark = dict(m.model_dump(mode="json"), label=f"essentials search: {rec.purpose}")
        rec.samples = [float(x) for x in m.samples]
        if len(bench.against) >= 3:
            _grow(rec, handle, bench)
        rec.median = statistics.median(rec.samples) if rec.samples else None

    def profile(self, subset: list[str], label: str, measure: dict[str, Any]) -> tuple[PhaseTimes | None, str]:
        """Launch essentials + `subset` in its own tree and read its phase times from the engine's profiler only
        (no tok/s trial: that one was judged already). (None, why) when it cannot."""
        try:
            with trial_code(self.ctx, self.repo, f"trial-{next(_TREE_IDS)}", self.essential + subset) as tree:
                problem = tree_problem(tree)
                if problem:
                    return None, problem
                self.profiled += 1
                config = in_tree(LaunchConfig(command=self.launch, python=self.python, port=self.port, env=self.env,
                                              label=f"phases-{label}"), tree)
                with trial(self.ctx, profiled(self.ctx, config)) as handle:
                    check_origin(handle, tree)
                    return profile(handle, requests_per_run=measure["requests_per_run"],
                                   max_new_tokens=measure["max_new_tokens"])
        except (ToolRetry, Unresolved, WrongTree) as exc:  # LaunchFailed is Unresolved
            return None, f"{type(exc).__name__}: {exc}"[:200]


def arms_phase_effect(slow: list[str], fast: list[str], prof: ArmProfiler, what: str,
                      labels: tuple[str, str] = ("slow", "fast")) -> tuple[PhaseEffect | None, str, bool]:
    """Profile the two arms of a confirming comparison (`prof(arm, label)`, the fast one only when the slow one
    worked) and name the phase they differ in: (effect or None, what was found, whether both arms were profiled)."""
    a, why_a = prof(list(slow), labels[0])
    b, why_b = prof(list(fast), labels[1]) if a is not None else (None, "")
    if a is None or b is None:
        return None, f"not profiled: {why_a or why_b}", False
    eff = phase_effect(a, b, what)
    account = cycle_account_line(a, b)  # where the cycle's growth went, the parts adding up to its wall
    tail = f"; {account}" if account else ""
    if eff is not None:
        return eff, f"{eff.line()} ({eff.source}){tail}", True
    moved = "; ".join(f"{d.phase} {d.delta_ms:+.2f} ms [{d.ci[0]:.2f}, {d.ci[1]:.2f}]" for d in phase_deltas(a, b))
    return None, f"no phase named (none moved longer, or none carries the cycle's growth): {moved or 'no phase samples'}{tail}", True


def independent_phases(effects: list[CulpritEffect], prof: ArmProfiler) -> tuple[list[CulpritEffect], list[str]]:
    """Each independent culprit alone on the essentials against the essentials only (profiled once): the phase
    each one moves (1 + k launches; the set's two arms would mix two phases into one)."""
    fast: dict[str, tuple[PhaseTimes | None, str]] = {}

    def cached(sub: list[str], label: str) -> tuple[PhaseTimes | None, str]:
        if not sub:
            if "" not in fast:
                fast[""] = prof(sub, label)
            return fast[""]
        return prof(sub, label)

    out, notes = [], []
    for c in effects:
        who = c.path.rsplit("/", 1)[-1]
        eff, found, _ = arms_phase_effect([c.path], [], cached, f"essentials + {who} vs essentials only",
                                          labels=(who, "essentials"))
        out.append(c.model_copy(update={"phase_effect": eff}))
        notes.append(f"phases of {who} alone vs essentials only: {found}")
    return out, notes


def confirmed_phase_effect(culprits: list[str], items: list[str], prof: ArmProfiler
                           ) -> tuple[PhaseEffect | None, list[str]]:
    """The culprits' phase: the arms of their confirming comparison — the culprits alone on the essentials (slow)
    and every patch but them (fast)."""
    who = ", ".join(c.rsplit("/", 1)[-1] for c in culprits)
    eff, found, _ = arms_phase_effect(culprits, [p for p in items if p not in culprits], prof,
                                      f"essentials + {who} vs every patch but {who}", labels=("culprits", "rest"))
    if eff is None:
        return None, [f"phases of the confirming arms: {found}: no phase effect claimed"]
    return eff, [f"phases of the confirming arms: {found}"]


Judge = Callable[[list[float]], "Outcome | None"]


def sequential_trial(rec: Trial, more: Callable[[int], list[float]], looks: list[int], judge: Judge | None) -> None:
    """Measure up to each look, judge, and buy more runs while undecided (capped at the last look): an
    undecided trial stays 'unresolved' with its cause, never a guess. No judge: the first look is the answer."""
    for look in looks:
        if look > len(rec.samples):
            rec.samples += more(look - len(rec.samples))
        verdict = judge(rec.samples) if judge else "regressed"
        if verdict is not None:
            rec.outcome = verdict
            return
    rec.cause = f"comparator undecided after {len(rec.samples)} runs"


def _known(outcome: Outcome) -> Judge:
    """A judge for a reference measured again: its outcome is what it is known to be."""
    return lambda _samples: outcome


def _two_sided(refs: dict[str, list[float]]) -> bool:
    """Both references measured (>= 2 runs each) and the fast one faster: the midpoint test applies."""
    slow, fast = refs["slow"], refs["fast"]
    return (len(slow) >= 2 and len(fast) >= 2 and min(slow + fast) > 0
            and statistics.fmean(fast) > statistics.fmean(slow))


def _needed_z(looks: list[int]) -> float:
    """Expected |t| a trial at the cap needs: the last look's critical value plus the power margin."""
    return float(norm.isf(level_at(looks[-1], looks) / 2)) + POWER_Z


class EssentialInput(BaseModel):
    """Arguments of find_essential_patches."""

    repo: str = Field(description="Path of the git checkout on the host.")
    launch: str = Field(description="The speculative server's launch line.")
    python: str | None = Field(default=None, description="Python on the host that runs the server.")
    essential: list[str] = Field(default_factory=list, description="The user's essential list (no launches).")
    port: int | None = Field(default=None, description="Port for trial servers (default: the launch line's).")
    env: dict[str, str] = Field(default_factory=dict, description="Env for trial servers (e.g. the running server's).")
    restore: bool = Field(default=True, description="Put the tree back (verified) at the end.")
    bench_runs: int = Field(default=0, ge=0, description="Benchmark the boundary trials (no patch, and every patch "
                            "when that one is launched) with this many runs while they are up (0: start only): the "
                            "subtraction takes a measurement of the very tree it would build instead of launching "
                            "it again.")
    bench_against: list[float] = Field(default_factory=list, description="Today's runs with every patch (the "
                                       "subtraction's other arm): the no-patch trial's benchmark grows while its "
                                       "comparison with them is undecided, so the subtraction need not relaunch it.")
    requests_per_run: int = Field(default=3, ge=1)
    max_new_tokens: int = Field(default=128, ge=2)


class Essentials(BaseModel):
    """The minimal patch set the speculative server needs to start."""

    essential: list[str]
    source: Literal["user", "search"]
    launches: int
    trials: list[Trial] = Field(default_factory=list)
    restored: bool = False

    def measured(self, tree: TreeIdentity) -> dict[str, Any] | None:
        """The benchmark of a trial whose tree held exactly the same code as `tree` (HEAD, files, hunks, and no
        patch script in either), or None: only the same code may stand in for a launch."""
        for t in self.trials:
            if t.benchmark and len(t.benchmark.get("samples") or []) >= 3 and t.tree == tree and not tree.script:
                return t.benchmark
        return None

    def summary_line(self) -> str:
        benched = sum(1 for t in self.trials if t.benchmark)
        return f"{len(self.essential)} essential patches ({self.source}, {self.launches} launches" + \
            (f", {benched} benchmarked for the subtraction" if benched else "") + "): " + \
            ", ".join(p.rsplit("/", 1)[-1] for p in self.essential)


def _match(paths: list[str], changed: list[str]) -> list[str]:
    out = []
    for p in paths:
        hit = [c for c in changed if c == p or c.endswith("/" + p.lstrip("/"))]
        if not hit:
            raise ToolRetry(f"{p!r} is not one of the changed paths of the backup")
        out.append(hit[0])
    return out


def _finish(ctx: ToolContext, repo: str, backup: Backup, runner: _Runner | None, do_restore: bool) -> bool:
    if runner is not None:
        registry.call(runner.ctx, "stop_server", {"pgid": None})
    if do_restore:
        return restore(ctx, repo, backup.backup_id).verified
    return False


def _grow(rec: Trial, handle: Any, bench: Bench) -> None:
    """More runs on the server that is up while its comparison with `bench.against` is undecided, up to the
    subtraction's cap: the subtraction otherwise launched this very tree again only to take the same looks (#46).
    A failed benchmark keeps the runs so far."""
    looks = GrowingArm(bench.against, bench.runs)
    while (n := looks.more(rec.samples)) > 0:
        try:
            m = measure_(handle, runs=n, requests_per_run=bench.requests_per_run, max_new_tokens=bench.max_new_tokens,
                         label=rec.purpose[:40], warmup_runs=0)
        except MeasureFailed:
            break
        rec.samples += [float(x) for x in m.samples]
    s = summarize(rec.samples)
    rec.median = s.median
    rec.benchmark = dict(rec.benchmark or {}, samples=list(rec.samples), median=s.median, ci_low=s.ci_low,
                         ci_high=s.ci_high)


def _every_patch_starts(runner: _Runner, changed: list[str], oracle: CachedOracle[str], bench: Bench | None) -> None:
    """Launch every patch applied, the search's upper boundary, only when the no-patch tree did not start.

    Why it is safe to skip otherwise: the search asks one question, "which patches can the server not start
    without?". A server that started with no patch answers it (none) whatever every patch does, so that launch
    would decide nothing. Its benchmark was only ever taken by the subtraction's confirming trial (a difference
    seen against today's running server), which launches the same tree itself when it needs it: one launch fewer
    wherever no patch is essential and the subtraction finds no difference, the same count where it does. When
    HEAD alone does not start, the boundary is launched (and must start) exactly as before, then the prefix search.
    """
    if runner.run(sorted(changed), "all patches", None, bench=bench).outcome != "starts":
        raise ToolFailed("the server does not start even with every patch applied: " +
                         (runner.trials[-1].cause or "?"))
    oracle.seed(frozenset(changed), "regressed")


@tool(effect="disrupt")
def find_essential_patches(ctx: ToolContext, args: EssentialInput) -> Essentials:
    """The minimal set of patches without which the speculative server fails to start.

    From the user's list when given (no launch); otherwise searched by launching with subsets
    (shortest-prefix delta debugging on "starts / does not start"). The tree is restored at the end.
    """
    backup = ensure_backup(ctx, args.repo)
    if args.essential:
        return Essentials(essential=_match(args.essential, backup.changed), source="user", launches=0)
    runner = _Runner(ctx, args.repo, args.launch, args.python, args.port, backup, [], env=args.env)
    bench = Bench(runs=args.bench_runs, requests_per_run=args.requests_per_run,
                  max_new_tokens=args.max_new_tokens) if args.bench_runs >= 3 else None
    ok = False
    try:
        oracle: CachedOracle[str] = CachedOracle(
            lambda s: "regressed" if runner.run(sorted(s), "start?", None).outcome == "starts" else "same")
        # No patch first: when HEAD alone starts, no patch is essential and the every-patch launch would decide
        # nothing (see `_every_patch_starts`). The no-patch tree is the subtraction's essentials tree (no script): benchmarked
        # while up, it spares the subtraction that launch.
        if backup.changed:
            grow = bench.model_copy(update={"against": list(args.bench_against)}) if bench is not None else None
            none = runner.run([], "no patches", None, bench=grow)
            oracle.seed(frozenset(), "regressed" if none.outcome == "starts" else "same")
        if not backup.changed or oracle([], "no patches") != "regressed":
            _every_patch_starts(runner, backup.changed, oracle, bench)
        found = [] if oracle([], "no patches") == "regressed" else prefix_search(backup.changed, oracle)
        result = Essentials(essential=sorted(found), source="search", launches=runner.launches,
                            trials=runner.trials)
        ok = True
    finally:
        restored = _finish(ctx, args.repo, backup, runner, args.restore)
    if ok:
        result.restored = restored
    return result


class BisectInput(BaseModel):
    """Arguments of bisect_patches."""

    repo: str = Field(description="Path of the git checkout on the host.")
    launch: str = Field(description="The speculative server's launch line.")
    python: str | None = None
    essential: list[str] = Field(default_factory=list, description="Always applied, never bisected.")
    order: list[str] = Field(default_factory=list, description="Priority order (triage_diffs); others follow.")
    patches: list[str] | None = Field(default=None, description="Candidates (default: every non-essential change).")
    port: int | None = None
    env: dict[str, str] = Field(default_factory=dict, description="Env for trial servers (e.g. the running server's).")
    runs: int = Field(default=5, ge=3, description="Benchmark runs per look.")
    max_runs: int = Field(default=40, ge=3, description="Runs per trial before it is unresolved (looks at runs, "
                          "doubling, then this cap: an undecided comparison buys more runs, never a guess).")
    requests_per_run: int = Field(default=3, ge=1)
    max_new_tokens: int = Field(default=128, ge=2)
    magnitude_pct: float = Field(default=10.0, gt=0, description="Smallest slowdown that matters, % of the slow ref.")
    reference_slow: list[float] | None = Field(default=None, description="tok/s with all patches (skips a launch).")
    reference_fast: list[float] | None = Field(default=None, description="tok/s with essentials only.")
    confirm: bool = Field(default=True, description="Confirm both ways (False: candidates only, no culprit named).")
    effects: bool = Field(default=True, description="When the slow/fast search confirms no culprit and both "
                          "references are given, search by effect sizes: independent culprits each with its share.")
    phases: bool = Field(default=True, description="Once culprits are confirmed, the confirming comparison's two "
                         "arms' phase times (2x2 short runs each) for the phase they move: taken on the trials that "
                         "ran those arms while up; an arm no trial profiled is launched once more.")
    restore: bool = True


class BisectResult(BaseModel):
    """Culprit patch(es), every trial with its cause, and the launches used."""

    verdict: str
    culprits: list[str] = Field(default_factory=list, description="Only a set confirmed both ways by trials.")
    confirmed: bool = False
    candidates: list[str] = Field(default_factory=list, description="When unresolved: where it may be (not blamed).")
    launches: int
    naive_launches: int = Field(description="What one-at-a-time would have needed (P + 1).")
    order: list[str] = Field(default_factory=list)
    trials: list[Trial] = Field(default_factory=list)
    search: list[TrialRecord] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)
    restored: bool = False
    phase_effect: PhaseEffect | None = Field(default=None, description="The confirmed culprits' effect on the phase "
                                             "they touch (both confirming arms profiled).")
    phase_launches: int = Field(default=0, description="Launches the phase profile took (not in `launches`).")
    phase_from_trials: int = Field(default=0, description="Arms whose phase profile came from their own trial's "
                                   "server, taken while it was up (no launch).")
    culprit_effects: list[CulpritEffect] = Field(default_factory=list, description="The effect search's culprits, "
                                                 "each with its own effect and share (additive, checked both ways).")

    def summary_line(self) -> str:
        who = ", ".join(c.rsplit("/", 1)[-1] for c in self.culprits) or "none"
        if not self.culprits and self.candidates:
            return (f"{self.verdict}: candidates " + ", ".join(c.rsplit("/", 1)[-1] for c in self.candidates) +
                    f" (no culprit named) in {self.launches} launches")
        phases = (f"; {self.phase_effect.line()} ({profiled_how(self.phase_from_trials, self.phase_launches)})"
                  if self.phase_effect else "")
        return (f"{self.verdict}: {who}{' (confirmed)' if self.confirmed else ''} in {self.launches} launches "
                f"(one-at-a-time: {self.naive_launches}){phases}")


RunTrial = Callable[[list[str], str, "dict[str, Any] | None", "Judge | None"], Trial]


def search_patches(items: list[str], run: RunTrial, args: BisectInput,
                   refs: dict[str, list[float]] | None = None) -> SearchResult:
    """The bisection over `items` with `run(subset, purpose, measure, judge) -> Trial` as its only contact with the
    box (one call = one launch): references from `args` (measured again when too noisy for their gap), each trial
    judged by which reference it is like, the search and its both-ways confirmation (stats.ddmin.isolate).
    `refs` ({"slow": …, "fast": …}, from `args` when absent) is extended in place by every re-measurement, so that a
    search after this one reads its effects against the same, better-measured references."""
    if refs is None:
        refs = {"slow": list(args.reference_slow or []), "fast": list(args.reference_fast or [])}
    measure = {"runs": args.runs, "max_runs": args.max_runs, "requests_per_run": args.requests_per_run,
               "max_new_tokens": args.max_new_tokens}

    looks = midpoint_looks(args.runs, args.max_runs)

    def judge(samples: list[float]) -> Outcome | None:
        if _two_sided(refs):  # which reference is it like? (stats.nearer: the midpoint test, alpha over the looks)
            side = side_of_midpoint(samples, refs["slow"], refs["fast"], level=level_at(len(samples), looks))
            return None if side.outcome is None else "regressed" if side.outcome == "slow" else "same"
        mag = args.magnitude_pct / 100 * statistics.median(refs["slow"])
        return classify(samples, refs["slow"], refs["fast"] or None, magnitude=mag)

    def ensure_precise_refs(force: bool = False) -> bool:
        """References too noisy for the gap they span are measured again (once each, up to the cap) before a
        trial is judged against them (or after one stayed undecided, `force`): a trial can never be placed more
        precisely than its references allow. True when they were measured again now."""
        if topped_up or (not force and midpoint_z(args.max_runs, refs["slow"], refs["fast"]) >= _needed_z(looks)):
            return False
        topped_up.append(True)
        for name, subset in (("slow", items), ("fast", [])):
            need = args.max_runs - len(refs[name])
            if need > 0:
                t = run(subset, f"reference again ({'all patches' if name == 'slow' else 'essentials only'}): "
                        f"{need} more runs", {**measure, "runs": need, "max_runs": need},
                        _known("regressed" if name == "slow" else "same"))
                refs[name] += t.samples
        return True

    def test(subset: frozenset[str]) -> Outcome:
        chosen = [p for p in items if p in subset]
        if len(chosen) == len(items) and not refs["slow"]:
            t = run(chosen, "reference: all patches", measure, None)
            refs["slow"] = list(t.samples) if t.outcome == "regressed" else []  # a copy: the trial keeps its own
            return "regressed" if refs["slow"] else "unresolved"
        if _two_sided(refs):
            ensure_precise_refs()  # before this trial's server starts: one server at a time
        # a trial the search runs to confirm a set, or of a candidate set alone (an interaction's found set): an arm
        # of the confirming comparison it may end with (tools.arm_profiles.confirming_arm reads this)
        confirming = (" (to confirm)" if oracle.asking.startswith("confirm") else
                      " (a candidate set alone)" if "alone" in oracle.asking else "")
        t = run(chosen, f"{len(chosen)} of {len(items)} patches{confirming}", measure, judge)
        if t.outcome == "unresolved" and t.samples and (t.cause or "").startswith("comparator undecided") \
                and _two_sided(refs) and ensure_precise_refs(force=True):
            # The references were the imprecise side: judge the same runs again against them, at the last
            # look's level (one more look, after the cap; the trial's own runs are not repeated).
            side = side_of_midpoint(t.samples, refs["slow"], refs["fast"], level=level_at(looks[-1], looks))
            if side.outcome is not None:
                t.outcome = "regressed" if side.outcome == "slow" else "same"
                t.cause = f"decided once the references had {len(refs['slow'])}/{len(refs['fast'])} runs"
        if t.outcome == "same" and not refs["fast"]:
            refs["fast"] = list(t.samples)
        return t.outcome if t.outcome in ("regressed", "same") else "unresolved"  # type: ignore[return-value]

    topped_up: list[bool] = []
    oracle: CachedOracle[str] = CachedOracle(test)
    if args.reference_slow:
        oracle.seed(frozenset(items), "regressed")
    if args.reference_fast:
        oracle.seed(frozenset(), "same")
    return isolate(items, oracle, confirm=args.confirm, replicate=True)


@tool(effect="disrupt")
def bisect_patches(ctx: ToolContext, args: BisectInput) -> BisectResult:
    """Statistical delta debugging over the non-essential patches to find what makes the server slow.

    References: all patches (slow) and essentials only (fast), measured once each unless given. Trials
    run in triage order, halves are inferred when the other half is fast, results are cached by subset,
    interacting culprits are found by shortest-prefix search. A culprit set is named only when confirmed both
    ways (it alone is slow, every patch but it is fast); otherwise the result is "unresolved" with candidates. A trial is regressed / same / unresolved
    (patch conflict, failed start, crash, undecided comparator: recorded with its cause, never counted).
    """
    backup = ensure_backup(ctx, args.repo)
    essential = _match(args.essential, backup.changed)
    pool = _match(args.patches, backup.changed) if args.patches is not None else backup.changed
    pool = [p for p in pool if p not in essential]
    ranked = [p for p in _match([o for o in args.order if any(c.endswith(o) for c in pool)], pool)
              if p in pool] if args.order else []
    items = list(dict.fromkeys(ranked + pool))
    # The arms a confirmation may need are profiled on their own trials while up (tools.arm_profiles): the phase
    # profile then launches only an arm no trial profiled.
    arms = ArmProfiles(confirming_arm(items) if args.phases and args.confirm else None)
    runner = _Runner(ctx, args.repo, args.launch, args.python, args.port, backup, essential, env=args.env, arms=arms)
    ok = False
    try:
        effects: list[CulpritEffect] = []
        # The references both searches read, extended in place when the slow/fast search measures them again: the
        # effect search then reads every effect against all the runs of each (a single launch's five runs carry
        # that launch's offset, which an effect a third of the gap cannot absorb).
        refs = {"slow": list(args.reference_slow or []), "fast": list(args.reference_fast or [])}
        found = search_patches(items, runner.run, args, refs)
        notes = list(found.notes)
        # The slow/fast search decides first: against one launch's reference, an effect carries that launch's
        # offset, which the midpoint test tolerates (single-culprit: 3 launches, where effects first took 8). When
        # it confirms no culprit — a half-slow subset left undecided, independent culprits — the effect search
        # measures what each subset costs and names independent culprits with their shares, or nobody.
        if args.effects and args.confirm and not (found.confirmed and found.culprits):
            by_effect, searched, more = effects_search(
                items, runner.run, slow=refs["slow"], fast=refs["fast"],
                runs=args.runs, max_runs=args.max_runs,
                measure={"requests_per_run": args.requests_per_run, "max_new_tokens": args.max_new_tokens})
            notes += more
            if by_effect is not None and searched is not None:
                found, effects = by_effect, culprit_effects(searched)
        eff = None
        measure = {"requests_per_run": args.requests_per_run, "max_new_tokens": args.max_new_tokens}
        prof = arms.profiler(lambda sub, label: runner.profile(sub, label, measure))
        if len(effects) > 1 and args.phases:  # independent culprits: each its own phase, against essentials only
            effects, more = independent_phases(effects, prof)
            notes += more
        elif found.confirmed and found.culprits and args.phases:
            eff, more = confirmed_phase_effect(found.culprits, items, prof)
            notes += more
        if arms.taken:
            notes.append(f"phase profiles taken on {arms.taken} trial server(s) while up (arms a confirmation may "
                         f"need); {arms.used} used, {runner.profiled} arm(s) launched only to be profiled")
        result = BisectResult(verdict=found.verdict, culprits=found.culprits, confirmed=found.confirmed,
                              candidates=found.candidates,
                              launches=runner.launches, naive_launches=len(items) + 1, order=items,
                              trials=runner.trials, search=found.trials, notes=notes, phase_effect=eff,
                              phase_launches=runner.profiled, phase_from_trials=arms.used,
                              culprit_effects=effects)
        ok = True
    finally:
        restored = _finish(ctx, args.repo, backup, runner, args.restore)
    if ok:
        result.restored = restored
    return result
