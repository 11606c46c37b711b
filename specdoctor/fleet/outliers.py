"""Odd ones out: per metric a robust test (median/MAD of host medians + the comparator on the host's runs vs the
pooled runs of the rest of the fleet); per field the departures from the majority, most likely cause first."""

from __future__ import annotations

import statistics

from specdoctor.fleet.majority import deviations, majority_fingerprint, majority_launch
from specdoctor.fleet.models import FieldDeviation, FleetAnalysis, HostSurvey, HostVerdict, MetricTest
from specdoctor.stats.comparator import compare

__all__ = ["MAX_POOLED", "Z_LIMIT", "analyse", "metric_tests"]

Z_LIMIT = 3.5
"""Iglewicz & Hoaglin's cut-off for the modified z-score: beyond it a value is an outlier."""
_MAD_TO_SD = 1.4826  # MAD of a normal sample times this estimates its standard deviation
_IMPACT = {"high": 0, "medium": 1, "low": 2}
MAX_POOLED = 512
"""The comparator's reference is at most this many of the core's runs (an even stride through them): more adds
no power against 8 runs, and the comparator's bootstrap would make the analysis quadratic in the fleet size."""


def _series(row: HostSurvey, metric: str) -> list[float]:
    if metric == "throughput":
        return list(row.throughput.samples) if row.throughput else []
    return list(row.accept_samples)


_METRICS: list[tuple[str, str, bool]] = [("throughput", "tok/s", True), ("accept_length", "tokens/step", True)]


def metric_tests(rows: list[HostSurvey], metric: str, unit: str, higher_is_better: bool,
                 min_effect_pct: float) -> dict[str, MetricTest]:
    """Each measured host's test on one metric. Needs 3+ hosts with 2+ runs each (fewer: no test, no row)."""
    series = {r.name: xs for r in rows if len(xs := _series(r, metric)) >= 2}
    if len(series) < 3:
        return {}
    medians = {n: statistics.median(xs) for n, xs in series.items()}
    centre = statistics.median(medians.values())
    mad = statistics.median(abs(m - centre) for m in medians.values())
    # Alike hosts can agree more closely than one host's runs do: the scale never goes below the typical
    # standard error of a host's median, or run-to-run noise alone would make outliers.
    se = statistics.median(statistics.stdev(xs) / len(xs) ** 0.5 * 1.2533 for xs in series.values())
    scale = max(_MAD_TO_SD * mad, se, 1e-12)
    out: dict[str, MetricTest] = {}
    # The reference is the fleet's core (hosts within the z limit): an outlier's runs must not drag it.
    core = {n for n, m in medians.items() if abs(m - centre) / scale <= Z_LIMIT}
    for name, xs in series.items():
        z = (medians[name] - centre) / scale
        pooled = [x for other, ys in series.items() if other != name and other in core for x in ys]
        pooled = pooled[::-(-len(pooled) // MAX_POOLED)] if len(pooled) > MAX_POOLED else pooled
        test = MetricTest(metric=metric, unit=unit, higher_is_better=higher_is_better, value=medians[name],
                          fleet_median=centre, scale=scale, robust_z=z)
        try:
            cmp = compare(pooled, xs, unit=unit, higher_is_better=higher_is_better,
                          magnitude=abs(centre) * min_effect_pct / 100)
        except ValueError as exc:
            test.why = f"comparator could not judge: {exc}"
            out[name] = test
            continue
        test.outcome, test.p_value, test.pct_change, test.delta_ci = (cmp.outcome, cmp.p_value, cmp.pct_change,
                                                                      cmp.delta_ci)
        far = abs(z) > Z_LIMIT
        large = abs(cmp.pct_change) >= min_effect_pct
        test.outlier = far and cmp.outcome == "DIFFERENT" and large
        if test.outlier:
            test.direction = "worse" if (cmp.pct_change < 0) == higher_is_better else "better"
        test.why = (f"robust z {z:+.1f} ({'beyond' if far else 'within'} ±{Z_LIMIT}); comparator vs the other "
                    f"{len(core - {name})} core hosts' {len(pooled)} runs: {cmp.outcome} {cmp.pct_change:+.1f} % "
                    f"(p={cmp.p_value:.2g}); {'at least' if large else 'under'} the {min_effect_pct:g} % that matters")
        out[name] = test
    return out


def _order(dev: FieldDeviation, outliers: set[str]) -> tuple[int, int, int, str]:
    """Most likely cause first: a value no healthy host shares, then impact, then the diff's own rank."""
    healthy_share = sum(1 for h in dev.shared_with if h not in outliers)
    return (healthy_share, _IMPACT[dev.impact], dev.rank, dev.key)


def _note_healthy_sharers(devs: list[FieldDeviation], name: str, outliers: set[str]) -> None:
    """An outlier's departure that only healthy hosts share is unlikely its cause: say who they are."""
    for d in devs:
        if d.shared_with and all(h not in outliers for h in d.shared_with) and name in outliers:
            d.why = (d.why + "; " if d.why else "") + f"also on {', '.join(d.shared_with)}, which are not outliers"


def _host_verdict(r: HostSurvey, tests: dict[str, dict[str, MetricTest]], devs: dict[str, list[FieldDeviation]],
                  outliers: set[str]) -> HostVerdict:
    """One host's verdict: its metric tests, its direction, and its departures, most likely cause first."""
    mts = [t[r.name] for t in tests.values() if r.name in t]
    directions = {t.direction for t in mts if t.outlier}
    hv = HostVerdict(name=r.name, status=r.status, error=r.error, outlier=r.name in outliers,
                     direction="worse" if "worse" in directions else ("better" if directions else ""),
                     metrics=mts, throughput=r.throughput, accept_length=r.accept_length)
    _note_healthy_sharers(devs.get(r.name, []), r.name, outliers)
    hv.deviations = sorted(devs.get(r.name, []), key=lambda d: _order(d, outliers))
    return hv


def analyse(rows: list[HostSurvey], min_effect_pct: float = 5.0) -> FleetAnalysis:
    """The fleet analysis: metric outliers, the majority fingerprint and launch line, departures per host."""
    fps = [r.fingerprint for r in rows if r.fingerprint is not None]
    majority, split = majority_fingerprint(fps)
    launch, launch_split = majority_launch([r.launch for r in rows if r.launch])
    tests = {m: metric_tests(rows, m, unit, hib, min_effect_pct) for m, unit, hib in _METRICS}
    outliers = {r.name for r in rows if any(t.get(r.name) and t[r.name].outlier for t in tests.values())}
    devs = deviations(rows, majority, launch, split + launch_split) if majority is not None else {}
    out = FleetAnalysis(majority_fingerprint=majority, majority_launch=launch, split_fields=split + launch_split,
                        min_effect_pct=min_effect_pct)
    for r in rows:
        hv = _host_verdict(r, tests, devs, outliers)
        out.hosts.append(hv)
        if not r.measured:
            out.unreachable.append(r.name)
        for d in hv.deviations:
            out.fields.setdefault(d.key, []).append(r.name)
    out.outliers = [r.name for r in rows if r.name in outliers]
    if len([r for r in rows if r.measured]) < 3:
        out.notes.append("fewer than 3 hosts measured: no outlier test (a majority needs at least 3)")
    return out
