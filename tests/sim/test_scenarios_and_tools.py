"""Scenario loading/validation, the scenarios CLI, and the stand-in nvidia-smi / all_reduce_perf."""

from __future__ import annotations

import json
import re
import textwrap

import httpx
import pytest
from typer.testing import CliRunner

from specdoctor.cli import app
from specdoctor.errors import ScenarioError
from specdoctor.sim import build_sandbox, list_scenarios, load_scenario, predict
from specdoctor.sim.standin.sglang._twin.perf import accept_length, alpha_for_accept_length

from .conftest import free_port

BUILTINS = {"seed", "single-culprit", "gate-leak", "lost-nccl-env", "nccl-win", "no-regression"}


def test_builtins_load_with_truth_and_claims():
    assert {n for n, _ in list_scenarios()} == BUILTINS  # per-scenario suites elsewhere run the first six
    corpus = {n for n, _ in list_scenarios(include_corpus=True)} - BUILTINS
    assert len(corpus) >= 18 and all(load_scenario(n).corpus for n in corpus)
    for name in BUILTINS:
        sc = load_scenario(name)
        assert sc.hints.expect.keys() == {"baseline", "spec"}
        assert all(c in {p.id for p in sc.sglang.patches} for c in sc.truth.culprits)
    seed = load_scenario("seed")
    assert len({p.file for p in seed.sglang.patches}) == 8
    assert [p.id for p in seed.sglang.patches if p.essential] == ["kimi-eagle3-delegation"]
    assert (2 * 0.5 + 29) / 12.2 == pytest.approx(seed.truth.breakeven_tau, abs=0.01)
    assert load_scenario("single-culprit").truth.culprits == ["verify-sync"]
    assert load_scenario("nccl-win").truth.nccl_win == {"NCCL_PROTO": "LL"}


