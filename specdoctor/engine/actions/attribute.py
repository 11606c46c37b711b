"""Attribute the measured gap: revert trials over every revertible delta, one delta-debugging search, causes with CIs.

A delta is named a cause only when trials measured it both ways: reverting exactly it restores the speed and
leaving only it (every other delta reverted) reproduces the slowdown. An unresolved trial buys more runs and then
ends as a candidate, never a cause. Causes no trial can revert come from targeted measurements (hardware probe,
the NCCL A/B) and the bisection's confirmed code culprits.
"""

from __future__ import annotations

import itertools
import statistics
from collections.abc import Callable, Iterable
from typing import Any, Literal

from pydantic import BaseModel, Field

from specdoctor.diagnosis import Case
from specdoctor.diagnosis.attribution import without_split
from specdoctor.diagnosis.causes import CODE_CLEARED, effect, non_revertible_causes
from specdoctor.diagnosis.delta_causes import reverted_cause
from specdoctor.engine.actions import ActionOutcome, action
from specdoctor.engine.actions.attribute_evidence import control_is_trial, promoted_override
from specdoctor.engine.actions.attribute_phases import cause_phase_effect, profiled_arms
from specdoctor.engine.actions.measure import _recorder, reference_for, same_within
from specdoctor.engine.actions.subtract import essential_files
from specdoctor.engine.gap import read_gap
from specdoctor.engine.state import Decision, StateView
from specdoctor.errors import ToolRetry, Unresolved
from specdoctor.models import (
    AttributionFact,
    Claims,
    Delta,
    DeltaList,
    MeasureFacts,
    Revert,
    SubtractionFact,
)
from specdoctor.models.phases import PhaseTimes
from specdoctor.stats.comparator import compare, compare_to_claim
from specdoctor.stats.ddmin import CachedOracle, Outcome, classify, isolate
from specdoctor.stats.sequential import nominal_levels
from specdoctor.stats.summary import median_ci
from specdoctor.toolkit import registry
from specdoctor.tools.checkout.bisect import BisectResult
from specdoctor.tools.environment.revert import describe, merge_reverts, reverted
from specdoctor.tools.environment.trial_env import check_trial_env
from specdoctor.tools.nccl.nccl_promote import NcclPromotion
from specdoctor.tools.serving.arm_profiles import ArmProfiles, confirming_arm
from specdoctor.tools.serving.trial import (
    AUTO_PORT,
    LaunchConfig,
    LaunchFailed,
    MeasureFailed,
    measure,
    profile,
    profiled,
    trial,
)

__all__ = ["attribute", "TrialRun", "SearchOutcome", "search_deltas"]

MAX_RUNS = 14
"""Runs one trial server may take before its comparison ends unresolved (start 5, then 3 more per look)."""
Judge = Callable[[list[float]], Outcome | None]
RunKept = Callable[[frozenset[str], str, Judge], "TrialRun"]
"""Launch with exactly `kept` at today's value (every other delta reverted), measure until `judge` decides."""


class TrialRun(BaseModel):
    """One revert trial: which deltas stayed at today's value, what it measured, and why it stopped."""

    kept: list[str]
    reverted: list[str]
    samples: list[float] = Field(default_factory=list)
    outcome: Outcome = "unresolved"
    purpose: str = ""
    cause: str | None = Field(default=None, description="Why it is unresolved (failed start, undecided comparator).")

    @property
    def median(self) -> float | None:
        return statistics.median(self.samples) if self.samples else None


class SearchOutcome(BaseModel):
    """What the revert trials established: confirmed sets with their effects, candidates, and every trial."""

    first: Literal["restores", "same", "slower", "unresolved", "no-control"]
    causes: list[tuple[list[str], float, float, float]] = Field(
        default_factory=list, description="(names reverted together, effect today − reverted, CI low, CI high).")
    candidates: list[str] = Field(default_factory=list)
    trials: list[TrialRun] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)
    restored_samples: list[float] = Field(default_factory=list, description="Reverting every confirmed cause.")
    arms: list[tuple[list[str], list[str]]] = Field(default_factory=list, description="Per cause: the deltas kept "
                                                    "at today's value in its confirming comparison's slow arm and "
                                                    "in its fast arm (the set reverted).")


