"""NVLink multicast stays off on the multi-GPU machines (#52): the real-SGLang runner's user server and every story
keep NCCL_NVLS_ENABLE=0, TORCH_SYMM_MEM_DISABLE_MULTICAST=1 and NVSHMEM_DISABLE_NVLS=1 whatever the story or
STORIES_ENV says, its launch line takes --tp-size at TP > 1 and never --enable-nccl-nvls, and specdoctor's NCCL sweep
never runs an NVLS setting."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

from specdoctor.tools.nccl.nccl_grid import DEFAULT_GRID, expand_grid

ROOT = Path(__file__).resolve().parents[2]
OFF = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}


def _stories(monkeypatch: pytest.MonkeyPatch, **env: str):
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    name = f"stories_nvls_{len(sys.modules)}"
    spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / "real_sglang" / "stories.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod  # its dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("tp", [1, 2, 4, 8])
def test_every_story_keeps_multicast_off_at_every_tp(monkeypatch: pytest.MonkeyPatch, tp: int) -> None:
    # a story or STORIES_ENV that asks for multicast does not get it
    mod = _stories(monkeypatch, STORIES_TP=str(tp), STORIES_ENV=json.dumps({"NCCL_NVLS_ENABLE": "1"}))
    for story in mod.STORIES.values():
        story.env = {**story.env, "NVSHMEM_DISABLE_NVLS": "0"}
        env = mod.user_env(story)
        assert {k: env[k] for k in OFF} == OFF, story.name
        argv = mod.launch_line(story)
        assert "--enable-nccl-nvls" not in argv
        assert (argv[argv.index("--tp-size") + 1] == str(tp)) if tp > 1 else "--tp-size" not in argv


def test_a_story_asking_for_nvls_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    mod = _stories(monkeypatch, STORIES_TP="8")
    story = next(iter(mod.STORIES.values()))
    story.extra_flags = ["--enable-nccl-nvls"]
    with pytest.raises(SystemExit, match="never"):
        mod.launch_line(story)


def test_the_nccl_sweep_never_runs_nvls() -> None:
    grid = {**DEFAULT_GRID, "NCCL_ALGO": [None, "Ring", "NVLS", "NVLSTree", "allreduce:nvls", "^NVLS"],
            "NCCL_NVLS_ENABLE": [None, "1"]}
    configs, skipped = expand_grid(grid, interconnect="nvlink")
    for c in configs:
        algo = c.env.get("NCCL_ALGO", "").split(":", 1)[-1]
        assert algo.startswith("^") or "NVLS" not in algo.upper(), c.label
        assert c.env.get("NCCL_NVLS_ENABLE", "0") == "0", c.label
    assert any("NVLS" in s.label for s in skipped) and all("multicast" in s.reason for s in skipped
                                                          if "NVLS" in s.label.upper())
    assert any(c.env.get("NCCL_ALGO") == "^NVLS" for c in configs)  # excluding NVLS is allowed
    default_configs, _ = expand_grid(None, interconnect="nvlink")
    assert default_configs and not any("NVLS" in c.label.upper() for c in default_configs)
