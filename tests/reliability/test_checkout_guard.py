"""The run's checkout guard on a real repo: the proof names a change, the lock is refreshed and released."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from specdoctor.engine import checkout_guard
from specdoctor.engine.checkout_guard import CheckoutGuard, manifest_path
from specdoctor.host import LocalHost
from specdoctor.toolkit import ToolContext
from specdoctor.tools.checkout.checkout_lock import lock_path, read_lock


@pytest.fixture()
def repo(tmp_path: Path) -> tuple[ToolContext, str]:
    home = tmp_path / "home"
    home.mkdir()
    host = LocalHost(base_env={"HOME": str(home)})
    r = str(tmp_path / "repo")
    host.run(["bash", "-c", f"git init -q {r} && cd {r} && printf a > a.txt && git add a.txt && "
              "git -c user.name=t -c user.email=t@t commit -qm a && printf secret > private.key && "
              "chmod 600 private.key"])
    return ToolContext(host=host, run_id="guard-run"), r


def test_the_proof_names_a_mode_change_git_does_not_see(repo):
    ctx, r = repo
    guard = CheckoutGuard(ctx, r, "guard-run")
    assert guard.acquire() is None
    guard.take_before()
    assert oct(os.stat(manifest_path("guard-run")).st_mode & 0o777) == "0o600"  # the user's paths: theirs only
    os.chmod(f"{r}/private.key", 0o644)  # what a careless restore did in round one: world-readable
    fact = guard.prove()
    guard.release()
    assert fact is not None and fact.identical is False and fact.manifest_before != fact.manifest_after
    assert any("private.key" in d and "0600 → 0644" in d for d in fact.differences), fact.differences
    assert guard.decision(fact).status == "error"
    assert read_lock(ctx, r) is None


def test_resume_compares_with_the_manifest_of_the_first_start(repo):
    ctx, r = repo
    first = CheckoutGuard(ctx, r, "guard-run")
    first.acquire()
    first.take_before()
    first.release()  # the controller died here (its lock is taken over below)
    Path(f"{r}/a.txt").write_text("changed while nobody watched")
    again = CheckoutGuard(ctx, r, "guard-run")
    again.acquire()
    again.take_before(resuming=True)
    fact = again.prove()
    again.release()
    assert fact is not None and fact.identical is False and any("a.txt" in d for d in fact.differences)


def test_progress_refreshes_the_lock_and_is_passed_on(repo, monkeypatch):
    ctx, r = repo
    guard = CheckoutGuard(ctx, r, "guard-run")
    guard.acquire()
    path = lock_path(ctx, r)
    os.utime(path, (1_000_000, 1_000_000))
    seen: list[str] = []
    monkeypatch.setattr(checkout_guard, "BEAT_EVERY_S", -1.0)
    guard.beating(seen.append)("step 3")
    assert seen == ["step 3"] and os.stat(path).st_mtime > 1_000_000
    guard.release()


def test_no_repo_no_lock_no_proof(repo):
    ctx, _r = repo
    guard = CheckoutGuard(ctx, None, "guard-run")
    assert guard.acquire() is None and guard.take_before() is None and guard.prove() is None
