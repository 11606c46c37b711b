"""The facts a run records, one typed field each, and the case the diagnosis reads (facts + tool outputs).

A step records facts by name (`ActionOutcome.facts`, a playbook's `save:`); the run state keeps them as JSON, because
a checkpoint must resume in any process and LangGraph's strict checkpoint serde refuses arbitrary classes. `RunFacts`
is their schema: every write is validated against it (an undeclared name or a wrong shape fails at the step that
wrote it, naming the fact and the field), and readers get the typed model. Fact models ignore keys they do not name
(a writer may keep more), so the stored JSON is never trimmed by the check.
"""

from __future__ import annotations

from typing import Any

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, ValidationError

from specdoctor.diagnosis.outcome import PlanAction, Verdict
from specdoctor.errors import ResultShapeError
from specdoctor.models import (
    AttributionFact,
    BreakevenAnalysis,
    CheckoutProofFact,
    Claims,
    DeltaList,
    FactModel,
    FingerprintDiff,
    MeasuredFact,
    MeasureFacts,
    NcclFact,
    ServerFact,
    StateReader,
    SubtractionFact,
    TopologyFact,
    UserServerFact,
)
from specdoctor.models.delta import CauseFact
from specdoctor.models.identity import BudgetFact, IdentityFact
from specdoctor.tools.checkout.bisect import BisectResult
from specdoctor.tools.checkout.commit_bisect import CommitBisectResult
from specdoctor.tools.environment.gates import GateScan
from specdoctor.tools.environment.hardware_probe import HardwareProbe
from specdoctor.tools.nccl.nccl import NcclSweep
from specdoctor.tools.serving.measure import Workload
from specdoctor.tools.serving.server import Propagation
from specdoctor.tools.serving.user_server import UserServerRecord

__all__ = ["RunFacts", "WorkloadFact", "EngineOriginFact", "NarrativeFact", "ToolOutputs", "Case", "checked_facts"]


class WorkloadFact(FactModel):
    """`facts.workload`: the workload behind the claims (recorded by the user or the good run) against today's."""

    recorded: Workload | None = None
    source: str | None = Field(default=None, description="'you' or 'the good run'.")
    today: Workload | None = None
    differences: list[str] = Field(default_factory=list)


class EngineOriginFact(FactModel):
    """`facts.engine_origin`: whether the user's server imports the engine's package (sglang, vllm) from the checkout
    under investigation."""

    from_checkout: bool = False
    where: str | None = None
    repo: str | None = None
    editable_from: str | None = None
    package: str | None = Field(default=None, description="The engine's package (older records name none).")


class NarrativeFact(FactModel):
    """`facts.narrative`: the LLM advisor's prose and which model wrote it."""

    summary: str = ""
    model: str | None = None
    llm_made: bool = True


