"""The user's own server: read what brings it back (argv, cwd, env, user, log targets, supervisor), stop it, restart it.

Nothing here runs on its own initiative: the engine's GPU-ownership steps call these with the user's consent. The
full environment never leaves `capture()`'s return value (the engine keeps it in the 0600 relaunch file); tool
outputs carry it redacted.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import shlex
import time
from dataclasses import dataclass, field

from pydantic import BaseModel, Field

from specdoctor.errors import ToolFailed, ToolRetry
from specdoctor.host.base import Host, Raw
from specdoctor.host.redact import redact_env
from specdoctor.inference import engine_for_argv
from specdoctor.parsers.sections import split_sections
from specdoctor.toolkit import ToolContext, tool
from specdoctor.tools.serving.terminal_session import LOCATION_VARS, TerminalSession, session_of

__all__ = ["Captured", "Ancestor", "UserServerInput", "UserServerRecord", "inspect_user_server", "capture",
           "classify_supervisor", "identity_hash", "StopUserInput", "StopUserResult", "stop_user_server",
           "RESTARTERS", "manual_step", "record_of"]

# Supervisors that would start the server again the moment it exits (or own its lifetime): never fought.
RESTARTERS = frozenset({"supervisord", "restarter", "systemd", "container"})
_SUPERVISOR_NAMES = {"supervisord": "supervisord", "runsv": "supervisord", "s6-supervise": "supervisord",
                     "circusd": "supervisord", "pm2": "supervisord", "god": "supervisord", "monit": "supervisord"}
_CONTAINER = re.compile(r"/(docker|libpod|lxc|kubepods|containerd|crio)[-/.]|/docker/[0-9a-f]{12}")
_SERVICE = re.compile(r"/([^/]+\.service)$")
_LOOP = re.compile(r"\b(while|until)\b.*\b(do)\b")


@dataclass(frozen=True)
class Ancestor:
    """One process above the server: pid and command line."""

    pid: int
    cmdline: str


@dataclass
class Captured:
    """Everything needed to start the server again as it was (env unredacted: keep it in the 0600 file only)."""

    pid: int
    starttime: int
    pgid: int
    ppid: int
    argv: list[str]
    env: dict[str, str]
    cwd: str
    uid: int
    user: str
    stdout: str
    stderr: str
    cgroup: str
    ancestors: list[Ancestor] = field(default_factory=list)


def identity_hash(argv: list[str], env: dict[str, str], cwd: str | None, user: str | None) -> str:
    """A PID-less identity: the same server started again hashes the same (argv, full env, cwd, user). Which tmux
    pane or screen window it runs in (LOCATION_VARS) is where it is, not what it is, like its pid."""
    kept = sorted((k, v) for k, v in env.items() if k not in LOCATION_VARS)
    blob = json.dumps({"argv": list(argv), "env": kept, "cwd": cwd, "user": user}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def _script(pid: int) -> Raw:
    p = f"/proc/{int(pid)}"
    # One round trip. The comm field of a stat line may hold spaces and ')': fields are read after its last ') '.
    return Raw(
        f"cat {p}/stat && echo @@argv && base64 -w0 {p}/cmdline && echo && echo @@env && base64 -w0 {p}/environ "
        f"&& echo && echo @@cwd && readlink {p}/cwd && echo @@out && readlink {p}/fd/1; echo @@err; "
        f"readlink {p}/fd/2; echo @@uid; uid=$(awk '/^Uid:/{{print $2}}' {p}/status); echo \"$uid\"; "
        "getent passwd \"$uid\" | cut -d: -f1; echo @@cgroup; "
        f"cat {p}/cgroup; echo @@anc; q={int(pid)}; i=0; while [ $i -lt 16 ]; do i=$((i+1)); "
        "s=$(cat /proc/$q/stat 2>/dev/null) || break; r=${s##*) }; set -- $r; q=$2; [ \"$q\" -gt 1 ] || break; "
        "echo \"$q $(base64 -w0 /proc/$q/cmdline 2>/dev/null)\"; done; true")


def _argv(b64: str) -> list[str]:
    raw = base64.b64decode(b64 or "")
    return [a.decode("utf-8", "replace") for a in raw.split(b"\0") if a] if raw else []


def capture(host: Host, pid: int) -> Captured:
    """Read /proc/PID on the host: argv, full environment, cwd, user, stdout/stderr targets, cgroup, parents."""
    res = host.run(_script(pid), check="ignore", timeout=30)
    sec = split_sections(res.stdout, first="stat")
    stat = next((ln for ln in sec.get("stat", []) if ln.startswith(f"{pid} (")), None)
    if stat is None or not sec.get("argv"):
        raise ToolRetry(f"process {pid} is gone or unreadable on {host.name}")
    fields = stat[stat.rindex(")") + 2:].split()
    env_raw = base64.b64decode((sec.get("env") or [""])[0] or "")
    env = dict(kv.split("=", 1) for kv in env_raw.decode("utf-8", "replace").split("\0") if "=" in kv)
    uid_lines = sec.get("uid") or []
    uid = int(uid_lines[0]) if uid_lines and uid_lines[0].isdigit() else -1
    ancestors = []
    for line in sec.get("anc") or []:
        ppid, _, b64 = line.partition(" ")
        if ppid.isdigit():
            ancestors.append(Ancestor(int(ppid), " ".join(_argv(b64))))
    return Captured(pid=pid, starttime=int(fields[19]), pgid=int(fields[2]), ppid=int(fields[1]),
                    argv=_argv(sec["argv"][0]), env=env, cwd=(sec.get("cwd") or [""])[0],
                    uid=uid, user=(uid_lines[1] if len(uid_lines) > 1 else str(uid)),
                    stdout=(sec.get("out") or [""])[0], stderr=(sec.get("err") or [""])[0],
                    cgroup="\n".join(sec.get("cgroup") or []), ancestors=ancestors)


def classify_supervisor(cgroup: str, ancestors: list[Ancestor], ppid: int) -> tuple[str, str]:
    """(kind, detail): container / systemd (a .service unit) from the cgroup; supervisord-like daemons, a shell
    restart loop, tmux or screen from the parent chain; else nohup (re-parented to init) or none."""
    for line in cgroup.splitlines():
        path = line.split(":", 2)[-1]
        if _CONTAINER.search(path):
            return "container", f"cgroup {path}"
    for line in cgroup.splitlines():
        path = line.split(":", 2)[-1]
        m = _SERVICE.search(path)
        if m and not m.group(1).startswith("user@"):
            return "systemd", f"unit {m.group(1)}"
    for a in ancestors:
        words = a.cmdline.split()
        names = {w.rsplit("/", 1)[-1] for w in words[:3]}  # `python /usr/bin/supervisord -c ...` included
        for name in names:
            if name in _SUPERVISOR_NAMES:
                return _SUPERVISOR_NAMES[name], f"pid {a.pid}: {a.cmdline[:120]}"
        if _LOOP.search(a.cmdline):
            return "restarter", f"pid {a.pid} restarts it in a loop: {a.cmdline[:120]}"
        head = words[0].rsplit("/", 1)[-1] if words else ""
        if head.startswith("tmux"):
            return "tmux", f"pid {a.pid}: {a.cmdline[:80]}"
        if head.lower().startswith("screen"):
            return "screen", f"pid {a.pid}: {a.cmdline[:80]}"
    if ppid <= 1 or not ancestors:
        return "nohup", "re-parented to init (started with nohup/setsid, its shell gone)"
    return "none", f"child of pid {ancestors[0].pid}: {ancestors[0].cmdline[:80]}"


def manual_step(kind: str, detail: str, port: int | None) -> str:
    """The one line telling the user what to do by hand when a supervisor owns the server."""
    how = {"supervisord": "stop it through its supervisor (e.g. `supervisorctl stop PROGRAM`)",
           "restarter": "stop the loop that restarts it",
           "systemd": f"`systemctl stop {detail.removeprefix('unit ')}`",
           "container": "stop its container"}.get(kind, "stop it")
    where = f" on :{port}" if port else ""
    return (f"your server{where} is kept running by {kind} ({detail}); specdoctor never fights a supervisor for the "
            f"GPUs: {how}, then run specdoctor again with --launch (the launching steps were skipped)")


class UserServerInput(BaseModel):
    """Arguments of inspect_user_server."""

    pid: int = Field(gt=0, description="The user's server (main process).")
    pids: list[int] = Field(default_factory=list, description="Its workers (find_server_processes).")
    port: int | None = None


class UserServerRecord(BaseModel):
    """What brings the user's server back, and whether the launches need its GPUs (environment redacted)."""

    pid: int
    starttime: int
    pids: list[int] = Field(default_factory=list, description="Its other processes (workers, detokenizer).")
    port: int | None = None
    argv: list[str]
    cwd: str
    user: str
    stdout: str
    stderr: str
    env: dict[str, str] = Field(default_factory=dict, description="Redacted; the full one is kept in a 0600 file.")
    identity: str = Field(description="Hash of argv + full env + cwd + user (identity_hash).")
    supervisor: str
    supervisor_detail: str
    restarts_it: bool = Field(description="The supervisor would start it again (or owns its lifetime).")
    gpu_mib: dict[str, int] = Field(default_factory=dict, description="GPU memory its processes hold, by pid.")
    holds_gpus: bool = Field(description="nvidia-smi lists its processes: a second server needs what it holds.")
    session: TerminalSession | None = Field(default=None, description="The tmux/screen session it runs in (a "
                                            "restart opens a new window there).")
    session_note: str = Field(default="", description="Why a tmux/screen server's session could not be read.")

    def summary_line(self) -> str:
        held = sum(self.gpu_mib.values())
        gpus = f"holds {held} MiB on the GPUs" if self.holds_gpus else "holds no GPU memory nvidia-smi shows"
        where = f", in {self.session.where()}" if self.session else ""
        return (f"your server pid {self.pid} (user {self.user}, supervisor {self.supervisor}{where}) {gpus}; "
                f"log {self.stdout or '?'}; identity {self.identity}")


