"""launch/stop/find/env/benchmark/server_info against real fake-SGLang processes on LocalHost."""

from __future__ import annotations

import json
from pathlib import Path

from specdoctor.toolkit import registry

from .helpers import PYTHON, free_port


def _launch(ctx, port, *, spec=True, env=None, tp=2, **kw):
    cmd = (f"python3 -m sglang.launch_server --model /m --tp {tp} --port {port} --attention-backend triton"
           + (" --speculative-algo EAGLE3 --speculative-draft /d --speculative-num-steps 3 "
              "--speculative-eagle-topk 1 --speculative-num-draft-tokens 4" if spec else ""))
    return registry.call(ctx, "launch_server", {"command": cmd, "python": PYTHON, "env": env or {},
                                                "timeout_s": 30, "label": "spec" if spec else "base", **kw})


def test_launch_find_propagate_benchmark_stop(local_ctx):
    port = free_port()
    r = _launch(local_ctx, port, env={"NCCL_PROTO": "LL", "NCCL_ALGO": "Ring", "FAKE_DROP": "NCCL_PROTO",
                                      "HF_TOKEN": "hf_abcdefghijklmnop"})
    assert r.ok, r.summary
    out = r.output
    assert out["port"] == port and out["pgid"] and out["ready_seconds"] is not None
    assert out["env"]["HF_TOKEN"] == "***REDACTED***"
    assert len(out["pids"]) >= 4  # main + 2 schedulers + detokenizer
    started = local_ctx.host.read(f"{local_ctx.run_dir}/started.json").decode().splitlines()
    assert json.loads(started[0])["pgid"] == out["pgid"]
    # a second launch on the same port is refused
    busy = _launch(local_ctx, port)
    assert busy.status == "error" and "busy" in busy.summary

    found = registry.call(local_ctx, "find_server_processes", {"port": port})
    assert found.ok, found.summary
    s = found.output["servers"][0]
    assert sorted(s["ranks"]) == ["TP0", "TP1"] and s["detokenizer"]
    assert s["args"]["tp_size"] == 2 and s["args"]["speculative_algorithm"] == "EAGLE3"
    assert s["args"]["speculative_draft_model_path"] == "/d" and s["port"] == port
    assert registry.call(local_ctx, "find_server_processes", {"port": free_port()}).status == "no_data"

    env = registry.call(local_ctx, "read_process_env", {"pid": s["main"]["pid"]})
    assert env.output["env"]["HF_TOKEN"] == "***REDACTED***" and env.output["env"]["NCCL_ALGO"] == "Ring"

    prop = registry.call(local_ctx, "check_env_propagation", {"port": port, "shell_env": {"NCCL_PROTO": "LL",
                                                                                         "NCCL_ALGO": "Ring"}})
    assert prop.ok, prop.summary
    rows = {r["name"]: r for r in prop.output["rows"]}
    assert rows["NCCL_PROTO"]["status"] == "dropped-for-workers"
    assert rows["NCCL_PROTO"]["shell"] == "LL" and rows["NCCL_PROTO"]["parent"] == "LL"
    assert rows["NCCL_PROTO"]["workers"] == {"TP0": None, "TP1": None}
    assert prop.output["rows"][0]["name"] == "NCCL_PROTO"  # dropped variables lead the table
    assert rows["NCCL_ALGO"]["status"] == "propagated"
    assert rows["CUDA_DEVICE_MAX_CONNECTIONS"]["status"] == "forced-by-sglang"
    assert rows["NCCL_NVLS_ENABLE"]["forced_by_engine"]
    assert "NCCL_PROTO" in prop.summary

    info = registry.call(local_ctx, "server_info", {"port": port})
    assert info.ok, info.summary
    assert info.output["source"] == "/get_server_info"  # /server_info answers 404 HTML: fell back
    assert info.output["tp_size"] == 2 and info.output["accept_length"] == 2.0
    assert info.output["model_info"]["model_path"] == "/m"  # python-repr body tolerated

    log = out["log_path"]
    bench = registry.call(local_ctx, "benchmark", {"port": port, "runs": 3, "requests_per_run": 2,
                                                  "max_new_tokens": 20, "warmup_runs": 1, "log_path": log})
    assert bench.ok, bench.summary
    b = bench.output
    assert len(b["samples"]) == 3 and b["ci_low"] <= b["median"] <= b["ci_high"]
    assert 200 < b["median"] < 1000  # 20 tokens at 1.4 ms each (+ overhead) per request
    assert b["accept_length"] == 2.0 and b["speculative"]
    assert b["cuda_graph"] is False
    assert any(f["kind"] == "verify-no-cuda-graph" for f in b["findings"])

    stop = registry.call(local_ctx, "stop_server", {"pgid": out["pgid"], "grace_s": 3})
    assert stop.ok and stop.output["stopped"] == [out["pgid"]]
    for pid in out["pids"]:
        stat = Path(f"/proc/{pid}/stat")
        assert not stat.exists() or stat.read_text().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    assert registry.call(local_ctx, "stop_server", {"pgid": 1}).status == "error"  # never a foreign group


