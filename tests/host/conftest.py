"""Fixtures for Host-layer tests: the same semantic test runs over LocalHost and a real SSHHost."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from specdoctor.host import Host, LocalHost
from specdoctor.testing import SSHServer


@pytest.fixture(params=["local", "ssh"])
def host(request: pytest.FixtureRequest, sshd: SSHServer) -> Iterator[Host]:
    """A fresh host of each kind (fresh audit log); files go under `sshd.workdir`, writable by both."""
    h: Host = LocalHost() if request.param == "local" else sshd.connect()
    with h:
        yield h


@pytest.fixture
def workdir(sshd: SSHServer, request: pytest.FixtureRequest) -> str:
    """A per-test folder that both the local user and the ssh user can write."""
    import os
    import tempfile

    path = tempfile.mkdtemp(prefix=request.node.name[:20].replace("[", "_") + "-", dir=sshd.workdir)
    os.chmod(path, 0o777)
    return path
