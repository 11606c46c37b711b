"""While the user's server is down, its port is kept for it: nothing else binds it, a client is told why (503),
and the placeholder goes before the restart, at its deadline, or when `restore` runs after a crash."""

from __future__ import annotations

import socket
import time
from pathlib import Path

import httpx
import pytest

from specdoctor.host import open_host
from specdoctor.sim.ports import free_port
from specdoctor.tools.serving.port_hold import MARKER, hold_port, holders, release_port


@pytest.fixture
def host():
    h = open_host("local")
    yield h
    h.close()


def _server_bind(port: int) -> socket.socket:
    """What a server does (uvicorn sets SO_REUSEADDR): bind and listen."""
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        s.bind(("127.0.0.1", port))
        s.listen()
    except OSError:
        s.close()
        raise
    return s


def test_a_held_port_refuses_another_server_tells_clients_why_and_is_released(host, tmp_path):
    port = free_port()
    hold = hold_port(host, port, "127.0.0.1", run_id="r1", seconds=60, log=str(tmp_path / "hold.log"))
    try:
        assert hold.held and hold.pid is not None, hold.note
        with pytest.raises(OSError):
            _server_bind(port)
        r = httpx.get(f"http://127.0.0.1:{port}/health", timeout=5)
        assert r.status_code == 503 and "specdoctor run r1" in r.text and "restore" in r.text
        cmdline = Path(f"/proc/{hold.pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        assert f"{MARKER} :{port} (for your server; run r1" in cmdline  # `ps` says what it is
        assert holders(host, port) == [hold.pid]  # the search never finds its own shell
    finally:
        released = release_port(host, port)
    assert released == [hold.pid] and holders(host, port) == []
    _server_bind(port).close()  # the restart binds at once: no TIME_WAIT left by the 503 exchange


def test_a_forgotten_placeholder_exits_at_its_deadline(host, tmp_path):
    port = free_port()
    hold = hold_port(host, port, "127.0.0.1", run_id="r2", seconds=1.0, log=str(tmp_path / "hold.log"))
    assert hold.held
    deadline = time.monotonic() + 10
    while holders(host, port) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert holders(host, port) == []
    _server_bind(port).close()


def test_a_port_already_taken_is_not_held_and_says_why(host, tmp_path):
    # must not fire: someone else's server on the port stays untouched, and nothing is left behind
    port = free_port()
    other = _server_bind(port)
    try:
        hold = hold_port(host, port, "127.0.0.1", run_id="r3", seconds=30, log=str(tmp_path / "hold.log"))
        assert not hold.held and "Address already in use" in hold.note
        assert holders(host, port) == [] and release_port(host, port) == []
    finally:
        other.close()
