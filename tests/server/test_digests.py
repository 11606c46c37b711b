"""Content digests: equal only for byte-identical checkouts, launch lines and worker variables."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from specdoctor.sim.digest import code_digest as twin_digest
from specdoctor.tools.environment.digests import (
    CODE_DIGEST_SCRIPT,
    env_digest,
    launch_digest,
    parse_code_digest,
)


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *args], check=True,
                   capture_output=True)


def _digest(repo: Path) -> str | None:
    res = subprocess.run(["bash", "-c", CODE_DIGEST_SCRIPT], capture_output=True, text=True,
                         env={**os.environ, "SD_REPO": str(repo)}, check=False)
    return parse_code_digest(res.stdout)


def test_code_digest_changes_with_one_byte_anywhere_the_server_could_import_it(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q")
    (repo / ".gitignore").write_text("*.log\n")
    (repo / "a.py").write_text("x = 1\n")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "base")
    (repo / "a.py").write_text("x = 2\n")          # a local patch
    (repo / "new.py").write_text("y = 1\n")        # an untracked file
    first = _digest(repo)
    assert first is not None and first == twin_digest(repo, dict(os.environ))  # the twin reads the same recipe
    assert _digest(repo) == first                                             # deterministic
    (repo / "server.log").write_text("ignored\n")  # ignored files are not code
    assert _digest(repo) == first
    (repo / "new.py").write_text("y = 2\n")        # one byte in an untracked file
    untracked = _digest(repo)
    assert untracked != first
    (repo / "new.py").write_text("y = 1\n")
    (repo / "a.py").write_text("x = 3\n")          # one byte in a tracked file
    assert _digest(repo) not in (first, untracked)
    (repo / "a.py").write_text("x = 2\n")
    _git(repo, "add", "a.py")                      # staging changes nothing: the diff is against HEAD
    assert _digest(repo) == first
    _git(repo, "commit", "-qm", "patch committed")  # same files, another HEAD: not the same checkout
    assert _digest(repo) != first


def test_no_digest_outside_a_checkout(tmp_path):
    assert _digest(tmp_path / "missing") is None


def test_launch_digest_ignores_port_and_host_only():
    a = "python -m sglang.launch_server --model-path /m --tp-size 2 --port 30000 --host 0.0.0.0"
    assert launch_digest(a) == launch_digest("python -m sglang.launch_server --model-path /m --tp-size 2 --port=31000")
    assert launch_digest(a) != launch_digest(a + " --disable-cuda-graph")
    assert launch_digest(a) != launch_digest(a.replace("--tp-size 2", "--tp-size 4"))
    assert launch_digest(None) is None


def test_env_digest_is_order_free_and_value_exact():
    assert env_digest({"A": "1", "B": "2"}) == env_digest({"B": "2", "A": "1"})
    assert env_digest({"A": "1"}) != env_digest({"A": "1 "}) and env_digest({}) != env_digest({"A": ""})
    assert env_digest(None) is None
