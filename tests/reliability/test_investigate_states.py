"""A full `investigate` on the twin (subtraction and bisection in trial trees) leaves an awkward checkout identical."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from specdoctor.sim import SimHost, build_sandbox, load_scenario
from specdoctor.toolkit import ToolContext

from .investigate_states import investigate_states

# Every state in one checkout: they touch different paths (the submodule adds its own commit, CRLF its own
# .gitattributes), so none hides another; the per-state runs are benchmarks/reliability_report.py's.
COMBINED = ["gitignore-modified", "nested-gitignore", "assume-unchanged", "skip-worktree", "intent-to-add",
            "crlf-text-auto", "modes", "empty-dirs", "non-utf8", "big-untracked", "symlinks",
            "submodule-local-changes"]


@pytest.fixture()
def twin(tmp_path: Path):
    host = SimHost(build_sandbox(load_scenario("single-culprit"), tmp_path / "box"))
    try:
        yield host
    finally:
        host.close()


def test_full_investigate_with_every_state_leaves_the_checkout_identical(twin: SimHost, tmp_path: Path):
    res = investigate_states(twin, twin.sandbox.repo, COMBINED, tmp_path / "out")
    assert res.error is None, res.error
    assert res.subtracted and res.bisected, res  # the trials this is about did run, in trial trees
    assert res.identical, res.differences
    assert res.proof_identical is True, res  # the run's own proof agrees
    assert res.trees_left == [], res.trees_left


def test_a_second_run_on_a_locked_checkout_is_refused_in_one_line_naming_the_holder(twin: SimHost, tmp_path: Path):
    from specdoctor.tools.checkout.checkout_lock import acquire_lock

    ctx = ToolContext(host=twin, run_id="holder-run")
    acquire_lock(ctx, twin.sandbox.repo)  # held by this (live) test process
    env = {**os.environ, "SPECDOCTOR_HOME": str(tmp_path / "sdhome")}
    proc = subprocess.run([sys.executable, "-m", "specdoctor.cli", "investigate", "--host",
                           f"sim:attach={twin.sandbox.root}", "--yes", "--out", str(tmp_path / "out")],
                          env=env, capture_output=True, text=True, timeout=300)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 20, proc.stderr[-2000:]
    assert len(lines) == 1 and "run holder-run" in lines[0] and "Traceback" not in proc.stderr, proc.stderr
    assert not (tmp_path / "out" / "report.json").exists()  # refused before any step
    # (the refused process closed its `sim:attach` host, which takes the sandbox away: nothing more to read there)


def test_a_dead_runs_lock_is_taken_over_with_a_note(twin: SimHost, tmp_path: Path):
    from specdoctor.tools.checkout.checkout_lock import lock_path, read_lock

    ctx = ToolContext(host=twin, run_id="x")
    dead = subprocess.Popen(["true"])
    dead.wait()
    import socket

    body = {"run_id": "dead-run", "pid": dead.pid, "controller": socket.gethostname(), "user": "u",
            "host": twin.name, "checkout": twin.sandbox.repo}
    path = lock_path(ctx, twin.sandbox.repo)
    twin.run(["mkdir", "-p", str(Path(path).parent)])
    twin.put(json.dumps(body).encode(), path)
    from specdoctor.engine.checkout_guard import CheckoutGuard

    guard = CheckoutGuard(ctx, twin.sandbox.repo, "new-run")
    note = guard.acquire()
    assert note is not None and "dead-run" in note, note
    holder = read_lock(ctx, twin.sandbox.repo)
    assert holder is not None and holder.run_id == "new-run"
    guard.take_before()
    fact = guard.prove()
    guard.release()
    assert fact is not None and fact.identical is True and fact.lock_holder == "new-run" and "dead-run" in fact.note
    assert read_lock(ctx, twin.sandbox.repo) is None
