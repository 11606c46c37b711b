"""The fleet's typed records: who to survey, what one host gave, and the odd-ones-out analysis."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from specdoctor.models import Fingerprint, Measurement, StrictModel
from specdoctor.models.fingerprint import Impact

__all__ = ["HostStatus", "SurveyTarget", "SurveyParams", "HostSurvey", "MetricTest", "FieldDeviation",
           "HostVerdict", "FleetAnalysis"]

HostStatus = Literal["ok", "unreachable", "auth-failed", "host-key-rejected", "connection-lost", "no-server",
                     "error"]


class SurveyTarget(StrictModel):
    """One host of the fleet: its spec (as for --host), a short name for tables, and the server's port."""

    name: str
    spec: str
    port: int | None = Field(default=None, description="The SGLang server's port (default: the only one found).")


class SurveyParams(StrictModel):
    """Everything a survey run needs to be resumed by another process (no secrets: paths only)."""

    targets: list[SurveyTarget]
    runs: int = Field(default=8, ge=2, le=50, description="Measured benchmark runs per host.")
    requests_per_run: int = Field(default=2, ge=1, le=20)
    max_new_tokens: int = Field(default=256, ge=2, le=4096)
    warmup_runs: int = Field(default=1, ge=0, le=5)
    identity_files: list[str] = Field(default_factory=list)
    known_hosts: str | None = None
    ssh_config: str | None = None
    accept_new_host_key: bool = False
    min_effect_pct: float = Field(default=5.0, gt=0, description="Smallest gap to the fleet that matters, %.")


class HostSurvey(StrictModel):
    """What one host gave: its fingerprint, launch flags and a short benchmark; or why it could not."""

    name: str
    spec: str
    status: HostStatus
    error: str | None = None
    port: int | None = None
    fingerprint: Fingerprint | None = None
    launch: dict[str, str] = Field(default_factory=dict, description="Launch flags (port/host left out; the "
                                   "host's home folder written as ~), values as text.")
    launch_line: str | None = None
    throughput: Measurement | None = None
    accept_samples: list[float] = Field(default_factory=list, description="Accept length per benchmark run.")
    accept_length: float | None = Field(default=None, description="Median accept length over the runs.")
    server_accept_length: float | None = Field(default=None, description="The server's own lifetime average.")
    seconds: float = 0.0
    controller: str = Field(default="", description="host:pid of the controller process that surveyed it.")
    finished_at: float | None = None

    @property
    def measured(self) -> bool:
        return self.throughput is not None and bool(self.throughput.samples)


class MetricTest(StrictModel):
    """One host's metric against the fleet: robust z (median/MAD) and the comparator vs the pooled runs."""

    metric: str
    unit: str
    higher_is_better: bool = True
    value: float
    fleet_median: float
    scale: float = Field(description="1.4826·MAD of the host medians, never below the typical per-host SE.")
    robust_z: float
    outcome: Literal["DIFFERENT", "SAME", "UNKNOWN"] | None = None
    p_value: float | None = None
    pct_change: float | None = Field(default=None, description="Host vs the pooled runs of the other hosts, %.")
    delta_ci: tuple[float, float] | None = None
    outlier: bool = False
    direction: Literal["worse", "better", ""] = ""
    why: str = ""


class FieldDeviation(StrictModel):
    """A fingerprint field or launch flag where this host differs from the fleet's majority."""

    key: str
    value: str | None = None
    majority: str | None = None
    impact: Impact = "low"
    rank: int = 100
    agree: int = Field(default=0, description="Hosts that have the majority value.")
    of: int = Field(default=0, description="Hosts compared on this field.")
    shared_with: list[str] = Field(default_factory=list, description="Other hosts with this host's value.")
    why: str = ""


class HostVerdict(StrictModel):
    """One host's row of the analysis."""

    name: str
    status: str
    error: str | None = None
    outlier: bool = False
    direction: Literal["worse", "better", ""] = ""
    metrics: list[MetricTest] = Field(default_factory=list)
    deviations: list[FieldDeviation] = Field(default_factory=list, description="Most likely cause first.")
    throughput: Measurement | None = None
    accept_length: float | None = None


class FleetAnalysis(StrictModel):
    """The odd ones out and the majority they are measured against."""

    hosts: list[HostVerdict] = Field(default_factory=list)
    outliers: list[str] = Field(default_factory=list, description="Hosts whose metrics differ from the fleet's.")
    unreachable: list[str] = Field(default_factory=list, description="Hosts that gave no measurement, with why "
                                   "in their row.")
    majority_fingerprint: Fingerprint | None = None
    majority_launch: dict[str, str] = Field(default_factory=dict)
    split_fields: list[str] = Field(default_factory=list, description="Fields with no strict majority.")
    fields: dict[str, list[str]] = Field(default_factory=dict, description="Field -> hosts that differ from the "
                                         "majority on it.")
    min_effect_pct: float = 5.0
    notes: list[str] = Field(default_factory=list)

    def host(self, name: str) -> HostVerdict | None:
        return next((h for h in self.hosts if h.name == name), None)
