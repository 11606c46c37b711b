"""specdoctor's vLLM readers on what the real vLLM 0.26.0 wrote on the lent H100 (2026-12-06, first contact): the
launch line, the start-up log with and without --enforce-eager, the spec-decode counters of /metrics (the launch line
forced a mean acceptance length of 3.0 with vLLM's own synthetic rejection sampler)."""

from __future__ import annotations

from pathlib import Path

from specdoctor.inference import get_engine
from specdoctor.parsers.vllm import (
    accept_length_between,
    parse_vllm_metrics,
    spec_counters,
    startup_cuda_graph,
)

FIX = Path(__file__).resolve().parents[1] / "fixtures"
RUN = FIX / "real-vllm" / "h100-2026-12-06"


def test_the_launch_line_reads_as_vllm_read_it():
    args = get_engine("vllm").parse_launch((RUN / "launch.txt").read_text().strip())
    assert (args.port, args.tp_size, args.speculative_algorithm) == (30000, 1, "eagle3")
    assert (args.speculative_num_steps, args.speculative_num_draft_tokens) == (3, 4)  # k = 3, and k + 1 verified
    assert args.speculative_draft_model_path == "/box/models/draft" and args.attention_backend == "TRITON_ATTN"
    assert not args.disable_cuda_graph and args.problems == []


def test_cuda_graphs_read_from_the_real_start_up_logs():
    assert startup_cuda_graph((RUN / "server.log").read_text()) is True
    assert startup_cuda_graph((FIX / "vllm-0.26-h100" / "eager-server.log").read_text()) is False


def test_the_forced_acceptance_length_reads_back_from_the_counters():
    before = spec_counters((RUN / "metrics-before.txt").read_text())
    after = spec_counters((RUN / "metrics-after.txt").read_text())
    assert after.drafts > before.drafts
    assert accept_length_between(before, after) == 3.0  # 1 + accepted / drafts, as synthetic_acceptance_length said
    # prometheus_client's `_created` gauges (a start time each) are not counters: never read as one
    metrics = parse_vllm_metrics((RUN / "metrics-after.txt").read_text())
    assert all(v < 1e9 for k, v in metrics.items() if "spec_decode" in k and not k.endswith("_created"))
