"""One measured configuration: per-run samples, their summary, and where they came from.

The one measurement model: the benchmark tool's output (`BenchmarkResult`) extends it with the tool's detail, the
fact an action saves (`MeasuredFact`) with what a fact needs, and the report takes either as it is — the report's
JSON holds this model's fields only (a field annotated `Measurement` serializes as one).
"""

from __future__ import annotations

from typing import Self

from pydantic import Field

from specdoctor.models.base import StrictModel
from specdoctor.models.evidence import Evidence

__all__ = ["Measurement"]


class Measurement(StrictModel):
    """One benchmark configuration: per-run samples and their summary (what the plots draw)."""

    label: str = Field(description="Configuration, e.g. 'baseline', 'eagle3 k=2', 'essential only'.")
    metric: str = "throughput"
    unit: str = "tok/s"
    samples: list[float] = Field(default_factory=list)
    median: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    tpot_ms: float | None = None
    accept_length: float | None = None
    cuda_graph: bool | None = None
    evidence: Evidence | None = None

    @property
    def measured(self) -> bool:
        return self.median is not None

    def as_reported(self, label: str | None = None, evidence: Evidence | None = None) -> Self | None:
        """This measurement under the report's label, with the evidence the report cites (a copy: every figure as
        measured); None when nothing was measured."""
        if self.median is None:
            return None
        return self.model_copy(update={"label": label or self.label, "evidence": evidence})
