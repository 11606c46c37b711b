"""A worker whose /proc/PID/environ its process title overwrote (setproctitle; seen on the real SGLang 0.5.17 box)
is read from an untitled sibling, never taken for 'the launcher dropped these variables'.

First contact with the real server: every run on the H200 ended `environment` with CUDA_HOME, SGLANG_SIMULATE_ACC_LEN
and five more "dropped by the launcher before the TP workers", because sglang::scheduler's environ area holds only
the variables SGLang added last. The fixtures are that server's real process list (tests/fixtures/sglang-0.5.17-h200).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from specdoctor.host import MockHost
from specdoctor.tools.serving.server import Proc, find_servers, overwritten, server_environs

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "sglang-0.5.17-h200"


def _real(run: str = "spec") -> tuple[list[Proc], dict[int, dict[str, str]]]:
    data = {int(pid): p for pid, p in json.loads((FIX / run / "procs.json").read_text()).items()}
    procs = [Proc(pid=pid, ppid=p["ppid"], title=p["comm"], cmdline=p["cmdline"]) for pid, p in data.items()]
    envs = {pid: {k: p["env_values"].get(k, f"value-of-{k}") for k in p["env_keys"]} for pid, p in data.items()}
    return procs, envs


def _host(envs: dict[int, dict[str, str]]) -> MockHost:
    """Answers read_environs' one command the way /proc would: a record per pid, NUL-separated K=V."""

    def handler(cmd, env, cwd):
        pids = [int(p) for p in re.findall(r"for p in ([\d ]+);", str(cmd))[0].split()]
        out = ""
        for pid in pids:
            out += f"\x1e{pid}\x1f"
            if pid in envs:
                out += "".join(f"{k}={v}\0" for k, v in envs[pid].items()) + "\x1dok"
        return out

    return MockHost(handler)


def _server(procs: list[Proc]):
    (server,) = find_servers(procs)
    return server


@pytest.mark.parametrize("run", ["spec", "nospec"])
def test_the_real_scheduler_is_read_through_its_untitled_sibling(run):
    procs, envs = _real(run)
    server = _server(procs)
    tracker = next(p.pid for p in procs if "resource_tracker" in " ".join(p.cmdline))
    assert server.env_witnesses == [tracker]
    (rank, pid), = server.ranks.items()
    assert overwritten(envs[pid], envs[server.main.pid])  # as the box showed it: no PATH, 17 of 98 keys
    read = server_environs(_host(envs), server)
    worker = read.workers[rank]
    assert worker is not None
    for name in ("SGLANG_SIMULATE_ACC_LEN", "SGLANG_IS_FLASHINFER_AVAILABLE", "CUDA_HOME", "PATH"):
        if name in envs[server.main.pid]:
            assert worker[name] == envs[server.main.pid][name], name
    for name, value in envs[pid].items():  # what the worker's own area still shows wins over the witness
        assert worker[name] == value
    assert any("overwritten by its process title" in n and str(tracker) in n for n in read.notes)


def test_without_a_witness_the_worker_is_unreadable_not_empty():
    procs, envs = _real()
    procs = [p for p in procs if "resource_tracker" not in " ".join(p.cmdline)]
    server = _server(procs)
    assert server.env_witnesses == []
    read = server_environs(_host(envs), server)
    assert list(read.workers.values()) == [None]
    assert any("not readable" in n for n in read.notes)


def test_a_launcher_that_drops_variables_is_still_seen_dropping_them():
    """Must not fire: a worker that lost NCCL_ALGO (and only that) keeps PATH and the rest: read as it is."""
    procs, envs = _real()
    server = _server(procs)
    (rank, pid), = server.ranks.items()
    main = {**envs[server.main.pid], "NCCL_ALGO": "Ring"}
    envs[server.main.pid] = main
    envs[pid] = {k: v for k, v in main.items() if k != "NCCL_ALGO"}
    assert not overwritten(envs[pid], main)
    read = server_environs(_host(envs), server)
    assert read.workers[rank] == envs[pid] and "NCCL_ALGO" not in (read.workers[rank] or {})
    assert read.notes == []


def test_the_twin_of_the_real_box_reports_nothing_dropped(tmp_path):
    """End to end on the twin laid out as the real 0.5.17 box (its children's environ overwritten likewise)."""
    import yaml

    import specdoctor

    scenario = yaml.safe_load((FIX / "scenario.yaml").read_text())
    scenario["server"]["running"] = True  # the fixture's box, with the user's server up
    path = tmp_path / "real-h200-0517-running.yaml"
    path.write_text(yaml.safe_dump(scenario))
    with specdoctor.connect(f"sim:{path}") as client:
        res = client.call("check_env_propagation", repo=client.hints.repo)
        fp = client.call("fingerprint", repo=client.hints.repo)
    assert res.status == "ok", res.summary
    rows = res.output["rows"]
    assert [r["name"] for r in rows if r["status"] == "dropped-for-workers"] == []
    assert any("overwritten by its process title" in p for p in res.output["problems"])
    assert fp.output["worker_env"].get("SGLANG_TORCH_PROFILER_DIR") == \
        fp.output["parent_env"].get("SGLANG_TORCH_PROFILER_DIR")


def test_the_real_box_twin_with_its_own_claims_is_no_regression(tmp_path):
    """The story that showed the bug, on the twin of the real box: its own good-run figure as the claim → the
    verdict is no-regression, not 'environment' on variables the workers' titles hid."""
    import yaml

    import specdoctor
    from specdoctor.engine.runner import InvestigateOptions, investigate

    scenario = yaml.safe_load((FIX / "scenario.yaml").read_text())
    scenario["server"]["running"] = True
    path = tmp_path / "real-h200-0517-running.yaml"
    path.write_text(yaml.safe_dump(scenario))
    with specdoctor.connect(f"sim:{path}") as client:
        port = client.call("find_server_processes", repo=client.hints.repo).output["servers"][0]["port"]
        bench = client.call("benchmark", port=port, runs=6)
        assert bench.status == "ok", bench.summary
        spec = bench.output["median"]
    outcome = investigate(InvestigateOptions(host=f"sim:{path}", yes=True, expect={"spec": round(spec, 1)},
                                             out=str(tmp_path / "run")))
    report = json.loads((tmp_path / "run" / "report.json").read_text())
    assert report["verdict"] == "no-regression", report["summary"]
    assert not [r for r in report["env_propagation"] if r["status"] == "dropped-for-workers"]
    assert outcome is not None
