"""The vLLM story runner (benchmarks/real_vllm/stories.py), rehearsed on the twin's vLLM stand-in: the SGLang
runner's box code with vLLM's launch line, server processes and result rows lays the box out, starts the user's
`vllm serve` with nohup, measures the good run, runs `investigate --host local` and checks the box afterwards — so
the device run is only the GPU part."""

from __future__ import annotations

import importlib.util
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

from specdoctor.sim.sandbox import build_sandbox

ROOT = Path(__file__).resolve().parents[2]


def test_the_vllm_no_regression_story_runs_on_the_twin(tmp_path):
    sb = build_sandbox("vllm-no-regression", root=tmp_path / "box", start_server=False)
    try:
        flags = shlex.join(shlex.split(sb.launch)[2:])  # "vllm serve FLAGS"
        env = {**os.environ, **sb.base_env, "STORIES_REPO": sb.repo, "STORIES_PY": sb.python,
               "STORIES_FLAGS": flags, "STORIES_PORT": str(sb.port), "STORIES_WORK": str(tmp_path / "work"),
               "STORIES_STATE": str(tmp_path / "state"), "STORY_TIMEOUT_S": "240", "STORIES_SEED_STATE": "",
               "STORIES_ENGINE": "vllm",
               "STORIES_SPECDOCTOR": str(Path(sys.executable).parent / "specdoctor")}
        env.pop("PYTHONPATH", None)
        res = subprocess.run([sys.executable, str(ROOT / "benchmarks/real_vllm/stories.py"), str(tmp_path / "out"),
                              "no-regression"], env=env, capture_output=True, text=True, timeout=400)
        assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
        (row,) = json.loads((tmp_path / "out" / "summary.json").read_text())
        assert row["verdict"] == row["truth_verdict"] == "no-regression", row
        assert row["engine"] == "vllm" and row["engine_reported"] == "vllm" and row["engine_version"] == "0.26.0", row
        assert "sglang_version" not in row
        assert row["box_left_as_found"] is True and row["box_left_as_found_by_specdoctor"] is True
        assert json.loads((tmp_path / "state" / "claims.json").read_text())["spec"] > 0
        box = json.loads((tmp_path / "out" / "no-regression" / "box.json").read_text())
        assert box["server_after"]["running"] and box["env_differences"] == [] and box["checkout_identical"]
        assert "vllm" in " ".join(box["server_after"]["argv"][:3]) and "serve" in box["server_after"]["argv"]
    finally:
        sb.stop_all()


def _load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_launch_line_is_vllm_serve_with_a_forced_acceptance(monkeypatch):
    """The stories' own line: `vllm serve`, the speculative config a JSON vLLM's parser reads (synthetic
    acceptance: vLLM has no acceptance variable), dummy weights, the Triton backend, the profiler configured."""
    launch = _load("vllm_launch", ROOT / "benchmarks/real_vllm/launch.py")
    argv = launch.launch_argv(models="/m", port=30000, prof_dir="/p", extra=["--enforce-eager"], tp=2)
    assert argv[:3] == ["vllm", "serve", "/m/target"] and argv[-1] == "--enforce-eager"
    spec = json.loads(argv[argv.index("--speculative-config") + 1])
    assert spec == {"method": "eagle3", "model": "/m/draft", "num_speculative_tokens": 3,
                    "rejection_sample_method": "synthetic", "synthetic_acceptance_length": 3.0}
    assert argv[argv.index("--load-format") + 1] == "dummy"
    assert argv[argv.index("--attention-backend") + 1] == "TRITON_ATTN"
    assert json.loads(argv[argv.index("--profiler-config") + 1])["torch_profiler_dir"] == "/p"
    assert argv[argv.index("--tensor-parallel-size") + 1] == "2"
    # specdoctor reads the same line: the engine's own parser finds the draft and the forced acceptance
    from specdoctor.inference.vllm import VLLM_0_26_0

    parsed = VLLM_0_26_0.parse_launch(argv)
    assert parsed.flags and VLLM_0_26_0.is_main_process(argv)


