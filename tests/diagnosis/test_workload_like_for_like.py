"""A workload recorded behind the claims (good run or user) that differs from today's benchmark is measured too,
and the claims are compared like with like (workload-mismatch: code prompts accept more than chat prompts)."""

from __future__ import annotations

import types

from specdoctor.diagnosis.claims import claim_outcome
from specdoctor.engine.actions.measure import recorded_workload
from specdoctor.engine.runs import redact_deep
from specdoctor.engine.state import StateView
from specdoctor.host import open_host
from specdoctor.inference import get_engine
from specdoctor.toolkit import ToolContext, registry
from specdoctor.tools.serving.measure import PROMPTS, BenchmarkResult, Workload, default_workload


def _recorded(host, ctx):
    view = StateView({"params": {"good_fingerprint": host.hints.good_fingerprint}})
    return recorded_workload(types.SimpleNamespace(tool_ctx=ctx), view)


def test_claims_measured_on_code_prompts_hold_when_measured_like_for_like():
    with open_host("sim:workload-mismatch") as host:
        ctx = ToolContext(host=host, run_id="workload", auto_approve=True)
        found = _recorded(host, ctx)
        assert found is not None
        wl, source = found
        assert source == "the good run" and wl.dataset == "humaneval" and wl.output_tokens == 128
        diffs = wl.differs_from(default_workload(128))
        assert any(d.startswith("dataset") for d in diffs)
        base = {"port": get_engine("sglang").parse_launch(host.hints.launch).port, "runs": 8, "warmup_runs": 1}
        today = registry.call(ctx, "benchmark", base)
        alike = registry.call(ctx, "benchmark", {**base, "prompts": wl.request_prompts(),
                                                 "temperature": wl.temperature or 0.0})
    assert today.ok and alike.ok
    claimed = float(host.hints.expect["spec"])
    # chat prompts: ~17 % short in either reading
    assert claim_outcome(today.output["samples"], claimed, today.output["decode_samples"])["outcome"] == "DIFFERENT"
    # the claims' own workload reaches the claim within the benchmark's prefill share (its tok/s includes the
    # time to first token, ~3 % at 140-token prompts; the claim is decode throughput)
    assert abs(alike.output["median"] / claimed - 1) < 0.05 < abs(today.output["median"] / claimed - 1)
    # --enable-metrics: the server reports each request's first-token time; without the prefill the runs read higher
    assert alike.output["decode_samples"] and all(
        d > s for d, s in zip(alike.output["decode_samples"], alike.output["samples"], strict=True))
    assert {r["ttft_source"] for run in alike.output["runs"] for r in run["requests"]} == {"first_token_latency"}
    assert alike.output["accept_length"] > today.output["accept_length"] + 0.3
    # every figure states its workload: today's chat prompts, the claims' own prompts for the like-for-like run
    assert today.output["workload"]["prompts"] == list(PROMPTS) and today.output["workload"]["concurrency"] == 1
    assert alike.output["workload"]["prompts"] == wl.request_prompts()


def test_no_recorded_workload_changes_nothing():
    # must not fire: a good run without a workload (nccl-upgrade) and no good run at all
    with open_host("sim:nccl-upgrade") as host:
        ctx = ToolContext(host=host, run_id="workload-none", auto_approve=True)
        assert _recorded(host, ctx) is None
    assert recorded_workload(types.SimpleNamespace(tool_ctx=None), StateView({"params": {}})) is None


def test_a_recorded_example_is_stretched_to_its_length_and_differences_are_named():
    wl = Workload(dataset="humaneval", prompt_example="def f(x): return x", prompt_tokens=40, output_tokens=256,
                  temperature=0.0, concurrency=1)
    (prompt,) = wl.request_prompts()
    assert prompt.startswith("def f(x)") and 25 <= len(prompt.split()) <= 40
    diffs = wl.differs_from(default_workload(128))
    assert diffs == ["dataset: fixed chat prompts → humaneval", "output tokens: 128 → 256"]
    # today's own workload differs from nothing
    assert default_workload(128).differs_from(default_workload(128)) == []
    assert Workload(prompts=list(PROMPTS), output_tokens=128).differs_from(default_workload(128)) == []


def test_without_enable_metrics_a_one_token_request_times_the_prefill():
    # nccl-upgrade's server runs without --enable-metrics: meta_info has no first_token_latency, so the benchmark
    # measures the prefill of each prompt with a one-token request (its e2e latency) and subtracts it
    with open_host("sim:nccl-upgrade") as host:
        assert "--enable-metrics" not in host.hints.launch
        ctx = ToolContext(host=host, run_id="probe", auto_approve=True)
        res = registry.call(ctx, "benchmark", {"port": get_engine("sglang").parse_launch(host.hints.launch).port, "runs": 3,
                                               "requests_per_run": 2, "warmup_runs": 0})
    assert res.ok, res.summary
    reqs = [r for run in res.output["runs"] for r in run["requests"]]
    assert {r["ttft_source"] for r in reqs} == {"one-token probe"}
    assert all(0 < r["ttft_s"] < r["latency_s"] for r in reqs)
    # one probe per distinct prompt, the same value for each request with that prompt
    assert len({r["ttft_s"] for r in reqs}) <= len(PROMPTS)
    assert len(res.output["decode_samples"]) == 3
    # what a checkpoint keeps (redacted: a key naming a token is a secret) reads back as the same result on resume
    assert BenchmarkResult.model_validate(redact_deep(res.output)) == BenchmarkResult.model_validate(res.output)
    assert all(d > s for d, s in zip(res.output["decode_samples"], res.output["samples"], strict=True))
