"""Typed differences between a reference (good run, claims, clean HEAD) and now, and what explains the gap.

These are the shared contract of the diagnosis: `list_deltas` produces a `DeltaList`, the `attribute` step tests
what can be reverted and quantifies what cannot, and writes an `AttributionFact` that the verdict, the game plan
and the report read. Values are normalised strings (``"2617"`` and ``"2617.0"`` are one value), so a diff never
reports formatting noise.
"""

from __future__ import annotations

from typing import Literal, NamedTuple

from pydantic import Field, field_validator

from specdoctor.models.base import StrictModel
from specdoctor.models.phases import PhaseEffect

__all__ = ["DeltaKind", "ReportCauseKind", "CauseKindInfo", "CAUSE_KINDS", "Revert", "Delta", "DeltaList", "CauseFact", "AttributionFact", "norm_value"]

DeltaKind = Literal["code", "commit", "env", "launch-flag", "software", "hardware", "acceptance", "workload"]
"""code: a local patch; commit: an upstream commit between the good run's and HEAD; env: a worker variable; launch-flag: a launch argument (model and draft paths included);
software: driver/CUDA/NCCL/torch/engine version; hardware: link, clocks, power, other GPU processes;
acceptance: tau now vs then; workload: prompt/output lengths, sampling, concurrency, dataset behind a figure."""

ReportCauseKind = Literal["code", "environment", "launch", "software", "hardware", "workload", "other"]
"""How the report's attribution table names a cause's kind."""


class CauseKindInfo(NamedTuple):
    """What the plan and the report say of every cause of one kind."""

    report: ReportCauseKind
    fix_cost: str


CAUSE_KINDS: dict[DeltaKind, CauseKindInfo] = {
    "code": CauseKindInfo("code", "low (revert one patch, one relaunch)"),
    "commit": CauseKindInfo("code", "low (git revert the commit on your branch, or pin below it; one relaunch)"),
    "env": CauseKindInfo("environment", "low (one edit, one relaunch)"),
    "launch-flag": CauseKindInfo("launch", "low (one relaunch)"),
    "software": CauseKindInfo("software", "medium (pin or reinstall a package, one relaunch)"),
    "hardware": CauseKindInfo("hardware", "medium (an admin action on the box, then a relaunch)"),
    "acceptance": CauseKindInfo("other", "medium (one relaunch)"),
    "workload": CauseKindInfo("workload", "none (compare like with like)"),
}
"""One row per delta kind: a new kind is a `DeltaKind` value and its row here (the verdict counts every kind but
`code` as the environment's)."""