class _Search:
    """The state of one delta search: the trials so far (by what they kept), the outcome being written, the
    sequential levels of the first comparison."""

    def __init__(self, run: RunKept, *, runs: int, step: int, max_runs: int, alpha: float,
                 magnitude: float | None, control_is_trial: bool = False):
        self.run, self.magnitude, self.control_is_trial = run, magnitude, control_is_trial
        self.rounds = 0
        self.trials: dict[frozenset[str], TrialRun] = {}
        self.out = SearchOutcome(first="no-control")
        sizes = sorted({*range(runs, max_runs, step), max_runs})
        self.levels = dict(zip(sizes, nominal_levels(sizes, alpha), strict=True))

    def decide(self, today: list[float], rev: list[float]) -> Outcome | None:
        """Sequential look at today vs everything reverted: 'same' = reverting restores speed, 'regressed' = it
        does not (SAME, or slower), None = undecided at this look (more runs)."""
        level = max((lv for n, lv in self.levels.items() if n <= min(len(today), len(rev))), default=None)
        if level is None:
            return None
        c = compare(today, rev, t_level=level, magnitude=self.magnitude)
        if c.outcome == "DIFFERENT":
            return "same" if c.delta > 0 else "regressed"
        return "regressed" if c.outcome == "SAME" else None

    def measured(self, kept: frozenset[str], purpose: str, judge: Judge, *, fresh: bool = False) -> TrialRun:
        if kept not in self.trials or fresh:
            t = self.run(kept, purpose, judge)
            self.trials[kept] = t
            self.out.trials.append(t)
        return self.trials[kept]

    def first_look(self, names: list[str], control: list[float]) -> tuple[list[float], TrialRun] | None:
        """Today vs every delta reverted. Returns (today's runs, the all-reverted trial) when reverting restores the
        speed; otherwise writes why the search ends there and returns None."""
        out = self.out
        if len(control) < 3:  # nothing reusable: a control trial of today's configuration
            control += self.measured(frozenset(names), "control: today's configuration", lambda s: "regressed").samples
        if len(control) < 3:
            out.notes.append("today's configuration could not be measured: nothing to compare the reverts with")
            return None
        allrev = self.measured(frozenset(), "every revertible delta reverted", lambda s: self.decide(control, s))
        if len(allrev.samples) < 3:
            out.first, out.candidates = "unresolved", list(names)
            out.notes.append(f"reverting everything could not be measured: {allrev.cause or 'too few runs'}")
            return None
        decided = self.decide(control, allrev.samples)
        if decided is None:
            # Today's figure came from a few runs (reused): a control trial of today's configuration buys more runs.
            ctrl = self.measured(frozenset(names), "control: today's configuration",
                                 lambda s: self.decide(control + s, allrev.samples))
            control = control + ctrl.samples
            decided = self.decide(control, allrev.samples)
        first = compare(control, allrev.samples)
        if decided is None:
            out.first, out.candidates = "unresolved", list(names)
            out.notes.append(f"reverting everything vs today: comparator undecided after {len(allrev.samples)}/"
                             f"{len(control)} runs ({first.summary_line()}): candidates only")
            return None
        if decided == "regressed":
            out.first = "slower" if first.outcome == "DIFFERENT" else "same"
            out.notes.append(f"reverting every revertible delta changes nothing that matters ({first.summary_line()})"
                             if out.first == "same" else f"reverting everything made it slower ({first.summary_line()})")
            return None
        out.first = "restores"
        return control, allrev

    def one_round(self, remaining: list[str], slow_ref: list[float], allrev: TrialRun) -> tuple[list[str], list[float]] | None:
        """Isolate the minimal set (confirmed both ways) that explains `slow_ref` vs everything reverted. Returns
        what is left to search (the rest, with this round's revert trial as the new "today"), or None: done."""
        out, trials = self.out, self.trials
        gain = statistics.median(allrev.samples) - statistics.median(slow_ref)
        mag = max(0.3 * gain, 0.02 * statistics.median(slow_ref))
        # slow once it keeps a fifth of the gap: a set holding one of two independent causes sits half way, where
        # noise chose its side (two causes from two sources, each half the gap, seen in the corpus)
        part = max(0.2 * gain, 0.02 * statistics.median(slow_ref))
        ref = list(slow_ref)

        def judge(samples: list[float]) -> Outcome | None:
            return classify(samples, ref, allrev.samples, magnitude=mag, part=part)

        seeded = {frozenset(remaining), frozenset()}

        def test(kept: frozenset[str]) -> Outcome:
            # kept at today's value; every other delta (earlier causes too) reverted. A seeded reference is only
            # asked again to replicate it: a fresh trial, never the runs that suggested the set.
            t = self.measured(kept, "", judge, fresh=kept in seeded)
            if t.cause or len(t.samples) < 3:
                return "unresolved"
            return judge(t.samples) or "unresolved"

        oracle: CachedOracle[str] = CachedOracle(test)
        oracle.seed(frozenset(remaining), "regressed")
        oracle.seed(frozenset(), "same")
        self.rounds += 1
        found = isolate(remaining, oracle, noun="deltas", base="every other delta reverted",
                        replicate=not self._lone_measured(remaining))
        for rec in found.trials:  # the purpose of each trial, as the search meant it
            t = trials.get(frozenset(rec.subset))
            if t is not None and not t.purpose:
                t.purpose = rec.purpose
        out.notes += found.notes
        if found.confirmed:
            culprits = found.culprits
            alone = trials.get(frozenset(culprits))
            if len(culprits) > 1 and alone is not None and len(alone.samples) >= 3 and \
                    (fewer := self._necessary(culprits, alone.samples, ref, part)) != culprits:
                # a member the set reads as slow without is no part of it: what is left must be confirmed again
                culprits = self.part_of_the_gap(fewer, remaining, ref, allrev, part)
        else:
            culprits = self.part_of_the_gap(found.culprits or found.candidates, remaining, ref, allrev, part)
        if not culprits:
            out.candidates += [c for c in (found.candidates or ([] if found.verdict == "no-regression" else remaining))
                               if c not in out.candidates]
            return None
        rest = [n for n in remaining if n not in culprits]
        rev_c = trials.get(frozenset(rest)) if rest else allrev
        samples = rev_c.samples if rev_c is not None else allrev.samples
        out.causes.append((culprits, *effect(slow_ref, samples)))
        out.arms.append((list(remaining), rest))
        out.restored_samples = list(samples)
        # What reverting the named set leaves: if everything-reverted is still clearly faster, search the rest
        # with this trial as the new "today".
        left = compare(samples, allrev.samples)
        if not rest or left.outcome != "DIFFERENT" or left.delta <= 0:
            return None
        return rest, list(samples)

    def _lone_measured(self, remaining: list[str]) -> bool:
        """One delta left, and both of its confirming arms already measured in trial launches of exactly those
        configurations: the replicate would launch one of them again and decide nothing.

        Why it is safe: a replicate guards against the runs that *chose* a set among others also confirming it
        (a noisy reference picks a wrong half). With one delta left there is no choice — the set is forced — and its
        two confirming arms are the round's own references: kept alone it is the slow reference (a revert trial of
        the previous round, or, in the first round, today's configuration as the reproduce step launched it), and
        reverted it is the everything-reverted trial, and the comparator already called them different. Not when
        the first round's slow reference is your running server: what a trial launch does differently must not
        pass for the delta, so the replicate runs then."""
        return len(remaining) == 1 and (self.rounds > 1 or self.control_is_trial)

    def part_of_the_gap(self, cands: list[str], remaining: list[str], slow_ref: list[float], allrev: TrialRun,
                        part: float) -> list[str]:
        """A set no search could confirm as the whole slowdown, confirmed as a part of it, both ways measured:
        kept alone (every other delta reverted) it is slower than everything reverted, and reverted alone it is
        faster than `slow_ref` — each by more than `part`. Independent causes, each a share of the gap, end here
        (the rest is searched next round). [] when either trial is missing, unresolved or short of `part`."""
        if not cands or not [n for n in remaining if n not in cands]:
            return []

        def slower(s: list[float]) -> Outcome | None:  # than everything reverted, by more than `part`
            c = compare(allrev.samples, s, magnitude=part)
            return "regressed" if c.outcome == "DIFFERENT" and c.delta_ci[1] < -part else \
                "same" if len(s) >= 8 else None

        def faster(s: list[float]) -> Outcome | None:  # than today, by more than `part`
            c = compare(slow_ref, s, magnitude=part)
            return "same" if c.outcome == "DIFFERENT" and c.delta_ci[0] > part else "regressed" if len(s) >= 8 else None

        purpose = "confirm a part: the candidates alone, every other delta reverted"
        only = self.measured(frozenset(cands), purpose, slower)
        if len(only.samples) >= 3 and (fewer := self._necessary(cands, only.samples, slow_ref, part)) != cands:
            cands = fewer
            only = self.measured(frozenset(cands), purpose, slower)
        rest = [n for n in remaining if n not in cands]
        without = self.measured(frozenset(rest), "confirm a part: exactly the candidates reverted", faster)
        if only.cause or without.cause or slower(only.samples) != "regressed" or faster(without.samples) != "same":
            return []
        self.out.notes.append(f"{', '.join(cands)}: a part of the gap, confirmed both ways (alone slower than "
                              "everything reverted, reverted alone faster than today)")
        return list(cands)

    def _necessary(self, cands: list[str], alone: list[float], today: list[float],
                   part: float) -> list[str]:
        """The candidates less any that a trial already showed unnecessary: it kept exactly the other candidates
        (every other delta reverted) and read less than a part faster than the candidates kept alone (`alone`) or
        than today (`today`, this round's slow reference). Confirmed both ways, a set holds each cause in it, but
        also any innocent delta the search left beside them (two independent causes, each half the gap, leave
        half-way trials that noise sends either way); only a trial without it can tell, and the search has usually
        run one. A cause in the set is never such a member: without it a trial reads its share faster than both."""
        if len(cands) < 2:
            return cands
        ref = max(statistics.median(alone), statistics.median(today))
        kept: list[str] = []
        for c in cands:
            others = frozenset(cands) - {c}
            t = self.trials.get(others)
            if t is None or len(t.samples) < 3 or statistics.median(t.samples) - ref >= part:
                kept.append(c)
                continue
            self.out.notes.append(f"{c}: not part of the set: with it reverted and {', '.join(sorted(others))} kept, "
                                  f"a trial read {statistics.median(t.samples):.1f} tok/s, less than {part:.1f} faster "
                                  f"than the set alone or today ({ref:.1f})")
        return kept or cands


