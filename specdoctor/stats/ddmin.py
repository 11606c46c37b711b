"""Delta debugging over patch sets, as pure functions of an oracle `test(subset) -> Outcome` (no I/O)."""

from __future__ import annotations

import statistics
from collections.abc import Callable, Hashable, Sequence
from typing import Generic, Literal, TypeVar

from pydantic import BaseModel, Field

from specdoctor.stats.comparator import compare

__all__ = ["Outcome", "TrialRecord", "SearchResult", "CachedOracle", "isolate", "ddmin", "split", "classify", "prefix_search"]

Outcome = Literal["regressed", "same", "unresolved"]
T = TypeVar("T", bound=Hashable)


class TrialRecord(BaseModel):
    """One oracle call: the subset (added to the essentials), its outcome and why it was run."""

    subset: list[str]
    outcome: Outcome
    purpose: str


class SearchResult(BaseModel):
    """What the search concluded and what it cost."""

    verdict: Literal["culprit", "interaction", "no-regression", "not-in-patches", "unresolved"]
    culprits: list[str] = Field(default_factory=list)
    confirmed: bool = Field(description="essentials + culprits was itself measured slow.")
    tests: int = Field(description="Distinct oracle calls made (= server launches in the tool).")
    trials: list[TrialRecord] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)


class CachedOracle(Generic[T]):
    """Wraps an oracle: each distinct subset is tested once; known outcomes can be seeded without a call."""

    def __init__(self, test: Callable[[frozenset[T]], Outcome], name: Callable[[T], str] = str):
        self.test = test
        self.name = name
        self.cache: dict[frozenset[T], Outcome] = {}
        self.trials: list[TrialRecord] = []
        self.calls = 0

    def seed(self, subset: frozenset[T], outcome: Outcome) -> None:
        self.cache[subset] = outcome

    def __call__(self, subset: Sequence[T] | frozenset[T], purpose: str = "") -> Outcome:
        key = frozenset(subset)
        if key not in self.cache:
            self.calls += 1
            self.cache[key] = self.test(key)
            self.trials.append(TrialRecord(subset=sorted(self.name(x) for x in key), outcome=self.cache[key],
                                           purpose=purpose))
        return self.cache[key]

    def seen(self, outcome: Outcome) -> bool:
        return outcome in self.cache.values()


def split(items: Sequence[T], n: int) -> list[list[T]]:
    """n nearly equal consecutive chunks (order kept, earlier chunks one longer)."""
    k, r = divmod(len(items), n)
    out, start = [], 0
    for i in range(n):
        end = start + k + (1 if i < r else 0)
        out.append(list(items[start:end]))
        start = end
    return [c for c in out if c]


def ddmin(items: Sequence[T], fails: Callable[[list[T]], Outcome], *, target: Outcome = "regressed") -> list[T]:
    """Zeller's ddmin: a 1-minimal subset of `items` whose outcome is still `target` (items must reach it).

    Subsets first, then complements; granularity doubles when neither reduces. Unresolved counts as
    "does not reach the target" (the conservative choice: it never removes a needed item).
    """
    cur = list(items)
    n = 2
    while len(cur) >= 2:
        chunks = split(cur, min(n, len(cur)))
        for chunk in chunks:
            if fails(chunk) == target:
                cur, n = chunk, 2
                break
        else:
            for chunk in chunks:
                comp = [x for x in cur if x not in chunk]
                if len(chunks) > 2 and fails(comp) == target:
                    cur, n = comp, max(n - 1, 2)
                    break
            else:
                if n >= len(cur):
                    break
                n = min(len(cur), 2 * n)
    return cur


def prefix_search(items: Sequence[T], oracle: CachedOracle[T], *, target: Outcome = "regressed",
                  limit: int = 8) -> list[T]:
    """Interacting culprits one by one: the shortest prefix that reaches `target` ends with a needed item.

    With `found` so far, binary-search the shortest prefix p of the remaining items such that
    found + items[:p] reaches the target; items[p-1] is needed. Stop when `found` alone reaches it.
    About log2(P) trials per culprit; unresolved trials count as "not reached".
    """
    rest, found = list(items), []  # type: ignore[var-annotated]
    while rest and len(found) < limit:
        if found and oracle(found, "interaction: found set alone") == target:
            break
        lo, hi = 1, len(rest)
        if oracle(found + rest, "interaction: found + all remaining") != target:
            break
        while lo < hi:
            mid = (lo + hi) // 2
            if oracle(found + rest[:mid], f"interaction: prefix {mid}/{len(rest)}") == target:
                hi = mid
            else:
                lo = mid + 1
        found.append(rest[lo - 1])
        rest = rest[:lo - 1]
    return found


