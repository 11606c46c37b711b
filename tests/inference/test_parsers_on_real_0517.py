"""The product's parsers on real 0.5.17 text (fixtures): the start-up timings and meta_info fields it reads."""

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


def test_cuda_graph_seconds_are_read_from_the_capture_lines():
    assert parse_startup((FIX / "spec" / "server.log").read_text()).cuda_graph_s == pytest.approx(
        44.32 + 4.04 + 1.52 + 5.77 + 1.16, abs=0.05)


def test_first_token_latency_is_read_from_the_timestamps():
    """0.5.17 has no first_token_latency: prefill_finished_time - request_received_ts (the server's clock)."""
    meta = json.loads((FIX / "spec" / "generate.json").read_text())[0]["reply"]["json"]["meta_info"]
    ttft = normalise_meta_info(meta).first_token_latency
    assert ttft == pytest.approx(meta["prefill_finished_time"] - meta["request_received_ts"])
    assert 0 < ttft < meta["e2e_latency"]
    broken = {**meta, "prefill_finished_time": meta["request_received_ts"] - 1}  # a clock that makes no sense
    assert normalise_meta_info(broken).first_token_latency is None
