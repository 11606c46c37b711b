"""Fixtures for the twin's tests: a sandbox plus a Host reaching it locally (SimHost) or over the loopback sshd."""

from __future__ import annotations

import os
import socket
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from specdoctor.host.base import Host
from specdoctor.sim import Sandbox, SimHost, build_sandbox, load_scenario


def free_port() -> int:
    """An ephemeral port: tests never use the scenario's 30000 (other runs may hold it)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Box:
    """A sandbox and the host that drives it (local or ssh); `close()` stops everything by PID."""

    def __init__(self, sandbox: Sandbox, host: Host, kind: str):
        self.sandbox = sandbox
        self.host = host
        self.kind = kind

    def proc_text(self, pid: int, what: str) -> str:
        """/proc/PID/<what> read on the host as its user (NULs become newlines)."""
        return self.host.read(f"/proc/{pid}/{what}").decode(errors="replace").replace("\0", "\n")

    def environ(self, pid: int) -> dict[str, str]:
        return dict(line.split("=", 1) for line in self.proc_text(pid, "environ").splitlines() if "=" in line)

    def close(self) -> None:
        self.host.close()
        self.sandbox.remove()


@pytest.fixture(params=["local", "ssh"])
def kind(request) -> str:
    return request.param


@pytest.fixture
def make_box(request, kind) -> Iterator[Callable[..., Box]]:
    """make_box(name, start=True): lay the scenario out and connect; the running server is started as the host user."""
    boxes: list[Box] = []

    def make(name: str, start: bool = True) -> Box:
        root = Path(tempfile.mkdtemp(prefix=f"sim-{name}-"))
        os.chmod(root, 0o777)
        sb = build_sandbox(load_scenario(name), root, start_server=False, port=free_port())
        if kind == "local":
            host: Host = SimHost(sb)
        else:
            sshd = request.getfixturevalue("sshd")
            host = sshd.connect(base_env=sb.base_env)
        box = Box(sb, host, kind)
        boxes.append(box)
        if start:
            sb.start_server(host)
        return box

    yield make
    for b in boxes:
        b.close()


@pytest.fixture
def local_box() -> Iterator[Callable[..., Box]]:
    """Like make_box but LocalHost only (for checks that do not depend on the transport)."""
    boxes: list[Box] = []

    def make(name: str, start: bool = True) -> Box:
        sb = build_sandbox(load_scenario(name), start_server=False, port=free_port())
        box = Box(sb, SimHost(sb), "local")
        boxes.append(box)
        if start:
            sb.start_server(box.host)
        return box

    yield make
    for b in boxes:
        b.close()