def isolate(items: Sequence[T], oracle: CachedOracle[T], *, confirm: bool = True) -> SearchResult:
    """Find the patches (in priority order, most suspect first) that make essentials + patches slow.

    Adaptive bisection: test the higher-priority half; a fast half clears it, so the other half is inferred
    guilty without a trial; one confirmation trial when the last step was an inference; shortest-prefix
    search when the confirmation shows the culprit is not alone (interacting patches). Unresolved trials
    (conflict, failed start) are never counted as good or bad.

    `oracle(all)` is the slow reference and `oracle([])` the fast one (essentials only); seed them in the
    oracle when they were measured before, and they cost nothing. The fast reference is measured last,
    and only when no trial came back fast (that trial already proves the premise).
    """
    items = list(items)
    notes: list[str] = []

    def done(verdict, culprits, confirmed) -> SearchResult:  # type: ignore[no-untyped-def]
        return SearchResult(verdict=verdict, culprits=[oracle.name(c) for c in culprits], confirmed=confirmed,
                            tests=oracle.calls, trials=list(oracle.trials), notes=notes)

    if not items:
        return done("no-regression", [], False)
    top = oracle(items, "reference: essentials + all patches")
    if top != "regressed":
        notes.append("essentials + all patches is not slow: nothing to bisect")
        return done("no-regression" if top == "same" else "unresolved", [], False)
    cand, direct = items, True
    while len(cand) > 1:
        half = (len(cand) + 1) // 2
        a, b = cand[:half], cand[half:]
        oa = oracle(a, f"bisect: {len(a)} of {len(cand)} candidates")
        if oa == "regressed":
            cand, direct = a, True
            continue
        if oa == "same":
            cand, direct = b, False
            continue
        ob = oracle(b, f"bisect: other {len(b)} (first half unresolved)")
        if ob == "regressed":
            cand, direct = b, True
        elif ob == "same":
            notes.append(f"{len(a)} patches could not be judged; the culprit is inferred among them")
            cand, direct = a, False
        else:
            notes.append("both halves unresolved: cannot narrow further")
            return done("unresolved", cand, False)
    confirmed = direct
    if not direct and confirm:
        oc = oracle(cand, "confirm: the inferred culprit alone")
        if oc == "regressed":
            confirmed = True
        elif oc == "same":
            notes.append(f"{oracle.name(cand[0])} alone is fast: patches interact; running ddmin")
            found = prefix_search(items, oracle)
            fast = oracle(found, "confirm: the interacting set") if found else "same"
            return done("interaction" if len(found) > 1 else "culprit", found, fast == "regressed")
        else:
            notes.append("confirmation trial unresolved: culprit inferred, not confirmed")
    if not oracle.seen("same"):
        if oracle([], "reference: essentials only") == "regressed":
            notes.append("essentials alone are as slow as all patches: the slowdown is not in these patches")
            return done("not-in-patches", [], False)
    return done("culprit", cand, confirmed)


def classify(trial: Sequence[float], slow: Sequence[float], fast: Sequence[float] | None = None,
             magnitude: float | None = None) -> Outcome | None:
    """A trial's tok/s samples vs the references: 'same' (fast), 'regressed' (slow), None (need more runs).

    `magnitude` is the smallest speed difference that matters (default 10 % of the slow median). Fast:
    significantly faster than the slow reference, by more than `magnitude` (95 % CI of the difference),
    and not clearly slower than the fast reference. Slow: clearly slower than the fast reference, or no
    speed-up as large as `magnitude` over the slow one. Small but significant differences (a patch with
    a minor effect) therefore do not flip a verdict.
    """
    mag = abs(magnitude) if magnitude is not None else 0.1 * statistics.median(slow)
    c_slow = compare(slow, trial, magnitude=mag)
    lo, hi = c_slow.delta_ci
    faster = c_slow.outcome == "DIFFERENT" and lo > mag
    if fast:
        c_fast = compare(fast, trial, magnitude=mag)
        if c_fast.outcome == "DIFFERENT" and c_fast.delta_ci[1] < -mag:
            return "regressed"
        if faster:
            return "same"
    elif faster:
        return "same"
    if len(trial) >= 3 and hi < mag:
        return "regressed"
    return None