def _gpu_mib(host: Host, pids: set[int]) -> dict[str, int]:
    res = host.run(["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"],
                   check="ignore", timeout=30)
    out: dict[str, int] = {}
    for line in res.stdout.splitlines():
        cells = [c.strip() for c in line.split(",")]
        if len(cells) >= 2 and cells[0].isdigit() and int(cells[0]) in pids:
            mib = re.sub(r"\D", "", cells[1])
            out[cells[0]] = out.get(cells[0], 0) + (int(mib) if mib else 0)
    return out


def record_of(host: Host, cap: Captured, pids: list[int], port: int | None) -> UserServerRecord:
    kind, detail = classify_supervisor(cap.cgroup, cap.ancestors, cap.ppid)
    mib = _gpu_mib(host, {cap.pid, *pids})
    session, session_note = (session_of(host, kind, cap.env, {a.pid for a in cap.ancestors})
                             if kind in ("tmux", "screen") else (None, ""))
    return UserServerRecord(pid=cap.pid, starttime=cap.starttime, pids=[p for p in pids if p != cap.pid], port=port, argv=cap.argv, cwd=cap.cwd,
                            user=cap.user, stdout=cap.stdout, stderr=cap.stderr, env=redact_env(cap.env),
                            identity=identity_hash(cap.argv, cap.env, cap.cwd, cap.user), supervisor=kind,
                            supervisor_detail=detail, restarts_it=kind in RESTARTERS, gpu_mib=mib,
                            holds_gpus=bool(mib), session=session, session_note=session_note)


