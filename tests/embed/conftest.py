"""Fixtures for the embedding tests: a seeded simulated host, a throwaway git repo, an isolated HOME."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import specdoctor
from specdoctor.embed import Client

REPO_ROOT = Path(__file__).resolve().parents[2]
SPECDOCTOR = str(Path(sys.executable).with_name("specdoctor"))
SEED_FILES = 8  # the seed write-up's eight locally modified files


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *args],
                          check=True, capture_output=True, text=True).stdout


def tree_state(repo: Path) -> tuple[str, str, dict[str, str]]:
    """HEAD, porcelain status and a hash of every non-.git file: equal states mean byte-identical trees."""
    files = {str(p.relative_to(repo)): hashlib.sha256(p.read_bytes()).hexdigest()
             for p in sorted(repo.rglob("*")) if p.is_file() and ".git" not in p.relative_to(repo).parts}
    return git(repo, "rev-parse", "HEAD").strip(), git(repo, "status", "--porcelain=v1", "-uall"), files


@pytest.fixture(scope="session")
def seed() -> Iterator[Client]:
    """One read-only client on `sim:seed` for the whole session (the sandbox is built once)."""
    client = specdoctor.connect("sim:seed")
    try:
        yield client
    finally:
        client.close()


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An isolated HOME: specdoctor keeps backups and run files under ~/.specdoctor of the host user."""
    h = tmp_path / "home"
    h.mkdir()
    monkeypatch.setenv("HOME", str(h))
    return h


@pytest.fixture
def repo(tmp_path: Path, home: Path) -> Path:
    """A git checkout with a committed base, two modified files, one staged file and one untracked file."""
    r = tmp_path / "sglang"
    (r / "python" / "sglang" / "srt").mkdir(parents=True)
    files = {"python/sglang/srt/server_args.py": "ARGS = 1\n", "python/sglang/srt/eagle_worker.py": "STEPS = 3\n",
             "python/sglang/srt/utils.py": "def f():\n    return 1\n"}
    for path, text in files.items():
        (r / path).write_text(text)
    git(r, "init", "-q", "-b", "main")
    git(r, "add", "-A")
    git(r, "commit", "-qm", "base")
    (r / "python/sglang/srt/server_args.py").write_text("ARGS = 2\nimport os\nX = os.environ.get('SGLANG_X', '0')\n")
    (r / "python/sglang/srt/eagle_worker.py").write_text("STEPS = 5\n")
    (r / "python/sglang/srt/utils.py").write_text("def f():\n    return 2\n")
    git(r, "add", "python/sglang/srt/utils.py")
    (r / "patch_notes.txt").write_text("local experiment\n")
    return r


def child_env(home: Path, **extra: str) -> dict[str, str]:
    """Environment for a specdoctor subprocess: this venv first on PATH, the isolated HOME."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPECDOCTOR_")}
    env.update({"HOME": str(home), "PATH": f"{Path(sys.executable).parent}:{env.get('PATH', '')}"}, **extra)
    return env
