"""Each engine's profiler plan: where phase_times finds the trace, what it posts, and when it cannot profile."""

from __future__ import annotations

from specdoctor.inference import VLLM_0_26_0, SGLang
from specdoctor.inference.profiling import ProfilerPlan
from specdoctor.parsers.sglang_trace import TRACE_NAME
from specdoctor.parsers.vllm_trace import RANK_TRACE, parse_vllm_trace
from specdoctor.tools.serving.phase_times import _pick

REAL_LINE = ("/VENV/bin/vllm serve /MODELS/target --load-format dummy --speculative-config '{\"method\":\"eagle3\","
             "\"model\":\"/MODELS/draft\",\"num_speculative_tokens\":3}' --profiler-config "
             "'{\"profiler\":\"torch\",\"torch_profiler_dir\":\"/HOME/prof\"}'")


def _vllm(line: str) -> ProfilerPlan:
    return VLLM_0_26_0.profiler_plan(VLLM_0_26_0.parse_launch(line).as_args(), {}, "/run/profile", 100)


def test_vllm_reads_the_rank_trace_from_the_launch_lines_profiler_dir_json_or_dotted():
    for line in (REAL_LINE, "vllm serve m --profiler-config.profiler torch --profiler-config.torch_profiler_dir=/HOME/prof"):
        plan = _vllm(line)
        assert plan.missing is None and plan.folder == "/HOME/prof" and plan.start_body is None
        assert plan.trace_name is RANK_TRACE and plan.parse is parse_vllm_trace and not plan.make_folder


def test_vllm_without_a_usable_torch_profiler_is_missing_with_one_line_saying_why():
    cases = {"vllm serve m": "no --profiler-config",
             "vllm serve m --profiler-config '{\"profiler\":\"cuda\"}'": "'cuda'",
             "vllm serve m --profiler-config '{\"profiler\":\"torch\"}'": "no torch_profiler_dir",
             REAL_LINE.replace("\"/HOME/prof\"}", "\"/HOME/prof\",\"torch_profiler_with_stack\":false}"): "with_stack"}
    for line, why in cases.items():
        plan = _vllm(line)
        assert plan.missing is not None and why in plan.missing and "\n" not in plan.missing, line


def test_sglang_plan_is_the_one_phase_times_always_used():
    plan = SGLang("0.5.17").profiler_plan({}, {"SGLANG_TORCH_PROFILER_DIR": "/p"}, "/run/profile", 50)
    assert plan.folder == "/p" and plan.trace_name is TRACE_NAME and plan.start_body is not None
    assert plan.start_body["num_steps"] == 50 and "output_dir" not in plan.start_body and plan.rank is None
    plan = SGLang("0.5.17").profiler_plan({}, {}, "/run/profile", 50)
    assert plan.folder == "/run/profile" and plan.make_folder and plan.start_body["output_dir"] == "/run/profile"


def test_the_newest_rank_zero_trace_is_read_not_another_ranks_or_the_api_servers():
    plan = _vllm(REAL_LINE)
    new = {"rank0.1796577052269873383.pt.trace.json.gz", "rank1.1796577052269873999.pt.trace.json.gz",
           "rank0.1796577052269873400.pt.trace.json.gz"}
    assert _pick(new, plan) == "rank0.1796577052269873400.pt.trace.json.gz"
    assert not RANK_TRACE.match("vm_1906.async_llm.1796577052114835927.pt.trace.json.gz")