def search_deltas(names: list[str], run: RunKept, control: list[float], *, runs: int = 5, step: int = 3,
                  max_runs: int = MAX_RUNS, alpha: float = 0.01, rounds: int = 3,
                  magnitude: float | None = None, control_is_trial: bool = False) -> SearchOutcome:
    """Control (today) vs everything reverted, then confirm-both-ways delta debugging over `names` (most suspect
    first). `run(kept, purpose, judge)` measures one configuration; pure otherwise (tests drive it with noise).
    `control_is_trial`: the control's runs come from a trial launch of today's configuration as these trials launch
    it (not your running server), so they stand for "every delta kept" (`_Search._lone_measured`)."""
    search = _Search(run, runs=runs, step=step, max_runs=max_runs, alpha=alpha, magnitude=magnitude,
                     control_is_trial=control_is_trial)
    looked = search.first_look(names, list(control))
    if looked is None:
        return search.out
    slow_ref, allrev = looked
    remaining = list(names)
    for _ in range(rounds):
        if not remaining:
            break
        left = search.one_round(remaining, list(slow_ref), allrev)
        if left is None:
            break
        remaining, slow_ref = left
    return search.out


def _deltas(view: StateView) -> DeltaList | None:
    return view.latest(DeltaList) or view.fact("deltas", DeltaList)


