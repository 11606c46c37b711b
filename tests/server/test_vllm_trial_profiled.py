"""A trial whose phases are read: vLLM 0.26 takes its profiler only at launch, so a profiled trial's own line carries
`--profiler-config` (the user's server is never relaunched with another line); SGLang's line is left as it is."""

from __future__ import annotations

import json

from specdoctor.inference import get_engine
from specdoctor.parsers.vllm import parse_vllm_launch
from specdoctor.sim import open_sim_host
from specdoctor.toolkit import ToolContext
from specdoctor.tools.serving.trial import AUTO_PORT, LaunchConfig, profile, profiled, trial

VLLM = get_engine("vllm", "0.26.0")
SERVE = ("vllm serve /m/Llama-3.1-8B-Instruct --speculative-config '{\"method\": \"eagle3\", \"model\": \"/m/d\", "
         "\"num_speculative_tokens\": 3}' --attention-backend TRITON_ATTN --port 8000")


def _profiler(argv: list[str]) -> dict:
    return parse_vllm_launch(argv).as_args().get("profiler_config") or {}


def test_a_vllm_line_without_a_torch_profiler_gets_one_into_the_given_folder():
    argv = VLLM.profiler_launch_argv(SERVE, "/h/.specdoctor/runs/r/profile")
    assert argv is not None and argv[:2] == ["vllm", "serve"]
    assert _profiler(argv) == {"profiler": "torch", "torch_profiler_dir": "/h/.specdoctor/runs/r/profile"}
    assert VLLM.profiler_plan(parse_vllm_launch(argv).as_args(), {}, "/x", 10).missing is None
    assert parse_vllm_launch(argv).speculative_num_steps == 3 and parse_vllm_launch(argv).port == 8000
    # a config that cannot give phases (no stack, another profiler) is replaced, never doubled
    for bad in (" --profiler-config.profiler torch --profiler-config.torch_profiler_dir /p "
                "--profiler-config.torch_profiler_with_stack false",
                " --profiler-config '{\"profiler\": \"cuda\"}'", " --profiler-config={\"profiler\":\"torch\"}"):
        fixed = VLLM.profiler_launch_argv(SERVE + bad, "/f")
        assert fixed is not None and sum(t.startswith("--profiler-config") for t in fixed) == 1, fixed
        assert _profiler(fixed) == {"profiler": "torch", "torch_profiler_dir": "/f"}


def test_a_line_that_profiles_already_and_an_sglang_line_are_kept_as_they_are():
    own = SERVE + " --profiler-config '" + json.dumps({"profiler": "torch", "torch_profiler_dir": "/mine"}) + "'"
    assert VLLM.profiler_launch_argv(own, "/f") is None
    sglang = "python -m sglang.launch_server --model-path /m --speculative-algorithm EAGLE3 --port 30000"
    assert get_engine("sglang").profiler_launch_argv(sglang, "/f") is None


def test_a_profiled_vllm_trial_on_the_twin_has_its_phases_read():
    """vllm-draft-sync's server runs without a profiler (phase_times on it is no_data); its trial is profiled."""
    with open_sim_host("vllm-draft-sync") as host:
        ctx = ToolContext(host=host, run_id="vllm-trial-phases", auto_approve=True)
        assert ctx.engine.name == "vllm" and "--profiler-config" not in host.hints.launch
        plain = LaunchConfig(command=host.hints.launch, port=AUTO_PORT, label="phases-t", timeout_s=60)
        config = profiled(ctx, plain)
        assert _profiler(config.command)["torch_profiler_dir"] == f"{ctx.run_dir}/profile"  # type: ignore[arg-type]
        host.sandbox.stop_all()  # type: ignore[attr-defined]  # the user's server holds the GPU (as a run stops it)
        with trial(ctx, config) as handle:
            times, why = profile(handle, requests_per_run=1, max_new_tokens=48)
    assert times is not None, why
    assert times.source == "profiler-gpu" and times.cycles > 0 and times.phases == ["draft", "verify", "sample"]
    assert times.draft_ms is not None and times.verify_ms is not None and times.draft_extend_ms is None