class RunFacts(BaseModel):
    """Every fact a step may record, by name. All optional: a playbook records what its steps reach."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    # where the server is and how it runs (locate step)
    server: ServerFact | None = None
    launch: str | None = None
    server_env: dict[str, str] | None = Field(default=None, description="The running server's tuning variables, "
                                              "which relaunches reproduce.")
    trial_port: int | None = None
    topology: TopologyFact | None = None
    # what was measured and claimed (reproduce step)
    measure: MeasureFacts | None = None
    measure_today_workload: MeasureFacts | None = Field(default=None, description="Today's workload's figures, "
                                                        "when `measure` holds the recorded workload's.")
    workload: WorkloadFact | None = None
    workload_cause: CauseFact | None = None
    claims: Claims | None = None
    # what the trials found
    backup_id: str | None = None
    trial_trees: list[str] | None = Field(default=None, description="One line per trial tree the subtraction built.")
    subtraction: SubtractionFact | None = None
    deltas: DeltaList | None = None
    attribution: AttributionFact | None = None
    nccl: NcclFact | None = None
    nccl_cause: CauseFact | None = None
    cuda_graph_off: bool | None = None
    # the user's own server and the checkout, left as found
    user_server: UserServerFact | None = None
    user_server_record: UserServerRecord | None = None
    user_server_bench: MeasuredFact | None = None
    engine_origin: EngineOriginFact | None = Field(default=None, validation_alias=AliasChoices(
        "engine_origin", "sglang_origin"), description="Where the server imports the engine from (checkpoints "
        "before the second engine say sglang_origin).")
    checkout_proof: CheckoutProofFact | None = None
    # the conclusion, and what the optional LLM added
    verdict: Verdict | None = None
    game_plan: list[PlanAction] | None = None
    narrative: NarrativeFact | None = None
    llm_triage: list[dict[str, Any]] | None = Field(default=None, description="The LLM's guesses for unknown files.")
    llm_explore: list[dict[str, Any]] | None = Field(default=None, description="The LLM's read-only tool calls.")
    identity: IdentityFact | None = Field(default=None, description="What the good run's digests and the running "
                                          "server settle before the stop (engine/identity.py).")
    budget: BudgetFact | None = Field(default=None, description="--budget and where the run stopped to keep it.")
    # the plan and --dry-run records (read back by the engine only)
    plan: dict[str, Any] | None = Field(default=None, description="The plan in force (tools.plan.Plan): the first, "
                                        "then the re-estimate you consent to before the stop.")
    plan_first: dict[str, Any] | None = Field(default=None, description="The plan step's plan, once re-estimated.")
    plan_revised: dict[str, Any] | None = Field(default=None, description="Re-estimated after reproduce and "
                                                "list_deltas (engine/actions/replan.py).")
    dry_run: dict[str, dict[str, Any]] | None = Field(default=None, description="Step id -> what it would run.")


def checked_facts(facts: dict[str, Any], where: str = "facts") -> RunFacts:
    """`facts` as `RunFacts`, or a one-line `ResultShapeError` naming the fact and its field."""
    try:
        return RunFacts.model_validate(facts)
    except ValidationError as exc:
        e = exc.errors()[0]
        loc = [str(p) for p in e.get("loc", ())]
        if e.get("type") == "extra_forbidden":
            raise ResultShapeError(f"{where}: {loc[0]!r} is not a declared fact (diagnosis.facts.RunFacts names "
                                 "every fact a step may record)") from None
        name, field = (loc[0], ".".join(loc[1:])) if loc else ("?", "")
        raise ResultShapeError(f"fact {name!r}: field {field}: {e.get('msg', '')}".replace("\n", " ")) from None


class ToolOutputs(BaseModel):
    """The latest output of each tool the diagnosis reads (None: not run, or not ok)."""

    gates: GateScan | None = None
    fingerprint_diff: FingerprintDiff | None = None
    breakeven: BreakevenAnalysis | None = None
    bisect: BisectResult | None = None
    hardware: HardwareProbe | None = None
    propagation: Propagation | None = None
    commit_bisect: CommitBisectResult | None = None
    nccl_sweep: NcclSweep | None = None
    deltas: DeltaList | None = Field(default=None, description="list_deltas: every difference from the reference.")


class Case(BaseModel):
    """Everything `diagnose()` reads: the recorded facts, the tools' outputs and the two parameters that matter."""

    facts: RunFacts = Field(default_factory=RunFacts)
    tools: ToolOutputs = Field(default_factory=ToolOutputs)
    expect: dict[str, float] = Field(default_factory=dict, description="The claimed figures (`--expect`).")
    repo: str | None = None

    @classmethod
    def of(cls, view: StateReader) -> Case:
        """The case as a run's state holds it (a pure read of checkpointed JSON: no host, no I/O)."""
        tools = ToolOutputs(gates=view.latest(GateScan), fingerprint_diff=view.latest(FingerprintDiff),
                            breakeven=view.latest(BreakevenAnalysis), bisect=view.latest(BisectResult),
                            hardware=view.latest(HardwareProbe), propagation=view.latest(Propagation),
                            commit_bisect=view.latest(CommitBisectResult),
                            nccl_sweep=view.latest(NcclSweep), deltas=view.latest(DeltaList))
        p = view.params
        return cls(facts=checked_facts(view.facts), tools=tools, expect=dict(p.expect or {}),
                   repo=p.repo)
