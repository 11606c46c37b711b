"""LocalHost: the Host protocol on this machine, through subprocess (no shell unless asked)."""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from specdoctor.errors import CommandTimedOut, UsageError
from specdoctor.host.audit import AuditLog
from specdoctor.host.base import Host, quote_command

__all__ = ["LocalHost"]


class LocalHost(Host):
    """Runs commands with subprocess; `forward` is the identity (the port is already local)."""

    def __init__(
        self,
        *,
        name: str = "local",
        audit: AuditLog | None = None,
        base_env: Mapping[str, str] | None = None,
        inherit_env: bool = True,
    ):
        super().__init__(audit=audit, base_env=base_env)
        self.name = name
        self.inherit_env = inherit_env

    def _env(self, extra: dict[str, str]) -> dict[str, str]:
        env = dict(os.environ) if self.inherit_env else {}
        env.update(self.base_env)
        env.update(extra)
        return env

    def _exec(self, cmd, *, env, cwd, timeout, stdin):
        argv = ["sh", "-c", cmd] if isinstance(cmd, str) else cmd
        if cwd is not None and not os.path.isdir(cwd):
            return 1, "", f"cwd does not exist: {cwd}\n"
        try:
            proc = subprocess.Popen(
                argv,
                stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                cwd=cwd,
                env=self._env(env),
                start_new_session=True,  # a timeout kills the whole group, not just the shell
            )
        except FileNotFoundError:
            return 127, "", f"{argv[0]}: command not found\n"
        except PermissionError:
            return 126, "", f"{argv[0]}: permission denied\n"
        except OSError as exc:  # e.g. a program name too long to exec: a failed command, not a crash
            return 126, "", f"{argv[0][:200]}: {exc.strerror or exc}\n"
        try:
            out, err = proc.communicate(input=stdin, timeout=timeout)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.communicate()
            raise CommandTimedOut(self.name, quote_command(cmd), timeout or 0) from None
        return proc.returncode, out.decode("utf-8", "replace"), err.decode("utf-8", "replace")

    def read(self, path: str) -> bytes:
        try:
            return Path(path).read_bytes()
        except FileNotFoundError:
            raise UsageError(f"no such file on {self.name}: {path}") from None
        except OSError as exc:  # a directory, no permission, a name too long: one-line error, not a crash
            raise UsageError(f"cannot read {path[:200]} on {self.name}: {exc.strerror or exc}") from None
        except ValueError as exc:  # a NUL in the name: no file can have it
            raise UsageError(f"cannot read {path[:200]!r} on {self.name}: {exc}") from None

    def put(self, data: bytes | Path, remote_path: str, *, mode: int | None = None) -> None:
        payload = data.read_bytes() if isinstance(data, Path) else data
        target = Path(remote_path)
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f".{target.name}.specdoctor-tmp")
        tmp.write_bytes(payload)
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, target)
        self.audit.record(host=self.name, command=f"<put {len(payload)} bytes> {remote_path}", cwd=None, env=None,
                          exit=0, seconds=0.0)

    @contextmanager
    def _forward(self, remote_port: int, remote_host: str) -> Iterator[int]:
        yield remote_port

    def close(self) -> None:
        return None
