"""Delta debugging over any set of items (patches, deltas kept at today's value), as pure functions of an oracle."""

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
    confirmed: bool = Field(description="Confirmed both ways: culprits alone slow, every patch but them fast.")
    tests: int = Field(description="Distinct oracle calls made (= server launches in the tool).")
    trials: list[TrialRecord] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)
    candidates: list[str] = Field(default_factory=list,
                                  description="When unresolved: where the slowdown may be (never named a culprit).")


class CachedOracle(Generic[T]):
    """Wraps an oracle: each distinct subset is tested once; known outcomes can be seeded without a call."""

    def __init__(self, test: Callable[[frozenset[T]], Outcome], name: Callable[[T], str] = str):
        self.test = test
        self.name = name
        self.cache: dict[frozenset[T], Outcome] = {}
        self.trials: list[TrialRecord] = []
        self.calls = 0
        self.seeded: set[frozenset[T]] = set()
        self.asking = ""
        """The purpose of the call being tested now (a test that treats a confirmation trial differently reads it)."""

    def seed(self, subset: frozenset[T], outcome: Outcome) -> None:
        self.cache[subset] = outcome
        self.seeded.add(subset)

    def replicate(self, subset: Sequence[T] | frozenset[T], purpose: str = "") -> Outcome:
        """Test a seeded subset again in its own trial: an outcome taken from the measurements that started the
        search cannot, on its own, confirm what those same measurements suggested."""
        key = frozenset(subset)
        self.calls += 1
        self.asking = purpose
        self.cache[key] = self.test(key)
        self.seeded.discard(key)
        self.trials.append(TrialRecord(subset=sorted(self.name(x) for x in key), outcome=self.cache[key],
                                       purpose=purpose))
        return self.cache[key]

    def __call__(self, subset: Sequence[T] | frozenset[T], purpose: str = "") -> Outcome:
        key = frozenset(subset)
        if key not in self.cache:
            self.calls += 1
            self.asking = purpose
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


def isolate(items: Sequence[T], oracle: CachedOracle[T], *, confirm: bool = True, noun: str = "patches",
            base: str = "essentials", replicate: bool = False) -> SearchResult:
    """Find the items (in priority order, most suspect first) that make `base` + items slow.

    An item is whatever a trial can add to the fast reference: a patch on top of the essential patches, or a delta
    left at today's value while every other delta is reverted (`noun`/`base` only name them in the notes).

    Adaptive bisection narrows the candidates (a fast half clears it, a slow half keeps it). Narrowing is only
    a guide: a culprit set C is named only when it is confirmed both ways by measured trials — essentials + C
    reproduces the slowdown, and every patch but C is fast (removing exactly C restores) — and, for a set of
    several, removing any one member from C is fast (each member is needed). Candidates that alone are fast
    lead to a shortest-prefix search for interacting patches, whose result is confirmed the same way. An
    unresolved trial (conflict, failed start, undecided comparator after its sequential runs) is never counted
    good or bad and never completes an inference: the search then ends as "unresolved" with its candidates.

    `oracle(all)` is the slow reference and `oracle([])` the fast one (essentials only); seed them in the
    oracle when they were measured before, and they cost nothing. `confirm=False` names no culprit: the
    narrowed set is returned as candidates. `replicate=True`: when every confirming trial would be one of those
    seeded references (one candidate set spanning all items), the candidates alone are measured again in a fresh
    trial first — the references that suggested the set cannot also be its only confirmation.
    """
    items = list(items)
    notes: list[str] = []

    def done(verdict, culprits, confirmed, candidates=()) -> SearchResult:  # type: ignore[no-untyped-def]
        return SearchResult(verdict=verdict, culprits=[oracle.name(c) for c in culprits], confirmed=confirmed,
                            candidates=[oracle.name(c) for c in candidates], tests=oracle.calls,
                            trials=list(oracle.trials), notes=notes)

    if not items:
        return done("no-regression", [], False)
    top = oracle(items, f"reference: {base} + all {noun}")
    if top != "regressed":
        notes.append(f"{base} + all {noun} is not slow: nothing to bisect")
        return done("no-regression" if top == "same" else "unresolved", [], False, items if top != "same" else ())
    cand, stuck = items, False
    while len(cand) > 1:
        half = (len(cand) + 1) // 2
        a, b = cand[:half], cand[half:]
        oa = oracle(a, f"bisect: {len(a)} of {len(cand)} candidates")
        if oa in ("regressed", "same"):
            cand = a if oa == "regressed" else b
            continue
        ob = oracle(b, f"bisect: other {len(b)} (first half unresolved)")
        if ob == "regressed":
            cand = b
            continue
        notes.append(f"{len(a)} {noun} could not be judged ({', '.join(oracle.name(x) for x in a)}); "
                     "no culprit is inferred from an unresolved trial")
        stuck = True
        break
    if not confirm:
        notes.append("confirmation disabled: candidates only, no culprit named")
        return done("unresolved", [], False, cand)
    if not stuck:
        verdict = _confirmed(items, cand, oracle, replicate=replicate)
        if verdict == "yes":
            return done("culprit" if len(cand) == 1 else "interaction", cand, True)
        if verdict == "unresolved":
            notes.append("a confirmation trial was unresolved: candidates only")
            return done("unresolved", [], False, cand)
        if oracle([], f"reference: {base} only") == "regressed":
            notes.append(f"{base} alone are as slow as all {noun}: the slowdown is not in these {noun}")
            return done("not-in-patches", [], False)
        notes.append(f"{', '.join(oracle.name(x) for x in cand)} alone does not explain the slowdown: "
                     f"searching for interacting {noun}")
    found = prefix_search(items, oracle)
    if not found:
        notes.append(f"no set of {noun} was shown to reproduce the slowdown")
        return done("unresolved", [], False, cand)
    verdict = _confirmed(items, found, oracle, replicate=replicate)
    if verdict == "yes":
        return done("culprit" if len(found) == 1 else "interaction", found, True)
    notes.append(f"{', '.join(oracle.name(x) for x in found)} not confirmed both ways ({verdict}): candidates only")
    return done("unresolved", [], False, list(dict.fromkeys(found + (cand if stuck else []))))


