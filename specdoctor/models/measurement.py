"""One measured configuration: per-run samples, their summary, and where they came from."""

from __future__ import annotations

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