def test_baseline_launch_drops_speculation(local_ctx):
    port = free_port()
    r = _launch(local_ctx, port, drop_speculative=True, tp=1)
    assert r.ok, r.summary
    assert not any(a.startswith("--speculative") for a in r.output["argv"])
    assert r.output["argv"][0] == PYTHON
    found = registry.call(local_ctx, "find_server_processes", {"port": port}).output["servers"][0]
    assert found["args"]["speculative_algorithm"] is None and list(found["ranks"]) == ["W0"]
    bench = registry.call(local_ctx, "benchmark", {"port": port, "runs": 2, "requests_per_run": 1,
                                                  "max_new_tokens": 10, "log_path": r.output["log_path"]})
    assert bench.ok and bench.output["accept_length"] is None and bench.output["cuda_graph"] is True


def test_failed_start_is_unresolved_with_log_tail(local_ctx):
    r = _launch(local_ctx, free_port(), env={"FAKE_CRASH": "1"})
    assert r.status == "unresolved"
    assert "RuntimeError: fake start-up failure" in r.summary
    assert "Traceback" in r.output["log_tail"]


def test_a_request_handlers_traceback_in_a_server_that_answers_is_not_a_failed_start(local_ctx):
    """Under load a health probe gives up and closes its connection; the server logs the handler's traceback and
    goes on serving. Read as a fatal start-up line, that killed a healthy trial server (seen in a test run)."""
    r = _launch(local_ctx, free_port(), tp=1, spec=False, env={"FAKE_HANDLER_TRACEBACK": "1"})
    assert r.ok, r.summary
    assert registry.call(local_ctx, "stop_server", {"pgid": r.output["pgid"]}).ok


def test_a_picked_port_taken_before_the_bind_is_picked_again(local_ctx, monkeypatch):
    """Port 0: our pick is checked, then the server binds it; a process taking it in between costs one retry,
    not the trial (and a port the user named is never swapped for another)."""
    import socket

    from specdoctor.tools.serving import launch

    taken, free = free_port(), free_port()
    picks = iter([taken, free])
    monkeypatch.setattr(launch, "pick_free_port", lambda used, rng=None: next(picks))
    with socket.socket() as s:
        s.bind(("127.0.0.1", taken))
        s.listen()
        cmd = f"python3 -m sglang.launch_server --model /m --tp 1 --port {taken}"
        r = registry.call(local_ctx, "launch_server", {"command": cmd, "python": PYTHON, "port": 0, "timeout_s": 30})
        assert r.ok, r.summary
        assert r.output["port"] == free
        stop = registry.call(local_ctx, "stop_server", {"pgid": r.output["pgid"]})
        assert stop.ok, stop.summary
        named = _launch(local_ctx, taken, tp=1, spec=False)
        assert named.status == "error" and "busy" in named.summary


def test_a_just_started_server_is_alive_before_its_setsid_has_run():
    """A loaded box can read /proc before the child's setsid(): it is still in the launching shell's group then.
    Read as 'exited', the restart of the user's server was reported failed while it came up (and held the port)."""
    from specdoctor.tools.serving import launch

    shell, child, other = 4100, 4242, 4300
    before_setsid = (f"{shell} (sh) S 1 {shell} {shell} 0\n"
                     f"{child} (setsid) R {shell} {shell} {shell} 0\n"
                     f"{other} (python3) S 1 {other} {other} 0\n")
    assert launch._members(before_setsid, child) == [child]
    after = f"{child} (python3) S 1 {child} {child} 0\n{child + 1} (sglang::scheduler) S {child} {child} {child} 0\n"
    assert launch._members(after, child) == [child, child + 1]
    gone = f"{child} (python3) Z 1 {child} {child} 0\n"
    assert launch._members(gone, child) == [] and launch._members(before_setsid, 9999) == []


def test_the_launched_process_comes_first_when_a_worker_has_the_smaller_pid(local_ctx, monkeypatch):
    """pids wrap at pid_max: a worker forked after the wrap has a smaller number than its parent. Sorted, the
    worker came first and was taken for the server (a CI run restarted the user's server and reported a scheduler
    as its main pid)."""
    from specdoctor.tools.serving import launch

    real = launch._group_pids
    monkeypatch.setattr(launch, "_group_pids", lambda host, pgid: [*real(host, pgid), 1])  # a wrapped pid
    r = _launch(local_ctx, free_port(), tp=1, spec=False)
    assert r.ok, r.summary
    try:
        assert r.output["pids"][0] == r.output["pgid"] and 1 in r.output["pids"]
    finally:
        monkeypatch.undo()  # stop_server reads the group too
        assert registry.call(local_ctx, "stop_server", {"pgid": r.output["pgid"]}).ok
