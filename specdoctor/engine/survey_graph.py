"""The fleet survey as a LangGraph map-reduce: one `Send` per host not yet surveyed, bounded concurrency, one
checkpoint thread per survey run (SQLite by default, Postgres for a team), resumable from any controller.

    plan --Send(host)--> survey_host (xN, at most `parallel` at once) --> analyse --> END

A host's row is written to the checkpoint the moment its task finishes (LangGraph keeps the writes of the
finished tasks of an interrupted step), so a resumed survey runs only the hosts that had not finished.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Annotated, Any, TypedDict

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Send
from pydantic import Field

from specdoctor.engine.runs import new_run_id, open_checkpointer
from specdoctor.engine.state import merge_dicts
from specdoctor.errors import UsageError
from specdoctor.fleet.models import FleetAnalysis, HostSurvey, SurveyParams, SurveyTarget
from specdoctor.fleet.outliers import analyse
from specdoctor.fleet.probe import survey_host
from specdoctor.models import StrictModel

__all__ = ["SurveyState", "SurveyRun", "SurveyRunInfo", "build_survey_graph", "run_survey", "resume_survey",
           "load_survey", "list_surveys", "KIND"]

KIND = "fleet-survey"
"""The checkpoint metadata's `specdoctor` value that marks a survey thread (investigations share the store)."""


class SurveyState(TypedDict, total=False):
    """Checkpointed survey state: JSON only (params, one row per host name, the analysis at the end)."""

    run_id: str
    params: dict[str, Any]
    rows: Annotated[dict[str, Any], merge_dicts]
    analysis: dict[str, Any] | None
    started: float


class SurveyRun(StrictModel):
    """A survey as read back from the checkpoint store."""

    run_id: str
    params: SurveyParams
    rows: list[HostSurvey] = Field(default_factory=list, description="In the order of params.targets.")
    analysis: FleetAnalysis | None = None
    started: float | None = None
    resumed_rows: list[str] = Field(default_factory=list, description="Hosts this process surveyed.")

    @property
    def done(self) -> bool:
        return self.analysis is not None

    @property
    def pending(self) -> list[str]:
        have = {r.name for r in self.rows}
        return [t.name for t in self.params.targets if t.name not in have]


class SurveyRunInfo(StrictModel):
    """One line of `specdoctor survey --list`."""

    run_id: str
    hosts: int
    surveyed: int
    outliers: list[str] = Field(default_factory=list)
    finished: bool
    started: float | None = None


def build_survey_graph(checkpointer: BaseCheckpointSaver | None,
                       say: Callable[[str], None] | None = None) -> Any:
    """Compile the survey graph; `say` receives one-line progress messages (the CLI's live lines)."""

    def plan(state: SurveyState) -> dict[str, Any]:
        return {}

    def fan_out(state: SurveyState) -> list[Send] | str:
        params = SurveyParams.model_validate(state["params"])
        done = state.get("rows") or {}
        sends = [Send("survey_host", {"target": t.model_dump(mode="json"), "params": state["params"]})
                 for t in params.targets if t.name not in done]
        return sends or "analyse"

    def one_host(payload: dict[str, Any]) -> dict[str, Any]:
        target = SurveyTarget.model_validate(payload["target"])
        row = survey_host(target, SurveyParams.model_validate(payload["params"]), say)
        if say:
            say(f"{row.name}: {row.status}" + (f" ({row.error})" if row.error else ""))
        return {"rows": {row.name: row.model_dump(mode="json")}}

    def analyse_node(state: SurveyState) -> dict[str, Any]:
        params = SurveyParams.model_validate(state["params"])
        rows = _rows(params, state.get("rows") or {})
        return {"analysis": analyse(rows, params.min_effect_pct).model_dump(mode="json")}

    g = StateGraph(SurveyState)
    g.add_node("plan", plan)
    g.add_node("survey_host", one_host)  # type: ignore[arg-type]  # its input is the Send payload
    g.add_node("analyse", analyse_node)
    g.add_edge(START, "plan")
    g.add_conditional_edges("plan", fan_out, ["survey_host", "analyse"])
    g.add_edge("survey_host", "analyse")
    g.add_edge("analyse", END)
    return g.compile(checkpointer=checkpointer)


