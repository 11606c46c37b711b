"""Concurrent runs on one checkout: N real specdoctor processes race for its lock; exactly one may win.

Each contender is a separate Python process (its own pid, as a second `specdoctor investigate` would be) that
opens its own host (LocalHost, or an SSH login to the test sshd) and calls `acquire_lock`, then holds it
until told to stop. Used by tests/reliability/test_checkout_lock.py and benchmarks/reliability_report.py.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass, field
from typing import Any

__all__ = ["LockRace", "CONTENDER", "race"]

CONTENDER = r"""
import json, sys, time
from specdoctor.toolkit import ToolContext
from specdoctor.tools.checkout.checkout_lock import acquire_lock, release_lock
from specdoctor.errors import SpecdoctorError
spec = json.loads(sys.argv[1])
if spec["kind"] == "local":
    from specdoctor.host import LocalHost
    host = LocalHost(base_env={"HOME": spec["home"]})
else:
    from specdoctor.host.ssh import SSHHost
    host = SSHHost(**spec["ssh"])
ctx = ToolContext(host=host, run_id=spec["run_id"])
print("READY", flush=True)
if spec.get("wait_go", True):
    sys.stdin.readline()  # every contender is loaded and logged in: the parent says go to all at once
try:
    taken = acquire_lock(ctx, spec["repo"])
    print(json.dumps({"won": True, "note": taken.note}), flush=True)
    sys.stdin.read()  # hold until the parent closes stdin
    release_lock(ctx, spec["repo"])
except SpecdoctorError as exc:
    print(json.dumps({"won": False, "error": str(exc)}), flush=True)
host.close()
"""


@dataclass
class LockRace:
    """How many contenders tried, won, were refused with a one-line error naming the holder."""

    tried: int
    won: int = 0
    refused: int = 0
    named_holder: int = 0
    errors: list[str] = field(default_factory=list)


def race(repo: str, n: int, host_spec: dict[str, Any], python: str = sys.executable) -> LockRace:
    """Start n contenders that all call acquire_lock at the same instant; collect who won and who was refused."""
    procs = []
    for i in range(n):
        spec = {**host_spec, "repo": repo, "run_id": f"race-{i}"}
        procs.append(subprocess.Popen([python, "-c", CONTENDER, json.dumps(spec)], stdin=subprocess.PIPE,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    out = LockRace(tried=n)
    for p in procs:
        assert p.stdout is not None
        p.stdout.readline()  # READY (or EOF if it died: reported below)
    for p in procs:
        assert p.stdin is not None
        p.stdin.write("go\n")
        p.stdin.flush()
    answers = []
    for p in procs:
        assert p.stdout is not None
        answers.append(p.stdout.readline())
    for p in procs:
        p.communicate("", timeout=120)
    for line, p in zip(answers, procs, strict=True):
        try:
            a = json.loads(line)
        except ValueError:
            out.errors.append(f"exit {p.returncode}: {line[:200]}")
            continue
        if a["won"]:
            out.won += 1
        else:
            out.refused += 1
            msg = a["error"]
            out.named_holder += int("in use by run race-" in msg and "pid " in msg and "\n" not in msg)
    return out
