"""Content digests beside the commit: what is identical to the reference needs no trial.

A commit says little about a checkout with local patches; two runs are the same code only when HEAD, the diff of
the tracked files and the untracked files are byte for byte the same. The launch line (its port and bind address
aside) and the workers' tuning environment get a digest of their own, so a saved fingerprint answers "same flags,
same variables?" without a trial.
"""

from __future__ import annotations

import hashlib
import shlex

from specdoctor.tools.remote import remote_command

__all__ = ["CODE_DIGEST_SCRIPT", "parse_code_digest", "launch_digest", "env_digest", "IGNORED_FLAGS"]

CODE_DIGEST_SCRIPT = remote_command("code_digest.sh")
"""sha256 over HEAD, `git diff --binary HEAD` (tracked files, staged or not) and each untracked (not ignored)
file's own sha256 with its path, in byte order. Runs with SD_REPO set; prints 64 hex digits."""

IGNORED_FLAGS = frozenset({"--port", "--host"})
"""Flags that do not change performance: a relaunch picks its own port, and where it binds is the user's."""


def parse_code_digest(text: str) -> str | None:
    """The digest line of CODE_DIGEST_SCRIPT's output (None when git failed: no 64-hex line)."""
    for line in text.splitlines():
        s = line.strip()
        if len(s) == 64 and all(c in "0123456789abcdef" for c in s):
            return s
    return None


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def launch_digest(launch: str | None) -> str | None:
    """The launch line's tokens without --port/--host (and their values), `--flag=value` split like `--flag value`."""
    if not launch:
        return None
    try:
        tokens = shlex.split(launch)
    except ValueError:
        return None
    flat: list[str] = []
    for tok in tokens:
        if tok.startswith("--") and "=" in tok:
            flat.extend(tok.split("=", 1))
        else:
            flat.append(tok)
    kept: list[str] = []
    skip = False
    for tok in flat:
        if skip:
            skip = False
            continue
        if tok in IGNORED_FLAGS:
            skip = True
            continue
        kept.append(tok)
    return _sha("\0".join(kept))


def env_digest(env: dict[str, str] | None) -> str | None:
    """The workers' tuning variables (name=value, sorted); None when they were not read."""
    if env is None:
        return None
    return _sha("\0".join(f"{k}={v}" for k, v in sorted(env.items())))
