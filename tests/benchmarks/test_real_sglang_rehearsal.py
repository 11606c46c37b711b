"""The real-GPU story runner (benchmarks/real_sglang/stories.py), rehearsed on the twin: the same code that ran on the
H200 lays a box out, starts the user's server with nohup, measures the good run, runs `investigate --host local`
and checks the box afterwards — so the harness cannot rot between the sessions that have a GPU."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from specdoctor.sim.sandbox import build_sandbox

ROOT = Path(__file__).resolve().parents[2]


def test_the_no_regression_story_runs_on_the_twin(tmp_path):
    sb = build_sandbox("no-regression", root=tmp_path / "box", start_server=False)
    try:
        flags = sb.launch.split(" ", 3)[3]  # "python -m sglang.launch_server FLAGS"
        env = {**os.environ, **sb.base_env, "STORIES_ENGINE": "sglang", "STORIES_REPO": sb.repo, "STORIES_PY": sb.python,
               "STORIES_FLAGS": flags, "STORIES_PORT": str(sb.port), "STORIES_WORK": str(tmp_path / "work"),
               "STORIES_STATE": str(tmp_path / "state"), "STORY_TIMEOUT_S": "240",
               "STORIES_SPECDOCTOR": str(Path(sys.executable).parent / "specdoctor")}
        env.pop("PYTHONPATH", None)
        res = subprocess.run([sys.executable, str(ROOT / "benchmarks/real_sglang/stories.py"), str(tmp_path / "out"),
                              "no-regression"], env=env, capture_output=True, text=True, timeout=400)
        assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
        (row,) = json.loads((tmp_path / "out" / "summary.json").read_text())
        assert row["verdict"] == row["truth_verdict"] == "no-regression", row
        assert row["box_left_as_found"] is True and row["box_left_as_found_by_specdoctor"] is True
        claims = json.loads((tmp_path / "state" / "claims.json").read_text())
        assert claims["spec"] > 0  # the good run
        # specdoctor's own baseline when it launched one; when the speculative claims held on the running server it
        # ends without stopping it (#46), and then no baseline is measured and nothing is launched
        assert (row["launches"] or 0) == 0 and "baseline" not in claims or claims["baseline"] > 0
        box = json.loads((tmp_path / "out" / "no-regression" / "box.json").read_text())
        assert box["server_after"]["running"] and box["env_differences"] == [] and box["checkout_identical"]
    finally:
        sb.stop_all()


@pytest.mark.parametrize("mode", [["--phases-only", "no-regression"], ["phases:no-regression"]])
def test_the_phases_only_mode_profiles_a_story_server_on_the_twin(tmp_path, mode):
    """`stories.py OUT --phases-only STORY` (or `phases:STORY` among the stories): the server laid out, profiled by
    the read-only phase_times tool, the trace kept beside the figures, the server stopped afterwards."""
    sb = build_sandbox("no-regression", root=tmp_path / "box", start_server=False)
    try:
        flags = sb.launch.split(" ", 3)[3]
        prof = tmp_path / "prof"
        prof.mkdir()
        env = {**os.environ, **sb.base_env, "STORIES_ENGINE": "sglang", "STORIES_REPO": sb.repo, "STORIES_PY": sb.python,
               "STORIES_FLAGS": flags, "STORIES_PORT": str(sb.port), "STORIES_WORK": str(tmp_path / "work"),
               "STORIES_STATE": str(tmp_path / "state"),
               "STORIES_ENV": json.dumps({"SGLANG_TORCH_PROFILER_DIR": str(prof)})}
        env.pop("PYTHONPATH", None)
        res = subprocess.run([sys.executable, str(ROOT / "benchmarks/real_sglang/stories.py"), str(tmp_path / "out"),
                              *mode], env=env, capture_output=True, text=True, timeout=400)
        assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
        (row,) = json.loads((tmp_path / "out" / "phases.json").read_text())
        assert row["status"] == "ok", row
        pt = row["phase_times"]
        assert pt["source"] == "profiler-gpu" and pt["verify_ms"]["ms"] > 0 and pt["verify_ms"]["host_samples"] and pt["overhead"]["tps_with"] > 0
        assert (tmp_path / "out" / "no-regression" / "trace.json.gz").stat().st_size > 0
    finally:
        sb.stop_all()


def _load_stories():
    import importlib.util
    spec = importlib.util.spec_from_file_location("stories", ROOT / "benchmarks/real_sglang/stories.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("stories", mod)  # its dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


def test_the_seed_is_the_good_run_of_this_boxs_gpu_model(tmp_path):
    """A lease on another GPU model reads that model's good run when an earlier lease measured one (it saves the
    good run's ~200 device seconds), and the top folder's otherwise (the runner then measures a good run first)."""
    stories = _load_stories()

    def seed(folder: Path, gpu: str) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "claims.json").write_text(json.dumps({"spec": 1.0}))
        (folder / "good_fingerprint.json").write_text(json.dumps({"gpus": [{"name": gpu}]}))

    seed(tmp_path, "NVIDIA H200")
    seed(tmp_path / "seed-h100", "NVIDIA H100 80GB HBM3")
    (tmp_path / "code-regression").mkdir()  # a story's results: not a seed
    assert stories._seed_for(tmp_path, ["NVIDIA H100 80GB HBM3"]) == tmp_path / "seed-h100"
    assert stories._seed_for(tmp_path, ["NVIDIA H200"]) == tmp_path
    assert stories._seed_for(tmp_path, ["NVIDIA L40S"]) == tmp_path
