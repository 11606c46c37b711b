"""Fixtures for the repository-tool tests: messy checkouts on LocalHost and over the loopback sshd."""

from __future__ import annotations

import itertools
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from helpers import make_messy_repo  # noqa: E402

from specdoctor.host import LocalHost  # noqa: E402
from specdoctor.inference import get_engine
from specdoctor.toolkit import ToolContext  # noqa: E402

SGLANG = get_engine("sglang")  # these tools act on an SGLang checkout: no detection from stray processes

_n = itertools.count()


@pytest.fixture()
def local_repo(tmp_path: Path) -> Iterator[tuple[LocalHost, str]]:
    """A messy checkout on LocalHost, with HOME (so ~/.specdoctor) inside tmp_path."""
    home = tmp_path / "home"
    home.mkdir()
    host = LocalHost(base_env={"HOME": str(home)})
    repo = str(tmp_path / "repo")
    make_messy_repo(host, repo)
    yield host, repo


@pytest.fixture()
def local_ctx(local_repo: tuple[LocalHost, str]) -> tuple[ToolContext, str]:
    host, repo = local_repo
    return ToolContext(host=host, run_id=f"run{os.getpid()}", auto_approve=True, run_engine=SGLANG), repo


@pytest.fixture()
def ssh_case(sshd):
    """(connect(), repo path, home) for a fresh messy checkout created by the ssh user itself."""
    i = next(_n)
    home = f"{sshd.workdir}/home{i}"
    repo = f"{sshd.workdir}/repo{i}"

    def connect():
        return sshd.connect(base_env={"HOME": home})

    with connect() as h:
        h.run(["mkdir", "-p", home])
        make_messy_repo(h, repo)
    return connect, repo, home
