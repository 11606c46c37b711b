"""What the twin must be able to express (issue #16): each test fails on a twin without that behaviour.

Version facts are pinned to SGLang's own sources; each assertion names the file (read from the PyPI wheels
sglang-0.5.9 and sglang-0.5.23, `sglang/...` = the repo's `python/sglang/...`).
"""

from __future__ import annotations

import json
import re
import statistics
import textwrap
from pathlib import Path

import httpx
import pytest

from specdoctor.host.base import Raw
from specdoctor.sim import build_sandbox, load_scenario, predict
from specdoctor.sim.standin.sglang._twin import perf as twin_perf

from .conftest import free_port


def _gen(port: int, text: str = "Explain speculative decoding in two paragraphs.", n: int = 256,
         temperature: float = 0.0) -> dict:
    r = httpx.post(f"http://127.0.0.1:{port}/generate", timeout=30,
                   json={"text": text, "sampling_params": {"max_new_tokens": n, "temperature": temperature}})
    r.raise_for_status()
    return r.json()["meta_info"]


def _tps(port: int, runs: int = 6, **kw) -> float:
    return statistics.median(m["completion_tokens"] / m["e2e_latency"] for m in (_gen(port, **kw) for _ in range(runs)))


def _decode_lines(log: str) -> list[str]:
    return [ln for ln in log.splitlines() if "Decode batch" in ln]


# -- CUDA graphs per effect ------------------------------------------------------------------------------------

def test_verify_cuda_graph_follows_the_tree(local_box):
    """Two patches together make verify run eager: Decode lines say so and verify slows; revert one and it replays."""
    box = local_box("pair-eager-verify")
    sb, host = box.sandbox, box.host
    eager = _tps(sb.port)
    lines = _decode_lines(host.read(sb.server_log).decode())
    assert lines and all("cuda graph: False" in ln for ln in lines)
    assert predict(sb).verify_cuda_graph is False
    sb.stop_all()
    host.run(["git", "-C", sb.repo, "checkout", "--", "python/sglang/srt/speculative/eagle_utils.py"])
    log = str(sb.root / "home" / "after.log")
    assert sb.launch_server(host, log=log).healthy
    graphed = _tps(sb.port)
    lines = _decode_lines(host.read(log).decode())
    assert lines and all("cuda graph: True" in ln for ln in lines)
    assert graphed > 1.15 * eager
    assert graphed == pytest.approx(predict(sb).tps, rel=0.08)


# -- PCIe state ----------------------------------------------------------------------------------------------

def test_down_trained_link_slows_by_physics_and_shows_in_the_tools(local_box):
    box = local_box("pcie-downtrained", start=False)
    sb, host = box.sandbox, box.host
    gens = host.run(["nvidia-smi", "--query-gpu=index,pcie.link.gen.current,pcie.link.gen.max",
                     "--format=csv,noheader"]).stdout.splitlines()
    assert gens[5] == "5, 3, 5" and all(g.endswith(", 5, 5") for i, g in enumerate(gens) if i != 5)
    assert re.search(r"PCIe Generation\n\s+Max\s+: 5\n\s+Current\s+: 3", host.run(["nvidia-smi", "-q", "-i", "5"]).stdout)

    def busbw(devices: str) -> float:
        out = host.run(Raw(f"CUDA_VISIBLE_DEVICES={devices} all_reduce_perf -b 1M -e 1M -g 4")).stdout
        return float(re.search(r"# Avg bus bandwidth\s+:\s+([\d.]+)", out).group(1))

    healthy, with5 = busbw("0,1,2,3"), busbw("2,3,4,5")
    assert with5 < 0.6 * healthy  # Gen3 has a quarter of Gen5's bandwidth; 1 MB is mostly bandwidth
    twin = json.loads((sb.root / ".sim" / "twin.json").read_text())
    link = twin_perf.link_bw_factor(twin["hardware"], list(range(8)))
    assert link == pytest.approx(twin_perf.LANE_GBS[3] / twin_perf.LANE_GBS[5])
    now = predict(sb)
    # decode pays calls x (all-reduce(14 KB) at the slow link - at the full link): what physics says
    nbytes = 1 * 7168 * 2
    ar = twin["allreduce"]
    extra = twin["perf"]["allreduce_per_forward"] * (twin_perf.allreduce_us(ar, {}, nbytes, 8, 8, link)
                                                     - twin_perf.allreduce_us(ar, {}, nbytes, 8, 8)) / 1000
    base = predict(sb, speculative=False)
    assert base.t_decode_ms == pytest.approx(load_scenario("pcie-downtrained").perf.decode_ms + extra, rel=1e-6)
    assert extra > 0.5 and now.link_factor == pytest.approx(link)
    # the same box on an NVLink fabric would not care about the PCIe link
    twin["hardware"]["interconnect"] = "nvlink"
    assert twin_perf.link_bw_factor(twin["hardware"], [5]) == 1.0