@tool(effect="read")
def inspect_user_server(ctx: ToolContext, args: UserServerInput) -> UserServerRecord:
    """What would bring the user's running server back exactly (argv, cwd, env, user, log targets), which supervisor
    runs it (/proc/PID/cgroup and the parent chain), and whether it holds GPU memory (nvidia-smi). Reads only."""
    return record_of(ctx.host, capture(ctx.host, args.pid), args.pids, args.port)


class StopUserInput(BaseModel):
    """Arguments of stop_user_server."""

    pid: int = Field(gt=0)
    starttime: int = Field(description="From inspect_user_server: refuses a different process on a reused pid.")
    pids: list[int] = Field(default_factory=list, description="Its workers, stopped with it.")
    grace_s: float = Field(default=30.0, gt=0, description="Seconds between SIGTERM and SIGKILL.")


class StopUserResult(BaseModel):
    """The user's server stopped: which pids were signalled and how it ended."""

    pid: int
    signalled: list[int] = Field(default_factory=list)
    killed: bool = Field(default=False, description="SIGKILL was needed after the grace period.")
    seconds: float = 0.0

    def summary_line(self) -> str:
        how = "SIGKILL after the grace period" if self.killed else "SIGTERM"
        return f"stopped your server pid {self.pid} ({how}, {self.seconds:.1f}s)"


