"""The runtime context is typed: the Host declares what the runner uses, RunDeps names its protocols."""

from __future__ import annotations

import typing

from specdoctor.engine.context import Advisor, EngineView, RunDeps
from specdoctor.host import MockHost
from specdoctor.host.base import Host
from specdoctor.toolkit import ToolContext


def test_every_host_answers_what_the_runner_asks_of_it():
    host = MockHost(lambda cmd, env, cwd: "")
    host.detach()  # a real host has nothing to keep for resume: a no-op, not an AttributeError
    assert host.reopen_spec is None and host.hints is None and host.audit is not None
    declared = {n for n in dir(Host) if not n.startswith("_")} | set(typing.get_type_hints(Host))
    assert {"run", "read", "put", "forward", "close", "exists", "home", "detach", "audit", "hints", "name",
            "reopen_spec"} <= declared


def test_run_deps_name_their_protocols_not_any():
    hints = typing.get_type_hints(RunDeps)
    assert hints["view"] is EngineView and hints["advisor"] == Advisor | None and hints["host"] is Host
    deps = RunDeps(host=MockHost(lambda cmd, env, cwd: ""), tool_ctx=ToolContext(host=MockHost(lambda c, e, w: "")))
    assert deps.advisor is None and deps.view is not None
