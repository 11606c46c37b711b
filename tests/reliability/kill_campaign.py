"""SIGKILL the controller at random moments of a whole `investigate` on the twin, then `resume`: left as found?

For each kill a fresh sandbox of the scenario; the checkout's manifest is taken; `specdoctor investigate` runs as a
real process and is SIGKILLed a seeded random delay after a chosen step starts (steps spread over the whole run,
the trial steps more than once: a trial tree on disk at that moment); then `resume` runs to the end. Checked after:
the manifest byte for byte, no process of the run still alive (its started.json groups, anything running from
its trial trees), the user's server back (same identity: argv, environment, cwd, user) and healthy, the run's trees
gone, the run finished.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from specdoctor.sim import SimHost, build_sandbox, load_scenario
from specdoctor.toolkit import ToolContext
from specdoctor.tools.checkout.manifest import take_manifest
from specdoctor.tools.serving.port_hold import holders

__all__ = ["Kill", "KillCampaign", "run_kill_campaign", "KILL_STEPS"]


KILL_STEPS = ("fingerprint", "reproduce", "triage", "backup", "subtract", "subtract", "bisect", "bisect", "nccl",
              "conclude")
"""Where the kills fall: every phase, the trial steps twice (the worst moments: a trial server and tree exist)."""


@dataclass
class Kill:
    """One SIGKILL and what the resume left."""

    at_s: float
    step: str | None = None
    after_s: float = 0.0
    in_trial: bool = False
    resumed: bool = False
    identical: bool = False
    orphans: list[int] = field(default_factory=list)
    user_server_same: bool = False
    trees_left: bool = False
    error: str | None = None

    @property
    def recovered(self) -> bool:
        return self.resumed and self.identical and not self.orphans and self.user_server_same and not self.trees_left


@dataclass
class KillCampaign:
    kills: list[Kill] = field(default_factory=list)

    @property
    def recovered(self) -> int:
        return sum(k.recovered for k in self.kills)


def _cli(args: list[str], home: Path, cwd: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "SPECDOCTOR_HOME": str(home), "COLUMNS": "120", "PYTHONUNBUFFERED": "1"}
    return subprocess.Popen([sys.executable, "-m", "specdoctor.cli", *args], env=env, cwd=cwd,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _pgid(pid: str) -> int | None:
    try:
        f = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return None if f[0] in ("Z", "X") else int(f[2])
    except (OSError, IndexError, ValueError):
        return None


def _orphans(sb_root: Path, run_id: str) -> list[int]:
    """Live processes of the run: its recorded groups, or anything whose cwd/env points into its trial trees."""
    started = sb_root / "home" / ".specdoctor" / "runs" / run_id / "started.json"
    groups = {json.loads(ln)["pgid"] for ln in started.read_text().splitlines() if ln.strip()} \
        if started.exists() else set()
    trees = f"{sb_root}/home/.specdoctor/trees/{run_id}".encode()
    out = []
    for p in Path("/proc").iterdir():
        if not p.name.isdigit():
            continue
        pg = _pgid(p.name)
        if pg is None:
            continue
        try:
            env = (p / "environ").read_bytes()
            cwd = os.readlink(p / "cwd").encode()
        except OSError:
            env, cwd = b"", b""
        if pg in groups or trees in env or cwd.startswith(trees):
            out.append(int(p.name))
    return out


def _identity(host: SimHost, pid: int | None) -> str | None:
    """The PID-less identity the agent itself checks (argv, full environment, cwd, user)."""
    if pid is None:
        return None
    from specdoctor.tools.serving.user_server import capture, identity_hash

    c = capture(host, pid)
    return identity_hash(c.argv, c.env, c.cwd, c.user)


@contextmanager
def _keep_sandbox() -> Iterator[None]:
    """`resume` closes the host it reopened; the campaign still needs the sandbox to check it."""
    saved = SimHost.close
    SimHost.close = lambda self: None  # type: ignore[method-assign]
    try:
        yield
    finally:
        SimHost.close = saved  # type: ignore[method-assign]


def _kill_after(p: subprocess.Popen[str], step: str, delay: float) -> tuple[bool, float, list[str]]:
    """SIGKILL `delay` s after the line announcing `step` (▶ step); (killed while running, seconds, output)."""
    lines: list[str] = []
    seen = threading.Event()

    def read() -> None:
        assert p.stdout is not None
        for ln in p.stdout:
            lines.append(ln)
            if ln.startswith(f"▶ {step}:"):
                seen.set()

    t0 = time.monotonic()
    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    while not seen.wait(0.05):
        if p.poll() is not None:
            break
    time.sleep(delay if seen.is_set() else 0)
    running = p.poll() is None
    p.send_signal(signal.SIGKILL)
    p.wait(timeout=60)
    reader.join(timeout=10)
    return running and seen.is_set(), time.monotonic() - t0, lines


def _one(scenario: str, work: Path, step: str, delay: float) -> Kill:
    k = Kill(at_s=0.0, step=step, after_s=delay)
    sb = build_sandbox(load_scenario(scenario), work / "box")
    home = work / "sdhome"
    try:
        host = SimHost(sb)
        ctx = ToolContext(host=host, run_id="kill-check")
        before = take_manifest(ctx, sb.repo)
        user_pids = sb.server_pids()
        user_pid = user_pids[0] if user_pids else None
        user_identity = _identity(host, user_pid)
        p = _cli(["investigate", "--host", f"sim:attach={sb.root}", "--yes", "--out", str(work / "out")], home, work)
        trees = sb.root / "home" / ".specdoctor" / "trees"
        killed, k.at_s, _out = _kill_after(p, step, delay)
        k.in_trial = trees.exists() and any(d.is_dir() for r in trees.iterdir() for d in r.iterdir())
        if not killed:
            k.error = f"step {step} never ran or the run ended first"
        recs = sorted((home / "runs").glob("*.json"))
        if not recs:
            k.error = "killed before the run was recorded"
            run_id = None
        else:
            run_id = recs[0].stem
        if run_id is not None:
            os.environ["SPECDOCTOR_HOME"] = str(home)
            from specdoctor.engine.runner import resume

            try:
                with _keep_sandbox():
                    outcome = resume(run_id, yes=True)
                k.resumed = outcome.status == "finished"
            except Exception as exc:  # noqa: BLE001 - recorded per kill
                k.error = f"{type(exc).__name__}: {exc}"[:300]
            # a placeholder left on the user's port (the restart releases it) is an orphan too
            k.orphans = _orphans(sb.root, run_id) + holders(host, sb.port)
            k.trees_left = (sb.root / "home" / ".specdoctor" / "trees" / run_id).exists()
        d = before.diff(take_manifest(ctx, sb.repo))
        k.identical = d.same
        if not d.same:
            k.error = (k.error or "") + f" differences: {d.differences[:3]}"
        # The user's server was stopped for the trials (--yes) and restarted: the same server is the same argv,
        # environment, cwd and user on its port — not the same PID.
        now = sb.server_pids()
        alive = user_pid is None or (bool(now) and _identity(host, now[0]) == user_identity)
        try:
            healthy = httpx.get(f"http://127.0.0.1:{sb.port}/health", timeout=10).status_code == 200
        except httpx.HTTPError:
            healthy = False
        k.user_server_same = alive and healthy
        return k
    finally:
        sb.remove()


def run_kill_campaign(scenario: str, work: Path, kills: int = 10, seed: int = 19) -> KillCampaign:
    """`kills` SIGKILLs (KILL_STEPS, spread; fewer: a seeded sample) at a seeded random delay into the step."""
    out = KillCampaign()
    rng = random.Random(seed)
    steps = list(KILL_STEPS) if kills >= len(KILL_STEPS) else sorted(rng.sample(KILL_STEPS, kills),
                                                                     key=KILL_STEPS.index)
    saved = os.environ.get("SPECDOCTOR_HOME")
    try:
        for i, step in enumerate(steps):
            d = work / f"kill{i}"
            d.mkdir(parents=True)
            out.kills.append(_one(scenario, d, step, rng.uniform(0.0, 3.0)))
    finally:
        if saved is None:
            os.environ.pop("SPECDOCTOR_HOME", None)
        else:
            os.environ["SPECDOCTOR_HOME"] = saved
    return out
