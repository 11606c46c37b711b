"""Whole investigations over the loopback sshd reach their truth verdict and culprits and leave the tree as found.

Over the real sshd (the transport a user has, and the one the twin's in-process host does not exercise): one story
per kind of work the transport carries — a bisection over patches (single-culprit, which also bounds its
launches), an NCCL sweep with its `env -u` trials (lost-nccl-env), and a run that stops nothing (no-regression).
Every built-in and corpus story runs in process in `benchmarks/diagnosis_accuracy.py`, with the same checks (the
verdict, the culprits, the checkout left as found, the run complete) and more; the other first stories (seed,
gate-leak, nccl-win) and the in-process single-culprit moved there: they re-tested the same path here at about
five CI minutes of test time, for assertions that do not depend on the transport.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import pytest

from specdoctor.engine.runner import InvestigateOptions, investigate
from specdoctor.sim import build_sandbox, list_scenarios, load_scenario
from specdoctor.sim.ports import free_port as _free_port  # below the ephemeral range: no bind race

SCENARIOS = ["single-culprit", "lost-nccl-env", "no-regression"]


@pytest.fixture(autouse=True)
def _home(tmp_path, monkeypatch):
    monkeypatch.setenv("SPECDOCTOR_HOME", str(tmp_path / "home"))


@pytest.mark.parametrize("name", SCENARIOS, ids=[f"{n}-ssh" for n in SCENARIOS])
def test_scenario_reaches_its_truth(name, request, tmp_path, trial_envs_reached):
    truth = load_scenario(name).truth
    root = Path(tempfile.mkdtemp(prefix=f"e2e-{name}-"))
    os.chmod(root, 0o777)
    sb = build_sandbox(load_scenario(name), root, start_server=False, port=_free_port())
    host = request.getfixturevalue("sshd").connect(base_env=sb.base_env)
    host.hints = sb.hints
    try:
        if load_scenario(name).server.running:
            sb.start_server(host)
        before = sb.checkout_state(host)
        out = investigate(InvestigateOptions(host=f"ssh:{name}", yes=True, out=str(tmp_path / "out")), host=host)
        report = json.loads(Path(out.files["json"]).read_text())
        assert out.verdict == truth.verdict, report["summary"]
        culprits = sorted((report.get("stash") or {}).get("culprits") or [])
        assert culprits == sorted(truth.culprit_files)
        if name == "single-culprit":
            bisect = [d for d in report["decisions"] if d["step"] == "bisect"][0]
            launches = int(bisect["found"].split(" in ")[1].split()[0])
            assert launches <= 5, bisect["found"]
        assert sb.checkout_state(host) == before
        assert report["meta"]["status"] == "complete"
        trial_envs_reached()
    finally:
        host.close()
        sb.remove()


def test_the_first_stories_not_run_here_are_in_the_accuracy_benchmark():
    """The benchmark runs every built-in story by default; the ones moved out of this file must stay built-ins."""
    first = {name for name, _ in list_scenarios()}
    assert set(SCENARIOS) <= first
    assert {"seed", "gate-leak", "nccl-win", "single-culprit"} <= {n for n, _ in list_scenarios(include_corpus=True)}