def _code_settled(view: StateView) -> str | None:
    """Why the local patches need no revert trial here (None: they join the search with everything else)."""
    from specdoctor.engine.identity import identity_of

    if identity_of(view).code == "identical":
        return "the checkout is byte for byte the good run's (content digest of HEAD, diff and untracked files)"
    bis = view.latest(BisectResult)
    if bis is not None and bis.confirmed and bis.culprits:
        return "the bisection confirmed the culprit patches both ways"
    sub = view.fact("subtraction", SubtractionFact)
    if sub is not None and sub.outcome == "SAME":
        return CODE_CLEARED
    if sub is not None and not sub.made_faster:
        return f"the subtraction did not show that removing the patches makes it faster ({sub.outcome or 'not run'})"
    return None


def _metric(view: StateView, measure: MeasureFacts) -> Literal["spec", "baseline"]:
    """The figure the trials measure: of those whose gap to the reference was shown (claim DIFFERENT, or any when
    there are no claims), the one whose gap is largest next to its run-to-run noise. Speculative tok/s carries the
    acceptance's randomness; when the baseline shows the same gap it decides in far fewer runs."""
    claims = (view.fact("claims", Claims) or Claims({})).root
    best: tuple[float, Literal["spec", "baseline"]] | None = None
    for key in ("spec", "baseline"):
        m = getattr(measure, key)
        ref, _ = reference_for(view, key)
        if m is None or len(m.samples) < 3 or ref is None:
            continue
        if claims and (claims.get(key) is None or not claims[key].not_reached):
            continue
        med = statistics.median(m.samples)
        score = abs(ref - med) / max(statistics.stdev(m.samples), 0.005 * abs(med), 1e-9)
        if best is None or score > best[0]:
            best = (score, key)  # type: ignore[assignment]
    if best is not None:
        return best[1]
    return "spec" if measure.spec is not None and measure.spec.samples else "baseline"


