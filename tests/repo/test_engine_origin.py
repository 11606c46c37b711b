"""engine_origin resolves the run's engine package (vLLM too); sglang_origin stays callable as a deprecated alias, and
checkpoints that recorded `facts.sglang_origin` still read."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from specdoctor.diagnosis.facts import EngineOriginFact, checked_facts
from specdoctor.engine.actions.user_server import origin_outside_checkout
from specdoctor.engine.state import StateView
from specdoctor.host import LocalHost
from specdoctor.inference import get_engine
from specdoctor.toolkit import ToolContext, registry


def _tree(root: Path, package: str) -> str:
    (root / package).mkdir(parents=True)
    (root / package / "__init__.py").write_text("")
    return str(root)


def _ctx(tmp: Path, engine: str) -> ToolContext:
    home = tmp / "home"
    home.mkdir(exist_ok=True)
    return ToolContext(host=LocalHost(base_env={"HOME": str(home)}), run_id="origin", run_engine=get_engine(engine))


def test_engine_origin_resolves_vllm_for_a_vllm_run_and_sglang_for_an_sglang_run(tmp_path: Path):
    both = _tree(tmp_path / "src", "vllm")
    _tree(tmp_path / "src", "sglang")
    env = {"PYTHONPATH": both, "PATH": os.defpath}
    args = {"env": env, "python": sys.executable, "expect_under": both}
    v = registry.call(_ctx(tmp_path, "vllm"), "engine_origin", args)
    assert v.ok and v.output["origin"].endswith("/vllm/__init__.py") and v.output["inside"], v.summary
    assert v.output["package"] == "vllm" and v.summary.startswith("vllm imports from"), v.summary
    s = registry.call(_ctx(tmp_path, "sglang"), "engine_origin", args)
    assert s.ok and s.output["origin"].endswith("/sglang/__init__.py") and s.summary.startswith("sglang imports")


def test_the_old_tool_name_still_answers_and_says_it_is_deprecated(tmp_path: Path):
    root = _tree(tmp_path / "src", "vllm")
    args = {"env": {"PYTHONPATH": root, "PATH": os.defpath}, "python": sys.executable, "expect_under": root}
    old = registry.call(_ctx(tmp_path, "vllm"), "sglang_origin", args)
    new = registry.call(_ctx(tmp_path, "vllm"), "engine_origin", args)
    assert old.ok and old.output == new.output
    assert registry.get("sglang_origin").description.lower().startswith("deprecated")
    assert "engine_origin" in registry.get("sglang_origin").description
    assert "deprecated" not in registry.get("engine_origin").description.lower()


def test_a_checkpoint_that_says_sglang_origin_still_reads_as_engine_origin():
    old = {"sglang_origin": {"from_checkout": False, "where": "/site/sglang", "repo": "/r"}}
    facts = checked_facts(old)
    assert facts.engine_origin == EngineOriginFact(from_checkout=False, where="/site/sglang", repo="/r")
    assert "not from the --repo checkout /r" in (origin_outside_checkout(StateView({"facts": old})) or "")
    new = {"engine_origin": {"from_checkout": False, "where": "/site/vllm", "repo": "/r", "package": "vllm"}}
    assert checked_facts(new).engine_origin.package == "vllm"  # type: ignore[union-attr]
    assert "imports vllm from /site/vllm" in (origin_outside_checkout(StateView({"facts": new})) or "")
    assert origin_outside_checkout(StateView({"facts": {"engine_origin": {"from_checkout": True}}})) is None
