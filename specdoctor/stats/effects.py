"""Culprit search by effect sizes: each trial is a measurement of how much a subset costs, not a slow/fast vote.

The binary search (`stats.ddmin.isolate`) asks "is essentials + S slow?"; a subset holding one of two independent
culprits is half slow, neither same nor different, and the comparator runs to its cap undecided. Here a trial of S
estimates its effect e(S) = median(S) − median(fast reference) with a CI, against both references. Under an additive
model e(S) = Σ β_i, so a group whose effect is known splits in two with ONE launch: e(A) is measured and e(B) =
e(group) − e(A) is inferred. Groups whose effect is immaterial are dropped; material singletons are culprits with
their share of the gap. k independent culprits among P patches cost about k·⌈log2 P⌉ launches less what their
paths share, plus two checks: every patch but the culprits (removing them restores: fast) and the culprits alone
(they reproduce the gap: the interaction check compares it with Σβ and with the whole gap). A group that is material
while both halves are not, or a sum that misses the whole, is an interaction: the search says so and names no
culprit (the caller falls back to `isolate`, which searches interacting sets).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence
from typing import Generic, Literal, TypeVar

from pydantic import BaseModel, Field

__all__ = ["Effect", "EffectTrial", "Culprit", "EffectSearch", "effect_of", "search_effects"]

T = TypeVar("T")
Z95 = 1.96
Z99 = 2.576


class Effect(BaseModel):
    """A subset's effect on the figure (tok/s; negative: slower), with a 95 % CI (normal approximation)."""

    delta: float
    var_own: float = Field(ge=0, description="Variance from the trials' own medians (the fast reference's aside).")
    f_coef: float = Field(default=1.0, description="How many times the fast reference's median enters: 1 for a "
                          "measured effect, 0 for one inferred as a difference of two (it cancels).")
    var_fast: float = Field(default=0.0, ge=0, description="The fast reference median's variance.")
    measured: bool = Field(description="False: inferred from a parent and its measured sibling (additivity).")

    @property
    def se(self) -> float:
        return math.sqrt(self.var_own + self.f_coef ** 2 * self.var_fast)

    def minus(self, other: Effect) -> Effect:
        """parent − measured sibling: the other half's effect under additivity (shared fast reference cancels)."""
        return Effect(delta=self.delta - other.delta, var_own=self.var_own + other.var_own,
                      f_coef=self.f_coef - other.f_coef, var_fast=self.var_fast, measured=False)

    @property
    def ci(self) -> tuple[float, float]:
        return self.delta - Z95 * self.se, self.delta + Z95 * self.se

    def along(self, sign: float, z: float = Z95) -> tuple[float, float, float]:
        """(effect, CI low, CI high) in the gap's direction (sign −1: a slowdown counts positive)."""
        a, b = (self.delta - z * self.se) * sign, (self.delta + z * self.se) * sign
        return self.delta * sign, min(a, b), max(a, b)

    def material(self, threshold: float, sign: float = 1.0, z: float = Z95) -> bool:
        """At least `threshold` in the gap's direction, its CI (at `z`) clear of zero."""
        x, lo, _ = self.along(sign, z)
        return x >= abs(threshold) and lo > 0

    def negligible(self, threshold: float, sign: float = 1.0) -> bool:
        """Less than `threshold` in the gap's direction, or its CI holds zero: no material part of the gap in it
        (a speed-up is not part of a slowdown)."""
        return not self.material(threshold, sign)


def _se_median(xs: Sequence[float]) -> float:
    """Standard error of a median (≈ 1.2533·sd/√n for normal noise); a floor for n < 2."""
    if len(xs) < 2:
        return math.inf
    return 1.2533 * statistics.stdev(xs) / math.sqrt(len(xs))


def effect_of(samples: Sequence[float], fast: Sequence[float]) -> Effect:
    """e(S) = median(S) − median(fast), its SE from both arms."""
    d = statistics.median(samples) - statistics.median(fast)
    return Effect(delta=d, var_own=_se_median(samples) ** 2, var_fast=_se_median(fast) ** 2, measured=True)


class EffectTrial(BaseModel):
    """One launch of the search: which items were applied, what it measured, why it ran."""

    items: list[str]
    purpose: str
    samples: list[float]
    effect: Effect


class Culprit(BaseModel):
    """A patch (or delta) whose own effect is material, with its share of the whole gap."""

    name: str
    effect: Effect
    share: float = Field(description="β / gap.")
    share_ci: tuple[float, float]


