"""A fleet of alike GPU boxes: survey every host read-only, then find the odd ones out against the majority."""

from specdoctor.fleet.models import (
    FieldDeviation,
    FleetAnalysis,
    HostSurvey,
    HostVerdict,
    MetricTest,
    SurveyParams,
    SurveyTarget,
)

__all__ = ["FieldDeviation", "FleetAnalysis", "HostSurvey", "HostVerdict", "MetricTest", "SurveyParams",
           "SurveyTarget"]
