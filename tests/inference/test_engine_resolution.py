"""The engine is resolved once per run — `--engine`, the launch line, or the host's one engine — never by default."""

from __future__ import annotations

import pytest

from specdoctor.engine.runner import _run_engine
from specdoctor.engine.runs import RunRecord
from specdoctor.host.mock import MockHost
from specdoctor.inference.resolve import EngineUnknown
from specdoctor.tools.serving.server import Proc, find_servers

PROCS = [Proc(pid=10, ppid=1, title="python3", cmdline=["python3", "-m", "sglang.launch_server", "--port", "30000"]),
         Proc(pid=11, ppid=10, title="sglang::schedul", cmdline=["sglang::scheduler"]),
         Proc(pid=20, ppid=1, title="vllm", cmdline=["/venv/bin/python", "/venv/bin/vllm", "serve", "/m", "--port", "8001"]),
         Proc(pid=21, ppid=20, title="VLLM::EngineCor", cmdline=["VLLM::EngineCore"])]


def _rec(engine: str | None = None) -> RunRecord:
    return RunRecord(run_id="r", host="h", reopen="h", playbook="regression", out_dir="/tmp/x", checkpoint="",
                     engine=engine)


def test_servers_of_every_engine_each_read_by_its_own():
    servers = {s.port: s for s in find_servers(PROCS)}
    assert servers[30000].engine == "sglang" and list(servers[30000].ranks) == ["W0"]
    assert servers[8001].engine == "vllm" and list(servers[8001].ranks) == ["EngineCore"]
    assert [s.port for s in find_servers(PROCS, port=8001)] == [8001]


def test_the_run_engine_comes_from_the_flag_then_the_launch_line_then_the_host():
    quiet = MockHost(lambda cmd, env, cwd: "")
    rec = _rec("vllm")
    assert _run_engine(rec, quiet, {"params": {"launch": "python -m sglang.launch_server --model-path /m"}}).name \
        == "vllm"  # --engine wins over the line
    rec = _rec()
    assert _run_engine(rec, quiet, {"params": {"launch": "vllm serve /m --port 8000"}}).name == "vllm"
    assert rec.engine == "vllm"  # kept in the run record (resume reads it)
    with pytest.raises(EngineUnknown, match="--engine"):
        _run_engine(_rec(), quiet, {"params": {}})  # nothing says which: no default
