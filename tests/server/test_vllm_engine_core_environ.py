"""vLLM 0.26's VLLM::EngineCore loses the FIRST variables of its /proc/PID/environ to its process title, keeping the
later ones (PATH among them): read through its untitled sibling, never taken for 'the launcher dropped these'.

First contact with the real vLLM on the H100: story no-regression ended `environment`, with CUDA_VERSION,
NCCL_VERSION, NCCL_NVLS_ENABLE, VLLM_DO_NOT_TRACK and VLLM_USE_FLASHINFER_SAMPLER "dropped by the launcher before the
TP workers" — the last one the engine core had plainly read (the server started only because it was 0). The rule
that caught SGLang 0.5.17's scheduler (no PATH left) did not fire: the engine core kept PATH. The fixture holds the
variable names in the real /proc order (tests/fixtures/vllm-0.26-h100/engine_core_environ.json).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from specdoctor.host import MockHost
from specdoctor.inference import get_engine
from specdoctor.tools.serving.server import PREFIX_LOST_MIN, Proc, find_servers, overwritten, server_environs

FIX = json.loads((Path(__file__).resolve().parents[1] / "fixtures" / "vllm-0.26-h100"
                  / "engine_core_environ.json").read_text())
MAIN_PID, CORE_PID, TRACKER_PID = 2598, 2664, 2663


def _main_order() -> list[str]:
    """The main's variables in /proc order: the real tail (the audit kept only the last 2 000 characters), after
    the lost variables it does not show (they stood before it) and two every shell has."""
    tail = FIX["main_tail_order"]
    return ["HOSTNAME", "HOME", *[n for n in FIX["engine_core_lacks"] if n not in tail], *tail]


def _cuts() -> list[int]:
    """Every place the title's overwrite can have ended that agrees with what the real engine core showed: after the
    last variable it lacked, at or before the first one it kept."""
    order = _main_order()
    last_lost = max(order.index(n) for n in FIX["engine_core_lacks"])
    first_kept = min(order.index(n) for n in FIX["engine_core_has"] if n in order)
    return list(range(last_lost + 1, first_kept + 1))


def _envs(cut: int) -> dict[int, dict[str, str]]:
    order = _main_order()
    main = {n: f"value-of-{n}" for n in order}
    added = [n for n in FIX["witness_tail_order"] if n not in main]  # what vLLM writes into os.environ after exec
    assert "VLLM_WORKER_MULTIPROC_METHOD" in added
    witness = {**main, **{n: f"value-of-{n}" for n in added}}
    core = {n: witness[n] for n in [*order[cut:], *added]}
    return {MAIN_PID: main, TRACKER_PID: witness, CORE_PID: core}


def _procs() -> list[Proc]:
    py = "/venv/bin/python3"
    return [Proc(pid=MAIN_PID, ppid=1, title="vllm", cmdline=[py, "/venv/bin/vllm", "serve", "/models/target",
                                                                 "--port", "30000"]),
            Proc(pid=TRACKER_PID, ppid=MAIN_PID, title="python3",
                 cmdline=[py, "-c", "from multiprocessing.resource_tracker import main;main(5)"]),
            Proc(pid=CORE_PID, ppid=MAIN_PID, title="VLLM::EngineCor", cmdline=["VLLM::EngineCore"])]


def _host(envs: dict[int, dict[str, str]]) -> MockHost:
    """Answers read_environs' one command the way /proc would: a record per pid, NUL-separated K=V."""

    def handler(cmd, env, cwd):
        pids = [int(p) for p in re.findall(r"for p in ([\d ]+);", str(cmd))[0].split()]
        return "".join(f"\x1e{p}\x1f" + ("".join(f"{k}={v}\0" for k, v in envs[p].items()) + "\x1dok"
                                          if p in envs else "") for p in pids)

    return MockHost(handler)


@pytest.mark.parametrize("cut", _cuts())
def test_the_real_engine_core_is_read_through_its_untitled_sibling(cut):
    envs = _envs(cut)
    assert "PATH" in envs[CORE_PID]  # why the SGLang rule alone missed it
    assert overwritten(envs[CORE_PID], envs[MAIN_PID])
    (server,) = find_servers(_procs(), engine=get_engine("vllm"))
    assert server.env_witnesses == [TRACKER_PID]
    read = server_environs(_host(envs), server)
    (worker,) = read.workers.values()
    assert worker is not None
    for name in FIX["engine_core_lacks"]:
        assert worker[name] == envs[MAIN_PID][name], name
    assert worker["VLLM_WORKER_MULTIPROC_METHOD"] == "value-of-VLLM_WORKER_MULTIPROC_METHOD"
    assert any("overwritten by its process title" in n and str(TRACKER_PID) in n for n in read.notes)


@pytest.mark.parametrize("dropped", [
    ["NCCL_ALGO"],  # one variable, wherever it stands
    ["HOSTNAME", "HOME"],  # fewer than PREFIX_LOST_MIN, even at the very start
    ["HOME", "CUDA_HOME", "NCCL_VERSION"],  # three, but not all before the rest
])
def test_a_launcher_that_drops_variables_is_still_seen_dropping_them(dropped):
    """Must not fire: the engine core lacking variables the launcher removed by name is read as it is."""
    envs = _envs(_cuts()[0])
    main = {**envs[MAIN_PID], "NCCL_ALGO": "Ring"}
    core = {k: v for k, v in main.items() if k not in dropped}
    assert len(dropped) < PREFIX_LOST_MIN or "CUDA_HOME" in dropped
    assert not overwritten(core, main)
    envs = {**envs, MAIN_PID: main, CORE_PID: core}
    (server,) = find_servers(_procs(), engine=get_engine("vllm"))
    read = server_environs(_host(envs), server)
    (worker,) = read.workers.values()
    assert worker == core and read.notes == []


def _twin_propagation(tmp_path: Path, **over: object):
    import yaml

    import specdoctor

    path = tmp_path / "vllm-box.yaml"
    path.write_text(yaml.safe_dump({"extends": "vllm-no-regression", "name": "vllm-box", **over}))
    with specdoctor.connect(f"sim:{path}", engine="vllm") as client:
        return client.call("check_env_propagation", repo=client.hints.repo)


def test_the_twin_engine_core_hides_its_first_variables_and_nothing_reads_dropped(tmp_path):
    """The twin's VLLM::EngineCore now loses the first half of its environ to its title, as the real one did, beside
    an untitled resource_tracker; the propagation table still shows nothing dropped."""
    res = _twin_propagation(tmp_path)
    assert res.status == "ok", res.summary
    assert [r["name"] for r in res.output["rows"] if r["status"] == "dropped-for-workers"] == []
    assert any("overwritten by its process title" in p for p in res.output["problems"])


def test_the_twin_engine_core_still_shows_a_variable_the_launcher_dropped(tmp_path):
    """Must not fire: a launcher that drops NCCL_ALGO before the engine core (the twin's worker_env_drop) is still
    read as dropping it, through the witness, which was spawned with the same environment."""
    res = _twin_propagation(tmp_path, shell_env={"NCCL_ALGO": "Ring"}, server={"worker_env_drop": ["NCCL_ALGO"]})
    assert res.status == "ok", res.summary
    assert [r["name"] for r in res.output["rows"] if r["status"] == "dropped-for-workers"] == ["NCCL_ALGO"]
