"""One figure, one name: a claim judged with the prefill excluded is the gap's one claimed and one measured figure;
the trials' end-to-end units are a conversion said once, with why."""

from __future__ import annotations

import re

from specdoctor.report.model import Attribution
from specdoctor.report.sections.claims import gap_spans

from .report_builders import code_regression_report


def test_a_converted_claim_shows_one_claimed_and_one_measured_figure():
    r = code_regression_report()
    spec = r.claims[0].model_copy(update={"metric": "spec", "basis": "decode", "claimed": 702.8, "median": 341.6})
    r.claims = [spec]
    att = Attribution(metric="spec", reference=663.4, reference_label="claimed, converted to end-to-end",
                      measured=322.4)
    text = "".join(s if isinstance(s, str) else "" for s in gap_spans(att, r))
    assert "702.8 claimed → 341.6" in text and "-361.2" in text
    assert "663.4" not in text and "322.4" not in text  # the converted figures are not a second claim/measurement
    assert "-341.0" in text and "x 0.944" in text and "whole requests" in text
    assert len(re.findall(r"claimed", text)) == 1


def test_an_end_to_end_claim_reads_as_before():
    r = code_regression_report()
    att = Attribution(metric="spec", reference=700.0, measured=320.0)
    text = "".join(s if isinstance(s, str) else "" for s in gap_spans(att, r))
    assert text.startswith("Measured gap (spec): 700.0 claimed → 320.0 tok/s measured = -380.0") and "prefill" not in text
