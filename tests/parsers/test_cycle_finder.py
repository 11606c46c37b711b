"""A phase range's cycle is found by bisection per thread, with the same answer as a scan of every cycle."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from specdoctor.parsers.torch_trace import cycle_finder


def _scan(batches, ts, tid):
    return next((i for i, (b0, b1, t) in enumerate(batches) if b0 <= ts <= b1 and t == tid), None)


_batch = st.tuples(st.integers(0, 60), st.integers(0, 15), st.sampled_from(["a", "b", 7]))


@settings(max_examples=300, deadline=None)
@given(st.lists(_batch, max_size=25), st.lists(st.tuples(st.integers(-2, 80), st.sampled_from(["a", "b", 7, None]))))
def test_the_same_cycle_as_a_scan_in_order_overlapping_or_not(raw, probes):
    batches = sorted(((float(b0), float(b0 + d), t) for b0, d, t in raw), key=lambda b: b[0])
    find = cycle_finder(batches)
    for ts, tid in probes:
        assert find(float(ts), tid) == _scan(batches, float(ts), tid)


def test_sequential_cycles_of_two_threads():
    rng = random.Random(5)
    batches, t = [], 0.0
    for _ in range(2000):
        d = rng.uniform(1, 5)
        batches.append((t, t + d, rng.choice(["s0", "s1"])))
        t += d + rng.uniform(0.01, 1)
    find = cycle_finder(batches)
    for _ in range(500):
        ts, tid = rng.uniform(-5, t + 5), rng.choice(["s0", "s1", "other"])
        assert find(ts, tid) == _scan(batches, ts, tid)
