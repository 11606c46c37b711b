"""The order the suite's tests run in under pytest-xdist's work stealing: the slow ones first, spread evenly.

`--dist worksteal` hands each of the N workers one contiguous slice of the collection (by count), then lets an
idle worker take the tail of the longest queue. In file order the slow end-to-end tests bunch up: one worker is
left running a two-minute test at the end while the others idle. Here each slice starts with its share of the
slow tests (longest first, each to the slice with the least time so far) and is filled up with light ones, so
the slow work starts at once on every worker and the tails that get stolen are the light tests.

Weights are seconds per test (setup, call and teardown) from a profiled run (`durations.json`, refreshed with
`python tests/xdist_order.py LOG > tests/durations.json` from a `pytest --durations=0` log). A test missing from
it counts as light and keeps its place in file order; a wrong weight costs only balance, never a test. The tests of
a module that share a module-scoped fixture move together (the fixture is built once per worker that runs any).
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")

WEIGHTS = Path(__file__).with_name("durations.json")
HEAVY_S = 20.0  # a test this slow is placed by its weight; lighter ones fill the slices in file order


def slice_sizes(total: int, workers: int) -> list[int]:
    """How many items worksteal's first distribution gives each worker (`len(pending) // nodes_remaining`)."""
    sizes, left = [], total
    for i in range(workers):
        sizes.append(left // (workers - i))
        left -= sizes[-1]
    return sizes


def arrange(units: Sequence[list[T]], seconds: Callable[[T], float], workers: int) -> list[T]:
    """`units` (lists of items, in collection order) reordered for `workers` slices; every item kept once. A unit
    moves whole: a module whose tests share a module-scoped fixture is one unit (split, each worker that runs a
    part would build the fixture again), any other test is its own. `seconds(item)`: its weight."""
    items = [it for its in units for it in its]
    if workers < 2 or len(items) < workers:
        return items
    sizes = slice_sizes(len(items), workers)
    weighted = [(sum(seconds(it) for it in its), its) for its in units]
    heavy = sorted((u for u in weighted if u[0] >= HEAVY_S), key=lambda u: -u[0])
    light = [it for w, its in weighted if w < HEAVY_S for it in its]
    slices: list[list[T]] = [[] for _ in range(workers)]
    load = [0.0] * workers
    overflow: list[T] = []
    for w, its in heavy:  # longest first, each to the slice with the least time that still has room
        room = [i for i in range(workers) if len(slices[i]) + len(its) <= sizes[i]]
        if not room:
            overflow.extend(its)
            continue
        i = min(room, key=lambda k: load[k])
        slices[i].extend(its)
        load[i] += w
    rest = iter([*overflow, *light])
    for i in range(workers):
        while len(slices[i]) < sizes[i]:
            slices[i].append(next(rest))
    return [it for s in slices for it in s]


def load_weights(path: Path = WEIGHTS) -> dict[str, float]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return {str(k): float(v) for k, v in data.items()} if isinstance(data, dict) else {}


def weights_from_log(text: str, least: float = 5.0) -> dict[str, float]:
    """Seconds per test from pytest's `--durations` lines ('12.34s call tests/a/test_b.py::test_c'), the tests
    of at least `least` seconds (the rest are light whatever their weight)."""
    out: dict[str, float] = {}
    for m in re.finditer(r"^>?\s*([0-9.]+)s (?:call|setup|teardown)\s+(\S+)$", text, re.M):
        out[m.group(2)] = round(out.get(m.group(2), 0.0) + float(m.group(1)), 1)
    return dict(sorted(((k, v) for k, v in out.items() if v >= least), key=lambda kv: -kv[1]))


if __name__ == "__main__":
    print(json.dumps(weights_from_log(Path(sys.argv[1]).read_text()), indent=1))
