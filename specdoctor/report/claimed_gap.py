"""The report's attribution when the run recorded none: the diagnosis decides it from the report's claims and the
bisection's two measured trials (`diagnosis.attribution.claimed_gap`); this only puts it into the report's model,
marked derived, with the backup's commands as its cause's evidence.

The report builder calls it once the report is built, and `load_report` for a report.json written before the
attribution was filled there, so every renderer reads `Report.attribution` and derives nothing itself.
"""

from __future__ import annotations

from specdoctor.diagnosis.attribution import claimed_gap
from specdoctor.models import CAUSE_KINDS
from specdoctor.report.attribution_model import Attribution, Cause
from specdoctor.report.model import Report

__all__ = ["fill_claimed_gap"]


def fill_claimed_gap(r: Report) -> None:
    """Set `r.attribution` from the claims and the bisection's trials when it is unset (and a claim allows it)."""
    if r.attribution is not None:
        return
    st = r.stash
    fact = claimed_gap(r.claims, st.measurements if st else [], st.culprits if st else [], r.meta.repo)
    if fact is None or fact.reference_tps is None or fact.measured_tps is None:
        return
    ids = sorted({*(st.evidence.command_ids if st and st.evidence else [])})
    causes = [Cause(name=c.name, kind=CAUSE_KINDS[c.kind].report, delta=c.effect_tps, ci_low=c.ci_low,
                    ci_high=c.ci_high, fix=c.fix, command_ids=ids) for c in fact.causes if c.effect_tps is not None]
    r.attribution = Attribution(metric=fact.metric, reference=fact.reference_tps,
                                reference_label=fact.reference_label, measured=fact.measured_tps,
                                measured_ci_low=fact.measured_ci_low, measured_ci_high=fact.measured_ci_high,
                                causes=causes, derived=True)