def test_invalid_scenarios_are_refused(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("extends: seed\nname: bad\ntruth: {verdict: code-regression, culprits: [nope]}\n")
    with pytest.raises(ScenarioError, match="unknown culprit patch 'nope'"):
        load_scenario(bad)
    bad.write_text("extends: seed\nname: bad\nhardware: {gpu_count: 4}\n")
    with pytest.raises(ScenarioError, match="topology must be 4 rows"):
        load_scenario(bad)
    with pytest.raises(ScenarioError, match="no built-in scenario"):
        load_scenario("does-not-exist")


def test_accept_length_math_roundtrips():
    assert accept_length(0.53, 2) == pytest.approx(1.8109)
    for tau in (1.2, 1.8, 2.6):
        assert accept_length(alpha_for_accept_length(tau, 3), 3) == pytest.approx(tau, abs=1e-6)


def test_interacting_patches_only_act_together(tmp_path):
    """A custom YAML: two patches whose effect needs both; stashing either removes it."""
    path = tmp_path / "pair.yaml"
    path.write_text(textwrap.dedent("""
        extends: seed
        name: pair
        description: two patches that only slow verify together
        sitecustomize: null
        files: []
        sglang:
          use_patches: [kimi-eagle3-delegation, oea, embed-capture]
        perf:
          effects:
            - id: together
              when: {patches: [oea, embed-capture]}
              verify_ms: 10
        hints: {expect: {baseline: 82, spec: 60}, patch_script: null}
        truth: {verdict: code-regression, culprits: [oea, embed-capture]}
    """))
    sb = build_sandbox(load_scenario(path), start_server=False, port=free_port())
    try:
        assert predict(sb).effects == ["together"]
        deepseek = sb.root / "home/sglang/python/sglang/srt/models/deepseek_v2.py"
        original = deepseek.read_text()
        deepseek.write_text("\n".join(ln for ln in original.splitlines() if "capture_embeddings" not in ln))
        assert predict(sb).effects == []
        assert predict(sb).tps > 1.25 * (1.81 / 40 * 1000)
    finally:
        sb.remove()


def test_cli_list_and_show():
    runner = CliRunner()
    res = runner.invoke(app, ["scenarios", "list", "--json"])
    rows = json.loads(res.stdout)
    assert res.exit_code == 0 and {r["name"] for r in rows} >= BUILTINS and len(rows) >= 24
    seed_row = next(r for r in rows if r["name"] == "seed")
    assert seed_row["box"] == "8x NVIDIA RTX PRO 6000 Blackwell Server Edition (pcie)" and seed_row["sglang"] == "0.5.9"
    res = runner.invoke(app, ["scenarios", "show", "second-user-server"])
    assert "other server alice" in res.stdout and "GPUs 4,5,6,7" in res.stdout
    res = runner.invoke(app, ["scenarios", "show", "seed", "--json"])
    assert res.exit_code == 0
    shown = json.loads(res.stdout)
    assert "truth" not in shown and shown["hints"]["expect"] == {"baseline": 89.0, "spec": 94.0}
    res = runner.invoke(app, ["scenarios", "show", "gate-leak", "--json", "--truth"])
    assert json.loads(res.stdout)["truth"]["culprits"] == ["oea"]
    res = runner.invoke(app, ["scenarios", "show", "seed"])
    assert res.exit_code == 0 and "with 8 local patches" in res.stdout


def test_nvidia_smi_formats(local_box):
    box = local_box("seed")
    run = lambda *a: box.host.run(list(a)).stdout  # noqa: E731
    assert run("nvidia-smi", "-L").count("NVIDIA RTX PRO 6000 Blackwell Server Edition (UUID: GPU-") == 8
    csv = run("nvidia-smi", "--query-gpu=index,name,driver_version,pcie.link.gen.current,pcie.link.width.max,"
                            "clocks.max.sm,power.limit,persistence_mode", "--format=csv").splitlines()
    assert csv[0] == ("index, name, driver_version, pcie.link.gen.current, pcie.link.width.max, "
                      "clocks.max.sm [MHz], power.limit [W], persistence_mode")
    assert csv[1] == "0, NVIDIA RTX PRO 6000 Blackwell Server Edition, 580.95.05, 5, 16, 2617 MHz, 600.00 W, Enabled"
    assert run("nvidia-smi", "--query-gpu=memory.total", "--format=csv,noheader,nounits").split() == ["97894"] * 8
    topo = run("nvidia-smi", "topo", "-m").splitlines()
    assert topo[1].split("\t")[:4] == ["GPU0", " X ", "PIX", "NODE"] and "SYS" in topo[1]
    q = run("nvidia-smi", "-q", "-i", "3")
    assert re.search(r"GPU Link Info\n\s+PCIe Generation\n\s+Max\s+: 5\n\s+Current\s+: 5", q)
    assert re.search(r"Link Width\n\s+Max\s+: 16x\n\s+Current\s+: 16x", q) and "Driver Version" in q
    apps = run("nvidia-smi", "--query-compute-apps=pid,process_name,used_memory", "--format=csv").splitlines()
    assert apps[0] == "pid, process_name, used_gpu_memory [MiB]"
    assert [int(a.split(", ")[0]) for a in apps[1:]] == box.sandbox.server_pids()[1:9]
    assert box.host.run(["nvidia-smi", "--query-gpu=bogus", "--format=csv"], check="ignore").exit == 2


def _ar_times(out: str) -> dict[int, float]:
    rows = [ln.split() for ln in out.splitlines() if ln.strip() and not ln.startswith("#") and ln.split()[0].isdigit()]
    return {int(r[0]): float(r[5]) for r in rows}


def test_all_reduce_perf_table_json_and_nccl_win_agree_with_server(local_box, tmp_path):
    box = local_box("nccl-win", start=False)
    sb, host = box.sandbox, box.host
    cmd = ["all_reduce_perf", "-b", "14336", "-e", "43008", "-i", "28672", "-g", "8"]
    default = host.run(cmd).stdout
    assert "# nThread 1 nGpus 8 minBytes 14336 maxBytes 43008" in default and "# Avg bus bandwidth" in default
    assert "nccl-headers=22705" in default
    tuned = host.run([*cmd, "-J", str(tmp_path / "r.json")], env={"NCCL_PROTO": "LL", "NCCL_DEBUG": "INFO"}).stdout
    assert "NCCL INFO NCCL_PROTO set by environment to LL" in tuned
    d, t = _ar_times(default), _ar_times(tuned)
    assert t[43008] < 0.7 * d[43008]
    report = json.loads((tmp_path / "r.json").read_text())
    assert [r["size"] for r in report["results"]] == [14336, 43008] and report["env"]["NCCL_PROTO"] == "LL"
    # the server agrees: the same variable in the workers' env lowers verify (and so raises spec tok/s) >= 10 %
    base = predict(sb)
    win = predict(sb, worker_env={**sb.base_env, "NCCL_PROTO": "LL"})
    assert win.t_verify_ms < 0.9 * base.t_verify_ms
    res = sb.launch_server(host, env={"NCCL_PROTO": "LL"})
    assert res.healthy
    metas = [httpx.post(f"http://127.0.0.1:{sb.port}/generate", timeout=30,
                        json={"text": "x", "sampling_params": {"max_new_tokens": 256}}).json()["meta_info"]
             for _ in range(6)]
    tps = sorted(m["completion_tokens"] / m["e2e_latency"] for m in metas)[3]
    assert tps == pytest.approx(win.tps, rel=0.08) and tps > 1.08 * base.tps


def test_sitecustomize_does_not_reach_nccl_tests(local_box):
    """nccl-tests is a C binary: the seed's sitecustomize NCCL vars must not change its numbers."""
    box = local_box("seed", start=False)
    out = box.host.run(["all_reduce_perf", "-b", "8", "-e", "8", "-g", "8"], env={"NCCL_DEBUG": "INFO"}).stdout
    assert "NCCL_PROTO set by environment" not in out
    out = box.host.run(["python", "-c", "import os; print(os.environ.get('NCCL_PROTO'))"]).stdout
    assert out.strip() == "LL"  # but every Python process gets it
