"""The typed run record and its checkpoint are one record: what a process holds after each step is what the graph's
reducers made of the JSON updates, and a tool's output reaches its reader as the very model the tool returned."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from specdoctor.diagnosis.facts import RunFacts
from specdoctor.engine.context import RunDeps
from specdoctor.engine.graph import compile_playbook
from specdoctor.engine.playbook import Playbook, Step
from specdoctor.engine.state import RunState, StateView, StepUpdate
from specdoctor.host import MockHost
from specdoctor.models import Decision, ServerFact
from specdoctor.toolkit import ToolContext, ToolResult, registry


class _Args(BaseModel):
    """Args."""

    port: int = 0


class _Found(BaseModel):
    """Out."""

    port: int
    launch: str

    def summary_line(self) -> str:
        return f"server on {self.port}"


RETURNED: list[_Found] = []


def _t_find(ctx: ToolContext, args: _Args) -> _Found:
    """Test tool: 'finds' a server (no host command)."""
    RETURNED.append(_Found(port=args.port, launch=f"serve --port {args.port}"))
    return RETURNED[-1]


@pytest.fixture(autouse=True)
def _tool():
    registry.register(_t_find, effect="read", name="t_find")
    yield
    registry.unregister("t_find")


def _deps() -> RunDeps:
    host = MockHost(lambda cmd, env, cwd: "")
    return RunDeps(host=host, tool_ctx=ToolContext(host=host, run_id="typed"), yes=True)


def test_the_record_a_process_holds_is_the_checkpoints_record():
    pb = Playbook(name="t", steps=[
        Step(id="first", tool="t_find", args={"port": 30000}, save={"launch": "launch"}),
        Step(id="second", tool="t_find", args={"port": "$facts.trial_port"}, when="server_running"),
        Step(id="third", tool="t_find", args={"port": 30001}, save={"launch": "launch"}),
    ])
    deps = _deps()
    app = compile_playbook(pb)
    values = app.invoke({"run_id": "typed", "params": {"runs": 5}, "results": {}, "facts": {"trial_port": 1},
                         "decisions": [], "done": []}, context=deps)
    assert deps.record is not None and deps.record.done == ["first", "second", "third"]
    # the reducers' JSON and the process's typed record agree, field by field
    assert deps.record.to_checkpoint() == RunState.from_checkpoint(values).to_checkpoint()
    assert deps.record.facts.launch == "serve --port 30001" and deps.record.facts.trial_port == 1
    assert [d.status for d in deps.record.decisions] == ["ok", "skipped", "ok"]
    # the tool's own object reaches the reader: no JSON between them in one process (a copy, so readers can't
    # change the record)
    got = StateView(deps.record).result("third", _Found)
    assert got == RETURNED[-1] and got is not RETURNED[-1]
    assert deps.record.results["third"].typed_value() is RETURNED[-1]


def test_a_record_read_back_from_its_checkpoint_is_the_same_record():
    found = _Found(port=1, launch="serve")
    res = ToolResult(tool="t_find", status="ok", summary="", output=found.model_dump(mode="json"))
    facts = RunFacts(server=ServerFact(port=1, running=True), launch="serve")
    rec = RunState(run_id="r", params={"runs": 5}).apply(StepUpdate(
        results={"s": res}, facts=facts, decisions=[Decision(step="s")], done=["s"]))
    back = RunState.from_checkpoint(rec.to_checkpoint())
    assert back.to_checkpoint() == rec.to_checkpoint()
    assert back.facts.server == facts.server and StateView(back).result("s", _Found) == found
    # a fact's writer's own keys ride along (the record and the checkpoint hold the same fact)
    extra = RunState.from_checkpoint({"facts": {"measure": {"spec": {"median": 1.0, "also": {"median": 2.0}}}}})
    assert StateView(extra).get("facts.measure.spec.also.median") == 2.0


def test_a_result_whose_output_was_replaced_is_read_again_not_from_the_kept_model():
    res = registry.call(ToolContext(host=MockHost(lambda c, e, w: ""), auto_approve=True), "t_find", {"port": 7})
    assert res.typed_value() is RETURNED[-1]
    other = res.model_copy(update={"output": {"port": 8, "launch": "x"}})
    assert other.typed_value() is None and registry.typed_output(other, _Found) == _Found(port=8, launch="x")
