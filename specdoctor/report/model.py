"""The one `Report` model: everything an investigation found, each number with where it came from.

Models shared with the tools and the engine (Evidence, Measurement, EnvRow, Decision, BreakevenAnalysis)
live in `specdoctor.models` and are re-exported here under the same names.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator

from specdoctor.diagnosis.outcome import VerdictName
from specdoctor.host.audit import AuditEntry
from specdoctor.models import BreakevenAnalysis, Decision, EnvRow, Evidence, Measurement, StrictModel
from specdoctor.models.base import str_keys as _str_keys
from specdoctor.models.box import BoxLeftFact
from specdoctor.models.phases import PhaseTimes
from specdoctor.models.workload import Workload
from specdoctor.report.attribution_model import Attribution, BisectTrial, Cause

__all__ = [
    "SCHEMA_VERSION",
    "Verdict",
    "Outcome",
    "Evidence",
    "Measurement",
    "MetricComparison",
    "Finding",
    "Suspect",
    "FeatureGate",
    "EnvRow",
    "FingerprintChange",
    "FingerprintSection",
    "ScriptLine",
    "StashRecord",
    "NcclPoint",
    "NcclRow",
    "NcclSection",
    "Decision",
    "Action",
    "RunMeta",
    "Report",
    "confidence_label",
    "Attribution",
    "Cause",
    "BisectTrial",
    "LaunchPlan",
    "PlannedLaunches",
    "PlanEstimate",
    "PlannedCommand",
    "PlannedStep",
    "BoxLeftFact",
]

SCHEMA_VERSION = "1.2"   # 1.1: optional attribution, bisection trials, Action.command, RunMeta.launch/sitecustomize
# 1.2: dry-run plan (verdict plan-only, Report.dry_run), box left as found (Report.box), launches made

Verdict = Literal[VerdictName, "plan-only"]
"""plan-only: a --dry-run, which measures nothing and so concludes nothing."""
Outcome = Literal["DIFFERENT", "SAME", "UNKNOWN"]


class _Model(StrictModel):
    """Base: unknown keys are rejected and assignments validated, so engine mistakes fail loudly and early."""


class MetricComparison(_Model):
    """A claimed figure against what the box measured, judged by the comparator."""

    metric: str = Field(description="e.g. 'baseline' or 'spec'.")
    unit: str = "tok/s"
    claimed: float | None = None
    samples: list[float] = Field(default_factory=list)
    median: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    pct_change: float | None = Field(default=None, description="(median - claimed) / claimed * 100.")
    outcome: Outcome | None = None
    p_value: float | None = None
    basis: Literal["end-to-end", "decode"] = Field(
        default="end-to-end", description="Samples per run over the whole request, or with the prefill excluded "
        "(the reading nearer the claim, when the claim reads as a regression end to end).")
    source: str = Field(default="--expect", description="Where the claimed figure came from (--expect, or the good "
                        "run's fingerprint when no --expect was given).")
    higher_is_better: bool = Field(default=True, description="False for times (ms).")
    measured_by: str = Field(default="", description="What today's figure is, when not the benchmark's tok/s.")
    evidence: Evidence | None = None


class Finding(_Model):
    """A key finding in one line, plus the evidence a reader needs to check it."""

    title: str
    detail: str = ""
    severity: Literal["info", "warning", "critical"] = "info"
    evidence: list[Evidence] = Field(default_factory=list)
    llm_made: bool = False


class Suspect(_Model):
    """A changed file triaged against the running server's configuration."""

    path: str
    subsystem: str | None = None
    on_hot_path: bool | None = None
    reason: str = ""
    gated: str | None = Field(default=None, description="Name of the env gate guarding it, if any.")
    logging_only: bool = False
    priority: int | None = None
    bisection: Literal["culprit", "cleared", "untested", "unresolved", "essential"] | None = None
    evidence: Evidence | None = None


class FeatureGate(_Model):
    """An env-var gate in added code, its default, and its value in each live process."""

    name: str
    default: str | None = None
    reader: str | None = Field(default=None, description="e.g. os.environ.get, envs.X.get().")
    file: str | None = None
    state: str | None = Field(default=None, description="e.g. 'off', 'on', 'mixed'.")
    values: dict[str, str | None] = Field(default_factory=dict, description="Process label -> value (None: unset).")
    evidence: Evidence | None = None

    _keys = field_validator("values", mode="before")(_str_keys)


class FingerprintChange(_Model):
    """One fingerprint key that differs from the previous run, ranked by likely impact."""

    key: str
    before: str | None = None
    after: str | None = None
    impact: Literal["high", "medium", "low"] = "low"


