"""The product's parsers on real 0.5.17 text (fixtures); what they mis-read is xfail(strict) for the parser owner."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specdoctor.parsers.sglang import normalise_meta_info, parse_decode_lines
from specdoctor.parsers.sglang_startup import parse_startup

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "sglang-0.5.17-h200"


def test_decode_lines_are_read():
    lines = parse_decode_lines((FIX / "spec" / "server.log").read_text())
    assert lines and all(d.accept_len is not None and d.graph is True for d in lines)


@pytest.mark.xfail(strict=True, reason="parse_startup's _GRAPH_END knows 'Capture cuda graph end. Time elapsed: "
                   "X s' only; 0.5.17 logs 'Capture target prefill CUDA graph end. elapsed=44.32 s, ...' per phase")
def test_cuda_graph_seconds_are_read_from_the_capture_lines():
    assert parse_startup((FIX / "spec" / "server.log").read_text()).cuda_graph_s == pytest.approx(
        44.32 + 4.04 + 1.52 + 5.77 + 1.16, abs=0.05)


@pytest.mark.xfail(strict=True, reason="0.5.17's meta_info has no first_token_latency even with --enable-metrics; "
                   "the time to first token is prefill_finished_time - request_received_ts, which "
                   "normalise_meta_info does not read")
def test_first_token_latency_is_read_from_the_timestamps():
    meta = json.loads((FIX / "spec" / "generate.json").read_text())[0]["reply"]["json"]["meta_info"]
    assert normalise_meta_info(meta).first_token_latency is not None
