"""The CLI turns host failures into one line on stderr with a stable exit code, never a traceback."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest

from specdoctor.testing import SSHServer

_MAIN = "from specdoctor.cli import main; main()"


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize(
    ("case", "code", "kind"),
    [("unknown-key", 13, "host-key"), ("closed-port", 11, "host-unreachable"), ("wrong-key", 12, "host-auth"),
     ("bad-spec", 2, "usage"), ("dns", 11, "host-unreachable")],
)
def test_investigate_host_errors_are_one_line(sshd: SSHServer, tmp_path: Path, case: str, code: int,
                                              kind: str) -> None:
    target = f"{sshd.user}@127.0.0.1:{sshd.port}"
    args = {
        "unknown-key": ["--host", target, "--known-hosts", str(tmp_path / "empty"), "-i", str(sshd.key_path)],
        "closed-port": ["--host", f"{sshd.user}@127.0.0.1:{_closed_port()}", "--known-hosts", str(sshd.known_hosts),
                        "-i", str(sshd.key_path)],
        "wrong-key": ["--host", target, "--known-hosts", str(sshd.known_hosts), "-i", str(sshd.host_key_path)],
        "bad-spec": ["--host", "root@gpu;id"],
        "dns": ["--host", "root@nonexistent.invalid", "--known-hosts", str(sshd.known_hosts),
                "-i", str(sshd.key_path)],
    }[case]
    proc = subprocess.run([sys.executable, "-c", _MAIN, "investigate", "--out", str(tmp_path / "out"), *args],
                          capture_output=True, text=True, cwd=tmp_path, stdin=subprocess.DEVNULL, timeout=120,
                          env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "COLUMNS": "60"})
    assert proc.returncode == code, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"specdoctor: error [{kind}]: "), proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout
    if case == "unknown-key":
        assert "--accept-new-host-key" in lines[0]