class FingerprintSection(_Model):
    """The environment fingerprint recorded with the measurements, and its diff to a previous run."""

    current: dict[str, Any] = Field(default_factory=dict)
    previous_run: str | None = None
    changes: list[FingerprintChange] = Field(default_factory=list)
    evidence: Evidence | None = None


class ScriptLine(_Model):
    """A line of a patch script's output; SKIP/WARN lines are ambiguous and quoted verbatim."""

    text: str
    level: Literal["ok", "skip", "warn", "error"] = "ok"


class StashRecord(_Model):
    """What stash-and-reapply did to the tree, what it measured, and proof the tree came back."""

    backup_id: str | None = None
    backup_ref: str | None = None
    patch_path: str | None = None
    hash_before: str | None = None
    applied: list[str] = Field(default_factory=list, description="Patches/files re-applied.")
    script: str | None = None
    script_lines: list[ScriptLine] = Field(default_factory=list)
    measurements: list[Measurement] = Field(default_factory=list)
    comparison: MetricComparison | None = Field(default=None, description="Essential-only vs full tree.")
    culprits: list[str] = Field(default_factory=list, description="Bisection result, if bisected.")
    restore_verified: bool | None = None
    hash_after: str | None = None
    evidence: Evidence | None = None

    @property
    def ambiguous(self) -> list[ScriptLine]:
        """Lines that did not say plainly that they applied."""
        return [line for line in self.script_lines if line.level != "ok"]


class NcclPoint(_Model):
    """All-reduce latency at one message size."""

    size_bytes: int
    latency_us: float


class NcclRow(_Model):
    """One NCCL configuration of the sweep."""

    config: str = Field(description="Label, e.g. 'PROTO=LL ALGO=Ring'.")
    env: dict[str, str] = Field(default_factory=dict)
    points: list[NcclPoint] = Field(default_factory=list)
    promoted: bool = Field(default=False, description="Run in the end-to-end A/B (not only called better by the "
                           "micro-benchmark).")
    cycle_us: float | None = Field(default=None, description="All-reduce µs per speculative cycle at the cycle's own "
                                   "sizes and counts (None: not weighed).")


class NcclSection(_Model):
    """The sweep grid, the configurations promoted to an end-to-end A/B, and whether workers saw them."""

    tp: int | None = None
    rows: list[NcclRow] = Field(default_factory=list)
    ab: list[MetricComparison] = Field(default_factory=list, description="Promoted config vs default, tok/s.")
    weighting: str | None = Field(default=None, description="How the sizes were weighed: all-reduces per cycle at "
                                  "each size the cycle sends (None: every size the same).")
    propagated: bool | None = Field(default=None, description="Variables reached every TP worker.")
    evidence: Evidence | None = None


class Action(_Model):
    """A ranked next action of the game plan."""

    title: str
    gain: float | None = Field(default=None, description="Expected gain, in gain_unit.")
    gain_unit: Literal["tok/s", "%"] = "tok/s"
    basis: Literal["measured", "modelled"] = "modelled"
    cost: str = ""
    risk: str = ""
    detail: str = ""
    llm_made: bool = False
    command: str | None = Field(default=None, description="The exact command/edit that carries it out.")
    lever: str | None = Field(default=None, description="The lever it pulls (verify-graph, draft-steps, nccl, ...).")
    gain_low: float | None = Field(default=None, description="Low end of the modelled gain, tok/s.")
    gain_high: float | None = Field(default=None, description="High end of the modelled gain, tok/s.")
    modelled_gain: float | None = Field(default=None, description="The what-if model's point gain, tok/s (also when "
                                        "the action's gain was measured: modelled kept apart from measured).")
    measured_gain: float | None = Field(default=None, description="What a trial measured for the same lever, tok/s.")
    assumptions: list[str] = Field(default_factory=list, description="What the model assumes.")


class RunMeta(_Model):
    """Who ran what, where and when; `status` says whether the report is complete."""

    run_id: str | None = None
    host: str | None = None
    repo: str | None = None
    playbook: str | None = None
    started: float | None = Field(default=None, description="Unix time.")
    finished: float | None = None
    specdoctor_version: str | None = None
    status: Literal["complete", "partial", "interrupted", "error"] = "complete"
    error: str | None = None
    advisor: str | None = Field(default=None, description="LLM model used, if any.")
    launch: str | None = Field(default=None, description="The examined server's launch line.")
    engine: str | None = Field(default=None, description="The serving engine the run resolved (sglang, vllm); its "
                               "version is the fingerprint's engine_version.")
    sitecustomize: str | None = Field(default=None, description="Path of the sitecustomize.py the server imports.")


class PlannedLaunches(_Model):
    """One launching step of the plan: at most this many launches, and when it runs at all."""

    step: str
    launches: int
    expected: float | None = Field(default=None, description="Launches expected (None: the cap).")
    condition: str = ""


