"""Test helpers: build a messy git checkout through any Host, and fingerprint a checkout independently of specdoctor."""

from __future__ import annotations

import contextlib
import hashlib
import shlex
import threading

from specdoctor.errors import ConnectionLost
from specdoctor.host.base import Host

__all__ = ["WEIRD", "make_messy_repo", "fingerprint", "FaultyHost"]

WEIRD = "dir with space/na\u00efve f\u00efle\nwith newline.py"
"""A file name with spaces, unicode and a newline."""

_ID = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}


def _w(path: str, text: str) -> str:
    return f"mkdir -p \"$(dirname {shlex.quote(path)})\" && printf %s {shlex.quote(text)} > {shlex.quote(path)}\n"


def make_messy_repo(host: Host, repo: str, *, detached: bool = False) -> None:
    """Commits, two user stashes, a staged+unstaged file, an untracked file, a deleted file, an ignored file.

    Built in one shell round-trip (argv: the script's only input is the quoted repo path).
    """
    kimi, topk = "python/sglang/srt/models/kimi_k25.py", "python/sglang/srt/layers/moe/topk.py"
    eng = "python/sglang/srt/entrypoints/engine.py"
    steps = [
        "set -e", 'mkdir -p "$R" && cd "$R"', "git init -q -b main",
        _w(kimi, "EntryClass = [KimiK25ForConditionalGeneration]\n"),
        _w(topk, "def select_experts():\n    return 1\n"), _w(eng, "def launch():\n    pass\n"),
        _w(WEIRD, "weird = 1\n"), _w("gone.txt", "to be deleted\n"), _w("run.sh", "#!/bin/sh\necho hi\n"),
        _w(".gitignore", "*.log\n"), "chmod +x run.sh", "git add -A", "git commit -q -m base",
        _w(topk, "def select_experts():\n    return 2\n"), "git stash -q",
        _w(eng, "def launch():\n    return 'stash2'\n"), "git stash push -q -m 'second stash'",
        "git checkout -q --detach HEAD" if detached else "true",
        _w(kimi, "EntryClass = [KimiK25ForConditionalGeneration]\n\ndef set_eagle3_layers_to_capture():\n    pass\n"),
        f"git add {shlex.quote(kimi)}",
        _w(kimi, "EntryClass = [KimiK25ForConditionalGeneration]\n\ndef set_eagle3_layers_to_capture():\n"
                 "    return 3\n"),
        _w(topk, "import os\ndef select_experts():\n    k0 = int(os.environ.get('SGLANG_OEA_K0', '0'))\n"
                 "    return 1\n"),
        _w(WEIRD, "weird = 2\n"), "rm gone.txt", _w("new_untracked.py", "logger.info('new')\n"),
        _w("server.log", "ignored\n"),
    ]
    host.run(["bash", "-c", 'R="$1"\n' + "\n".join(steps), "make_messy_repo", repo], env=_ID)


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
