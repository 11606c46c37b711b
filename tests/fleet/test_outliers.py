"""The odd-ones-out analysis on hand-made rows: metric tests, the majority vote, departures and their order."""

from __future__ import annotations

import random

import pytest

from specdoctor.errors import UsageError
from specdoctor.fleet.models import HostSurvey
from specdoctor.fleet.outliers import analyse
from specdoctor.fleet.targets import parse_hosts
from specdoctor.models import Fingerprint, GpuFingerprint, Measurement


def _fp(driver: str = "580.95.05", proto: str | None = "LL", gen: int = 5, clock: float = 2617.0) -> Fingerprint:
    env = {"NCCL_PROTO": proto} if proto else {}
    return Fingerprint(driver=driver, nccl_version="2.27.5", worker_env=env,
                       gpus=[GpuFingerprint(index=i, name="GPU", pcie_gen=gen if i == 1 else 5, pcie_width=16,
                                            max_sm_clock_mhz=clock) for i in range(2)])


def _row(name: str, centre: float, rng: random.Random, fp: Fingerprint | None = None,
         launch: dict[str, str] | None = None, cv: float = 0.02) -> HostSurvey:
    xs = [centre * rng.lognormvariate(0, cv) for _ in range(8)]
    xs_sorted = sorted(xs)
    return HostSurvey(name=name, spec=f"u@{name}", status="ok", fingerprint=fp or _fp(),
                      launch=launch or {"tp_size": "2", "port": str(rng.randint(1000, 9000))},
                      throughput=Measurement(label=name, samples=xs, median=(xs_sorted[3] + xs_sorted[4]) / 2,
                                             ci_low=xs_sorted[1], ci_high=xs_sorted[6]),
                      accept_samples=[1.8 * rng.lognormvariate(0, cv) for _ in range(8)], accept_length=1.8)


@pytest.mark.parametrize("seed", range(5))
def test_the_slow_host_is_named_with_its_cause_first_and_no_alike_host_is(seed):
    rng = random.Random(seed)
    rows = [_row(f"h{i}", 70 * (1 + rng.uniform(-0.01, 0.01)), rng) for i in range(7)]
    rows.append(_row("slow", 56, rng, fp=_fp(proto=None)))
    rows.append(_row("driver", 70, rng, fp=_fp(driver="570.1")))
    a = analyse(rows)
    assert a.outliers == ["slow"]
    slow = a.host("slow")
    assert slow is not None and slow.direction == "worse"
    assert [d.key for d in slow.deviations] == ["worker_env.NCCL_PROTO"]
    assert slow.deviations[0].majority == "LL" and slow.deviations[0].value is None
    assert slow.deviations[0].agree == 8 and slow.deviations[0].of == 9
    driver = a.host("driver")
    assert driver is not None and not driver.outlier and [d.key for d in driver.deviations] == ["driver"]
    assert a.fields == {"worker_env.NCCL_PROTO": ["slow"], "driver": ["driver"]}
    assert a.majority_fingerprint is not None and a.majority_fingerprint.worker_env == {"NCCL_PROTO": "LL"}
    assert "port" not in a.majority_launch  # where a server listens is no performance setting


def test_a_small_gap_is_not_an_outlier_even_when_the_comparator_sees_it():
    rng = random.Random(7)
    rows = [_row(f"h{i}", 70, rng, cv=0.005) for i in range(8)] + [_row("bit-slow", 68, rng, cv=0.005)]
    a = analyse(rows, min_effect_pct=5.0)
    t = next(t for t in a.host("bit-slow").metrics if t.metric == "throughput")  # type: ignore[union-attr]
    assert t.outcome == "DIFFERENT" and abs(t.pct_change or 0) < 5
    assert a.outliers == []
    assert analyse(rows, min_effect_pct=2.0).outliers == ["bit-slow"]


def test_a_faster_host_is_odd_too_and_said_better():
    rng = random.Random(3)
    rows = [_row(f"h{i}", 70, rng) for i in range(6)] + [_row("fast", 90, rng)]
    a = analyse(rows)
    assert a.outliers == ["fast"] and a.host("fast").direction == "better"  # type: ignore[union-attr]


def test_a_departure_healthy_hosts_share_is_ranked_after_one_only_the_outlier_has():
    rng = random.Random(5)
    rows = [_row(f"h{i}", 70, rng) for i in range(5)]
    rows.append(_row("old-driver", 70, rng, fp=_fp(driver="570.1")))
    rows.append(_row("slow", 50, rng, fp=_fp(driver="570.1", gen=1)))
    a = analyse(rows)
    slow = a.host("slow")
    assert a.outliers == ["slow"] and slow is not None
    keys = [d.key for d in slow.deviations]
    assert keys[0] == "gpus[1].pcie_gen" and "driver" in keys  # driver: high impact, but old-driver is not slow
    driver = next(d for d in slow.deviations if d.key == "driver")
    assert driver.shared_with == ["old-driver"] and "not outliers" in driver.why


def test_a_split_field_names_no_deviant_and_two_hosts_make_no_test():
    rng = random.Random(1)
    rows = [_row(f"h{i}", 70, rng, fp=_fp(driver="A" if i % 2 else "B")) for i in range(4)]
    a = analyse(rows)
    assert "driver" in a.split_fields and "driver" not in a.fields
    few = analyse(rows[:2] + [HostSurvey(name="x", spec="u@x", status="unreachable", error="refused")])
    assert few.outliers == [] and few.unreachable == ["x"] and any("fewer than 3" in n for n in few.notes)
    assert all(h.metrics == [] for h in few.hosts)


def test_hosts_file_and_list_forms(tmp_path):
    f = tmp_path / "hosts"
    f.write_text("# the fleet\nbox1 ubuntu@10.0.0.1 port=30001\nubuntu@10.0.0.2:2222\n\n")
    t = parse_hosts(str(f))
    assert [(x.name, x.spec, x.port) for x in t] == [("box1", "ubuntu@10.0.0.1", 30001),
                                                     ("ubuntu@10.0.0.2:2222", "ubuntu@10.0.0.2:2222", None)]
    assert [x.spec for x in parse_hosts("a@h1,b@h2")] == ["a@h1", "b@h2"]
    for bad in ("a@h1,a@h1", "x y z", "h1 port=abc", " , "):
        with pytest.raises(UsageError):
            parse_hosts(bad)
    with pytest.raises(UsageError, match="no such file"):
        parse_hosts(str(tmp_path / "missing" / "hosts"))


def test_the_fleet_package_surface_is_pinned():
    import specdoctor.fleet as fleet

    assert sorted(fleet.__all__) == ["FieldDeviation", "FleetAnalysis", "HostSurvey", "HostVerdict", "MetricTest",
                                     "SurveyParams", "SurveyTarget"]
    assert all(hasattr(fleet, n) for n in fleet.__all__)
