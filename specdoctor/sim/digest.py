"""The twin's own content digest of a laid-out checkout, for stories whose good run had this very code."""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

__all__ = ["code_digest"]


def code_digest(repo: Path, env: dict[str, str]) -> str:
    """The checkout's content digest as a fingerprint records it (the twin's own reading of the documented recipe:
    sha256 of HEAD, '@@diff', `git diff --binary HEAD`, '@@untracked', then `sha256sum` lines of the untracked files
    in byte order of their paths)."""
    def out(*args: str) -> bytes:
        return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, env=env, check=True).stdout

    untracked = sorted(p for p in out("ls-files", "-z", "-o", "--exclude-standard").split(b"\0") if p)
    lines = b"".join(hashlib.sha256((repo / p.decode()).read_bytes()).hexdigest().encode() + b"  " + p + b"\n"
                     for p in untracked)
    blob = out("rev-parse", "HEAD") + b"@@diff\n" + out("diff", "--binary", "HEAD") + b"@@untracked\n" + lines
    return hashlib.sha256(blob).hexdigest()