# -- acceptance follows the draft ----------------------------------------------------------------------------

def test_acceptance_follows_the_draft_named_in_the_launch(tmp_path):
    path = tmp_path / "draft.yaml"
    path.write_text(textwrap.dedent("""
        extends: draft-path-changed
        name: draft-cond
        perf:
          effects:
            - id: old-draft-vocab
              when: {args: {speculative_draft_model_path: "{models}/EAGLE3-LLaMA3.1-Instruct-70B/"}}
              draft_ms: 0.2
    """))
    sb = build_sandbox(load_scenario(path), start_server=False, port=free_port())
    try:
        old = predict(sb)
        good = sb.launch.replace("EAGLE3-LLaMA3.1-Instruct-70B", "EAGLE3-LLaMA3.3-Instruct-70B")
        new = predict(sb, launch=good)
        assert old.accept_length == pytest.approx(twin_perf.accept_length(0.6, 3))
        assert new.accept_length == pytest.approx(twin_perf.accept_length(0.75, 3))
        # an effect condition on a path, written with a placeholder (and a trailing slash), matches the launch
        assert old.effects == ["old-draft-vocab"] and new.effects == []
        assert json.loads((Path(sb.root) / "models/EAGLE3-LLaMA3.1-Instruct-70B/config.json").read_text())[
            "architectures"] == ["LlamaForCausalLMEagle3"]
    finally:
        sb.remove()


# -- version fidelity ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["seed", "no-regression"])
def test_version_facts_match_sglang_sources(local_box, name):
    box = local_box(name)
    sb = box.sandbox
    old = sb.scenario.sglang.version == "0.5.9"
    get = lambda p: httpx.get(f"http://127.0.0.1:{sb.port}{p}", timeout=10)  # noqa: E731
    # entrypoints/http_server.py (0.5.9 and 0.5.23): both /server_info and /get_server_info are routes, the old
    # one logs "Endpoint '/get_server_info' is deprecated ..."; the same for /get_model_info.
    assert get("/server_info").status_code == get("/get_server_info").status_code == 200
    assert get("/get_model_info").status_code == 200
    # entrypoints/http_server.py: /ready exists only in 0.5.23.
    assert get("/ready").status_code == (404 if old else 200)
    info = get("/server_info").json()
    # 0.5.9 server_info: {**asdict(server_args), **scheduler_info, internal_states, version}; 0.5.23 adds
    # startup_time, frontend and build_server_info's launch_command (entrypoints/http_server.py, utils/common.py).
    for key in ("startup_time", "launch_command", "frontend"):
        assert (key in info) is (not old), key
    assert {"status", "max_total_num_tokens", "max_req_input_len"} <= set(info)  # managers/scheduler.py get_init_info
    # 0.5.9 only: /weight_version answers 404 with a deprecation detail (entrypoints/http_server.py).
    if old:
        assert "deprecated" in get("/weight_version").json()["detail"]
    meta = _gen(sb.port, n=256)
    # managers/tokenizer_manager.py: 0.5.9 total_retractions, spec_accept_token_num/spec_draft_token_num;
    # 0.5.23 num_retractions, reasoning_tokens, spec_num_correct_drafts/spec_num_proposed_drafts.
    v9 = {"total_retractions", "spec_accept_token_num", "spec_draft_token_num"}
    v23 = {"num_retractions", "reasoning_tokens", "spec_num_correct_drafts", "spec_num_proposed_drafts"}
    assert v9 <= set(meta) if old else v23 <= set(meta)
    assert not (v23 & set(meta)) if old else not (v9 & set(meta))
    # spec_accept_length = completion_tokens / spec_verify_ct (both versions).
    assert meta["spec_accept_length"] == pytest.approx(meta["completion_tokens"] / meta["spec_verify_ct"])
    log = box.host.read(sb.server_log).decode()
    assert "Endpoint '/get_server_info' is deprecated and will be removed in a future version. " \
           "Please use '/server_info' instead." in log
    assert "Endpoint '/get_model_info' is deprecated" in log
    # 0.5.9 managers/scheduler_metrics_mixin.py, 0.5.23 managers/scheduler_components/metrics_reporter.py:
    # f"Decode batch, #running-req: {n}, #token: {t}, token usage: {u:.2f}, accept len: {a:.2f}, accept rate:
    # {r:.2f}, cuda graph: {g}, gen throughput (token/s): {x:.2f}, #queue-req: {q}"
    pat = re.compile(r"\] Decode batch, #running-req: \d+, #token: \d+, token usage: \d\.\d\d, accept len: "
                     r"(\d\.\d\d), accept rate: (\d\.\d\d), cuda graph: (True|False), gen throughput \(token/s\): "
                     r"\d+\.\d\d, #queue-req: \d+$")
    ticks = [pat.search(ln) for ln in _decode_lines(log)]
    assert ticks and all(ticks)
    # accept rate: 0.5.9 = accepted tokens incl. bonus / (forward_ct * num_draft_tokens); 0.5.23 = correct drafts /
    # (forward_ct * (num_draft_tokens - 1)) -- so with the same accept length 0.5.9 reports a higher rate.
    nd = info["speculative_num_draft_tokens"]
    acc, rate = float(ticks[-1].group(1)), float(ticks[-1].group(2))
    assert rate == pytest.approx(acc / nd if old else (acc - 1) / (nd - 1), abs=0.02)