def _start_fact(view: StateView, measure_facts: MeasureFacts, metric: str) -> tuple[AttributionFact, list[float]]:
    """The gap on `metric` (reference → today's runs) with the causes that need no trial; today's samples."""
    today = getattr(measure_facts, metric)
    control = list(today.samples) if today is not None else []
    reference, ref_label = reference_for(view, metric)
    fact = AttributionFact(metric=metric, reference_tps=reference, reference_label=ref_label,
                           measured_tps=statistics.median(control) if control else None)
    if control:
        fact.measured_ci_low, fact.measured_ci_high = median_ci(control)
    fact.causes = non_revertible_causes(Case.of(view))
    return fact, control


def _testable(view: StateView, fact: AttributionFact) -> list[Delta]:
    """The deltas a revert trial can test, by expected impact; the rest go to `fact.untested` with the reason."""
    deltas = _deltas(view)
    code_settled = _code_settled(view)
    from specdoctor.engine.identity import identity_of
    config_same = identity_of(view).config_identical
    if (held := read_gap(view)).held:  # nothing to explain: a revert trial would decide nothing
        fact.untested += [f"{d.label}: {held.why}" for d in (deltas or DeltaList()).revertible()]
        return []
    essential = set(essential_files(view))
    promo = view.latest(NcclPromotion)
    testable: list[Delta] = []
    for d in deltas.deltas if deltas else []:
        if any(c.key == d.name and c.kind == d.kind for c in fact.causes):
            continue
        if d.kind == "code" and code_settled:
            fact.untested.append(f"{d.label}: {code_settled}")
        elif d.kind in ("env", "launch-flag") and config_same:
            fact.untested.append(f"{d.label}: the launch line and the workers' variables are the good run's "
                                 "(digests equal)")
        elif d.kind == "code" and any(d.name == e or d.name.endswith("/" + e.lstrip("/")) for e in essential):
            fact.untested.append(f"{d.label}: essential (the server does not start without it)")
        elif d in (deltas.revertible() if deltas else []):
            testable.append(d)
        elif (over := promoted_override(d, promo)) is not None:  # what the promotion measured makes it testable
            testable.append(over)
        elif d.kind not in ("acceptance", "workload"):
            fact.untested.append(f"{d.label}: no trial can revert it")
    order = {"high": 0, "medium": 1, "low": 2, "none": 3}
    testable.sort(key=lambda d: order[d.impact])
    return testable


