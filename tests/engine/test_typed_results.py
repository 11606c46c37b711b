"""Tool results are read back through the tool's own output model; a wrong shape fails where it is read."""

from __future__ import annotations

import pytest

from specdoctor.diagnosis import Case, decide_verdict
from specdoctor.engine.state import ResultShapeError, StateView
from specdoctor.models import MeasureFacts
from specdoctor.toolkit import ToolResult
from specdoctor.tools.checkout.repo import Catalog
from specdoctor.tools.serving.server import EnvRow, Propagation


def _stored(tool: str, output: dict, status: str = "ok") -> dict:
    return ToolResult(tool=tool, status=status, summary="", output=output).model_dump(mode="json")  # type: ignore[arg-type]


PROP = Propagation(port=30000, main_pid=10, shell_source="given", rows=[
    EnvRow(name="NCCL_PROTO", parent="LL", workers={"0": None, "1": None}, status="dropped-for-workers")])


def test_a_result_comes_back_as_the_tools_output_model_by_step_id_and_by_model():
    view = StateView({"results": {"propagation": _stored("check_env_propagation", PROP.model_dump(mode="json"))}})
    by_step = view.result("propagation", Propagation)
    assert isinstance(by_step, Propagation) and by_step.dropped == ["NCCL_PROTO"]
    assert view.latest(Propagation) == by_step and view.latest_key(Propagation) == "propagation"


def test_a_failed_or_missing_call_reads_as_none():
    view = StateView({"results": {"propagation": _stored("check_env_propagation", {}, status="error")}})
    assert view.result("propagation", Propagation) is None
    assert view.result("never_ran", Propagation) is None and view.latest(Propagation) is None


def test_a_wrong_shape_fails_where_it_is_read_naming_step_tool_and_field():
    bad = PROP.model_dump(mode="json")
    bad["rows"][0]["workers"] = "all ranks"  # a rank -> value table, not a sentence
    view = StateView({"params": {}, "facts": {}, "results": {"propagation": _stored("check_env_propagation", bad)}})
    with pytest.raises(ResultShapeError) as exc:
        view.result("propagation", Propagation)
    msg = str(exc.value)
    assert "'propagation'" in msg and "check_env_propagation" in msg and "rows.0.workers" in msg
    assert "\n" not in msg
    with pytest.raises(ResultShapeError, match="rows.0.workers"):  # the advisor, reading it, fails the same way
        decide_verdict(Case.of(view))


def test_reading_a_step_as_another_tools_model_is_refused():
    view = StateView({"results": {"propagation": _stored("check_env_propagation", PROP.model_dump(mode="json"))}})
    with pytest.raises(ResultShapeError, match="check_env_propagation returns Propagation, not Catalog"):
        view.result("propagation", Catalog)


def test_a_fact_of_the_wrong_shape_names_the_fact_and_field():
    # read when the checkpoint becomes the typed record, before any reader sees it
    with pytest.raises(ResultShapeError, match="fact 'measure'.*spec.median"):
        StateView({"facts": {"measure": {"spec": {"median": "fast"}}}}).fact("measure", MeasureFacts)


def test_an_action_reads_a_fresh_call_through_the_registry_the_same_way():
    from specdoctor.toolkit import registry

    res = ToolResult(tool="check_env_propagation", status="ok", summary="", output=PROP.model_dump(mode="json"))
    assert registry.typed_output(res, Propagation, where="locate_env") == PROP
    broken = res.model_copy(update={"output": {"port": "x"}})
    with pytest.raises(ResultShapeError, match="step 'locate_env' \\(tool check_env_propagation\\): output field"):
        registry.typed_output(broken, Propagation, where="locate_env")
