"""SSHHost against a real sshd: host-key policy, auth and network failures, forwarding, config, reconnects."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from specdoctor.errors import HostAuthFailed, HostKeyRejected, HostUnreachable
from specdoctor.host import AuditLog, Raw, open_host
from specdoctor.host.ssh import SSHHost
from specdoctor.testing import SSHServer


def _openssh_fingerprint(pub: Path) -> str:
    """The fingerprint as OpenSSH computes it: what a user compares against."""
    out = subprocess.run(["ssh-keygen", "-l", "-E", "sha256", "-f", str(pub)], capture_output=True, text=True,
                         check=True).stdout
    return out.split()[1]


def _other_key(tmp_path: Path) -> str:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp_path / "other")], check=True)
    return (tmp_path / "other.pub").read_text().split()[1]


def test_unknown_host_key_is_refused_naming_flag_and_fingerprint(sshd: SSHServer, tmp_path: Path) -> None:
    known = tmp_path / "known_hosts"
    with pytest.raises(HostKeyRejected) as info:
        sshd.connect(known_hosts=str(known))
    msg = str(info.value)
    assert "--accept-new-host-key" in msg
    assert _openssh_fingerprint(sshd.host_key_path.with_suffix(".pub")) in msg
    assert "\n" not in msg and not known.exists()


def test_accept_new_host_key_is_recorded_and_then_trusted(sshd: SSHServer, tmp_path: Path) -> None:
    known = tmp_path / "sub" / "known_hosts"
    with sshd.connect(known_hosts=str(known), accept_new_host_key=True) as h:
        assert h.run(["echo", "hi"]).stdout == "hi\n"
        assert len(h.policy.accepted) == 1
    server_key = sshd.host_key_path.with_suffix(".pub").read_text().split()[1]
    assert known.read_text().split() == [f"[127.0.0.1]:{sshd.port}", "ssh-ed25519", server_key]
    with sshd.connect(known_hosts=str(known)) as h:  # now known: no flag needed, nothing appended
        assert h.run(["true"]).ok and h.policy.accepted == []
    assert len(known.read_text().splitlines()) == 1
    # OpenSSH agrees with what was written
    res = subprocess.run([*sshd.ssh_argv("-o", f"UserKnownHostsFile={known}"), "true"], capture_output=True,
                         text=True, stdin=subprocess.DEVNULL)
    assert res.returncode == 0, res.stderr


@pytest.mark.parametrize("accept_new", [False, True])
def test_changed_host_key_is_always_refused(sshd: SSHServer, tmp_path: Path, accept_new: bool) -> None:
    known = tmp_path / "known_hosts"
    known.write_text(f"[127.0.0.1]:{sshd.port} ssh-ed25519 {_other_key(tmp_path)}\n")
    before = known.read_text()
    with pytest.raises(HostKeyRejected, match="CHANGED") as info:
        sshd.connect(known_hosts=str(known), accept_new_host_key=accept_new)
    assert _openssh_fingerprint(sshd.host_key_path.with_suffix(".pub")) in str(info.value)
    assert known.read_text() == before


def test_wrong_key_is_auth_failure_naming_what_was_tried(sshd: SSHServer, tmp_path: Path) -> None:
    _other_key(tmp_path)
    with pytest.raises(HostAuthFailed) as info:
        sshd.connect(identity_files=[str(tmp_path / "other")])
    msg = str(info.value)
    assert str(tmp_path / "other") in msg and f"user {sshd.user}" in msg and "\n" not in msg


def test_unknown_user_is_auth_failure(sshd: SSHServer) -> None:
    with pytest.raises(HostAuthFailed, match="user nobody-here"):
        sshd.connect(user="nobody-here")


def test_closed_port_is_unreachable(sshd: SSHServer) -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(HostUnreachable, match=str(port)):
        sshd.connect(port=port, connect_timeout=3)


def test_dns_failure_is_unreachable(sshd: SSHServer) -> None:
    with pytest.raises(HostUnreachable, match="nonexistent.invalid"):
        SSHHost("nonexistent.invalid", user="x", known_hosts=str(sshd.known_hosts), allow_agent=False,
                identity_files=[str(sshd.key_path)], ssh_config=str(sshd.root / "ssh_config"), connect_timeout=3)


def test_silent_server_times_out_as_unreachable_or_lost(sshd: SSHServer) -> None:
    """A port that accepts but never speaks SSH must not hang the caller."""
    import socket

    from specdoctor.errors import HostError

    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        t0 = time.monotonic()
        with pytest.raises(HostError):
            sshd.connect(port=listener.getsockname()[1], connect_timeout=1)
        assert time.monotonic() - t0 < 10


def test_one_connection_serves_many_commands(sshd: SSHServer) -> None:
    with sshd.connect() as h:
        transport = h._transport()
        pids = {h.run(["sh", "-c", "echo $PPID"]).stdout for _ in range(5)}
        assert h._transport() is transport
        assert len(pids) == 5  # each command is a new session on the same transport


def test_reconnects_after_the_connection_drops(sshd: SSHServer) -> None:
    with sshd.connect() as h:
        h._transport().close()
        assert h.run(["echo", "back"]).stdout == "back\n"


def test_ssh_config_supplies_hostname_port_user_and_key(sshd: SSHServer, tmp_path: Path) -> None:
    cfg = tmp_path / "config"
    cfg.write_text(f"Host gpu-box\n  HostName 127.0.0.1\n  Port {sshd.port}\n  User {sshd.user}\n"
                   f"  IdentityFile {sshd.key_path}\n")
    with SSHHost("gpu-box", ssh_config=str(cfg), known_hosts=str(sshd.known_hosts), allow_agent=False) as h:
        assert h.name == f"{sshd.user}@127.0.0.1:{sshd.port}"
        assert h.run(["id", "-un"]).stdout.strip() == sshd.user


def test_proxyjump_from_ssh_config(sshd: SSHServer, tmp_path: Path) -> None:
    cfg = tmp_path / "config"
    cfg.write_text(f"Host inner\n  HostName 127.0.0.1\n  Port {sshd.port}\n  User {sshd.user}\n"
                   f"  IdentityFile {sshd.key_path}\n  ProxyJump {sshd.user}@127.0.0.1:{sshd.port}\n"
                   f"Host 127.0.0.1\n  IdentityFile {sshd.key_path}\n")
    with SSHHost("inner", ssh_config=str(cfg), known_hosts=str(sshd.known_hosts), allow_agent=False) as h:
        assert h._jump is not None
        assert h.run(["echo", "via jump"]).stdout == "via jump\n"
        assert h.run(["sh", "-c", "echo $SSH_CLIENT"]).stdout.split()[0] == "127.0.0.1"


def test_open_host_builds_an_ssh_host_from_a_spec(sshd: SSHServer) -> None:
    spec = f"ssh://{sshd.user}@127.0.0.1:{sshd.port}"
    with open_host(spec, known_hosts=sshd.known_hosts, identity_files=[str(sshd.key_path)],
                   ssh_config=sshd.root / "ssh_config") as h:
        assert isinstance(h, SSHHost)
        assert h.run(["id", "-un"]).stdout.strip() == sshd.user


def test_remote_python_can_import_specdoctor(sshd: SSHServer) -> None:
    with sshd.connect() as h:
        out = h.run([sshd.python, "-c", "import json, specdoctor; print(json.dumps(specdoctor.__version__))"])
        import specdoctor

        assert json.loads(out.stdout) == specdoctor.__version__


def test_audit_log_file_redacts_secrets(sshd: SSHServer, tmp_path: Path) -> None:
    hf, oa = "hf_abcdefghijklmnopqrstuv12", "sk-proj-ABCDEFGH12345678zz"
    log = tmp_path / "audit.jsonl"
    with sshd.connect(audit=AuditLog(log)) as h:
        h.run(["sh", "-c", 'echo "token is $HF_TOKEN"; echo "OPENAI_API_KEY=$OPENAI_API_KEY" >&2'],
              env={"HF_TOKEN": hf, "OPENAI_API_KEY": oa, "SD_PLAIN": "visible"})
        h.run(["echo", f"HF_TOKEN={hf}"])
    text = log.read_text()
    assert hf not in text and oa not in text
    rows = [json.loads(line) for line in text.splitlines()]
    assert [r["host"] for r in rows] == [h.name, h.name]
    first = rows[0]
    assert set(first) >= {"time", "host", "command", "cwd", "env", "exit", "seconds", "stdout_tail", "stderr_tail"}
    assert first["env"] == {"HF_TOKEN": "***REDACTED***", "OPENAI_API_KEY": "***REDACTED***", "SD_PLAIN": "visible"}
    assert first["stdout_tail"] == "token is ***REDACTED***\n"
    assert first["stderr_tail"] == "OPENAI_API_KEY=***REDACTED***\n"
    assert rows[1]["command"] == "echo HF_TOKEN=***REDACTED***"
    assert re.fullmatch(r"\d+\.\d+", str(first["time"]))


def test_sshd_fixture_stops_by_pid(tmp_path: Path) -> None:
    from specdoctor.testing import start_sshd

    server = start_sshd()
    pid, root = server.pid, server.root
    assert pid is not None and Path(f"/proc/{pid}").exists()
    server.stop()
    assert not Path(f"/proc/{pid}").exists() and not root.exists()
    assert shutil.which("ssh-keygen")


def test_large_output_is_never_truncated_by_an_early_exit_status(sshd: SSHServer) -> None:
    """The exit status can overtake output held back by SSH flow control; reads must still be complete."""
    data = bytes(range(256)) * (16 * 1024)  # 4 MiB: twice paramiko's default window
    path = f"{sshd.workdir}/big-{id(data)}.bin"
    Path(path).write_bytes(data)
    with sshd.connect() as h:
        for _ in range(5):
            assert h.read(path) == data


def test_background_child_holding_stdout_does_not_hang_the_command(sshd: SSHServer) -> None:
    with sshd.connect() as h:
        t0 = time.monotonic()
        res = h.run(Raw("sleep 3 & echo started"))
        assert res.stdout == "started\n" and time.monotonic() - t0 < 2.5