def test_missing_essential_patch_traceback_names_real_module_paths(local_box):
    box = local_box("seed", start=False)
    sb, host = box.sandbox, box.host
    host.run(["git", "-C", sb.repo, "stash"])
    res = sb.launch_server(host)
    assert not res.healthy
    log = host.read(res.log).decode()
    pkg = f"{sb.repo}/python/sglang"
    # 0.5.9: managers/scheduler.py:3130 run_scheduler_process -> model_executor/model_runner.py:1906 _dummy_run
    assert f'File "{pkg}/srt/managers/scheduler.py", line 3130, in run_scheduler_process' in log
    assert f'File "{pkg}/srt/model_executor/model_runner.py", line 1906, in _dummy_run' in log
    kimi = Path(sb.repo) / "python/sglang/srt/models/kimi_k25.py"
    anchor = next(i for i, ln in enumerate(kimi.read_text().splitlines(), 1) if "return self.language_model(" in ln)
    assert f'File "{kimi}", line {anchor}, in <module>' in log  # the patch's own file, where it hangs
    assert "/models/kimi_k25.py" in log and "site-packages/sglang/srt/models" not in log


def test_scenarios_can_add_files_to_the_base_tree(local_box):
    box = local_box("sitecustomize-foreign", start=False)
    repo = box.sandbox.repo
    tracked = box.host.run(["git", "-C", repo, "ls-files"]).stdout.split()
    assert "python/sglang/srt/models/qwen2.py" in tracked  # committed with the base
    status = box.host.run(["git", "-C", repo, "status", "--short"]).stdout
    assert " M python/sglang/srt/models/qwen2.py" in status  # and patched on top, like any base file


# -- several servers on one box -------------------------------------------------------------------------------

def test_another_users_server_runs_beside_ours(local_box):
    box = local_box("second-user-server")
    sb, host = box.sandbox, box.host
    ours = set(sb.server_pids())
    theirs = {pid for pid, _ in sb.other_server_pids()}
    assert ours and theirs and not ours & theirs
    their_main = min(theirs)
    assert Path(f"/proc/{their_main}/cwd").resolve() == (sb.root / "srv/alice/sglang").resolve()
    assert box.environ(their_main)["USER"] == "alice"
    apps = host.run(["nvidia-smi", "--query-compute-apps=pid,gpu_bus_id", "--format=csv,noheader"]).stdout
    bus = host.run(["nvidia-smi", "--query-gpu=pci.bus_id", "--format=csv,noheader"]).stdout.split()
    gpu_of = {int(line.split(", ")[0]): bus.index(line.split(", ")[1]) for line in apps.splitlines()}
    assert sorted(g for p, g in gpu_of.items() if p in ours) == [0, 1, 2, 3]
    assert sorted(g for p, g in gpu_of.items() if p in theirs) == [4, 5, 6, 7]
    ports = {json.loads(f.read_text())["port"] for f in (sb.root / "run/pids").glob("*.json")}
    assert len(ports) == 2 and sb.port in ports
    other = next(p for p in ports if p != sb.port)
    info = httpx.get(f"http://127.0.0.1:{other}/server_info", timeout=10).json()
    assert info["model_path"].endswith("Llama-3.1-8B-Instruct") and info["speculative_algorithm"] is None
    # her checkout carries none of our patches: her numbers do not follow our working tree
    assert _gen(other, n=32)["completion_tokens"] == 32


