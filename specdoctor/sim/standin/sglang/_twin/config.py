"""Where the twin's hidden model lives, and SGLang-style log lines."""

from __future__ import annotations

import json
import os
import sys
import time

__all__ = ["exec_environ", "load_twin", "log", "sandbox_root", "ts"]


def sandbox_root() -> str:
    """The sandbox root, written next to this package when the sandbox was laid out."""
    here = os.path.dirname(os.path.abspath(__file__))
    with open(os.path.join(here, "location.txt"), encoding="utf-8") as fh:
        return fh.read().strip()


def bump_counter(root: str, name: str) -> int:
    """How many times this sandbox has run `name` (servers launched, nccl-tests run), this one included: the noise
    differs per run but is seeded from the scenario, never from a process id or Python's per-process hash."""
    import fcntl

    path = os.path.join(root, ".sim", name)
    with open(path, "a+", encoding="utf-8") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        fh.seek(0)
        n = int(fh.read().strip() or 0) + 1
        fh.seek(0)
        fh.truncate()
        fh.write(str(n))
    return n


def load_twin() -> dict:
    """The scenario model (hardware, patches, perf) that the sandbox wrote at <root>/.sim/twin.json."""
    with open(os.path.join(sandbox_root(), ".sim", "twin.json"), encoding="utf-8") as fh:
        return json.load(fh)


def ts() -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S")


def log(msg: str, tag: str = "") -> None:
    """One SGLang log line on stderr: `[YYYY-mm-dd HH:MM:SS TP0] msg` (tag only when TP>1)."""
    prefix = f"[{ts()}{' ' + tag if tag else ''}] "
    sys.stderr.write(prefix + msg + "\n")
    sys.stderr.flush()


def exec_environ() -> dict[str, str]:
    """The environment this process was exec'd with (before any sitecustomize edited os.environ)."""
    try:
        with open("/proc/self/environ", "rb") as fh:
            raw = fh.read()
    except OSError:
        return dict(os.environ)
    out = {}
    for item in raw.split(b"\0"):
        if b"=" in item:
            k, _, v = item.partition(b"=")
            out[k.decode(errors="replace")] = v.decode(errors="replace")
    return out
