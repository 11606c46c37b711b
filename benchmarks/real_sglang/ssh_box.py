"""An OpenSSH sshd on the box's loopback, so that specdoctor reaches the real engine over its real transport once.

The lent GPU image may have no openssh-server: `build_ssh_carry.sh` downloads Debian's `openssh-server` and the
libraries it links into `.sshpkg/debs/` (with paramiko's wheels in `.sshpkg/whl/`), and `unpack()` extracts them with
`dpkg -x` into a folder of their own — never into `/`. `start()` then runs `sshd -D -e` on 127.0.0.1 with a host key
made here, key-only login for one user, and writes the `known_hosts` line and the client key that `specdoctor
investigate --host USER@127.0.0.1:PORT --known-hosts … --identity …` needs: the host key is verified, never
accepted blindly. Only libraries the box lacks are put on sshd's own `LD_LIBRARY_PATH` (its sessions do not inherit it).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["SSHBox", "unpack", "find_sshd", "start"]

_CONFIG = """\
Port {port}
ListenAddress 127.0.0.1
HostKey {host_key}
PidFile none
AuthorizedKeysFile {authorized}
AllowUsers {user}
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
UseDNS no
PermitRootLogin prohibit-password
MaxSessions 200
MaxStartups 100:30:200
LogLevel INFO
Subsystem sftp internal-sftp
"""


@dataclass
class SSHBox:
    """A running sshd and what a client needs to reach it."""

    port: int
    user: str
    key: Path
    known_hosts: Path
    root: Path
    log: Path
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @property
    def host_spec(self) -> str:
        return f"{self.user}@127.0.0.1:{self.port}"

    def cli_args(self) -> list[str]:
        """The investigate options that reach this sshd with a verified host key and the generated client key."""
        return ["--host", self.host_spec, "--known-hosts", str(self.known_hosts), "--identity", str(self.key)]

    def stop(self) -> None:
        """Stop this sshd (by its own pid) and keep its log beside the results; the keys are removed."""
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=5)
        self.process = None
        for name in ("host_ed25519", "client_ed25519"):
            (self.root / name).unlink(missing_ok=True)


def unpack(pkg: Path, dest: Path) -> Path | None:
    """`dpkg -x` every carried .deb into `dest` (idempotent); the sshd found there, or None when none is carried."""
    debs = sorted((pkg / "debs").glob("*.deb")) if pkg.is_dir() else []
    if not debs:
        return None
    marker = dest / ".unpacked"
    if not marker.exists():
        dest.mkdir(parents=True, exist_ok=True)
        for deb in debs:
            subprocess.run(["dpkg", "-x", str(deb), str(dest)], check=True)
        marker.write_text("\n".join(d.name for d in debs))
    sshd = dest / "usr/sbin/sshd"
    return sshd if sshd.exists() else None


def find_sshd(pkg: Path, dest: Path) -> tuple[Path, dict[str, str]]:
    """The box's own sshd when it has one, else the carried one with the libraries the box lacks on its
    LD_LIBRARY_PATH. Raises when neither can run."""
    own = shutil.which("sshd") or ("/usr/sbin/sshd" if os.path.exists("/usr/sbin/sshd") else None)
    if own:
        return Path(own), {}
    carried = unpack(pkg, dest)
    if carried is None:
        raise SystemExit(f"no sshd on this box and none carried in {pkg}/debs (run build_ssh_carry.sh)")
    have = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True).stdout
    libdir = dest / "missing-libs"
    libdir.mkdir(exist_ok=True)
    for lib in list(dest.glob("usr/lib/x86_64-linux-gnu/*.so.*")) + list(dest.glob("lib/x86_64-linux-gnu/*.so.*")):
        if f"\t{lib.name} " not in have and not (libdir / lib.name).exists():
            (libdir / lib.name).symlink_to(lib.resolve())
    env = {"LD_LIBRARY_PATH": str(libdir)}
    check = subprocess.run(["ldd", str(carried)], capture_output=True, text=True, env={**os.environ, **env})
    if "not found" in check.stdout:
        raise SystemExit(f"the carried sshd lacks libraries here:\n{check.stdout}")
    return carried, env


def _keypair(path: Path, comment: str) -> str:
    """An ed25519 key in OpenSSH format at `path` (0600) and its public line (no ssh-keygen needed)."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    key = Ed25519PrivateKey.generate()
    path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH,
                                       serialization.NoEncryption()))
    os.chmod(path, 0o600)
    pub = key.public_key().public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
    return f"{pub.decode()} {comment}"


def _privsep() -> None:
    """sshd's privilege-separation directory and user (OpenSSH refuses to start without them)."""
    os.makedirs("/run/sshd", mode=0o755, exist_ok=True)
    if subprocess.run(["getent", "passwd", "sshd"], capture_output=True).returncode != 0:
        if subprocess.run(["useradd", "-r", "-M", "-d", "/run/sshd", "-s", "/usr/sbin/nologin", "sshd"],
                          capture_output=True).returncode != 0:
            with open("/etc/passwd", "a") as f:
                f.write("sshd:x:74:65534:privsep:/run/sshd:/usr/sbin/nologin\n")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start(pkg: Path, *, user: str = "root", session_env: dict[str, str] | None = None,
          root: Path | None = None) -> SSHBox:
    """Start sshd on a free loopback port; `session_env` is set in every login session (sshd's SetEnv), as a
    user's profile would set PATH. Returns once the server answers with its banner."""
    root = Path(root or tempfile.mkdtemp(prefix="sd-sshd-"))
    root.mkdir(parents=True, exist_ok=True)
    os.chmod(root, 0o755)
    sshd, sshd_env = find_sshd(pkg, root / "pkg")
    _privsep()
    host_pub = _keypair(root / "host_ed25519", "specdoctor-story-host")
    (root / "authorized_keys").write_text(_keypair(root / "client_ed25519", "specdoctor-story-client") + "\n")
    os.chmod(root / "authorized_keys", 0o644)
    log = root / "sshd.log"
    for _ in range(5):
        port = _free_port()
        conf = _CONFIG.format(port=port, host_key=root / "host_ed25519", authorized=root / "authorized_keys",
                              user=user)
        if session_env:
            conf += "SetEnv " + " ".join(f'"{k}={v}"' for k, v in sorted(session_env.items())) + "\n"
        (root / "sshd_config").write_text(conf)
        with log.open("ab") as fh:
            proc = subprocess.Popen([str(sshd), "-f", str(root / "sshd_config"), "-D", "-e"], stdin=subprocess.DEVNULL,
                                    stdout=fh, stderr=fh, env={**os.environ, **sshd_env}, start_new_session=True)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
                    if s.recv(64).startswith(b"SSH-"):
                        known = root / "known_hosts"
                        known.write_text(f"[127.0.0.1]:{port} {' '.join(host_pub.split()[:2])}\n")
                        return SSHBox(port=port, user=user, key=root / "client_ed25519", known_hosts=known,
                                      root=root, log=log, process=proc)
            except OSError:
                time.sleep(0.1)
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=5)
    raise SystemExit(f"sshd did not start: {log.read_text(errors='replace')[-1500:]}")
