"""How to run the user's patch script: by its own `#!` line, as the kernel would, not always with python.

A patch script is whatever the user wrote — often a bash script of `sed`/`git apply` lines. On the real H200 box a
`#!/usr/bin/env bash` script was run as `python3 script.sh` and died on its first `if` (SyntaxError, exit 1), which
made the subtraction's trial tree untrustworthy. A script whose `#!` names a python runs with the server's own
interpreter (it may import sglang); another `#!` names its interpreter; without one, `.sh`/`.bash` means bash and
anything else the server's python (the scripts the tool has always been given).
"""

from __future__ import annotations

import shlex
from pathlib import PurePosixPath

from specdoctor.errors import UsageError
from specdoctor.toolkit import ToolContext

__all__ = ["script_command"]

_SHELL_SUFFIXES = {".sh", ".bash"}


def _interpreter(shebang: str) -> list[str]:
    """The `#!` line's words (empty when it cannot be read)."""
    try:
        return shlex.split(shebang[2:].strip())
    except ValueError:
        return shebang[2:].split()


def _is_python(words: list[str]) -> bool:
    prog = [w for w in words[1:] if not w.startswith("-")] if PurePosixPath(words[0]).name == "env" else words
    return bool(prog) and PurePosixPath(prog[0]).name.startswith("python")


def script_command(ctx: ToolContext, script: str, python: str, args: list[str]) -> list[str]:
    """The argv that runs `script` with `args` the way its first line asks."""
    try:
        first = ctx.host.read(script)[:512].decode("utf-8", "replace").splitlines()[:1]
    except UsageError:
        first = []  # unreadable here: run it as before, and let the run say why it fails
    words = _interpreter(first[0]) if first and first[0].startswith("#!") else []
    if words and not _is_python(words):
        return [*words, script, *args]
    if not words and PurePosixPath(script).suffix in _SHELL_SUFFIXES:
        return ["bash", script, *args]
    return [python, script, *args]