class EffectSearch(BaseModel):
    """What the search decided, and every launch it made."""

    verdict: Literal["culprits", "none", "interaction", "unresolved"]
    culprits: list[Culprit] = Field(default_factory=list)
    gap: Effect
    trials: list[EffectTrial] = Field(default_factory=list)
    removed_restores: bool | None = Field(default=None, description="Every item but the culprits measured fast.")
    alone_reproduces: bool | None = Field(default=None, description="The culprits alone measured the gap's size.")
    notes: list[str] = Field(default_factory=list)

    @property
    def launches(self) -> int:
        return len(self.trials)

    @property
    def confirmed_both_ways(self) -> bool:
        """Both checks measured and held: the only case a report may say 'confirmed both ways'."""
        return bool(self.removed_restores) and bool(self.alone_reproduces)


class _Search(Generic[T]):
    def __init__(self, items: list[T], measure: Callable[[frozenset[T], str], list[float]],
                 fast: list[float], name: Callable[[T], str],
                 more: Callable[[frozenset[T], int], list[float]] | None, threshold: float, cap: int):
        self.items, self.measure, self.fast, self.name = items, measure, fast, name
        self.more, self.threshold, self.cap = more, threshold, cap
        self.sign = 1.0
        self.trials: list[EffectTrial] = []

    def decided(self, e: Effect) -> bool:
        """Material, or its whole CI short of the threshold: more runs would not change what the search does."""
        return e.material(self.threshold, self.sign) or e.along(self.sign)[2] < self.threshold

    def named(self, e: Effect) -> bool:
        """A single item is named a culprit on a stricter CI (99 %): a wrong culprit is worse than none."""
        return e.material(self.threshold, self.sign, Z99)

    def run(self, subset: list[T], purpose: str) -> Effect:
        """One launch; more runs on the same server while the effect is undecided (up to `cap` runs); a single
        item's effect also until it is named or clearly short of the threshold."""
        samples = self.measure(frozenset(subset), purpose)
        eff = effect_of(samples, self.fast)
        while self.more is not None and len(samples) < self.cap and (
                not self.decided(eff) or (len(subset) == 1 and eff.material(self.threshold, self.sign)
                                          and not self.named(eff))):
            samples = samples + self.more(frozenset(subset), min(3, self.cap - len(samples)))
            eff = effect_of(samples, self.fast)
        self.trials.append(EffectTrial(items=[self.name(x) for x in subset], purpose=purpose, samples=samples,
                                       effect=eff))
        return eff


_ROUNDS = 3
"""Searches of what is left once culprits are named (a culprit the inference lost to noise is found in the next)."""


def _split(s: _Search[T], queue: list[tuple[list[T], Effect]], name: Callable[[T], str], out: EffectSearch,
           max_launches: int | None) -> list[tuple[T, Effect]] | None:
    """Halve every group with a material effect down to single items (one launch per split: the other half is
    inferred). None when a measured group interacts (neither half explains it) or the launch limit is reached."""
    threshold, sign = s.threshold, s.sign
    found: list[tuple[T, Effect]] = []
    while queue:
        group, eff = queue.pop(0)
        if len(group) == 1:
            found.append((group[0], eff))
            continue
        if max_launches is not None and s.trials and len(s.trials) >= max_launches:
            out.verdict = "unresolved"
            out.notes.append(f"stopped at {max_launches} launches with groups left to split")
            return None
        half = (len(group) + 1) // 2
        a, b = group[:half], group[half:]
        ea = s.run(a, f"effect of {len(a)} of {len(group)}")
        eb = eff.minus(ea)
        # The inferred half is kept when its estimate reaches half the material size and dropped otherwise, without
        # a launch: a culprit lost to the inference's noise shows in the check of everything else afterwards.
        kept = [(a, ea)] if not ea.negligible(threshold, sign) else []
        if eb.along(sign)[0] >= threshold / 2:
            kept.append((b, eb))
        if not kept and eff.measured and eff.material(threshold, sign):
            # additivity says the halves sum to the group: a measured group that neither half explains interacts
            out.verdict = "interaction"
            out.notes.append(f"{', '.join(map(name, group))}: material together ({eff.delta:+.1f}), neither half "
                             "alone: interacting, not additive")
            return None
        queue.extend(kept)  # an inferred group that neither half explains was noise in the inference: dropped
    return found