# -- workload ----------------------------------------------------------------------------------------------------

def test_step_times_and_acceptance_follow_the_request_shape(local_box):
    box = local_box("workload-mismatch")
    port = box.sandbox.port
    short = [_gen(port, n=128) for _ in range(4)]
    long_text = "Summarise this report. " + "The quarterly numbers were steady across regions. " * 450
    long = [_gen(port, text=long_text, n=128) for _ in range(4)]

    def per_verify_ms(metas):
        return statistics.median(m["e2e_latency"] * 1000 / m["spec_verify_ct"] for m in metas)

    assert long[0]["prompt_tokens"] > 3000
    assert per_verify_ms(long) > per_verify_ms(short) + 0.5  # KV reads grow with the context (0.25 ms / 1k)
    chat = statistics.mean(m["spec_accept_length"] for m in short)
    code = statistics.mean(_gen(port, text="def fib(n):\n    '''Return the n-th Fibonacci number.'''",
                                n=256)["spec_accept_length"] for _ in range(4))
    assert code > chat + 0.25  # code prompts are easier to draft (the scenario's prompt kind)
    res = {"alpha": 0.7, "forced_accept_length": None, "alpha_per_temperature": -0.1, "prompt_kinds": []}
    assert twin_perf.alpha_for_request(res, "hi", 1.0) == pytest.approx(0.6)  # hotter sampling accepts less
    sb = box.sandbox
    assert predict(sb, prompt_tokens=4000, output_tokens=128).tps < predict(sb, prompt_tokens=14,
                                                                            output_tokens=128).tps


# -- hardware and software state ---------------------------------------------------------------------------------

def _query(host, fields: str, gpu: int = 0) -> list[str]:
    out = host.run(["nvidia-smi", f"--query-gpu={fields}", "--format=csv,noheader,nounits", "-i", str(gpu)]).stdout
    return [v.strip() for v in out.strip().split(",")]


def test_locked_clocks_and_power_cap_show_in_nvidia_smi_and_slow_the_model(local_box):
    box = local_box("clocks-locked")
    sm, sm_max, app = _query(box.host, "clocks.sm,clocks.max.sm,clocks_event_reasons.applications_clocks_setting")
    assert (sm, sm_max, app) == ("1200", "1980", "Active")
    assert predict(box.sandbox).hw_factor == pytest.approx(0.35 * 1980 / 1200 + 0.65)
    capped = local_box("power-cap")
    limit, default, sm, cap = _query(capped.host, "power.limit,power.default_limit,clocks.sm,"
                                                  "clocks_event_reasons.sw_power_cap")
    assert (float(limit), float(default), cap) == (300.0, 700.0, "Active")
    assert int(sm) == round(1980 * (300 / 520) ** 0.5)
    assert predict(capped.sandbox).hw_factor > 1.1


def test_another_process_on_a_gpu_is_listed_and_slows_every_step(local_box):
    box = local_box("neighbor-training-job", start=False)
    sb, host = box.sandbox, box.host
    apps = host.run(["nvidia-smi", "--query-compute-apps=pid,process_name,used_memory",
                     "--format=csv,noheader,nounits"]).stdout.splitlines()
    pid = int((sb.root / "run/gpu-procs/finetune.pid").read_text())
    assert apps == [f"{pid}, python, 26000"]
    assert "finetune_lora.py" in box.proc_text(pid, "cmdline")
    assert predict(sb).hw_factor == pytest.approx(1 / 0.7)
    host.run(["kill", str(pid)])
    for _ in range(100):
        if predict(sb).hw_factor == 1.0:
            break
    assert predict(sb).hw_factor == 1.0
    assert host.run(["nvidia-smi", "--query-compute-apps=pid", "--format=csv,noheader"]).stdout.strip() == ""


