"""MockHost: a Host whose commands are answered by a handler function (httpx MockTransport style)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from specdoctor.errors import UsageError
from specdoctor.host.base import Host, Result

__all__ = ["MockHost"]

Handler = Callable[[list[str] | str, dict[str, str], str | None], Result | tuple[int, str, str] | str]


class MockHost(Host):
    """Unit-test host: `handler(cmd, env, cwd)` returns a Result, (exit, out, err) or stdout; files live in a dict."""

    def __init__(self, handler: Handler, files: dict[str, bytes] | None = None, name: str = "mock"):
        super().__init__()
        self.handler = handler
        self.files = dict(files or {})
        self.name = name
        self.calls: list[list[str] | str] = []

    def _exec(self, cmd, *, env, cwd, timeout, stdin):
        self.calls.append(cmd)
        answer = self.handler(cmd, env, cwd)
        if isinstance(answer, Result):
            return answer.exit, answer.stdout, answer.stderr
        if isinstance(answer, str):
            return 0, answer, ""
        return answer

    def read(self, path: str) -> bytes:
        if path not in self.files:
            raise UsageError(f"no such file on {self.name}: {path}")
        return self.files[path]

    def put(self, data: bytes | Path, remote_path: str, *, mode: int | None = None) -> None:
        self.files[remote_path] = data.read_bytes() if isinstance(data, Path) else data

    @contextmanager
    def _forward(self, remote_port: int, remote_host: str) -> Iterator[int]:
        yield remote_port

    def close(self) -> None:
        return None
