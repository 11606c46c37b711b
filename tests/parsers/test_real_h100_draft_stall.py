"""The real H100 draft-stall story (2026-12-06): what its one returned trace supports.

A sync + ~3 ms sleep at the start of `draft()` (eagle_worker_v2.py) was found and confirmed by bisection, but no phase
was named: the parser took the draft range's first runtime call (a `cudaEventQuery`, or the patch's
`cudaDeviceSynchronize`) for its first launch, so the sleep after it was not the draft's host time. Only the fast arm
of the confirming comparison came back (`phases-rest`: every patch but the culprit, the newest trace on the box when
the story ended); the slow arm's and the user's server's traces did not, so the stall itself is tested on the twin
(tests/sim/test_trace_conformance.py) and the real trace is tested for the launch it must skip and as a must-not-fire.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

from specdoctor.parsers.sglang_trace import parse_sglang_trace
from specdoctor.stats.phases import phase_effect
from specdoctor.tools.serving.phase_times import phases_from_trace

TRACES = Path(__file__).resolve().parents[1] / "fixtures" / "sglang-0.5.17-h100" / "trace"
REST = TRACES / "draft-stall-rest-TP-0.trace.json.gz"


def _real(name: str):
    return phases_from_trace(parse_sglang_trace((TRACES / name).read_bytes()), 3)


def test_a_draft_range_is_timed_from_its_first_launch_of_gpu_work_not_its_first_runtime_call():
    """In the real trace each draft range opens with a runtime call that launches nothing (a cudaEventQuery, ~0.04 ms
    before its first kernel launch): the host time inside the range runs to the launch, past that call."""
    events = json.load(gzip.open(REST, "rt"))["traceEvents"]
    calls = sorted((e for e in events if e.get("cat") in ("cuda_runtime", "cuda_driver") and e.get("ph") == "X"),
                   key=lambda e: e["ts"])
    ranges = [e for e in events if e.get("cat") == "user_annotation" and e.get("name") == "draft"]
    trace = parse_sglang_trace(REST.read_bytes())
    drafts = [r for r in trace.ranges if r.phase == "draft"]
    assert len(drafts) == len(ranges) >= 12
    skipped = 0
    for e, r in zip(sorted(ranges, key=lambda x: x["ts"]), drafts, strict=True):
        first = next(c for c in calls if e["ts"] <= c["ts"] <= e["ts"] + e["dur"] and c["tid"] == e["tid"])
        if first["name"] == "cudaEventQuery":
            skipped += 1
            assert r.host_inside_ms is not None and r.host_inside_ms > (first["ts"] - e["ts"]) / 1000.0 + 0.01
        assert r.host_inside_ms is not None and r.host_inside_ms < 0.2  # this arm has no stall
    assert skipped >= len(drafts) // 2


def test_the_real_rest_arm_against_an_earlier_clean_server_names_no_phase_and_a_stalled_verify_stays_verify():
    """Must not fire: the draft-stall story's fast arm (two innocent patches) against the clean server of an earlier
    H100 lease moved no phase, GPU or host; the earlier lease's stalled-verify server against it is still verify on
    the host basis (+4.6 ms)."""
    rest, clean = _real(REST.name), _real("clean-TP-0.trace.json.gz")
    assert phase_effect(rest, clean) is None and phase_effect(clean, rest) is None
    eff = phase_effect(_real("stalled-TP-0.trace.json.gz"), rest, "stalled vs rest")
    assert eff is not None and eff.phase == "verify" and eff.basis == "host" and 3.5 < eff.delta_ms < 5.5
