"""Servers that never get healthy, crash mid-benchmark, sit on a busy port or answer garbage: outcomes, not crashes."""

from __future__ import annotations

import json
import os
import random
import signal
import socket
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from specdoctor.host import LocalHost
from specdoctor.inference import get_engine
from specdoctor.sim.ports import free_port as _port  # below the ephemeral range: no bind race
from specdoctor.toolkit import ToolContext, registry

FAKE = Path(__file__).resolve().parents[1] / "server" / "fakesglang"
HANG = Path(__file__).resolve().parent / "fakes" / "hang"


@pytest.fixture()
def ctx(tmp_path) -> Iterator[ToolContext]:
    host = LocalHost(base_env={"PYTHONPATH": str(FAKE), "HOME": str(tmp_path), "FAKE_MS_PER_TOKEN": "3"})
    c = ToolContext(host=host, run_id="srvfault", auto_approve=True, run_engine=get_engine("sglang"))
    yield c
    registry.call(c, "stop_server", {"grace_s": 2})


def _launch(ctx, port, **kw):
    return registry.call(ctx, "launch_server", {"command": f"python3 -m sglang.launch_server --model /m --port {port}",
                                                "python": sys.executable, "label": "t", **kw})


def test_never_healthy_is_unresolved_with_the_log_tail_and_nothing_left_running(ctx):
    ctx.host.base_env["PYTHONPATH"] = str(HANG)
    r = _launch(ctx, _port(), timeout_s=2)
    assert r.status == "unresolved" and "not healthy after 2s" in r.summary
    assert "loading weights" in r.output["log_tail"]
    pgid = r.output["pgid"]
    assert not [p for p in Path("/proc").iterdir() if p.name.isdigit() and _pgid(p) == pgid]


def _pgid(p: Path) -> int | None:
    """The process group of a live (non-zombie) process."""
    try:
        fields = p.joinpath("stat").read_text().rsplit(")", 1)[1].split()
        return None if fields[0] in ("Z", "X") else int(fields[2])
    except (OSError, ValueError, IndexError):
        return None


def test_port_already_in_use_is_refused_before_starting(ctx):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(1)
        r = _launch(ctx, s.getsockname()[1], timeout_s=5)
    assert r.status == "error" and "busy" in r.summary and r.retryable
    assert not any("setsid" in e.command for e in r.evidence)


def test_crash_mid_benchmark_is_an_outcome_with_a_reason(ctx):
    port = _port()
    up = _launch(ctx, port, timeout_s=30)
    assert up.ok, up.summary
    timer = threading.Timer(0.4, os.killpg, (up.output["pgid"], signal.SIGKILL))
    timer.start()
    r = registry.call(ctx, "benchmark", {"port": port, "runs": 30, "requests_per_run": 2, "max_new_tokens": 40,
                                         "warmup_runs": 0, "timeout_s": 5, "log_path": up.output["log_path"]})
    timer.join()
    assert r.status in ("error", "unresolved", "no_data"), r.summary
    assert r.summary and len(r.summary.splitlines()) <= 3


class _Stub(BaseHTTPRequestHandler):
    """Answers every path with the class's `body` (and `status`), like a proxy error page or an old server."""

    body = b""
    status = 200
    ctype = "application/json"

    def _answer(self) -> None:
        self.send_response(self.status)
        self.send_header("Content-Type", self.ctype)
        self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)

    do_GET = do_POST = _answer

    def log_message(self, *a) -> None:
        return None


HTML = b"<!DOCTYPE html><html><head><title>502 Bad Gateway</title></head><body>nginx</body></html>"
OLD = json.dumps({"text": "x " * 20, "meta_info": {"completion_tokens": 20, "prompt_tokens": 9,
                                                  "spec_accept_token_num": 31, "spec_verify_ct": 10,
                                                  "finish_reason": "length"}}).encode()


@pytest.mark.parametrize(("name", "body", "status", "ctype"), [
    ("html error page", HTML, 502, "text/html"),
    ("html with 200", HTML, 200, "text/html"),
    ("truncated json", b'{"text": "x", "meta_info": {"completion_tokens": 1', 200, "application/json"),
    ("json of the wrong shape", b'[1, 2, 3]', 200, "application/json"),
    ("empty body", b"", 200, "application/json"),
    ("binary garbage", bytes(random.Random(3).randrange(256) for _ in range(300)), 200, "application/octet-stream"),
    ("old field names", OLD, 200, "application/json"),
])
def test_garbage_or_old_answers_are_parsed_or_rejected_never_a_crash(tmp_path, name, body, status, ctype):
    handler = type("H", (_Stub,), {"body": body, "status": status, "ctype": ctype})
    srv = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        # the stub answers as SGLang does; named, as this machine's processes may show no server at all
        c = ToolContext(host=LocalHost(base_env={"HOME": str(tmp_path)}), run_id="stub", auto_approve=True,
                        run_engine=get_engine("sglang"))
        port = srv.server_address[1]
        info = registry.call(c, "server_info", {"port": port})
        bench = registry.call(c, "benchmark", {"port": port, "runs": 2, "requests_per_run": 1, "max_new_tokens": 20,
                                               "warmup_runs": 0, "timeout_s": 5})
    finally:
        srv.shutdown()
        srv.server_close()
    if name == "old field names":
        assert bench.ok, bench.summary  # 0.5.9-era names are understood
        assert bench.output["samples"] and all(s > 0 for s in bench.output["samples"])
    else:
        for r in (info, bench):
            assert r.status in ("error", "no_data", "unresolved"), (name, r.tool, r.summary)
            assert r.summary.strip() and "Traceback" not in r.summary
        if "html" in name:
            assert "HTML" in bench.summary or "HTML" in info.summary or "502" in bench.summary + info.summary


def test_noise_too_high_for_the_comparator_is_unknown_with_the_numbers():
    rng = random.Random(7)
    a = [90 + rng.gauss(0, 30) for _ in range(12)]
    b = [92 + rng.gauss(0, 30) for _ in range(12)]
    c = ToolContext(host=LocalHost(), run_id="noise")
    r = registry.call(c, "compare_samples", {"a": a, "b": b, "unit": "tok/s", "higher_is_better": True,
                                             "magnitude": 2.0})
    assert r.ok and r.output["outcome"] == "UNKNOWN", r.output
    assert r.output["p_value"] is not None and r.output["delta_ci"]  # the numbers, not a guess


def test_unknown_comparisons_make_the_verdict_inconclusive():
    from specdoctor.diagnosis import Case, decide_verdict
    from specdoctor.engine.state import StateView

    facts = {"measure": {"baseline": {"median": 82.0, "samples": [40, 82, 120]},
                         "spec": {"median": 60.0, "samples": [20, 60, 110]}},
             "claims": {"baseline": {"claimed": 89, "outcome": "UNKNOWN"}, "spec": {"claimed": 94,
                                                                                    "outcome": "UNKNOWN"}}}
    v = decide_verdict(Case.of(StateView({"params": {}, "facts": facts, "results": {}})))
    assert v.verdict == "inconclusive" and any("could not decide" in r for r in v.reasons)
