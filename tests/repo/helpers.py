"""Test helpers: build a messy git checkout through any Host, and fingerprint a checkout independently of specdoctor."""

from __future__ import annotations

import contextlib
import hashlib
import shlex
import threading

from specdoctor.errors import ConnectionLost
from specdoctor.host.base import Host, Raw

__all__ = ["WEIRD", "make_messy_repo", "fingerprint", "FaultyHost"]

WEIRD = "dir with space/na\u00efve f\u00efle\nwith newline.py"
"""A file name with spaces, unicode and a newline."""

_ID = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}


def _w(host: Host, path: str, text: str) -> None:
    host.run(Raw(f"mkdir -p \"$(dirname {shlex.quote(path)})\" && printf %s {shlex.quote(text)} > {shlex.quote(path)}"))


def make_messy_repo(host: Host, repo: str, *, detached: bool = False) -> None:
    """Commits, two user stashes, a staged+unstaged file, an untracked file, a deleted file, an ignored file."""
    g = ["git", "-C", repo]
    host.run(["mkdir", "-p", repo])
    host.run([*g, "init", "-q", "-b", "main"])
    _w(host, f"{repo}/python/sglang/srt/models/kimi_k25.py", "EntryClass = [KimiK25ForConditionalGeneration]\n")
    _w(host, f"{repo}/python/sglang/srt/layers/moe/topk.py", "def select_experts():\n    return 1\n")
    _w(host, f"{repo}/python/sglang/srt/entrypoints/engine.py", "def launch():\n    pass\n")
    _w(host, f"{repo}/{WEIRD}", "weird = 1\n")
    _w(host, f"{repo}/gone.txt", "to be deleted\n")
    _w(host, f"{repo}/run.sh", "#!/bin/sh\necho hi\n")
    _w(host, f"{repo}/.gitignore", "*.log\n")
    host.run(["chmod", "+x", f"{repo}/run.sh"])
    host.run([*g, "add", "-A"], env=_ID)
    host.run([*g, "commit", "-q", "-m", "base"], env=_ID)
    _w(host, f"{repo}/python/sglang/srt/layers/moe/topk.py", "def select_experts():\n    return 2\n")
    host.run([*g, "stash", "-q"], env=_ID)
    _w(host, f"{repo}/python/sglang/srt/entrypoints/engine.py", "def launch():\n    return 'stash2'\n")
    host.run([*g, "stash", "push", "-q", "-m", "second stash"], env=_ID)
    if detached:
        host.run([*g, "checkout", "-q", "--detach", "HEAD"])
    _w(host, f"{repo}/python/sglang/srt/models/kimi_k25.py",
       "EntryClass = [KimiK25ForConditionalGeneration]\n\ndef set_eagle3_layers_to_capture():\n    pass\n")
    host.run([*g, "add", "python/sglang/srt/models/kimi_k25.py"])
    _w(host, f"{repo}/python/sglang/srt/models/kimi_k25.py",
       "EntryClass = [KimiK25ForConditionalGeneration]\n\ndef set_eagle3_layers_to_capture():\n    return 3\n")
    _w(host, f"{repo}/python/sglang/srt/layers/moe/topk.py",
       "import os\ndef select_experts():\n    k0 = int(os.environ.get('SGLANG_OEA_K0', '0'))\n    return 1\n")
    _w(host, f"{repo}/{WEIRD}", "weird = 2\n")
    host.run(["rm", f"{repo}/gone.txt"])
    _w(host, f"{repo}/new_untracked.py", "logger.info('new')\n")
    _w(host, f"{repo}/server.log", "ignored\n")


_FP = r"""
cd "$1" || exit 1
echo "HEAD $(git rev-parse HEAD) $(git symbolic-ref -q HEAD || echo detached)"
echo "INDEX"; git ls-files -s -z | od -An -c | tr -s ' '
echo "STASH"; git stash list --format='%H %gs'
echo "FILES"
find . -path ./.git -prune -o \( -type f -o -type l \) -print0 | sort -z | while IFS= read -r -d '' f; do
  printf '%s %s %s\n' "$(printf %s "$f" | od -An -tx1 | tr -d ' \n')" "$(stat -c %a "$f")" "$(sha256sum < "$f" | cut -c1-16)"
done
"""


def fingerprint(host: Host, repo: str) -> str:
    """HEAD, index entries, stash list and every file's bytes+mode (ignored files too) — no specdoctor code."""
    res = host.run(["bash", "-c", _FP, "fp", repo])
    return hashlib.sha256(res.stdout.encode()).hexdigest() + "\n" + res.stdout


class FaultyHost(Host):
    """Wraps an SSHHost; at command number `fail_at` the connection is dropped before, during or after it.

    Every later command fails too (the controller lost its link), as if the laptop's SSH died.
    """

    def __init__(self, inner: Host, fail_at: int, mode: str = "during"):
        super().__init__(audit=inner.audit)
        self.inner, self.fail_at, self.mode, self.count = inner, fail_at, mode, 0
        self.name = inner.name

    def _drop(self) -> None:
        client = getattr(self.inner, "_client", None)
        transport = client.get_transport() if client is not None else None
        if transport is not None:
            transport.close()

    def _tick(self) -> None:
        self.count += 1
        if self.count > self.fail_at:
            raise ConnectionLost(f"connection to {self.name} is gone (injected at command {self.fail_at})")

    def _exec(self, cmd, *, env, cwd, timeout, stdin):
        self._tick()
        if self.count < self.fail_at:
            return self.inner._exec(cmd, env=env, cwd=cwd, timeout=timeout, stdin=stdin)
        if self.mode == "before":
            self._drop()
        elif self.mode == "during":
            threading.Timer(0.003, self._drop).start()
            with contextlib.suppress(ConnectionLost):
                self.inner._exec(cmd, env=env, cwd=cwd, timeout=timeout, stdin=stdin)
        else:
            self.inner._exec(cmd, env=env, cwd=cwd, timeout=timeout, stdin=stdin)
            self._drop()
        raise ConnectionLost(f"injected: connection to {self.name} dropped {self.mode} command {self.fail_at}")

    def read(self, path: str) -> bytes:
        self._tick()
        if self.count == self.fail_at:
            self._drop()
            raise ConnectionLost("injected during read")
        return self.inner.read(path)

    def put(self, data, remote_path: str, *, mode: int | None = None) -> None:
        payload = data.read_bytes() if hasattr(data, "read_bytes") else data
        self.run(f"mkdir -p \"$(dirname {shlex.quote(remote_path)})\" && cat > {shlex.quote(remote_path)}",
                 stdin=payload)

    def _forward(self, remote_port: int, remote_host: str):
        return self.inner._forward(remote_port, remote_host)

    def close(self) -> None:
        self.inner.close()