def search_effects(items: Sequence[T], measure: Callable[[frozenset[T], str], list[float]], *, slow: list[float],
                   fast: list[float], name: Callable[[T], str] = str, material_share: float = 0.2,
                   max_launches: int | None = None, more: Callable[[frozenset[T], int], list[float]] | None = None,
                   cap: int = 15) -> EffectSearch:
    """Split-by-effect search over `items` (most suspect first). `slow`/`fast`: the two references' samples (all
    items / none), measured before. `measure(subset, purpose)` launches the fast reference plus `subset` and
    returns its per-run samples; `more(subset, n)` (optional) n more runs on the server just launched, taken while
    an effect is undecided, up to `cap` runs. An effect is material at ≥ `material_share` of the gap (and its CI
    excludes 0)."""
    items = list(items)
    gap = effect_of(slow, fast)
    threshold = material_share * abs(gap.delta)
    s = _Search(items, measure, list(fast), name, more, threshold, cap)
    s.sign = sign = -1.0 if gap.delta < 0 else 1.0
    out = EffectSearch(verdict="none", gap=gap)
    if not items or not gap.material(threshold, sign):
        out.notes.append(f"all items vs none: {gap.delta:+.1f} (CI {gap.ci[0]:+.1f}, {gap.ci[1]:+.1f}): no material gap")
        return out
    culprits: list[tuple[T, Effect]] = []
    queue: list[tuple[list[T], Effect]] = [(items, gap)]
    rest: list[T] = []
    for _round in range(_ROUNDS):
        found = _split(s, queue, name, out, max_launches)
        if found is None:  # an interaction, or the launch limit: `out` says which
            out.trials = s.trials
            return out
        # An inferred singleton is named only when its whole CI clears the threshold (an innocent patch cannot
        # reach that by noise); otherwise it is launched alone first.
        found = [(x, e if e.measured or e.along(sign, Z99)[1] >= threshold else
                  s.run([x], f"effect of {name(x)} alone (inferred so far)")) for x, e in found]
        culprits += [(x, e) for x, e in found if s.named(e)]
        undecided = [name(x) for x, e in found if not s.named(e)]
        if undecided:
            out.notes.append(f"effect undecided (neither material nor negligible): {', '.join(undecided)}")
        if not culprits:
            out.verdict, out.trials = "unresolved", s.trials
            out.notes.append("no single item is material: the gap is spread or interacting")
            return out
        names = [x for x, _ in culprits]
        rest = [x for x in items if x not in names]
        if not rest:
            out.removed_restores = True  # removing every item is the fast reference itself, measured
            break
        e_rest = s.run(rest, "check: every item but the culprits (removing them restores?)")
        # Restores only when clearly short of a material effect: an undecided rest may still hold a culprit that
        # the inference lost to noise; one whose estimate reaches half a material effect is searched again.
        out.removed_restores = e_rest.along(sign)[2] < threshold
        if out.removed_restores or e_rest.along(sign)[0] < threshold / 2:
            break
        out.notes.append(f"every item but {', '.join(map(name, names))} still costs {e_rest.delta:+.1f}: searched again")
        queue = [(rest, e_rest)]
    total = sum(e.delta for _, e in culprits)
    se_total = math.sqrt(sum(e.se ** 2 for _, e in culprits))
    if len(culprits) == 1 or not rest:
        e_alone = culprits[0][1] if rest else gap
    elif all(e.measured for _, e in culprits):  # each launched alone already: their sum is the culprits alone
        e_alone = Effect(delta=total, var_own=se_total ** 2, f_coef=0.0, measured=False)
    else:
        e_alone = s.run(names, "check: the culprits alone (they reproduce the gap?)")
    out.alone_reproduces = abs(e_alone.delta - gap.delta) <= Z95 * math.hypot(e_alone.se, gap.se) + threshold
    additive = abs(e_alone.delta - total) <= Z95 * math.hypot(e_alone.se, se_total) + threshold
    out.trials = s.trials
    if not (out.removed_restores and out.alone_reproduces and additive):
        out.verdict = "interaction" if not additive else "unresolved"
        out.notes.append(f"checks: removing restores {out.removed_restores}, alone reproduces "
                         f"{out.alone_reproduces}, Σβ {total:+.1f} vs alone {e_alone.delta:+.1f} (additive {additive})")
        return out
    # Every launch measured a sum of the candidates' effects: one weighted least-squares fit over all of them (and
    # both references) is each culprit's effect; one that the fit does not hold material is not named.
    fitted, tau2 = _fit([name(x) for x in names], s.trials, slow, fast)
    if tau2 > 0:
        out.notes.append(f"launches read apart by more than their runs' spread (launch-to-launch sd "
                         f"{math.sqrt(tau2):.2f}): the fit's intervals include it")
    weak = [n for n, e in fitted.items() if not s.named(e)]
    if weak and tau2 > 0 and len(weak) < len(names) and (
            max_launches is None or len(s.trials) + len(weak) <= max_launches):
        # The search found it material, but the launches read apart beyond their runs' spread (τ²) and the fit
        # that counts that holds it short at 99 %: one launch of it cannot tell its effect from a launch's offset.
        # A second launch of it alone (a replicate) halves what an offset can do to it; then the fit decides again
        # (no culprit is named unless every one of the set clears it). Never where the launches agree (τ² = 0).
        for x in [x for x in names if name(x) in weak]:
            s.run([x], f"effect of {name(x)} alone, launched again (one launch of it reads within the launches' "
                  "spread of the threshold)")
        out.trials = s.trials
        fitted, tau2 = _fit([name(x) for x in names], s.trials, slow, fast)
        again = weak
        weak = [n for n, e in fitted.items() if not s.named(e)]
        out.notes.append(f"{', '.join(again)} launched again (the launches read apart): fitted over every trial, "
                         + ("; ".join(f"{n} {fitted[n].delta:+.1f}" for n in again)))
    if weak:
        out.verdict = "unresolved"
        out.notes.append(f"fitted over every trial, {', '.join(weak)} is not material: no culprit named")
        return out
    culprits = [(x, fitted[name(x)]) for x in names]
    gap_se = math.sqrt(gap.se ** 2 + 2 * tau2)  # two launches: the slow reference's and the fast one's
    for x, e in culprits:
        share = e.delta / gap.delta
        sd = abs(share) * math.hypot(e.se / abs(e.delta) if e.delta else math.inf,
                                     gap_se / abs(gap.delta))
        out.culprits.append(Culprit(name=name(x), effect=e, share=share,
                                    share_ci=(share - Z95 * sd, share + Z95 * sd)))
    out.verdict = "culprits"
    return out