def _rows(params: SurveyParams, raw: dict[str, Any]) -> list[HostSurvey]:
    return [HostSurvey.model_validate(raw[t.name]) for t in params.targets if t.name in raw]


def _config(run_id: str, parallel: int) -> dict[str, Any]:
    if parallel < 1:
        raise UsageError(f"--parallel must be at least 1, got {parallel}")
    return {"configurable": {"thread_id": run_id}, "max_concurrency": parallel,
            "metadata": {"specdoctor": KIND}}


def _state(graph: Any, run_id: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """(checkpointed values, rows written by finished tasks of an unfinished step) of one survey thread."""
    snap = graph.get_state({"configurable": {"thread_id": run_id}})
    values = dict(snap.values or {})
    pending: dict[str, Any] = {}
    for task in snap.tasks or ():
        result = getattr(task, "result", None)
        if isinstance(result, dict) and isinstance(result.get("rows"), dict):
            pending.update(result["rows"])
    return values, pending


def load_survey(checkpointer: BaseCheckpointSaver, run_id: str) -> SurveyRun:
    """A survey run read from the store; rows of finished hosts of an interrupted run included."""
    values, pending = _state(build_survey_graph(checkpointer), run_id)
    if not values.get("params"):
        raise UsageError(f"no survey {run_id!r} in this checkpoint store (see `specdoctor survey --list`)")
    params = SurveyParams.model_validate(values["params"])
    analysis = values.get("analysis")
    return SurveyRun(run_id=run_id, params=params, rows=_rows(params, {**pending, **(values.get("rows") or {})}),
                     analysis=FleetAnalysis.model_validate(analysis) if analysis else None,
                     started=values.get("started"))


def _finish(graph: Any, run_id: str, inputs: dict[str, Any] | None, parallel: int,
            checkpointer: BaseCheckpointSaver) -> SurveyRun:
    before = set() if inputs is not None else {r.name for r in load_survey(checkpointer, run_id).rows}
    graph.invoke(inputs, _config(run_id, parallel))
    run = load_survey(checkpointer, run_id)
    run.resumed_rows = [r.name for r in run.rows if r.name not in before]
    return run


def run_survey(params: SurveyParams, *, checkpoint: str | None = None, parallel: int = 8,
               run_id: str | None = None, say: Callable[[str], None] | None = None) -> SurveyRun:
    """Survey every target (at most `parallel` at once), checkpointing each host's row as it finishes."""
    names = [t.name for t in params.targets]
    if len(set(names)) != len(names):
        raise UsageError(f"host names must be unique: {', '.join(n for n in names if names.count(n) > 1)}")
    run_id = run_id or new_run_id()
    with open_checkpointer(checkpoint) as saver:
        graph = build_survey_graph(saver, say)
        inputs = {"run_id": run_id, "params": params.model_dump(mode="json"), "rows": {}, "analysis": None,
                  "started": time.time()}
        return _finish(graph, run_id, inputs, parallel, saver)


def resume_survey(run_id: str, *, checkpoint: str | None = None, parallel: int = 8,
                  say: Callable[[str], None] | None = None) -> SurveyRun:
    """Finish an interrupted survey: only the hosts without a row are surveyed, then the analysis runs."""
    with open_checkpointer(checkpoint) as saver:
        run = load_survey(saver, run_id)
        if run.done:
            raise UsageError(f"survey {run_id} is finished; nothing to resume")
        return _finish(build_survey_graph(saver, say), run_id, None, parallel, saver)


def list_surveys(checkpoint: str | None = None) -> list[SurveyRunInfo]:
    """Every survey in the store (whichever controller started it), oldest first."""
    out: list[SurveyRunInfo] = []
    with open_checkpointer(checkpoint) as saver:
        threads: list[str] = []
        for tup in saver.list(None, filter={"specdoctor": KIND}):
            tid = tup.config["configurable"]["thread_id"]
            if tid not in threads:
                threads.append(tid)
        for tid in threads:
            run = load_survey(saver, tid)
            out.append(SurveyRunInfo(run_id=tid, hosts=len(run.params.targets), surveyed=len(run.rows),
                                     outliers=run.analysis.outliers if run.analysis else [], finished=run.done,
                                     started=run.started))
    return sorted(out, key=lambda i: (i.started or 0, i.run_id))