class _RevertTrials:
    """Launches of today's configuration with some deltas reverted: one per search step, each a decision."""

    def __init__(self, deps: Any, view: StateView, step: Any, out: ActionOutcome, testable: list[Delta],
                 metric: Literal["spec", "baseline"], control: list[float], launch: str):
        self.deps, self.step, self.out, self.metric, self.control = deps, step, out, metric, control
        self.by_name = {d.label: d for d in testable}
        self.p = p = view.params
        self.base = LaunchConfig(command=launch, python=p.python, speculative=metric == "spec", label="attr",
                                 env=dict(view.run_facts.server_env or {}), port=AUTO_PORT,
                                 timeout_s=p.launch_timeout_s)
        self.runs = int(p.runs)
        self.record = _recorder(out.results)
        # A cause's phase comes from its confirming arms: profiled on the trials that ran them, while up.
        self.arms = ArmProfiles(confirming_arm(list(self.by_name)))
        today = getattr(view.run_facts.measure, metric) if view.run_facts.measure is not None else None
        if today is not None and today.phases is not None and control_is_trial(view, metric):
            self.arms.seed(self.by_name, today.phases)  # every difference kept: reproduce's launch, profiled while up

    def _revert(self, kept: Iterable[str]) -> Revert:
        return merge_reverts([r for n in self.by_name if n not in kept and (r := self.by_name[n].revert)])

    def run(self, kept: frozenset[str], purpose: str, judge: Judge) -> TrialRun:
        rev = [self.by_name[n] for n in self.by_name if n not in kept]
        t = TrialRun(kept=sorted(kept), reverted=[d.label for d in rev], purpose=purpose)
        revert = merge_reverts([d.revert for d in rev if d.revert is not None])
        label = f"attr{len(self.out.decisions) + 1}"
        first_cmd = len(self.out.commands(10**6))
        self.deps.view.progress(f"revert trial: {describe(revert)}")
        try:
            with reverted(self.deps.tool_ctx, self.base, revert, repo=self.p.repo, label=label) as cfg:
                with trial(self.deps.tool_ctx, cfg, record=self.record) as h:
                    missed = self._env_missed(h, rev, revert, label)
                    if missed is None:
                        self._measure_until_judged(h, t, judge, label)
                        if t.samples:  # an arm a confirmation may need: profiled before this server stops
                            self.arms.take(kept, purpose, h, requests_per_run=self.p.requests_per_run,
                                           max_new_tokens=self.p.max_new_tokens, key=f"phases_{label}",
                                           outcome=t.outcome)
                    else:  # measured, it would read as "this revert changes nothing"
                        t.cause = missed[:300]
        except (LaunchFailed, MeasureFailed) as exc:
            t.cause = f"{type(exc).__name__}: {exc.result.summary}"[:300]
        except (ToolRetry, Unresolved) as exc:
            t.cause = f"revert could not be applied: {exc}"[:300]
        self.out.decisions.append(self._decision(t, rev, revert, purpose, first_cmd))
        return t

    def _env_missed(self, h: Any, rev: list[Delta], revert: Revert, label: str) -> str | None:
        """Why the trial's workers do not have the environment it means to test (None: they have it, or there is
        nothing to check, or /proc could not be read: the check never blocks a trial it cannot judge)."""
        intended = _intended_env(rev, revert)
        if not intended:
            return None
        called = registry.call_fn(h.ctx, check_trial_env, {
            "port": h.port, "values": {k: v for k, v in intended.items() if v is not None},
            "absent": [k for k, v in intended.items() if v is None]}, where=f"env_{label}")
        self.record(f"env_{label}", called.result)
        check = called.output
        return check.summary() if check is not None and not check.reached else None

    def _measure_until_judged(self, h: Any, t: TrialRun, judge: Judge, label: str) -> None:
        """Runs in looks (the first `runs`, then 3 more) until the comparator decides or MAX_RUNS is reached."""
        n = self.runs
        while True:
            m = measure(h, runs=n, requests_per_run=self.p.requests_per_run,
                        max_new_tokens=self.p.max_new_tokens, key=f"bench_{label}_{len(t.samples)}")
            t.samples += [float(x) for x in m.samples]
            verdict = judge(t.samples)
            if verdict is not None:
                t.outcome = verdict
                return
            if len(t.samples) >= MAX_RUNS:
                t.cause = f"comparator undecided after {len(t.samples)} runs"
                return
            n = 3

    def _decision(self, t: TrialRun, rev: list[Delta], revert: Revert, purpose: str, first_cmd: int) -> Decision:
        med = t.median
        return Decision(
            step=self.step.id, title=self.step.title,
            checked=f"revert trial ({purpose or 'search'}, {self.metric} tok/s): {describe(revert)}",
            found=(f"{len(t.samples)} runs, median {med:.1f} tok/s vs today's {statistics.median(self.control):.1f}"
                   if med is not None else "not measured") + (f"; {t.cause}" if t.cause else ""),
            decided=("unresolved: never counted good or bad" if t.cause else
                     "today's configuration re-measured: more runs for the comparison" if not rev else
                     "fast: as with every difference reverted" if t.outcome == "same" else
                     "slow: as today" if t.outcome == "regressed" else "unresolved: never counted good or bad"),
            why="a delta is named only when reverting exactly it restores and leaving only it reproduces",
            status="ok" if not t.cause else "unresolved", evidence=self.out.commands(10**6)[first_cmd:][:40])

    def profile_kept(self, kept: list[str], label: str) -> tuple[PhaseTimes | None, str]:
        """Phase times of one arm (today's values of `kept`, the rest reverted)."""
        try:
            with reverted(self.deps.tool_ctx, self.base, self._revert(kept), repo=self.p.repo,
                          label=label) as cfg:
                with trial(self.deps.tool_ctx, profiled(self.deps.tool_ctx, cfg), record=self.record) as h:
                    return profile(h, requests_per_run=self.p.requests_per_run,
                                   max_new_tokens=self.p.max_new_tokens, key=f"phases_{label}")
        except (ToolRetry, Unresolved) as exc:  # LaunchFailed/MeasureFailed are Unresolved
            return None, f"{type(exc).__name__}: {exc}"[:200]


