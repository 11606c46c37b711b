"""The suite's order under xdist (tests/xdist_order.py): every test kept once, the slow ones spread over the slices."""

from __future__ import annotations

from xdist_order import HEAVY_S, arrange, slice_sizes, weights_from_log


def test_slices_are_worksteals_first_distribution():
    assert slice_sizes(10, 4) == [2, 2, 3, 3]
    assert sum(slice_sizes(2193, 4)) == 2193


def _units(n: int) -> list[list[int]]:
    return [[i] for i in range(n)]


def _by(weights: dict[str, float]):
    return lambda i: weights.get(f"t{i}", 0.0)


def test_every_item_kept_once_and_the_slow_ones_lead_their_slices():
    items = _units(40)
    weights = {"t3": 200.0, "t4": 150.0, "t5": 120.0, "t6": 90.0, "t30": 60.0, "t31": HEAVY_S - 1}
    out = arrange(items, _by(weights), 4)
    assert sorted(out) == list(range(40))
    firsts = [out[0], out[10], out[20], out[30]]  # the four slices of 10
    assert sorted(firsts) == [3, 4, 5, 6]  # one slow test to each worker, longest first
    assert out.index(30) % 10 == 1 and out[out.index(30) - 1] == 6  # the fifth goes to the least-loaded slice
    assert out[1:10] == [0, 1, 2, 7, 8, 9, 10, 11, 12]  # light tests fill in file order (t31 is light)


def test_without_workers_the_order_is_the_collection_s():
    assert arrange(_units(5), _by({"t4": 500.0}), 1) == [0, 1, 2, 3, 4]


def test_a_module_sharing_a_fixture_moves_whole():
    units = [*_units(10), [10, 11, 12], *_units(20)[13:]]  # 10-12: one module's tests sharing a fixture
    out = arrange(units, _by({"t10": 50.0, "t15": 40.0}), 4)  # the module's weight is in its first test (the setup)
    assert sorted(out) == list(range(20))
    assert out[:3] == [10, 11, 12] and out[5] == 15  # together, leading the first slice; t15 leads the next


def test_weights_are_read_from_durations_lines():
    log = ("12.50s call     tests/a/test_b.py::test_c[x-y]\n> 7.50s setup    tests/a/test_b.py::test_c[x-y]\n"
           "1.00s call tests/a/test_b.py::test_d\n")
    assert weights_from_log(log) == {"tests/a/test_b.py::test_c[x-y]": 20.0}