def _fit(names: list[str], trials: list[EffectTrial], slow: list[float], fast: list[float]
         ) -> tuple[dict[str, Effect], float]:
    """Weighted least squares: each trial's median = f + Σ β of the candidates it applied (the others held at 0, as
    the search found them); the slow reference applied them all, the fast one none. Each launch also reads its own
    offset (a server started again reads a few % apart, more than its runs spread): the rows' scatter about the fit
    beyond their runs' spread estimates that launch-to-launch variance τ² (the method of moments of a random-effects
    meta-regression), and every row is weighted, and every CI widened, with it. Returns the effects and τ²."""
    import numpy as np

    rows: list[tuple[set[str], list[float]]] = [(set(names), slow), (set(), fast)]
    rows += [(set(t.items) & set(names), t.samples) for t in trials]
    x = np.array([[1.0] + [1.0 if n in applied else 0.0 for n in names] for applied, _ in rows])
    y = np.array([statistics.median(smp) for _, smp in rows])
    # One server configuration's run-to-run noise, pooled over every row: a few runs' own spread can be small by
    # chance, and weights (and CIs) from it would claim a precision the trials do not have.
    dev = [v - statistics.fmean(smp) for _, smp in rows for v in smp]
    dof = len(dev) - len(rows)
    sd = math.sqrt(sum(d * d for d in dev) / dof) if dof > 0 else 0.0
    w = np.array([len(smp) / max((1.2533 * sd) ** 2, _se_median(smp) ** 2 * len(smp) if sd == 0 else 0.0, 1e-9)
                  for _, smp in rows])
    xtw = x.T * w
    cov = np.linalg.pinv(xtw @ x)
    beta = cov @ (xtw @ y)
    q = float(w @ (y - x @ beta) ** 2)
    dof = len(rows) - int(np.linalg.matrix_rank(x))
    tau2 = 0.0
    if dof > 0 and q > dof:
        tau2 = (q - dof) / float(w.sum() - np.trace(cov @ ((x.T * w ** 2) @ x)))
        w = 1.0 / (1.0 / w + tau2)
        xtw = x.T * w
        cov = np.linalg.pinv(xtw @ x)
        beta = cov @ (xtw @ y)
    return {n: Effect(delta=float(beta[i + 1]), var_own=float(max(cov[i + 1, i + 1], 0.0)), f_coef=0.0,
                      measured=True) for i, n in enumerate(names)}, tau2
