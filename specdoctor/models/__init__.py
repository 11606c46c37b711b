"""Domain models shared by every layer (tools, toolkit, engine, advisor, report): the bottom of the imports.

This package imports nothing from specdoctor but itself (import-linter checks it), so a tool, the engine
and the report can all say `from specdoctor.models import EnvRow` and mean the same class.
"""

from specdoctor.models.base import StrictModel
from specdoctor.models.box import BoxLeftFact, CheckoutProofFact, UserServerFact
from specdoctor.models.breakeven import (
    BreakevenAnalysis,
    CycleTerm,
    KPrediction,
    TargetRequirement,
    TermChange,
)
from specdoctor.models.decision import Decision
from specdoctor.models.delta import (
    CAUSE_KINDS,
    AttributionFact,
    CauseFact,
    CauseKindInfo,
    Delta,
    DeltaKind,
    DeltaList,
    ReportCauseKind,
    Revert,
    norm_value,
)
from specdoctor.models.env import EnvRow, EnvStatus
from specdoctor.models.evidence import Evidence
from specdoctor.models.facts import (
    ClaimFact,
    Claims,
    ComparisonFact,
    FactModel,
    MeasuredFact,
    MeasureFacts,
    NcclFact,
    ServerFact,
    SubtractionFact,
    TopologyFact,
)
from specdoctor.models.fingerprint import Change, Fingerprint, FingerprintDiff, GpuFingerprint
from specdoctor.models.measurement import Measurement
from specdoctor.models.view import StateReader

__all__ = [
    "BoxLeftFact",
    "CheckoutProofFact",
    "UserServerFact",
    "AttributionFact",
    "CauseFact",
    "CAUSE_KINDS",
    "CauseKindInfo",
    "ReportCauseKind",
    "Delta",
    "DeltaKind",
    "DeltaList",
    "Revert",
    "norm_value",
    "BreakevenAnalysis",
    "Change",
    "ClaimFact",
    "Claims",
    "ComparisonFact",
    "CycleTerm",
    "Decision",
    "EnvRow",
    "EnvStatus",
    "Evidence",
    "FactModel",
    "Fingerprint",
    "FingerprintDiff",
    "GpuFingerprint",
    "KPrediction",
    "MeasureFacts",
    "MeasuredFact",
    "Measurement",
    "NcclFact",
    "ServerFact",
    "StateReader",
    "StrictModel",
    "SubtractionFact",
    "TargetRequirement",
    "TermChange",
    "TopologyFact",
]
