"""`investigate --port P` on a box that runs an SGLang and a vLLM server side by side: the run's engine is the one
serving on P (its own command line), not a guess from every process on the box."""

from __future__ import annotations

from types import SimpleNamespace

from specdoctor.engine.runner import _run_engine
from specdoctor.host import LocalHost
from specdoctor.sim import build_sandbox, load_scenario
from specdoctor.sim.ports import free_port


def test_the_port_names_the_engine_when_two_engines_serve(tmp_path):
    sglang = build_sandbox(load_scenario("no-regression"), tmp_path / "sglang-box", start_server=True,
                           port=free_port())
    vllm = build_sandbox(load_scenario("vllm-enforce-eager"), tmp_path / "vllm-box", start_server=True,
                         port=free_port())
    try:
        assert sglang.server_pids() and vllm.server_pids(), "a twin server did not start"
        host = LocalHost()  # no hints: the box's processes are all it has
        for box, want in ((sglang, "sglang"), (vllm, "vllm")):
            rec = SimpleNamespace(engine=None)
            assert _run_engine(rec, host, {"params": {"port": box.port}}).name == want
            assert rec.engine == want
        # a named engine still wins over the port's server
        rec = SimpleNamespace(engine="sglang")
        assert _run_engine(rec, host, {"params": {"port": vllm.port}}).name == "sglang"
    finally:
        sglang.remove()
        vllm.remove()