def _search_causes(trials: _RevertTrials, view: StateView, fact: AttributionFact, reference: float | None
                   ) -> SearchOutcome:
    """The delta-debugging search over the testable deltas, its causes (each with its phase effect) into `fact`."""
    # SAME means "no change as large as half the gap to the reference": deltas that cannot explain the gap
    # are ruled out in a few runs even on a noisy figure.
    metric, control, by_name, step, out = trials.metric, trials.control, trials.by_name, trials.step, trials.out
    mag = same_within(view, metric, control)
    search = search_deltas(list(by_name), trials.run, control, runs=trials.runs, magnitude=mag,
                           control_is_trial=control_is_trial(view, metric))
    effects = [cause_phase_effect(trials.deps, step, out, *profiled_arms(trials.arms, slow, fast, names), trials.arms,
                                  trials.profile_kept, i, len(search.causes))
               for i, ((slow, fast), (names, *_)) in enumerate(zip(search.arms, search.causes, strict=False))]
    for (names, eff, lo, hi), ph in itertools.zip_longest(search.causes, effects):
        for n in names:
            fact.causes.append(reverted_cause(
                by_name[n], metric=metric, effect=(eff, lo, hi), together=[by_name[x] for x in names if x != n],
                repo=view.params.repo, launch=view.run_facts.launch, evidence=[step.id], phase_effect=ph))
    fact.candidates = [c for c in search.candidates]
    if search.restored_samples and reference is not None:
        chk = compare_to_claim(search.restored_samples, reference)
        fact.restored = chk.outcome == "SAME" or chk.median >= reference
    return search


