"""Routes to a host as OpenSSH takes them from ~/.ssh/config: ProxyJump chains (IPv6 hops included),
ProxyCommand, and the system-wide known_hosts file — all against the real sshd on loopback."""

from __future__ import annotations

import contextlib
import select
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from specdoctor.errors import HostKeyRejected
from specdoctor.host.ssh import SSHHost
from specdoctor.testing import SSHServer


@contextlib.contextmanager
def relay(family: socket.AddressFamily, bind: str, target_port: int) -> Iterator[tuple[int, list[str]]]:
    """A TCP relay on `bind` (127.0.0.1 or ::1) to the sshd; yields its port and the peers it served."""
    lsock = socket.socket(family, socket.SOCK_STREAM)
    lsock.bind((bind, 0))
    lsock.listen(8)
    peers: list[str] = []
    stop = threading.Event()

    def pump(a: socket.socket, b: socket.socket) -> None:
        with a, b, contextlib.suppress(OSError, ValueError):  # either side closing ends the relay
            while not stop.is_set():
                r, _, _ = select.select([a, b], [], [], 0.2)
                for s in r:
                    data = s.recv(65536)
                    if not data:
                        return
                    (b if s is a else a).sendall(data)

    def serve() -> None:
        while not stop.is_set():
            r, _, _ = select.select([lsock], [], [], 0.2)
            if r:
                conn, peer = lsock.accept()
                peers.append(peer[0])
                out = socket.create_connection(("127.0.0.1", target_port))
                threading.Thread(target=pump, args=(conn, out), daemon=True).start()

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    try:
        yield lsock.getsockname()[1], peers
    finally:
        stop.set()
        t.join(timeout=2)
        lsock.close()


def _host_key(sshd: SSHServer) -> str:
    return " ".join(sshd.host_key_path.with_suffix(".pub").read_text().split()[:2])


def test_proxyjump_chain_with_an_ipv6_hop(sshd: SSHServer, tmp_path: Path) -> None:
    """ProxyJump a,b: the client reaches hop a, a reaches hop b ([::1]), b reaches the target."""
    with relay(socket.AF_INET, "127.0.0.1", sshd.port) as (p1, peers1), \
            relay(socket.AF_INET6, "::1", sshd.port) as (p2, peers2):
        known = tmp_path / "known_hosts"
        known.write_text(sshd.known_hosts.read_text() + f"[127.0.0.1]:{p1} {_host_key(sshd)}\n"
                         f"[::1]:{p2} {_host_key(sshd)}\n")
        cfg = tmp_path / "config"
        cfg.write_text(f"Host target\n  HostName 127.0.0.1\n  Port {sshd.port}\n"
                       f"  ProxyJump {sshd.user}@127.0.0.1:{p1},{sshd.user}@[::1]:{p2}\n"
                       f"Host *\n  User {sshd.user}\n  IdentityFile {sshd.key_path}\n")
        with SSHHost("target", ssh_config=str(cfg), known_hosts=str(known), allow_agent=False,
                     system_known_hosts=[]) as h:
            assert h.run(["echo", "through two hops"]).stdout == "through two hops\n"
            assert h._jump is not None and h._jump.hostname == "::1" and h._jump.port == p2
            assert h._jump._jump is not None and h._jump._jump.port == p1
        assert peers1 == ["127.0.0.1"] and peers2 == ["::1"]  # each hop was crossed once, the IPv6 one over v6


def test_proxyjump_none_and_a_bad_hop(sshd: SSHServer, tmp_path: Path) -> None:
    cfg = tmp_path / "config"
    cfg.write_text(f"Host t\n  HostName 127.0.0.1\n  Port {sshd.port}\n  User {sshd.user}\n"
                   f"  IdentityFile {sshd.key_path}\n  ProxyJump none\n")
    with SSHHost("t", ssh_config=str(cfg), known_hosts=str(sshd.known_hosts), allow_agent=False) as h:
        assert h._jump is None and h.run(["true"]).ok  # `none` switches the jump off, as in OpenSSH
    cfg.write_text(f"Host t\n  HostName 127.0.0.1\n  Port {sshd.port}\n  ProxyJump root@[::1:22\n")
    from specdoctor.errors import UsageError

    with pytest.raises(UsageError, match="ProxyJump hop"):
        SSHHost("t", ssh_config=str(cfg), known_hosts=str(sshd.known_hosts), allow_agent=False)


def test_proxycommand_from_ssh_config(sshd: SSHServer, tmp_path: Path) -> None:
    marker = tmp_path / "proxy-ran"
    openssh = " ".join(sshd.ssh_argv("-W", "%h:%p")[:-1]) + f" {sshd.user}@127.0.0.1"
    cfg = tmp_path / "config"
    cfg.write_text(f"Host via-proxy\n  HostName 127.0.0.1\n  Port {sshd.port}\n  User {sshd.user}\n"
                   f"  IdentityFile {sshd.key_path}\n  ProxyCommand sh -c 'touch {marker}; exec {openssh}'\n")
    with SSHHost("via-proxy", ssh_config=str(cfg), known_hosts=str(sshd.known_hosts), allow_agent=False) as h:
        assert h.proxy_command and "127.0.0.1:" + str(sshd.port) in h.proxy_command  # %h:%p expanded
        assert h.run(["echo", "proxied"]).stdout == "proxied\n"
    assert marker.exists()


def test_system_known_hosts_is_trusted_and_never_written(sshd: SSHServer, tmp_path: Path) -> None:
    user_known, system_known = tmp_path / "known_hosts", tmp_path / "ssh_known_hosts"
    system_known.write_text(f"[127.0.0.1]:{sshd.port} {_host_key(sshd)}\n")
    with sshd.connect(known_hosts=str(user_known), system_known_hosts=[str(system_known)]) as h:
        assert h.run(["true"]).ok  # the administrator's file vouches for the key: no prompt, no flag
    assert not user_known.exists()  # nothing copied into the user's file
    with pytest.raises(HostKeyRejected, match="--accept-new-host-key"):
        sshd.connect(known_hosts=str(user_known), system_known_hosts=[str(tmp_path / "absent")])
    # a key that differs from the system file's entry is a changed key: refused even with accept-new
    other = tmp_path / "other"
    import subprocess

    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(other)], check=True)
    wrong = " ".join(other.with_suffix(".pub").read_text().split()[:2])
    system_known.write_text(f"[127.0.0.1]:{sshd.port} {wrong}\n")
    with pytest.raises(HostKeyRejected, match="CHANGED"):
        sshd.connect(known_hosts=str(user_known), system_known_hosts=[str(system_known)], accept_new_host_key=True)
