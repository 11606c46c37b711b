"""A throwaway PostgreSQL server on 127.0.0.1 (Debian's binaries, a temp data dir, a free port), for tests."""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

__all__ = ["PostgresServer", "find_pg_bin", "start_postgres"]

_USER = "postgres"  # PostgreSQL refuses to run as root: as root, run it as Debian's `postgres` user


def find_pg_bin() -> Path | None:
    """The newest /usr/lib/postgresql/*/bin holding initdb and pg_ctl (or the ones on PATH), else None."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"),
                   key=lambda p: [int(x) if x.isdigit() else 0 for x in Path(p).parent.parent.name.split(".")])
    if found:
        return Path(found[-1]).parent
    initdb = shutil.which("initdb")
    return Path(initdb).parent if initdb and shutil.which("pg_ctl") else None


@dataclass
class PostgresServer:
    """A running server: `url` reaches its `postgres` database as the superuser (trust auth, loopback only)."""

    bin_dir: Path
    root: Path
    port: int
    user: str
    run_as: str | None

    @property
    def url(self) -> str:
        return f"postgresql://{self.user}@127.0.0.1:{self.port}/postgres?sslmode=disable"

    def _run(self, argv: list[str]) -> subprocess.CompletedProcess[str]:
        full = ["runuser", "-u", self.run_as, "--", *argv] if self.run_as else argv
        return subprocess.run(full, capture_output=True, text=True, timeout=120, check=False)

    def stop(self) -> None:
        self._run([str(self.bin_dir / "pg_ctl"), "-D", str(self.root / "data"), "-m", "immediate", "-w", "stop"])
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> PostgresServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_postgres(bin_dir: Path | None = None) -> PostgresServer:
    """initdb a temp cluster and start it on a free loopback port; RuntimeError (with the log) if it fails."""
    bin_dir = bin_dir or find_pg_bin()
    if bin_dir is None:
        raise RuntimeError("PostgreSQL binaries not found (apt-get install postgresql)")
    run_as = _USER if os.geteuid() == 0 else None
    user = run_as or pwd.getpwuid(os.getuid()).pw_name
    root = Path(tempfile.mkdtemp(prefix="specdoctor-pg-"))
    if run_as:
        pw = pwd.getpwnam(run_as)
        os.chown(root, pw.pw_uid, pw.pw_gid)
    server = PostgresServer(bin_dir, root, _free_port(), user, run_as)
    res = server._run([str(bin_dir / "initdb"), "-D", str(root / "data"), "-U", user, "-A", "trust", "-E", "UTF8",
                       "--no-sync", "--no-instructions"])
    if res.returncode != 0:
        shutil.rmtree(root, ignore_errors=True)
        raise RuntimeError(f"initdb failed: {res.stderr.strip()[-500:]}")
    opts = (f"-p {server.port} -k {root} -c listen_addresses=127.0.0.1 -c fsync=off -c shared_buffers=16MB "
            "-c max_connections=30")
    res = server._run([str(bin_dir / "pg_ctl"), "-D", str(root / "data"), "-o", opts, "-l", str(root / "log"),
                       "-w", "-t", "60", "start"])
    if res.returncode != 0:
        log = (root / "log").read_text(errors="replace")[-800:] if (root / "log").exists() else res.stderr
        server.stop()
        raise RuntimeError(f"pg_ctl start failed: {log}")
    return server