@action("disrupt")
def attribute(deps: Any, view: StateView, step: Any, args: dict[str, Any]) -> ActionOutcome:
    """Revert every revertible delta in trials, search for the minimal set confirmed both ways, attribute the gap."""
    out = ActionOutcome()
    measure_facts = view.fact("measure", MeasureFacts) or MeasureFacts()
    metric = _metric(view, measure_facts)
    fact, control = _start_fact(view, measure_facts, metric)
    testable = _testable(view, fact)
    launch = view.run_facts.launch
    search: SearchOutcome | None = None
    if testable and launch:
        trials = _RevertTrials(deps, view, step, out, testable, metric, control, launch)
        search = _search_causes(trials, view, fact, fact.reference_tps)
    elif testable:
        fact.untested += [f"{d.label}: no launch command to run a trial" for d in testable]
    _in_the_causes_unit(view, measure_facts, fact)
    fact.causes = without_split(fact.causes)
    out.facts.attribution = fact
    named = [c.name for c in fact.confirmed()]
    out.summary = ("causes: " + "; ".join(named) if named else
                   f"candidates (unresolved): {', '.join(fact.candidates)}" if fact.candidates else
                   "no delta explains the gap" if testable else "nothing to revert")
    out.decisions.append(Decision(
        step=step.id, title=step.title,
        checked=f"{len(testable)} revertible deltas by trial; {len(fact.causes) - len(search.causes if search else [])} "
                "causes from the bisection, targeted measurements and /proc",
        found=out.summary + ("; " + " ".join(search.notes) if search and search.notes else ""),
        decided="attribution written: the verdict follows it",
        why="only measured causes explain a gap; an unresolved comparison names candidates, never a cause"))
    return out


def _in_the_causes_unit(view: StateView, measure: MeasureFacts, fact: AttributionFact) -> None:
    """Read the gap on the figure the causes were measured on. The trials' figure is chosen for its signal, but
    the bisection and the NCCL A/B measure speculative tok/s: a baseline gap "explained" by a spec-tok/s effect
    adds numbers in two units. When every cause with a measured effect shares one other figure, the gap is read on
    that one (its claim or good-run figure and today's runs); mixed units stay apart in the report."""
    units = {c.metric for c in fact.causes if c.effect_tps is not None}
    if len(units) != 1 or fact.metric in units or not units <= {"spec", "baseline"}:
        return
    (unit,) = units
    today = getattr(measure, unit)
    reference, label = reference_for(view, unit)
    if today is None or len(today.samples) < 2 or reference is None:
        return
    fact.metric, fact.reference_tps, fact.reference_label = unit, reference, label
    fact.measured_tps = statistics.median(today.samples)
    fact.measured_ci_low, fact.measured_ci_high = median_ci(today.samples)
    fact.restored = None  # the revert trials measured the other figure


def _intended_env(rev: list[Delta], revert: Revert) -> dict[str, str | None]:
    """What a trial means its workers to have for each environment delta it reverts: the value it sets, else the
    variable absent (an unset, or a start-up hook shadowed where the reference lacked it)."""
    return {d.name: revert.env.get(d.name) for d in rev if d.kind == "env" and d.revert is not None}