def norm_value(value: object) -> str | None:
    """One spelling per value: None stays None, numbers lose float noise (2617.0 → '2617'), text is stripped."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int | float):
        f = float(value)
        return str(int(f)) if f.is_integer() else f"{f:g}"
    text = str(value).strip()
    try:
        f = float(text)
    except ValueError:
        return text
    if text.lower() in ("nan", "inf", "-inf", "infinity", "-infinity"):
        return text
    return str(int(f)) if f.is_integer() else f"{f:g}"


class Revert(StrictModel):
    """How one trial puts a delta back to its reference value (all parts apply together)."""

    env: dict[str, str] = Field(default_factory=dict, description="Variables set for the trial server (K=V).")
    unset: list[str] = Field(default_factory=list, description="Variables removed from its environment.")
    undo_sitecustomize: list[str] = Field(default_factory=list, description="Variables a sitecustomize forces in "
                                          "every process; the trial runs it, then restores these (shadow module).")
    argv_set: dict[str, str | None] = Field(default_factory=dict, description="Launch flag → reference value; "
                                            "None removes the flag, '' keeps it as a bare switch.")
    drop_patches: list[str] = Field(default_factory=list, description="Changed files left out of the trial tree.")

    def empty(self) -> bool:
        return not (self.env or self.unset or self.undo_sitecustomize or self.argv_set or self.drop_patches)


class Delta(StrictModel):
    """One difference between the reference and now, with where it comes from and whether a trial can revert it."""

    kind: DeltaKind
    name: str = Field(description="Variable, flag (dest name, e.g. attention_backend), file, 'nccl', "
                      "'pcie-link', 'sm-clock', 'power-limit', 'gpu-processes', 'accept-length', ...")
    reference: str | None = Field(default=None, description="Value in the reference (None: absent/unset).")
    current: str | None = Field(default=None, description="Value now (None: absent/unset).")
    source: str = Field(default="", description="Where the current value comes from: sitecustomize.py, "
                        "/etc/nccl.conf, ~/.bashrc, launch line, launcher, engine-forced, GPU 5 (bus id), ...")
    reference_label: Literal["good run", "claims", "HEAD"] = "good run"
    revertible: bool = False
    revert: Revert | None = Field(default=None, description="How a trial reverts it (None: it cannot be).")
    impact: Literal["high", "medium", "low", "none"] = Field(
        default="medium", description="Prior rank before any trial (from the kind and what it touches).")
    why: str = ""
    step_ids: list[str] = Field(default_factory=list, description="Steps whose results show it (evidence).")

    _norm = field_validator("reference", "current", mode="before")(norm_value)

    @property
    def label(self) -> str:
        ref = "unset" if self.reference is None else self.reference
        cur = "unset" if self.current is None else self.current
        where = f" ({self.source})" if self.source else ""
        return f"{self.name}: {ref} → {cur}{where}"


class DeltaList(StrictModel):
    """Every difference found, most suspicious first; `read_only` deltas are what trials can never test."""

    reference: str = Field(default="good run", description="What the deltas are measured from.")
    deltas: list[Delta] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list, description="What could not be compared, and why.")

    def revertible(self) -> list[Delta]:
        return [d for d in self.deltas if d.revertible and d.revert is not None and not d.revert.empty()]

    def read_only(self) -> list[Delta]:
        return [d for d in self.deltas if not d.revertible]


class CauseFact(StrictModel):
    """A cause of the gap with the share it explains (tok/s, negative = slower) and how it was established."""

    name: str = Field(description="Human label naming the thing, e.g. 'NCCL_P2P_DISABLE=1 set by sitecustomize.py'.")
    kind: DeltaKind
    key: str = Field(description="The delta's name (variable, flag, file, 'pcie-link', ...).")
    metric: str = Field(default="spec", description="baseline / spec.")
    effect_tps: float | None = Field(default=None, description="Reverting it changes the metric by this (today "
                                     "minus reverted: negative = it slows the server).")
    ci_low: float | None = None
    ci_high: float | None = None
    confirmed: bool = Field(description="True only when trials measured it both ways (revert restores, alone "
                            "reproduces) or a targeted measurement showed it (non-revertible).")
    method: Literal["revert-trial", "targeted-measurement", "bisection", "workload-rerun"] = "revert-trial"
    fix: str | None = Field(default=None, description="The exact command or edit that removes it.")
    evidence: list[str] = Field(default_factory=list, description="Step ids / tool results behind it.")
    detail: str = ""
    together: list[str] = Field(default_factory=list, description="The keys of the other members of the set it was "
                                "confirmed with: the effect is the set's, one share of the gap for all of them.")
    share_from: str = Field(default="", description="The comparison its share was measured by (the same tree "
                            "with and without it), named: e.g. 'bisection trial 5 (every patch but X) vs all "
                            "patches'.")
    phase_effect: PhaseEffect | None = Field(default=None, description="Its effect on the phase it touches (both "
                                             "arms of the confirming comparison profiled); None: not profiled, or "
                                             "no phase moved.")

    @property
    def set_key(self) -> tuple[str, frozenset[str]] | None:
        """(metric, every member) of the set it was confirmed with; None for a cause measured on its own. The report
        and the game plan show one set once, with its one effect."""
        return (self.metric, frozenset([self.key, *self.together])) if self.together else None


class AttributionFact(StrictModel):
    """The measured gap (reference → today) split into causes; the verdict follows it."""

    metric: str = "spec"
    reference_tps: float | None = None
    reference_label: str = "claimed"
    measured_tps: float | None = None
    measured_ci_low: float | None = None
    measured_ci_high: float | None = None
    causes: list[CauseFact] = Field(default_factory=list)
    candidates: list[str] = Field(default_factory=list, description="Deltas tested but unresolved: never causes.")
    untested: list[str] = Field(default_factory=list, description="Deltas not tested, and why.")
    restored: bool | None = Field(default=None, description="Reverting every confirmed cause reaches the "
                                  "reference figure (comparator SAME or faster); None: not tested.")

    def confirmed(self) -> list[CauseFact]:
        return [c for c in self.causes if c.confirmed]