def _confirmed(items: list[T], cand: list[T], oracle: CachedOracle[T], *,
               replicate: bool = False) -> Literal["yes", "no", "unresolved"]:
    """Both ways, measured: cand alone is slow, everything but cand is fast, and each member of cand is needed."""
    checks = [(cand, "regressed", "confirm: the candidates alone on top of the essentials"),
              ([x for x in items if x not in cand], "same", "confirm: every patch but the candidates")]
    checks += [([y for y in cand if y != x], "same", f"confirm: the candidates without {oracle.name(x)}")
               for x in cand if len(cand) > 1]
    if replicate and all(frozenset(sub) in oracle.seeded for sub, _, _ in checks):
        got = oracle.replicate(cand, "confirm: the candidates alone again, in a fresh trial (the references "
                                     "that suggested them confirm nothing by themselves)")
        if got != "regressed":
            return "unresolved" if got == "unresolved" else "no"
    for subset, want, purpose in checks:
        got = oracle(subset, purpose)
        if got == "unresolved":
            return "unresolved"
        if got != want:
            return "no"
    return "yes"


def classify(trial: Sequence[float], slow: Sequence[float], fast: Sequence[float] | None = None,
             magnitude: float | None = None, part: float | None = None) -> Outcome | None:
    """A trial's tok/s samples vs the references: 'same' (fast), 'regressed' (slow), None (need more runs).

    `magnitude` is the smallest speed difference that matters (default 10 % of the slow median). Fast:
    significantly faster than the slow reference, by more than `magnitude` (95 % CI of the difference),
    and not clearly slower than the fast reference. Slow: clearly slower than the fast reference, or no
    speed-up as large as `magnitude` over the slow one. Small but significant differences (a patch with
    a minor effect) therefore do not flip a verdict. `part` (default `magnitude`): how much slower than the
    fast reference (CI) makes a trial slow — smaller where a set may hold one of several independent causes, each
    a part of the gap: such a trial sits part way, faster than the slow reference too, and is slow, not fast.
    """
    mag = abs(magnitude) if magnitude is not None else 0.1 * statistics.median(slow)
    c_slow = compare(slow, trial, magnitude=mag)
    lo, hi = c_slow.delta_ci
    faster = c_slow.outcome == "DIFFERENT" and lo > mag
    if fast:
        c_fast = compare(fast, trial, magnitude=mag)
        if c_fast.outcome == "DIFFERENT" and c_fast.delta_ci[1] < -(abs(part) if part is not None else mag):
            return "regressed"
        if faster:
            return "same"
    elif faster:
        return "same"
    if len(trial) >= 3 and hi < mag:
        return "regressed"
    return None
