"""Reverts as trial configurations: launch flags by the engine's spelling, env, and a shadow sitecustomize that
really runs the original and then puts the named variables back (checked with a real interpreter)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from specdoctor.host.local import LocalHost
from specdoctor.models import Revert
from specdoctor.toolkit import ToolContext
from specdoctor.tools.environment.revert import (
    apply_revert,
    merge_reverts,
    remove_written,
    reverted,
    set_flags,
)
from specdoctor.tools.serving.trial import LaunchConfig

LAUNCH = ("python -m sglang.launch_server --model-path /m --tp 2 --attention-backend triton "
          "--disable-cuda-graph --cuda-graph-bs 1 2 4 --port 30000")


def test_set_flags_replaces_removes_and_adds_by_dest_name():
    out = set_flags(LAUNCH, {"attention_backend": "fa3", "disable_cuda_graph": None, "cuda_graph_bs": None})
    assert out[:3] == ["python", "-m", "sglang.launch_server"]
    assert out[out.index("--attention-backend") + 1] == "fa3" and "triton" not in out
    assert "--disable-cuda-graph" not in out and "--cuda-graph-bs" not in out and "4" not in out
    assert out[out.index("--tp") + 1] == "2" and out[out.index("--port") + 1] == "30000"
    # '=value' spellings and abbreviations are the same flag; a flag the line lacks is added in canonical spelling
    out = set_flags("sglang serve --model-path /m --attention-back=triton", {"attention_backend": "fa3",
                                                                            "enable_metrics": ""})
    assert out == ["sglang", "serve", "--model-path", "/m", "--attention-back", "fa3", "--enable-metrics"]


def test_env_and_unset_reach_the_launch_line_prefix_too():
    cfg = LaunchConfig(command="NCCL_PROTO=Simple CUDA_LAUNCH_BLOCKING=1 python -m sglang.launch_server --model-path /m",
                       env={"CUDA_LAUNCH_BLOCKING": "1", "KEEP": "x"})
    ctx = ToolContext(host=LocalHost(), run_id="t")
    out = apply_revert(cfg, Revert(unset=["CUDA_LAUNCH_BLOCKING"], env={"NCCL_PROTO": "LL"}), ctx)
    assert out.command[:2] == ["NCCL_PROTO=LL", "python"]  # type: ignore[index]
    assert "CUDA_LAUNCH_BLOCKING" in out.unset and "CUDA_LAUNCH_BLOCKING" not in out.env
    assert out.env["NCCL_PROTO"] == "LL" and out.env["KEEP"] == "x"


def test_merge_keeps_every_part():
    m = merge_reverts([Revert(unset=["A"]), Revert(argv_set={"x": None}), Revert(undo_sitecustomize=["B"])])
    assert m.unset == ["A"] and m.argv_set == {"x": None} and m.undo_sitecustomize == ["B"]


def _env_after_startup(pythonpath: str, home: Path) -> dict[str, str]:
    code = "import json, os; print(json.dumps({k: os.environ.get(k) for k in ('FORCED', 'OTHER', 'ALREADY')}))"
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": pythonpath, "HOME": str(home), "ALREADY": "mine"}
    res = subprocess.run([sys.executable, "-S", "-c", f"import site; site.main(); {code}"], env=env,
                         capture_output=True, text=True, check=True)
    return json.loads(res.stdout.strip().splitlines()[-1])


def test_shadow_sitecustomize_runs_the_original_then_restores_the_variables(tmp_path: Path):
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(
        "import os\nos.environ['FORCED'] = '1'\nos.environ['OTHER'] = 'kept'\nos.environ['ALREADY'] = 'clobbered'\n")
    assert _env_after_startup(str(site), tmp_path) == {"FORCED": "1", "OTHER": "kept", "ALREADY": "clobbered"}
    ctx = ToolContext(host=LocalHost(base_env={"HOME": str(tmp_path)}), run_id="shadow")
    cfg = LaunchConfig(command=LAUNCH, python=sys.executable, env={"PYTHONPATH": str(site)})
    with reverted(ctx, cfg, Revert(undo_sitecustomize=["FORCED", "ALREADY"]), label="undo site") as out:
        shadow = out.env["PYTHONPATH"].split(":")[0]
        assert shadow.startswith(str(tmp_path / ".specdoctor" / "runs" / "shadow")) and Path(shadow).is_dir()
        # the original ran (OTHER), FORCED is gone again, ALREADY has the launch environment's value back
        assert _env_after_startup(out.env["PYTHONPATH"], tmp_path) == {"FORCED": None, "OTHER": "kept",
                                                                        "ALREADY": "mine"}
    assert not Path(shadow).exists()  # removed after the trial
    assert (site / "sitecustomize.py").read_text().startswith("import os")  # the user's file untouched


def test_remove_written_only_removes_below_the_run_folder(tmp_path: Path):
    ctx = ToolContext(host=LocalHost(base_env={"HOME": str(tmp_path)}), run_id="r")
    outside = tmp_path / "keep"
    outside.mkdir()
    written: list[str] = []
    apply_revert(LaunchConfig(command=LAUNCH, python=sys.executable), Revert(undo_sitecustomize=["X"]), ctx,
                 written=written)
    written.append(str(outside))
    gone = remove_written(ctx, written)
    assert outside.is_dir() and len(gone) == 1 and not Path(gone[0]).exists()
