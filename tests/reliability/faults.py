"""Fault campaign: drop the SSH link at chosen commands of a whole backup→stash→apply→launch→benchmark→restore run.

A fresh controller (new connection, same run id, nothing carried over but what is on the host) then does
what `specdoctor resume` does first: stop the servers this run started (by recorded process group only)
and restore the run's backup. The tree must be byte-identical and no server this run started may live on.
tests/repo/test_faults.py drops the link inside single worktree steps; this adds launch and benchmark.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from specdoctor.errors import HostError
from specdoctor.host.base import Host
from specdoctor.sim.ports import free_port as _free_port  # below the ephemeral range: no bind race
from specdoctor.toolkit import ToolContext, registry

from .hostile import _repo_helpers

__all__ = ["PHASES", "Fault", "FaultCampaign", "FaultOutcome", "plan_faults", "run_fault", "run_fault_campaign"]

PHASES = ["backup", "stash", "apply", "launch", "benchmark", "restore"]
KIMI = "python/sglang/srt/models/kimi_k25.py"
SCRIPT = "print('1. OK - added')\nprint('2. WARN - could not find class definition')\n"
FAKE = Path(__file__).resolve().parents[1] / "server" / "fakesglang"


@dataclass
class Fault:
    """Drop the link at command `at` (counted over the whole run) `mode` it: before / during / after.

    Mode `timer` drops it `delay` seconds after the phase starts instead (mid-HTTP during a benchmark).
    """

    phase: str
    at: int
    mode: str
    delay: float = 0.0


@dataclass
class FaultOutcome:
    """What one injected fault left behind after recovery."""

    fault: Fault
    raised: str
    restored: bool
    identical: bool
    orphans: list[int]
    detail: str = ""


@dataclass
class FaultCampaign:
    """All faults of a campaign and the totals the benchmark prints."""

    outcomes: list[FaultOutcome] = field(default_factory=list)
    phase_sizes: dict[str, int] = field(default_factory=dict)

    @property
    def injected(self) -> int:
        return len(self.outcomes)

    @property
    def identical(self) -> int:
        return sum(o.identical for o in self.outcomes)

    @property
    def orphans(self) -> int:
        return sum(len(o.orphans) for o in self.outcomes)

    def failures(self) -> list[FaultOutcome]:
        return [o for o in self.outcomes if not o.identical or o.orphans]


def _pipeline(ctx: ToolContext, repo: str, port: int, mark: Callable[[str], None]) -> None:
    """The run under test; `mark(phase)` is called as each phase starts."""
    def call(name: str, args: dict[str, Any]) -> dict[str, Any]:
        r = registry.call(ctx, name, args)
        return r.output or {}

    mark("backup")
    call("backup_worktree", {"repo": repo})
    mark("stash")
    call("stash_all", {"repo": repo})
    mark("apply")
    script = f"{ctx.state_dir}/patch_script.py"
    ctx.host.put(SCRIPT.encode(), script)
    call("apply_patches", {"repo": repo, "files": [KIMI], "script": script, "from_clean": True})
    mark("launch")
    call("launch_server", {"command": f"python3 -m sglang.launch_server --model /m --port {port}",
                           "python": "python3", "timeout_s": 30, "label": "faulty"})
    mark("benchmark")
    call("benchmark", {"port": port, "runs": 2, "requests_per_run": 1, "max_new_tokens": 8, "warmup_runs": 0,
                       "timeout_s": 10})
    call("stop_server", {"grace_s": 3})
    mark("restore")
    call("restore_worktree", {"repo": repo})
    mark("end")


def _server_pids(port: int) -> list[int]:
    """Live processes (this machine: the test host is loopback) whose command line serves `port`."""
    out = []
    needle = f"--port\x00{port}\x00".encode()
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            if needle in (d / "cmdline").read_bytes():
                state = (d / "stat").read_text().rsplit(")", 1)[1].split()[0]
                if state not in ("Z", "X"):
                    out.append(int(d.name))
        except OSError:
            continue
    return out


class Lab:
    """Everything a campaign needs on the (loopback) host: connect(), a repo template, per-fault copies."""

    def __init__(self, connect: Callable[[str], Host], workdir: str):
        self.connect, self.workdir = connect, workdir
        self.template = f"{workdir}/fault-template"
        self.n = 0
        with connect(f"{workdir}/fault-home-t") as h:
            h.run(["rm", "-rf", self.template])
            _repo_helpers().make_messy_repo(h, self.template)

    def fresh(self) -> tuple[str, str]:
        """(repo, home) copies for one fault."""
        self.n += 1
        repo, home = f"{self.workdir}/fault-repo{self.n}", f"{self.workdir}/fault-home{self.n}"
        with self.connect(home) as h:
            h.run(["rm", "-rf", repo, home])
            h.run(["mkdir", "-p", home])
            h.run(["cp", "-a", self.template, repo])
        return repo, home


def measure_phases(lab: Lab) -> dict[str, tuple[int, int]]:
    """Command-number range of every phase, on a healthy link."""
    faulty = _repo_helpers().FaultyHost
    repo, home = lab.fresh()
    starts: dict[str, int] = {}
    with lab.connect(home) as h:
        probe = faulty(h, fail_at=10**9)
        ctx = ToolContext(host=probe, run_id="measure", auto_approve=True)
        _pipeline(ctx, repo, _free_port(), lambda ph: starts.__setitem__(ph, probe.count + 1))
    names = [*PHASES, "end"]
    return {p: (starts[p], starts[names[i + 1]] - 1) for i, p in enumerate(PHASES)}


def plan_faults(ranges: dict[str, tuple[int, int]], per_phase: int = 4) -> list[Fault]:
    """`per_phase` drop points spread over each phase, cycling the drop modes.

    The launch phase always includes its start command itself (dropped after it ran: the server is up but
    the controller never saw its pid); the benchmark phase also gets drops timed into its HTTP traffic.
    """
    modes = ["during", "before", "after", "during"]
    out = []
    for ph in PHASES:
        lo, hi = ranges[ph]
        points = [(lo + round((hi - lo) * (i + 0.5) / per_phase), modes[i % len(modes)]) for i in range(per_phase)]
        if ph == "launch":
            points[:2] = [(lo + 1, "after"), (lo + 1, "during")]
        out += [Fault(ph, max(lo, min(hi, at)), m) for at, m in points]
        if ph == "benchmark":
            out += [Fault(ph, 0, "timer", d) for d in (0.05, 0.3)]
    return out


def run_fault(lab: Lab, fault: Fault) -> FaultOutcome:
    """Inject one fault, then recover from a new connection the way `specdoctor resume` does, and judge."""
    helpers = _repo_helpers()
    repo, home = lab.fresh()
    port = _free_port()
    rid = f"fault{lab.n}"
    with lab.connect(home) as h:
        before = helpers.fingerprint(h, repo)
        faulty = helpers.FaultyHost(h, fail_at=fault.at if fault.mode != "timer" else 10**9,
                                    mode=fault.mode if fault.mode != "timer" else "during")

        def drop_now() -> None:
            faulty.fail_at = faulty.count  # every later command fails: the controller lost its link
            faulty._drop()

        def mark(ph: str) -> None:
            if fault.mode == "timer" and ph == fault.phase:
                threading.Timer(fault.delay, drop_now).start()

        raised = "none"
        try:
            _pipeline(ToolContext(host=faulty, run_id=rid, auto_approve=True), repo, port, mark)
        except HostError as exc:
            raised = type(exc).__name__
    time.sleep(0.1)
    restored, detail = False, ""
    with lab.connect(home) as h2:
        ctx = ToolContext(host=h2, run_id=rid, auto_approve=True)
        stop = registry.call(ctx, "stop_server", {"grace_s": 3})
        if stop.status not in ("ok",):
            detail = f"stop_server: {stop.summary}"
        backups = registry.call(ctx, "restore_worktree", {"repo": repo, "backup_id": rid})
        restored = backups.ok
        if not backups.ok and "no backup" not in backups.summary:
            detail += f" restore: {backups.summary}"
        after = helpers.fingerprint(h2, repo)
    return FaultOutcome(fault, raised, restored, after == before, _server_pids(port), detail.strip())


def run_fault_campaign(connect: Callable[[str], Host], workdir: str, per_phase: int = 4) -> FaultCampaign:
    """Measure the phases, then inject `per_phase` faults in each of the six phases."""
    lab = Lab(connect, workdir)
    ranges = measure_phases(lab)
    camp = FaultCampaign(phase_sizes={p: hi - lo + 1 for p, (lo, hi) in ranges.items()})
    for fault in plan_faults(ranges, per_phase):
        camp.outcomes.append(run_fault(lab, fault))
    return camp


def sshd_connect(sshd: Any) -> Callable[[str], Host]:
    """connect(home) for the test sshd, with the fake SGLang importable by the remote python3."""
    def connect(home: str) -> Host:
        return sshd.connect(base_env={"HOME": home, "PYTHONPATH": str(FAKE), "FAKE_MS_PER_TOKEN": "1",
                                      "PATH": f"{os.path.dirname(sshd.python)}:/usr/local/bin:/usr/bin:/bin"})

    return connect