def test_to_fixtures_writes_the_box_folders_out_and_refuses_a_secret(tmp_path):
    cap = tmp_path / "results" / "capture"
    cap.mkdir(parents=True)
    for f in ("version.json", "models.json", "metrics-before.txt", "metrics-after.txt", "server.log"):
        (cap / f).write_text('{"version": "0.26.0"}' if f == "version.json" else "model /root/models/target\n")
    (cap / "launch.txt").write_text("/usr/bin/vllm serve /root/models/target --port 30000\n")
    script = str(ROOT / "benchmarks/real_vllm/to_fixtures.py")
    res = subprocess.run([sys.executable, script, str(tmp_path / "results"), "h100", str(tmp_path / "fx")],
                         capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    assert (tmp_path / "fx/h100/launch.txt").read_text() == "/usr/bin/vllm serve /box/models/target --port 30000\n"
    assert "/root/" not in "".join(p.read_text() for p in (tmp_path / "fx/h100").iterdir())
    (cap / "server.log").write_text("HF_TOKEN=hf_" + "a" * 30 + "\n")
    res = subprocess.run([sys.executable, script, str(tmp_path / "results"), "h100b", str(tmp_path / "fx")],
                         capture_output=True, text=True)
    assert res.returncode != 0 and "secret" in res.stderr and not (tmp_path / "fx/h100b").exists()


def test_run_device_gathers_the_pieces_over_calls_and_joins_them_once_all_came(tmp_path):
    """Each call copies its carried piece to the machine's folder; only the last one's MANIFEST (count, sha256)
    lets them be joined, checked and unpacked — a corrupt piece stops the join."""
    house = tmp_path / "src" / "house" / "part1"
    house.mkdir(parents=True)
    (house / "x.bin").write_bytes(os.urandom(5000))
    subprocess.run(["tar", "-C", str(tmp_path / "src"), "-cf", str(tmp_path / "house.tar"), "house"], check=True)
    data = (tmp_path / "house.tar").read_bytes()
    checkout = tmp_path / "checkout"
    (checkout / "benchmarks").mkdir(parents=True)
    subprocess.run(["cp", "-r", str(ROOT / "benchmarks/real_vllm"), str(checkout / "benchmarks/")], check=True)
    import hashlib

    for k, chunk in enumerate((data[:4096], data[4096:8192], data[8192:]), start=1):
        (checkout / f".whl-vllm/call{k}").mkdir(parents=True)
        (checkout / f".whl-vllm/call{k}/house.tar.{k - 1}").write_bytes(chunk)
    (checkout / ".whl-vllm/call3/MANIFEST").write_text(f"pieces 3\n{hashlib.sha256(data).hexdigest()}  house.tar\n")
    env = {**os.environ, "VLLM_WH_DIR": str(tmp_path / "wh")}
    script = str(checkout / "benchmarks/real_vllm/run_device.sh")
    outs = [subprocess.run(["bash", script, "--piece", str(k)], env=env, capture_output=True, text=True)
            for k in (1, 2, 3)]
    assert [o.returncode for o in outs] == [0, 0, 0], [o.stdout + o.stderr for o in outs]
    assert "1 of ?" in outs[0].stdout and "2 of ?" in outs[1].stdout and "joined" in outs[2].stdout
    assert (tmp_path / "wh/house/part1/x.bin").read_bytes() == (house / "x.bin").read_bytes()
    assert not list((tmp_path / "wh").glob("house.tar*"))
    # a piece that changed on the way: the sha256 stops the join
    (checkout / ".whl-vllm/call2/house.tar.1").write_bytes(b"\0" * 4096)
    env["VLLM_WH_DIR"] = str(tmp_path / "wh2")
    outs = [subprocess.run(["bash", script, "--piece", str(k)], env=env, capture_output=True, text=True)
            for k in (1, 2, 3)]
    assert outs[2].returncode != 0 and not (tmp_path / "wh2/house").exists()
