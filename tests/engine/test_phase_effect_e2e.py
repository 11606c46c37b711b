"""A patch that holds the host in verify is attributed to verify on the host basis (with a CI): the phase named is the
one the twin's story moves, never the other, and no GPU phase is said to move (investigate end to end on the twin).

The GPU-basis stories (verify-only-slowdown, draft-only-slowdown) and every other story with a phase truth are
checked the same way — phase, interval, size within a quarter of the truth, the other phase left alone — by
`benchmarks/diagnosis_accuracy.py` (`phase_check`); they re-tested this path here at ~3 CI minutes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specdoctor.engine.runner import InvestigateOptions, investigate
from specdoctor.sim import SimHost, build_sandbox, load_scenario


@pytest.fixture(autouse=True)
def _home(tmp_path, monkeypatch):
    monkeypatch.setenv("SPECDOCTOR_HOME", str(tmp_path / "home"))


def _investigate(name: str, tmp_path: Path) -> tuple[dict, str]:
    sb = build_sandbox(load_scenario(name), tmp_path / "box")
    host = SimHost(sb)
    try:
        out = investigate(InvestigateOptions(host=f"sim:{name}", yes=True, out=str(tmp_path / "out")), host=host)
        return json.loads(Path(out.files["json"]).read_text()), Path(out.files["md"]).read_text()
    finally:
        host.close()
        sb.remove()


@pytest.mark.parametrize("name", ["verify-host-stall"])
def test_the_culprit_s_phase_is_the_one_its_patch_slows(name, tmp_path):
    truth = load_scenario(name).truth
    assert truth.phase_effect is not None
    report, md = _investigate(name, tmp_path)
    assert sorted((report.get("stash") or {}).get("culprits") or []) == truth.culprit_files
    (cause,) = [c for c in report["attribution"]["causes"] if c["confirmed"]]
    eff = cause["phase_effect"]
    assert eff is not None, cause
    want, other = truth.phase_effect.phase, "draft" if truth.phase_effect.phase == "verify" else "verify"
    assert eff["phase"] == want and eff["source"].startswith("profiler-gpu")
    lo, hi = eff["ci"]
    assert 0 < lo <= eff["delta_ms"] <= hi
    assert eff["delta_ms"] == pytest.approx(truth.phase_effect.delta_ms, rel=0.25)
    deltas = {d["phase"]: d for d in eff["phases"]}
    basis = "host" if any(e.verify_host_ms for e in load_scenario(name).perf.effects) else "gpu"
    assert eff["basis"] == basis  # a host stall leaves the GPU time as it was: read where it shows
    deltas = {(d["phase"], d["basis"]): d for d in eff["phases"]}
    assert deltas[(want, basis)]["moved"] and not deltas[(other, basis)]["moved"]  # never the phase left alone
    if basis == "host":
        assert not any(d["moved"] for (_, b), d in deltas.items() if b == "gpu")
    # The report's attribution line states it beside the tok/s effect.
    per = "step" if want == "draft" else "cycle"
    assert f"({want} +" in md and f"per {per}" in md and "profiler-gpu" in md