def _alive(host: Host, pids: list[int]) -> list[int]:
    if not pids:
        return []
    res = host.run(Raw("for p in " + " ".join(str(int(p)) for p in pids) + "; do "
                       "s=$(cat /proc/$p/stat 2>/dev/null) || continue; r=${s##*) }; set -- $r; "
                       "[ \"$1\" = Z ] || echo $p; done; true"), check="ignore")
    return [int(x) for x in res.stdout.split() if x.isdigit()]


@tool(effect="disrupt")
def stop_user_server(ctx: ToolContext, args: StopUserInput) -> StopUserResult:
    """Stop the user's own server (SIGTERM its main process, then its workers; SIGKILL after the grace period) —
    only the process inspect_user_server recorded (same pid and start time). The engine calls it with consent."""
    cap = capture(ctx.host, args.pid)
    if cap.starttime != args.starttime:
        raise ToolFailed(f"pid {args.pid} is no longer the recorded server (start time changed): refusing to stop it")
    if engine_for_argv(cap.argv) is None:  # only an inference server's main process, nothing else
        raise ToolFailed(f"pid {args.pid} is not an inference server ({' '.join(cap.argv)[:80]}): refusing to stop it")
    t0 = time.monotonic()
    pids = [args.pid, *[p for p in args.pids if p != args.pid]]
    ctx.host.run(["kill", "-TERM", str(args.pid)], check="ignore")
    out = StopUserResult(pid=args.pid, signalled=[args.pid])
    deadline = t0 + args.grace_s
    while time.monotonic() < deadline:
        left = _alive(ctx.host, pids)
        if not left:
            break
        if args.pid not in left and time.monotonic() > t0 + 2:  # the parent went without its workers
            ctx.host.run(["kill", "-TERM", *[str(p) for p in left]], check="ignore")
            out.signalled += [p for p in left if p not in out.signalled]
        time.sleep(0.2)
    left = _alive(ctx.host, pids)
    if left:
        out.killed = True
        ctx.host.run(["kill", "-KILL", *[str(p) for p in left]], check="ignore")
        time.sleep(0.5)
        if _alive(ctx.host, pids):
            raise ToolFailed(f"your server's processes {left} survived SIGKILL")
    out.seconds = round(time.monotonic() - t0, 2)
    return out


def relaunch_command(cap_argv: list[str]) -> str:
    """The launch line as the user would type it (for messages; the relaunch itself uses the argv list)."""
    return shlex.join(cap_argv)
