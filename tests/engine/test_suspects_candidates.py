"""The suspects table reads the bisection's record: an unresolved search's candidates are never shown 'cleared'."""

from __future__ import annotations

from types import SimpleNamespace

from specdoctor.engine import report_builder as rb
from specdoctor.report import model as m
from specdoctor.tools.checkout.bisect import BisectResult
from specdoctor.tools.checkout.repo import Triage, TriageRow


def _row(path: str) -> TriageRow:
    return TriageRow(path=path, status="M", subsystem="speculative", on_hot_path=True, reason="r", priority=1)


class _View:
    def __init__(self, bisect: BisectResult, triage: Triage):
        self.objs = {BisectResult: bisect, Triage: triage}
        self.run_facts = SimpleNamespace(verdict=None)

    def latest(self, model):
        return self.objs.get(model)

    def latest_key(self, model):
        return None

    def fact(self, path, model):
        return None


def test_unresolved_candidates_stay_unresolved_and_only_the_rest_is_cleared():
    triage = Triage.model_construct(repo="/r", served=None, rows=[_row("a.py"), _row("b.py"), _row("c.py")])
    bis = BisectResult(verdict="unresolved", candidates=["a.py", "b.py"], launches=7, naive_launches=4)
    report = m.Report(verdict="inconclusive")
    reader = SimpleNamespace(v=_View(bis, triage), evidence=lambda *a, **k: m.Evidence(step="triage"))
    rb._suspects(report, reader)  # type: ignore[arg-type]
    assert {s.path: s.bisection for s in report.suspects} == {"a.py": "unresolved", "b.py": "unresolved",
                                                              "c.py": "cleared"}