class PlanEstimate(_Model):
    """The launches expected at one point of the run (the plan is re-estimated as facts come)."""

    stage: str = Field(description="first (the plan step), consent (before the stop), revised (after reproduce "
                       "and list_deltas).")
    launches_expected: float
    launches_max: int = Field(default=0, description="Every phase at its cap, as known at this point.")
    box_minutes_expected: float | None = None
    phases: list[PlannedLaunches] = Field(default_factory=list)


class LaunchPlan(_Model):
    """What the run said it would launch and cost before its first disruptive step (planned, not actual)."""

    text: str = Field(description="The one line printed, e.g. 'up to 6 launches ≈ 41 min of box time; ...'.")
    launches_max: int
    box_minutes_max: float | None = None
    launches_expected: float | None = Field(default=None, description="Expected from what was known before the stop.")
    box_minutes_expected: float | None = None
    launch_s: float | None = Field(default=None, description="One launch on this box (the running server's start-up).")
    stops_user_server: bool = False
    phases: list[PlannedLaunches] = Field(default_factory=list)
    stage: str = Field(default="first", description="Which estimate this is: the plan in force when the user was "
                       "asked to consent to the stop ('consent'), else the first plan.")
    estimates: list[PlanEstimate] = Field(default_factory=list, description="Every estimate in order: first, "
                                          "consent, revised.")


class PlannedCommand(_Model):
    """A command a dry run would run, as far as it is known before running."""

    command: str
    known: bool = Field(default=True, description="False: parts of it come from an earlier step's result.")
    after: str = Field(default="", description="The result it depends on, when not known.")
    note: str = ""


class PlannedStep(_Model):
    """A step a dry run did not run (it launches, benchmarks, sweeps, mutates or decides), and what it would run."""

    step: str
    title: str = ""
    target: str = Field(description="Tool or action name.")
    effect: str = Field(description="read / mutate / disrupt.")
    condition: str = Field(default="", description="Its `when`, and whether it holds today.")
    commands: list[PlannedCommand] = Field(default_factory=list)
    why: str = ""


def confidence_label(confidence: float | None) -> str:
    """Words for a 0..1 confidence, so every renderer says the same thing."""
    if confidence is None:
        return "unknown"
    return "high" if confidence >= 0.8 else "medium" if confidence >= 0.5 else "low"


class Report(_Model):
    """The investigation's result; everything but the verdict has a default so partial reports render."""

    schema_version: str = SCHEMA_VERSION
    meta: RunMeta = Field(default_factory=RunMeta)
    verdict: Verdict
    confidence: float | None = Field(default=None, ge=0.0, le=1.0)
    summary: str = Field(default="", description="The verdict in one sentence.")
    summary_llm_made: bool = False
    claims: list[MetricComparison] = Field(default_factory=list)
    measurements: list[Measurement] = Field(default_factory=list)
    findings: list[Finding] = Field(default_factory=list)
    suspects: list[Suspect] = Field(default_factory=list)
    gates: list[FeatureGate] = Field(default_factory=list)
    env_propagation: list[EnvRow] = Field(default_factory=list)
    fingerprint: FingerprintSection | None = None
    stash: StashRecord | None = None
    nccl: NcclSection | None = None
    breakeven: BreakevenAnalysis | None = None
    phase_times: PhaseTimes | None = Field(default=None, description="Draft/verify/draft-extend/decode ms per "
                                           "cycle with samples, CIs and their source (the engine's profiler first).")
    decisions: list[Decision] = Field(default_factory=list)
    game_plan: list[Action] = Field(default_factory=list, description="Ranked, best first.")
    workload: Workload | None = Field(default=None, description="What every figure of this run was measured on: "
                                      "prompt set, output length, temperature, concurrency.")
    claims_workload: Workload | None = Field(default=None, description="The workload recorded behind the claims "
                                             "(by the user or the good run), when one was.")
    claims_workload_source: str | None = None
    workload_differences: list[str] = Field(default_factory=list, description="How the claims' workload differs "
                                            "from today's benchmark: such claims are flagged, not silently compared.")
    commands: list[AuditEntry] = Field(default_factory=list, description="The audit log, in order.")
    attribution: Attribution | None = Field(default=None, description="The measured gap split into causes, with CIs.")
    bisection: list[BisectTrial] = Field(default_factory=list, description="The bisection's trials, in order.")
    plan: LaunchPlan | None = Field(default=None, description="The launch plan and its cost, as planned.")
    launches_made: int | None = Field(default=None, description="Servers actually launched (launch_server calls).")
    box: BoxLeftFact | None = Field(default=None, description="The user's server and checkout at the end.")
    dry_run: list[PlannedStep] = Field(default_factory=list, description="--dry-run: the steps not run, with "
                                       "the commands they would run.")
