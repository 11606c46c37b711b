"""The fleet survey as a LangGraph map-reduce: one `Send` per host not yet surveyed, bounded concurrency, one
checkpoint thread per survey run (SQLite by default, Postgres for a team), resumable from any controller.

    plan --Send(host)--> survey_host (xN, at most `parallel` at once) --> analyse --> END

A host's row is written to the checkpoint the moment its task finishes (LangGraph keeps the writes of the
finished tasks of an interrupted step), so a resumed survey runs only the hosts that had not finished. The graph
runs on LangGraph's async loop, and the bound on concurrency is the pool of exactly `parallel` threads that runs
the blocking per-host work. Not LangGraph's `max_concurrency`: its executors put the checkpointer's writes behind
the same limit (the sync loop's thread pool, the async loop's semaphore), so a finished host's row would wait for
the hosts still queued and a killed controller would lose it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Annotated, Any, TypedDict

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Send
from pydantic import Field

from specdoctor.engine.runs import new_run_id, specdoctor_home
from specdoctor.engine.state import merge_dicts
from specdoctor.errors import UsageError
from specdoctor.fleet.models import FleetAnalysis, HostSurvey, SurveyParams, SurveyTarget
from specdoctor.fleet.outliers import analyse
from specdoctor.fleet.probe import survey_host
from specdoctor.models import StrictModel

__all__ = ["SurveyState", "SurveyRun", "SurveyRunInfo", "build_survey_graph", "run_survey", "resume_survey",
           "load_survey", "list_surveys", "open_async_checkpointer", "KIND"]

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


@asynccontextmanager
async def open_async_checkpointer(spec: str | None) -> AsyncIterator[BaseCheckpointSaver]:
    """The async twin of `runs.open_checkpointer`: the same SQLite file by default, `postgres://` for a team."""
    if spec and spec.startswith(("postgres://", "postgresql://")):
        try:
            from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
        except ImportError:
            raise UsageError("Postgres checkpoints need `pip install specdoctor[postgres]`") from None
        async with AsyncPostgresSaver.from_conn_string(spec) as pg:
            await pg.setup()
            yield pg
        return
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

    path = Path(spec) if spec else specdoctor_home() / "state.sqlite"
    path.parent.mkdir(parents=True, exist_ok=True)
    async with AsyncSqliteSaver.from_conn_string(str(path)) as lite:
        yield lite


def build_survey_graph(checkpointer: BaseCheckpointSaver | None, say: Callable[[str], None] | None = None,
                       pool: ThreadPoolExecutor | None = None) -> Any:
    """Compile the survey graph; `say` receives one-line progress messages, `pool` runs the hosts' work."""

    def plan(state: SurveyState) -> dict[str, Any]:
        return {}

    def fan_out(state: SurveyState) -> list[Send] | str:
        params = SurveyParams.model_validate(state["params"])
        done = state.get("rows") or {}
        sends = [Send("survey_host", {"target": t.model_dump(mode="json"), "params": state["params"]})
                 for t in params.targets if t.name not in done]
        return sends or "analyse"

    async def one_host(payload: dict[str, Any]) -> dict[str, Any]:
        target = SurveyTarget.model_validate(payload["target"])
        params = SurveyParams.model_validate(payload["params"])
        row = await asyncio.get_running_loop().run_in_executor(pool, survey_host, target, params, say)
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


def _config(run_id: str) -> dict[str, Any]:
    # no max_concurrency: see the module docstring (the pool given to the graph bounds the hosts at work)
    return {"configurable": {"thread_id": run_id}, "metadata": {"specdoctor": KIND}}


