"""The profiler-trace parser on the real 0.5.17 trace: phase times are the GPU work, checked against hand sums."""

from __future__ import annotations

import gzip
import json
import statistics
from pathlib import Path

import pytest

from specdoctor.parsers.errors import ParseError
from specdoctor.parsers.sglang_trace import TRACE_NAME, parse_sglang_trace

TRACE = Path(__file__).resolve().parents[1] / "fixtures" / "sglang-0.5.17-h200" / "trace" / \
    "spec-1796176826.4640355-TP-0.trace.json.gz"


def _by_hand(cat: str, name: str) -> list[float]:
    """The durations of one named range, summed without the parser (no correlation, no cycles)."""
    events = json.loads(gzip.decompress(TRACE.read_bytes()))["traceEvents"]
    return [e["dur"] / 1000.0 for e in sorted(events, key=lambda e: e.get("ts", 0))
            if e.get("cat") == cat and e.get("name") == name]


@pytest.fixture(scope="module")
def trace():
    return parse_sglang_trace(TRACE.read_bytes())


def test_real_trace_phases_are_the_gpu_projection_of_each_range(trace):
    assert trace.gpu_annotations and trace.time_basis == "gpu"
    assert trace.cycles() == 12
    for phase, name in (("draft", "draft"), ("verify", "step[TARGET_VERIFY bs=1]")):
        assert trace.samples(phase) == pytest.approx(_by_hand("gpu_user_annotation", name))
        assert trace.cpu_samples(phase) == pytest.approx(_by_hand("user_annotation", name))
    assert statistics.median(trace.samples("verify")) == pytest.approx(1.8045, abs=1e-3)
    assert statistics.median(trace.samples("draft")) == pytest.approx(1.7634, abs=1e-3)


def test_prefill_draft_extend_is_not_a_cycle_sample(trace):
    every = _by_hand("gpu_user_annotation", "draft_extend")
    assert len(every) == 13 and len(trace.samples("draft_extend")) == 12
    assert trace.samples("draft_extend") == pytest.approx(every[1:])  # the first one runs in the prefill batch
    assert trace.samples("decode") == [] and len(trace.samples("extend")) == 2


def test_verify_cpu_range_is_launch_time_only(trace):
    """Graphs replay asynchronously: the CPU range closes before the verify's kernels are done."""
    v = [r for r in trace.ranges if r.phase == "verify"]
    assert all(r.gpu_ms is not None and r.cpu_ms < r.gpu_ms for r in v)
    assert all(r.kernels > 100 and 0 < (r.gpu_busy_ms or 0) <= (r.gpu_ms or 0) + 1e-6 for r in v)


def test_kernels_rebuild_the_projection_when_the_trace_lacks_it():
    doc = json.loads(gzip.decompress(TRACE.read_bytes()))
    doc["traceEvents"] = [e for e in doc["traceEvents"] if e.get("cat") != "gpu_user_annotation"]
    t = parse_sglang_trace(json.dumps(doc))
    assert not t.gpu_annotations and t.time_basis == "gpu"
    assert t.samples("verify") == pytest.approx(_by_hand("gpu_user_annotation", "step[TARGET_VERIFY bs=1]"),
                                                abs=1e-3)


def test_cpu_only_trace_times_the_ranges_on_the_cpu():
    doc = json.loads(gzip.decompress(TRACE.read_bytes()))
    doc["traceEvents"] = [e for e in doc["traceEvents"] if e.get("cat") in ("user_annotation", None)]
    t = parse_sglang_trace(json.dumps(doc).encode())
    assert t.time_basis == "cpu" and t.samples("verify") == pytest.approx(t.cpu_samples("verify"))


@pytest.mark.parametrize("data", [b"", b"\x1f\x8bnot gzip", b"[]", b'{"traceEvents": 3}', b"{\"traceEvents\": []}",
                                  b'{"traceEvents": [{"cat": "user_annotation", "ph": "X", "name": "draft"}]}',
                                  b'{"traceEvents": [{"cat": "user_annotation", "ph": "X", "name": "draft", '
                                  b'"ts": 1, "dur": "x"}]}',
                                  b'{"traceEvents": [{"cat": "gpu_user_annotation", "args": {"External id": []}}]}'])
def test_anything_else_is_a_parse_error(data):
    with pytest.raises(ParseError):
        parse_sglang_trace(data)


def test_trace_file_name_is_sglangs():
    m = TRACE_NAME.match(TRACE.name)
    assert m and m["prefix"] == "spec" and m["rank"] == "0"
