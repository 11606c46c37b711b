"""One run per checkout: a lock file on the host naming its holder; a second run is refused, a dead holder's is taken over."""

from __future__ import annotations

import getpass
import hashlib
import json
import os
import secrets
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from pydantic import BaseModel, Field

from specdoctor.errors import RepoRefused, ToolRetry
from specdoctor.toolkit import ToolContext
from specdoctor.tools.remote import remote_command

__all__ = ["LockHolder", "LockTaken", "lock_path", "acquire_lock", "release_lock", "heartbeat", "read_lock",
           "checkout_lock", "STALE_AFTER_S"]

STALE_AFTER_S = 3600.0
"""A holder on another controller with no heartbeat for this long is presumed dead (same controller: pid check)."""

# link(2) is atomic: exactly one of several runs creating the lock at once succeeds.
_ACQUIRE = remote_command("lock_acquire.sh")


class LockHolder(BaseModel):
    """Who holds a checkout: the run, its controller process, the host and when it started."""

    run_id: str
    pid: int = Field(description="The controller process (specdoctor) holding the lock.")
    proc_start: str | None = Field(default=None, description="That process's start time (guards against pid reuse).")
    controller: str = Field(description="Host name of the machine specdoctor runs on.")
    user: str
    host: str = Field(description="The GPU host as specdoctor names it.")
    checkout: str
    started: float = Field(default_factory=time.time)
    heartbeat: float | None = Field(default=None, description="Last sign of life (the lock file's mtime).")

    def line(self) -> str:
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(self.started))
        return f"run {self.run_id} (pid {self.pid} of {self.user}@{self.controller}, since {when})"


class LockTaken(BaseModel):
    """The lock this run now holds, and the stale one it replaced, if any."""

    path: str
    holder: LockHolder
    took_over: LockHolder | None = None
    note: str | None = None


def _proc_start(pid: int) -> str | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def _alive_here(h: LockHolder) -> bool | None:
    """True/False for a holder on this controller (pid and its start time), None when it is elsewhere."""
    if h.controller != socket.gethostname():
        return None
    try:
        os.kill(h.pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return h.proc_start is None or _proc_start(h.pid) == h.proc_start


def lock_path(ctx: ToolContext, repo: str) -> str:
    """~/.specdoctor/locks/<sha of the checkout's real top folder>.json on the host."""
    res = ctx.host.run(["git", "-C", repo, "rev-parse", "--show-toplevel"], check="ignore",
                       env={"GIT_OPTIONAL_LOCKS": "0"})
    if not res.ok:
        raise ToolRetry(f"{repo} is not a git checkout on {ctx.host.name}")
    top = ctx.host.run(["realpath", "-e", "--", res.stdout.strip()]).stdout.strip()
    return f"{ctx.state_dir}/locks/{hashlib.sha256(top.encode()).hexdigest()[:20]}.json"


def _parse(text: str) -> LockHolder | None:
    try:
        return LockHolder.model_validate(json.loads(text))
    except ValueError:
        return None


def read_lock(ctx: ToolContext, repo: str) -> LockHolder | None:
    """The current holder of the checkout's lock, or None."""
    path = lock_path(ctx, repo)
    res = ctx.host.run(["sh", "-c", 'stat -c %Y "$1" && cat "$1"', "read", path], check="ignore")
    if not res.ok:
        return None
    mtime, _, body = res.stdout.partition("\n")
    h = _parse(body)
    if h is not None:
        h.heartbeat = float(mtime or 0)
    return h


def _stale(h: LockHolder | None, stale_after_s: float) -> str | None:
    """Why the holder is presumed dead, or None when it may be alive."""
    if h is None:
        return "unreadable lock file"
    alive = _alive_here(h)
    if alive is False:
        return f"its process {h.pid} is gone"
    if alive is None and h.heartbeat is not None and time.time() - h.heartbeat > stale_after_s:
        return f"no sign of life for {int(time.time() - h.heartbeat)} s"
    return None


def acquire_lock(ctx: ToolContext, repo: str, run_id: str | None = None, *,
                 stale_after_s: float = STALE_AFTER_S) -> LockTaken:
    """Take the checkout's lock for this run, or raise RepoRefused (one line naming the holder).

    The same run id (a `resume`) takes over its own lock when the old process is gone; a live holder is never
    displaced; a dead one (its pid gone on this controller, or silent for stale_after_s) is taken over with a note.
    """
    rid = run_id or ctx.run_id
    path = lock_path(ctx, repo)
    me = LockHolder(run_id=rid, pid=os.getpid(), proc_start=_proc_start(os.getpid()), controller=socket.gethostname(),
                    user=getpass.getuser(), host=ctx.host.name, checkout=repo)
    took_over: LockHolder | None = None
    why: str | None = None
    for _ in range(3):
        res = ctx.host.run(["sh", "-c", _ACQUIRE, "acquire", path, me.model_dump_json(), secrets.token_hex(6)])
        if res.stdout.startswith("ACQUIRED"):
            return LockTaken(path=path, holder=me, took_over=took_over,
                             note=f"took over the lock of {took_over.line()}: {why}" if took_over else None)
        _held, mtime, body = (res.stdout.split("\n", 2) + ["", ""])[:3]
        holder = _parse(body)
        if holder is not None:
            holder.heartbeat = float(mtime or 0) or None
        if holder is not None and holder.run_id == rid and holder.pid == me.pid:
            return LockTaken(path=path, holder=holder, note="already held by this process")
        why = _stale(holder, stale_after_s)
        if why is None and holder is not None:
            raise RepoRefused(f"{repo} is in use by {holder.line()}; wait for it to finish, or stop it first")
        # rename, not delete: if two runs judge the same stale lock, only one rename succeeds
        aside = f"{path}.stale-{secrets.token_hex(4)}"
        if ctx.host.run(["mv", "--", path, aside], check="ignore").ok:
            ctx.host.run(["rm", "-f", "--", aside], check="ignore")
            took_over = holder
    raise RepoRefused(f"{repo}: could not take its lock at {path} (another run keeps taking it)")


def heartbeat(ctx: ToolContext, repo: str, run_id: str | None = None) -> bool:
    """Refresh the lock's sign of life; False when this run no longer holds it."""
    return _on_own_lock(ctx, repo, run_id, "touch", "beat")


def release_lock(ctx: ToolContext, repo: str, run_id: str | None = None) -> bool:
    """Remove the lock if this run holds it (never another run's); True when removed."""
    return _on_own_lock(ctx, repo, run_id, "rm -f", "release")


def _on_own_lock(ctx: ToolContext, repo: str, run_id: str | None, command: str, label: str) -> bool:
    """Run `command -- LOCK` only while the lock names this run (one host command, so no race); True when it ran."""
    path = lock_path(ctx, repo)
    needle = json.dumps(run_id or ctx.run_id)
    res = ctx.host.run(["sh", "-c", f'grep -qF -- "$2" "$1" && {command} -- "$1"', label, path, f'"run_id":{needle}'],
                       check="ignore")
    return res.ok


@contextmanager
def checkout_lock(ctx: ToolContext, repo: str, run_id: str | None = None) -> Iterator[LockTaken]:
    """`with checkout_lock(ctx, repo) as taken:` hold the lock for the block (released on any exit)."""
    taken = acquire_lock(ctx, repo, run_id)
    if taken.note:
        ctx.say(taken.note)
    try:
        yield taken
    finally:
        release_lock(ctx, repo, run_id)