async def _load(saver: BaseCheckpointSaver, run_id: str) -> SurveyRun:
    snap = await build_survey_graph(saver).aget_state({"configurable": {"thread_id": run_id}})
    values = dict(snap.values or {})
    if not values.get("params"):
        raise UsageError(f"no survey {run_id!r} in this checkpoint store (see `specdoctor survey --list`)")
    pending: dict[str, Any] = {}  # rows of the hosts that finished in a step the controller did not finish
    for task in snap.tasks or ():
        result = getattr(task, "result", None)
        if isinstance(result, dict) and isinstance(result.get("rows"), dict):
            pending.update(result["rows"])
    params = SurveyParams.model_validate(values["params"])
    analysis = values.get("analysis")
    return SurveyRun(run_id=run_id, params=params, rows=_rows(params, {**pending, **(values.get("rows") or {})}),
                     analysis=FleetAnalysis.model_validate(analysis) if analysis else None,
                     started=values.get("started"))


async def _drive(checkpoint: str | None, run_id: str, inputs: dict[str, Any] | None, parallel: int,
                 say: Callable[[str], None] | None) -> SurveyRun:
    if parallel < 1:
        raise UsageError(f"--parallel must be at least 1, got {parallel}")
    async with open_async_checkpointer(checkpoint) as saver:
        before: set[str] = set()
        if inputs is None:
            run = await _load(saver, run_id)
            if run.done:
                raise UsageError(f"survey {run_id} is finished; nothing to resume")
            before = {r.name for r in run.rows}
            if say:
                say(f"survey {run_id}: {len(before)} of {len(run.params.targets)} hosts already done")
        pool = ThreadPoolExecutor(max_workers=parallel, thread_name_prefix="survey")
        try:
            await build_survey_graph(saver, say, pool).ainvoke(inputs, _config(run_id))
        finally:  # interrupted: hosts not started yet stay undone (a resume does them), none is started now
            pool.shutdown(wait=False, cancel_futures=True)
        run = await _load(saver, run_id)
    run.resumed_rows = [r.name for r in run.rows if r.name not in before]
    return run


def run_survey(params: SurveyParams, *, checkpoint: str | None = None, parallel: int = 8,
               run_id: str | None = None, say: Callable[[str], None] | None = None) -> SurveyRun:
    """Survey every target (at most `parallel` at once), checkpointing each host's row as it finishes."""
    names = [t.name for t in params.targets]
    if len(set(names)) != len(names):
        raise UsageError(f"host names must be unique: {', '.join(n for n in names if names.count(n) > 1)}")
    run_id = run_id or new_run_id()
    if say:
        say(f"survey {run_id}: {len(params.targets)} hosts, at most {parallel} at once")
    inputs = {"run_id": run_id, "params": params.model_dump(mode="json"), "rows": {}, "analysis": None,
              "started": time.time()}
    return asyncio.run(_drive(checkpoint, run_id, inputs, parallel, say))


def resume_survey(run_id: str, *, checkpoint: str | None = None, parallel: int = 8,
                  say: Callable[[str], None] | None = None) -> SurveyRun:
    """Finish an interrupted survey: only the hosts without a row are surveyed, then the analysis runs."""
    return asyncio.run(_drive(checkpoint, run_id, None, parallel, say))


def load_survey(run_id: str, checkpoint: str | None = None) -> SurveyRun:
    """A survey run read from the store; rows of the finished hosts of an interrupted run included."""

    async def go() -> SurveyRun:
        async with open_async_checkpointer(checkpoint) as saver:
            return await _load(saver, run_id)

    return asyncio.run(go())


def list_surveys(checkpoint: str | None = None) -> list[SurveyRunInfo]:
    """Every survey in the store (whichever controller started it), oldest first."""

    async def go() -> list[SurveyRunInfo]:
        out: list[SurveyRunInfo] = []
        async with open_async_checkpointer(checkpoint) as saver:
            threads: list[str] = []
            async for tup in saver.alist(None, filter={"specdoctor": KIND}):
                tid = tup.config["configurable"]["thread_id"]
                if tid not in threads:
                    threads.append(tid)
            for tid in threads:
                run = await _load(saver, tid)
                out.append(SurveyRunInfo(run_id=tid, hosts=len(run.params.targets), surveyed=len(run.rows),
                                         outliers=run.analysis.outliers if run.analysis else [],
                                         finished=run.done, started=run.started))
        return sorted(out, key=lambda i: (i.started or 0, i.run_id))

    return asyncio.run(go())
