"""A port that answers but is not SSH (an HTTP server, say) gets a message that says so, not paramiko's banner error."""

from __future__ import annotations

import socket
import threading
from pathlib import Path

import pytest

from specdoctor.errors import HostUnreachable
from specdoctor.host.ssh import SSHHost


def test_a_port_that_is_not_ssh_says_so(tmp_path: Path) -> None:
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen()
    port = srv.getsockname()[1]

    def answer_http() -> None:
        conn, _ = srv.accept()
        conn.recv(1024)
        conn.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
        conn.close()

    threading.Thread(target=answer_http, daemon=True).start()
    (tmp_path / "known_hosts").write_text("")
    (tmp_path / "ssh_config").write_text("")
    try:
        with pytest.raises(HostUnreachable) as info:
            SSHHost("127.0.0.1", port=port, user="x", known_hosts=str(tmp_path / "known_hosts"), allow_agent=False,
                    identity_files=[], ssh_config=str(tmp_path / "ssh_config"), connect_timeout=5)
    finally:
        srv.close()
    msg = str(info.value)
    assert "is not an SSH server" in msg and str(port) in msg and "banner" not in msg, msg
