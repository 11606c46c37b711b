"""A real OpenSSH `sshd` on 127.0.0.1 with its own config and keys, for tests and benchmarks."""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from specdoctor.host.ssh import SSHHost

__all__ = ["SSHServer", "DEFAULT_USER", "ensure_user", "ensure_git_safe_directory", "ensure_traversable",
           "start_sshd"]

DEFAULT_USER = "sdtest"
SSHD = "/usr/sbin/sshd"

_CONFIG = """\
Port {port}
ListenAddress 127.0.0.1
HostKey {host_key}
PidFile none
AuthorizedKeysFile {authorized_keys}
AllowUsers {user}
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
UseDNS no
PermitRootLogin {permit_root}
AllowTcpForwarding yes
MaxSessions 200
MaxStartups 100:30:200
LogLevel ERROR
Subsystem sftp internal-sftp
"""


@dataclass
class SSHServer:
    """A running private sshd: where it listens, who may log in, and the files a client needs."""

    host: str
    port: int
    user: str
    key_path: Path
    host_key_path: Path
    known_hosts: Path
    workdir: Path
    python: str
    root: Path
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process else None

    @property
    def log_path(self) -> Path:
        """sshd's own stderr (`-e`): read it when a login is refused for no visible reason."""
        return self.root / "sshd.log"

    def connect(self, **kw: Any) -> SSHHost:
        """An SSHHost logged in with the test key, verifying the host key; `kw` overrides or adds options."""
        from specdoctor.host.ssh import SSHHost

        opts: dict[str, Any] = {
            "user": self.user,
            "port": self.port,
            "identity_files": [str(self.key_path)],
            "known_hosts": str(self.known_hosts),
            "allow_agent": False,
            "ssh_config": str(self.root / "ssh_config"),  # empty: the developer's ~/.ssh/config stays out
        }
        opts.update(kw)
        return SSHHost(self.host, **opts)

    def ssh_argv(self, *extra: str) -> list[str]:
        """OpenSSH client argv reaching this server (for comparisons and git over ssh)."""
        return ["ssh", "-F", "/dev/null", "-i", str(self.key_path), "-p", str(self.port),
                "-o", f"UserKnownHostsFile={self.known_hosts}", "-o", "StrictHostKeyChecking=yes",
                "-o", "IdentitiesOnly=yes", "-o", "BatchMode=yes", *extra, f"{self.user}@{self.host}"]

    def stop(self) -> None:
        """Stop sshd by its PID and remove its files (the work dir included)."""
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=5)
        self.process = None
        shutil.rmtree(self.root, ignore_errors=True)
        shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self) -> SSHServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _is_root() -> bool:
    return os.geteuid() == 0


def ensure_user(name: str = DEFAULT_USER) -> str:
    """Create the unprivileged login user if missing (root only); `-p '*'` allows key login under UsePAM no."""
    try:
        pwd.getpwnam(name)
        return name
    except KeyError:
        pass
    if not _is_root():
        raise RuntimeError(f"user {name!r} does not exist and only root can create it")
    proc = subprocess.run(["useradd", "-M", "-d", "/tmp", "-s", "/bin/sh", "-p", "*", name],
                          capture_output=True, text=True)
    try:  # a concurrent test session may have created it first
        pwd.getpwnam(name)
    except KeyError:
        raise RuntimeError(f"useradd {name} failed: {proc.stderr.strip()}") from None
    return name


def ensure_git_safe_directory() -> None:
    """Let any user run git in repos owned by someone else (tests create repos as root, ssh in as another)."""
    if not _is_root():
        return
    for _ in range(5):
        have = subprocess.run(["git", "config", "--system", "--get-all", "safe.directory"],
                              capture_output=True, text=True).stdout.split()
        if "*" in have:
            return
        subprocess.run(["git", "config", "--system", "--add", "safe.directory", "*"], capture_output=True)
        time.sleep(0.05)  # the config file may be locked by a concurrent session: check again


def ensure_traversable(path: str | Path) -> None:
    """Give others search permission on the folders above `path` (as written and resolved), so the ssh user
    can run it: e.g. a pyenv interpreter under root's 0700 home. Only folders lacking o+x are touched.
    """
    if not _is_root():
        return
    for p in {Path(path).absolute(), Path(path).resolve()}:
        for d in [*reversed(p.parents), p] if p.is_dir() else list(reversed(p.parents)):
            mode = d.stat().st_mode
            if not mode & stat.S_IXOTH:
                os.chmod(d, mode | stat.S_IXOTH)


def _keygen(path: Path, comment: str) -> None:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(path)],
                   check=True, capture_output=True)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_banner(port: int, proc: subprocess.Popen[bytes], deadline: float) -> bool:
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return False
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
                if s.recv(64).startswith(b"SSH-"):
                    return True
        except OSError:
            time.sleep(0.02)
    return False


def start_sshd(user: str | None = None, *, python: str | None = None, attempts: int = 5) -> SSHServer:
    """Start `sshd -f CONFIG -D -e` on a free loopback port, key-only auth; returns once it answers.

    As root the login user is the dedicated unprivileged `sdtest` (created if missing); otherwise the
    current user. Stop it with `.stop()` (or use it as a context manager).
    """
    if not os.path.exists(SSHD):
        raise RuntimeError(f"{SSHD} is missing: install openssh-server (bash .ci/run does)")
    if user is None:
        user = ensure_user() if _is_root() else pwd.getpwuid(os.getuid()).pw_name
    python = python or sys.executable
    if _is_root():
        os.makedirs("/run/sshd", exist_ok=True)  # sshd's privilege-separation directory
        ensure_git_safe_directory()
        ensure_traversable(python)
        ensure_traversable(sys.prefix)
    root = Path(tempfile.mkdtemp(prefix="specdoctor-sshd-"))
    os.chmod(root, 0o755)  # sshd reads authorized_keys as the login user
    workdir = Path(tempfile.mkdtemp(prefix="specdoctor-remote-"))
    os.chmod(workdir, 0o777)
    host_key, client_key = root / "host_ed25519", root / "client_ed25519"
    _keygen(host_key, "specdoctor-test-host")
    _keygen(client_key, "specdoctor-test-client")
    authorized = root / "authorized_keys"
    shutil.copyfile(client_key.with_suffix(".pub"), authorized)
    os.chmod(authorized, 0o644)
    (root / "ssh_config").write_text("")
    host_pub = host_key.with_suffix(".pub").read_text().split()
    last = ""
    for _ in range(attempts):
        port = _free_port()
        config = root / "sshd_config"
        config.write_text(_CONFIG.format(port=port, host_key=host_key, authorized_keys=authorized, user=user,
                                         permit_root="prohibit-password" if user == "root" else "no"))
        log = (root / "sshd.log").open("ab")
        proc = subprocess.Popen([SSHD, "-f", str(config), "-D", "-e"], stdin=subprocess.DEVNULL,
                                stdout=log, stderr=log)
        log.close()
        if _wait_banner(port, proc, time.monotonic() + 10):
            known = root / "known_hosts"
            known.write_text(f"[127.0.0.1]:{port} {host_pub[0]} {host_pub[1]}\n")
            return SSHServer(host="127.0.0.1", port=port, user=user, key_path=client_key,
                             host_key_path=host_key, known_hosts=known, workdir=workdir, python=python,
                             root=root, process=proc)
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=5)
        last = (root / "sshd.log").read_text(errors="replace")[-500:]
    shutil.rmtree(root, ignore_errors=True)
    shutil.rmtree(workdir, ignore_errors=True)
    raise RuntimeError(f"sshd did not start after {attempts} attempts: {last}")
