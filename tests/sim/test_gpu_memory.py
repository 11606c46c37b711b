"""The twin's GPU-memory model: a server holds its static fraction; a launch beside it fails SGLang's way."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from specdoctor.sim.standin.sglang._twin.gpumem import (
    NOT_ENOUGH,
    UNBALANCED,
    MemoryConfig,
    check_launch,
    held_on_gpus,
    launch_memory,
)

CARD = 96 * 1024.0  # MiB
GPUS = list(range(8))


def _user_server(config: MemoryConfig) -> dict[int, float]:
    first = launch_memory(CARD, {}, GPUS, 0.88, config, speculative=True)
    assert first.ok and first.stage is None
    return {g: float(m) for g, m in first.held_mib.items()}


def test_alone_a_server_starts_and_holds_its_static_fraction_of_the_card():
    cfg = MemoryConfig(enforce=True, weights_gb=140.0)
    held = _user_server(cfg)
    assert set(held) == set(GPUS) and all(0.88 * CARD < m < 0.92 * CARD for m in held.values())


def test_beside_a_running_server_big_weights_fail_to_load_with_a_cuda_oom():
    cfg = MemoryConfig(enforce=True, weights_gb=140.0)  # 17.5 GB a rank: more than the ~9 GB left free
    out = launch_memory(CARD, _user_server(cfg), GPUS, 0.88, cfg, speculative=False)
    assert not out.ok and out.stage == "load" and out.error.startswith("torch.OutOfMemoryError: CUDA out of memory.")
    assert "GPU 0 has a total capacity of 96.00 GiB" in out.error


def test_beside_a_running_server_weights_that_fit_leave_no_kv_pool():
    cfg = MemoryConfig(enforce=True, weights_gb=8 * 8.0, draft_gb=1.0)  # 9 GB a rank: loads into the ~9.8 GB free, no pool left
    out = launch_memory(CARD, _user_server(cfg), GPUS, 0.88, cfg, speculative=True)
    assert not out.ok and out.stage == "kv" and out.error == f"RuntimeError: {NOT_ENOUGH}" and out.after_load_gb > 0


def test_a_partly_occupied_tp_group_is_refused_before_loading():
    cfg = MemoryConfig(enforce=True)
    out = launch_memory(CARD, {3: 0.5 * CARD}, GPUS, 0.88, cfg, speculative=True)
    assert not out.ok and out.stage == "init" and out.error.startswith("RuntimeError: " + UNBALANCED)


def test_once_the_user_server_is_stopped_the_same_launch_starts():
    cfg = MemoryConfig(enforce=True, weights_gb=140.0)
    _user_server(cfg)
    again = launch_memory(CARD, {}, GPUS, 0.88, cfg, speculative=False)  # the cards are free again
    assert again.ok and again.kv_gb > 10


def test_small_weights_do_start_beside_with_a_small_pool_as_sglang_would():
    cfg = MemoryConfig(enforce=True, weights_gb=8 * 2.0)  # static fraction is of what was free, not of the card
    out = launch_memory(CARD, _user_server(cfg), GPUS, 0.88, cfg, speculative=True)
    assert out.ok and 0 < out.kv_gb < 9 and out.avail_gb < 10


def test_a_live_server_in_the_sandbox_holds_its_gpus_until_it_exits(tmp_path):
    twin = {"hardware": {"memory_gb": 96.0}, "gpu_memory": {"enforce": True, "weights_gb": 140.0}}
    held = launch_memory(CARD, {}, GPUS, 0.88, MemoryConfig(enforce=True, weights_gb=140.0), speculative=True)
    sched = subprocess.Popen(["sleep", "60"])  # a real process stands for the user's scheduler
    try:
        (tmp_path / "run" / "pids").mkdir(parents=True)
        (tmp_path / "run" / "pids" / "1.json").write_text(json.dumps({"port": 30000, "procs": [
            {"pid": sched.pid, "title": f"sglang::scheduler_TP{g}", "gpu": g, "mem_mib": held.held_mib[g]}
            for g in GPUS]}))
        assert held_on_gpus(str(tmp_path), twin, CARD) == {g: float(held.held_mib[g]) for g in GPUS}
        beside = check_launch(str(tmp_path), twin, GPUS, 0.88, speculative=False, own_pid=-1)
        assert beside is not None and not beside.ok and beside.stage == "load"
        off = check_launch(str(tmp_path), {**twin, "gpu_memory": {"enforce": False}}, GPUS, 0.88,
                           speculative=False, own_pid=-1)
        assert off is None  # not enforced: today's agent keeps launching beside
    finally:
        sched.kill()
        sched.wait()
    after = check_launch(str(tmp_path), twin, GPUS, 0.88, speculative=False, own_pid=-1)
    assert after is not None and after.ok  # the holder is gone: its pidfile no longer counts


def _beside(enforce: bool, weights_gb: float | None):
    """The seed box with its user's server running, then a second launch on another port: its log and exit."""
    import re
    import time

    from specdoctor.sim import build_sandbox, load_scenario

    from .conftest import free_port

    sc = load_scenario("seed")
    sc = sc.model_copy(update={"gpu_memory": sc.gpu_memory.model_copy(
        update={"enforce": enforce, "weights_gb": weights_gb})})
    sb = build_sandbox(sc, start_server=False, port=free_port())
    try:
        sb.start_server()
        other = free_port()
        line = re.sub(r"--port[ =]\d+", f"--port {other}", sb.launch)
        res = sb.launch_server(line=line, port=other, log=str(sb.root / "beside.log"), timeout=30)
        deadline = time.time() + 10
        while Path(f"/proc/{res.pid}").exists() and time.time() < deadline and not res.healthy:
            time.sleep(0.1)  # a failed start exits: wait for it
        smi = subprocess.run(["nvidia-smi", "--query-gpu=memory.used,memory.total",
                              "--format=csv,noheader,nounits"], capture_output=True, text=True,
                             env={**sb.base_env}).stdout
        return res, (sb.root / "beside.log").read_text(), smi
    finally:
        sb.stop_all()
        sb.remove()


def test_launching_beside_the_users_server_fails_the_real_way_when_enforced():
    res, log, smi = _beside(True, 8 * 17.5)  # 17.5 GB a rank: more than the user's server left free
    assert not res.healthy and "torch.OutOfMemoryError: CUDA out of memory." in log and "Load weight begin" in log
    rows = [[int(x) for x in r.split(",")] for r in smi.strip().splitlines()]
    assert len(rows) == 8 and all(used > 0.8 * total for used, total in rows)  # held by the user's server, visibly


def test_launching_beside_still_starts_when_memory_is_not_enforced():
    res, log, _ = _beside(False, 8 * 17.5)
    assert res.healthy and "The server is fired up" in log


def test_the_models_own_size_decides_whether_a_second_server_fits():
    """No figure in the scenario: the seed's model directory says ~478 GiB (Kimi K2.5, 1T parameters at 4 bits),
    ~60 GiB a rank, and a second server beside the user's has no room to load it; the 16 GiB the twin used to
    assume would have fitted (the previous test's must-not-fire twin: a small model still starts beside)."""
    res, log, _ = _beside(True, None)
    assert not res.healthy and "torch.OutOfMemoryError: CUDA out of memory." in log
    small, small_log, _ = _beside(True, 16.0)
    assert small.healthy and "The server is fired up" in small_log