def test_software_versions_and_persistence_are_scenario_knobs(tmp_path):
    path = tmp_path / "sw.yaml"
    path.write_text(textwrap.dedent("""
        extends: neighbor-training-job
        name: sw
        gpu_processes: []
        hardware: {driver: 535.230.02, cuda: "12.2", nccl: 2.21.5, torch: 2.6.0+cu124, persistence_mode: false}
        sglang: {version: 0.5.9, base: sglang-0.5.9}
        perf:
          effects:
            - {id: old-nccl, when: {versions: {nccl: [2.21.5, 2.22.3]}}, verify_ms: 1.0}
    """))
    sb = build_sandbox(load_scenario(path), start_server=False, port=free_port())
    try:
        from specdoctor.sim import SimHost

        host = SimHost(sb)
        run = lambda *a: host.run(list(a)).stdout  # noqa: E731
        assert run("nvidia-smi", "--query-gpu=driver_version,persistence_mode",
                   "--format=csv,noheader").splitlines()[0] == "535.230.02, Disabled"
        assert " Off |" in run("nvidia-smi").splitlines()[4]
        env = run("python", "-m", "sglang.check_env")
        assert "PyTorch: 2.6.0+cu124" in env and "nvidia-nccl-cu12: 2.21.5" in env and "sglang: 0.5.9" in env
        assert run("python", "-c", "import importlib.metadata as m; print(m.version('torch'))").strip() == "2.6.0+cu124"
        assert predict(sb).effects == ["old-nccl"]  # effects can key on the box's versions
    finally:
        sb.remove()


def test_login_profile_exports_reach_the_server_workers(local_box):
    box = local_box("bashrc-launch-blocking")
    sb = box.sandbox
    assert "export CUDA_LAUNCH_BLOCKING=1" in (sb.root / "home/.bashrc").read_text()
    assert sb.base_env["CUDA_LAUNCH_BLOCKING"] == "1" and sb.base_env["HF_HOME"] == "/data/hf-cache"
    workers = sb.server_pids()[1:5]
    assert all(box.environ(p)["CUDA_LAUNCH_BLOCKING"] == "1" for p in workers)
    assert predict(sb).effects == ["launch-blocking"]


def test_clock_event_reasons_follow_their_real_causes(local_box):
    """A consumer card below 'max' at its normal boost shows no reason; application clocks set below it do; a power
    cap binding at the default limit shows SW Power Cap and the draw at the cap (nvidia-smi -q's wording)."""
    boost = local_box("rtx4090-boost-normal", start=False)
    sm, sm_max, app, app_default, idle, reason, cap = _query(
        boost.host, "clocks.sm,clocks.max.sm,clocks.applications.graphics,clocks.default_applications.graphics,"
        "clocks_event_reasons.gpu_idle,clocks_event_reasons.applications_clocks_setting,"
        "clocks_event_reasons.sw_power_cap")
    assert (sm, sm_max, app, app_default, idle, reason, cap) == ("180", "3105", "[N/A]", "[N/A]", "Active",
                                                                  "Not Active", "Not Active")  # no load: idle
    q = boost.host.run(["nvidia-smi", "-q"]).stdout
    assert "    Product Brand                         : GeForce" in q and "Ada Lovelace" in q
    boost = local_box("rtx4090-boost-normal")
    sm, idle, reason, cap = _query(boost.host, "clocks.sm,clocks_event_reasons.gpu_idle,"
                                   "clocks_event_reasons.applications_clocks_setting,clocks_event_reasons.sw_power_cap")
    assert (sm, idle, reason, cap) == ("2730", "Not Active", "Not Active", "Not Active")  # its boost, no reason
    locked = local_box("l40s-clocks-locked")
    sm, app, app_default, reason = _query(locked.host, "clocks.sm,clocks.applications.graphics,"
                                          "clocks.default_applications.graphics,"
                                          "clocks_event_reasons.applications_clocks_setting")
    assert (sm, app, app_default, reason) == ("1590", "1590", "2520", "Active")
    at_default = local_box("l40s-power-at-default")
    sm, draw, limit, default, reason, cap = _query(at_default.host, "clocks.sm,power.draw,power.limit,"
                                                   "power.default_limit,clocks_event_reasons.applications_clocks_setting,"
                                                   "clocks_event_reasons.sw_power_cap")
    assert (int(sm), float(draw), float(limit), float(default), reason, cap) == (
        round(2520 * (350 / 380) ** 0.5), 350.0, 350.0, 350.0, "Not Active", "Active")
