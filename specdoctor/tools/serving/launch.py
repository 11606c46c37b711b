"""Launch and stop inference servers that specdoctor owns: detached, logged, recorded by process group."""

from __future__ import annotations

import json
import random
import re
import shlex
import time
from typing import Any

import httpx
from pydantic import BaseModel, Field

from specdoctor.errors import ToolFailed, ToolRetry, Unresolved
from specdoctor.host import http
from specdoctor.host.base import Host, Raw
from specdoctor.host.redact import redact_env, redact_text
from specdoctor.inference import EngineName, InferenceEngine, engine_for_launch
from specdoctor.parsers.sections import split_sections
from specdoctor.toolkit import ToolContext, tool
from specdoctor.tools.serving.terminal_session import LOCATION_VARS, TerminalSession, start_in_session_script

__all__ = ["LaunchInput", "LaunchResult", "launch_server", "StopInput", "StopResult", "stop_server",
           "build_command", "port_busy", "listening_ports", "pick_free_port"]


class LaunchInput(BaseModel):
    """Arguments of launch_server."""

    command: str | list[str] = Field(description="The engine's launch line (python -m sglang.launch_server "
                                     "... / sglang serve ... / vllm serve ...).")
    python: str | None = Field(default=None, description="Interpreter on the host replacing a leading python/python3.")
    cwd: str | None = None
    env: dict[str, str] = Field(default_factory=dict, description="Environment overrides (env K=V).")
    unset: list[str] = Field(default_factory=list, description="Variables removed from the environment (env -u).")
    drop_speculative: bool = Field(default=False, description="Launch the baseline: drop every --speculative-* flag.")
    port: int | None = Field(default=None, ge=0, le=65535,
                             description="Override the port (--port); 0: a port free on the host.")
    timeout_s: float = Field(default=600, description="How long to wait until the server is healthy.")
    label: str = Field(default="server", description="A name for the log file and the record.")
    engine: EngineName | None = Field(default=None, description="Inference engine of the launch line (None: the "
                                      "one its entry point names, else the run's).")
    replace_env: bool = Field(default=False, description="Start from an empty environment (env -i) plus `env`: "
                              "restarts a recorded server with exactly its own environment.")
    log_path: str | None = Field(default=None, description="Append the server's output to this file (e.g. where "
                                 "the user's server logged) instead of a new log in the run folder.")
    own: bool = Field(default=True, description="False: the user's own server brought back — not recorded as "
                      "started by this run, so stop_server and the safety net never stop it.")
    session: TerminalSession | None = Field(default=None, description="Start it in a new window of this tmux/screen "
                                            "session instead of detached (the user's server comes back where they "
                                            "left it); without log_path its output goes to the window.")
    new_session: bool = Field(default=False, description="With `session`: the session ended, start a new one of "
                              "the same name on the same tmux server.")


class LaunchResult(BaseModel):
    """A server specdoctor started: its process group, pids, port and log."""

    pids: list[int] = Field(default_factory=list,
                            description="The launched (main) process first, then the rest of its group.")
    pgid: int | None = None
    port: int
    log_path: str
    ready_seconds: float | None = None
    argv: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict, description="Overrides passed (redacted).")
    label: str = ""
    log_tail: str = ""

    def summary_line(self) -> str:
        ready = f"ready in {self.ready_seconds:.1f}s" if self.ready_seconds is not None else "not ready"
        return f"{self.label}: pgid {self.pgid} on port {self.port}, {ready}, log {self.log_path}"


def build_command(command: str | list[str], *, python: str | None, drop_speculative: bool,
                  port: int | None, engine: InferenceEngine | None = None) -> list[str]:
    """The argv to run: baseline flags dropped, python swapped, port forced, leading K=V kept out (env); the engine
    is the one given, else the one the line's entry point names."""
    engine = engine or engine_for_launch(command)
    if engine is None:
        raise ToolRetry("the launch line names no known engine's entry point (sglang, vllm): pass the engine")
    return engine.relaunch_argv(command, python=python, speculative=not drop_speculative, port=port)


def listening_ports(host: Host) -> tuple[set[int], set[int]]:
    """(listening, every port in use) on the host, from /proc/net/tcp{,6}: works without ss/python."""
    res = host.run(Raw("cat /proc/net/tcp /proc/net/tcp6 2>/dev/null; true"), check="ignore")
    listening: set[int] = set()
    used: set[int] = set()
    for line in res.stdout.splitlines():
        cells = line.split()
        if len(cells) > 3 and ":" in cells[1]:
            try:
                port = int(cells[1].rsplit(":", 1)[1], 16)
            except ValueError:
                continue
            used.add(port)
            if cells[3] == "0A":
                listening.add(port)
    return listening, used


def port_busy(host: Host, port: int) -> bool:
    """True when something on the host listens on `port`."""
    return port in listening_ports(host)[0]


def pick_free_port(used: set[int], rng: random.Random | None = None) -> int:
    """A port no socket on the host uses: below the ephemeral range (no outgoing connection takes it first)
    and below 30000, the default port servers are started on by hand."""
    rng = rng or random.Random()
    for _ in range(1000):
        port = rng.randint(20000, 29999)
        if port not in used:
            return port
    raise ToolFailed("no free TCP port found on the host between 20000 and 29999")


def _record(ctx: ToolContext, entry: dict[str, Any]) -> None:
    """Append to ctx.cache['started'] and to RUN_DIR/started.json (JSON lines) on the host."""
    ctx.cache.setdefault("started", []).append(entry)
    path = f"{ctx.run_dir}/started.json"
    ctx.host.run(Raw(f"mkdir -p {shlex.quote(ctx.run_dir)} && printf '%s\\n' "
                     f"{shlex.quote(json.dumps(entry))} >> {shlex.quote(path)}"), check="ignore")


def _health(host: Host, port: int, path: str) -> bool:
    try:
        with host.forward(port) as local:
            r = http.get(f"http://127.0.0.1:{local}{path}", timeout=5.0)
            return r.status_code == 200
    except (httpx.HTTPError, OSError):
        return False


_STATS = 'for d in /proc/[0-9]*; do read -r st < "$d/stat" 2>/dev/null && echo "$st"; done; true'


def _members(stat_text: str, pgid: int) -> list[int]:
    """Live (non-zombie) pids of a process group, from /proc/*/stat lines. The leader itself counts before its
    setsid() has run (it is still in the launching shell's group then: a loaded box reads /proc that early)."""
    out = []
    for line in stat_text.splitlines():
        m = re.match(r"^(\d+) \(.*\) (\S) \d+ (\d+)", line)
        if m and pgid in (int(m.group(3)), int(m.group(1))) and m.group(2) not in ("Z", "X"):
            out.append(int(m.group(1)))
    return out


def _group_pids(host: Host, pgid: int) -> list[int]:
    return _members(host.run(Raw(_STATS), check="ignore").stdout, pgid)


def _probe(host: Host, pgid: int, log: str, offset: int = 0) -> tuple[bool, str]:
    """(group alive, tail of what the log gained since `offset`) in one command."""
    res = host.run(Raw(f"{_STATS}; echo @@tail; tail -c +{offset + 1} {shlex.quote(log)} 2>/dev/null | tail -n 60; "
                       "true"), check="ignore")
    sec = split_sections(res.stdout, first="stats", last="tail")
    return bool(_members("\n".join(sec["stats"]), pgid)), "\n".join(sec.get("tail", []))


def _kill_group(host: Host, pgid: int, grace_s: float = 10.0) -> bool:
    """SIGTERM the group, wait, SIGKILL if needed; True when no live member is left."""
    host.run(["kill", "-TERM", "--", f"-{pgid}"], check="ignore")
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        if not _group_pids(host, pgid):
            return True
        time.sleep(0.2)
    host.run(["kill", "-KILL", "--", f"-{pgid}"], check="ignore")
    for _ in range(25):
        if not _group_pids(host, pgid):
            return True
        time.sleep(0.2)
    return False


@tool(effect="disrupt")
def launch_server(ctx: ToolContext, args: LaunchInput) -> LaunchResult:
    """Start an inference server detached (setsid nohup), log to the run folder, wait until it is healthy.
    With `session`, it starts instead in a new window of that tmux/screen session (the user's server brought back).

    Refuses a busy port; port 0 picks one that is free on the host. The process group is recorded (ctx.cache['started'] and started.json) so that
    stop_server only ever stops what specdoctor started. A failed start raises Unresolved with the log tail.
    """
    for _ in range(2):
        try:
            return _launch(ctx, args)
        except Unresolved as e:
            # A port we picked can be taken between our check and the server's bind: pick another.
            if args.port != 0 or not _BIND_RACE.search(str(e)):
                raise
            ctx.say("the port picked was taken before the server bound it: another port")
    return _launch(ctx, args)


_BIND_RACE = re.compile(r"address already in use|port \d+ is (?:already )?in use", re.IGNORECASE)


def _launch_argv(ctx: ToolContext, args: LaunchInput, engine: InferenceEngine) -> tuple[list[str], dict[str, str], int]:
    """The argv to run (port 0: one free on the host), the environment it gets and its port; refuses a busy port."""
    want = args.port
    if want == 0:
        _, used = listening_ports(ctx.host)
        want = pick_free_port(used)
    argv = build_command(args.command, python=args.python, drop_speculative=args.drop_speculative, port=want,
                         engine=engine)
    parsed = engine.parse_launch(argv)
    env = {**engine.parse_launch(args.command).env, **args.env}
    port = parsed.port
    if args.port != 0 and port_busy(ctx.host, port):
        raise ToolRetry(f"port {port} is busy on {ctx.host.name}: stop that server first or pass another port")
    return argv, env, port


def _log_offset(ctx: ToolContext, args: LaunchInput) -> int:
    """Where this start's output begins: an existing log keeps its history, only what this start adds is read
    for failures."""
    if not args.log_path:
        return 0
    size = ctx.host.run(["wc", "-c", args.log_path], check="ignore").stdout.split()[:1]
    return int(size[0]) if size and size[0].isdigit() else 0


def _env_words(args: LaunchInput, env: dict[str, str]) -> tuple[list[str], str]:
    """The `env` command (-i, or -u for each variable removed) and the K=V words for the launch line."""
    env_part = " ".join(shlex.quote(f"{k}={v}") for k, v in env.items() if k not in args.unset)
    drop = [f"-u {shlex.quote(n)}" for n in args.unset if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", n)]
    env_cmd = ["env", "-i"] if args.replace_env else ["env", *drop] if env_part or drop else []
    return env_cmd, env_part


def _wait_healthy(ctx: ToolContext, args: LaunchInput, engine: InferenceEngine, result: LaunchResult, pgid: int,
                  offset: int) -> None:
    """Poll until the server answers its health route; a dead group, a fatal log line or the timeout stop the
    server and raise Unresolved with the log tail."""
    label, port, log = result.label, result.port, result.log_path
    t0 = time.monotonic()
    last_say = t0
    while True:
        alive, tail = _probe(ctx.host, pgid, log, offset)
        fatal = engine.fatal_log.search(tail)
        if alive and fatal and _health(ctx.host, port, engine.health_path):
            # it answers: the line was not fatal (a request handler's traceback, e.g. a health probe that gave
            # up under load and closed its connection mid-reply)
            result.ready_seconds = round(time.monotonic() - t0, 2)
            break
        if not alive or fatal:
            result.log_tail = redact_text(tail[-4000:])
            if alive:
                _kill_group(ctx.host, pgid)
            if not alive or fatal is None:  # still alive here means a fatal line matched
                why = "the server process exited"
            else:
                why = f"fatal line in the log: {fatal.group(0)!r}"
            raise Unresolved(f"{label} failed to start ({why}); log tail:\n{result.log_tail[-1500:]}", output=result)
        if _health(ctx.host, port, engine.health_path):
            result.ready_seconds = round(time.monotonic() - t0, 2)
            break
        if time.monotonic() - t0 > args.timeout_s:
            result.log_tail = redact_text(tail[-4000:])
            _kill_group(ctx.host, pgid)
            raise Unresolved(f"{label} not healthy after {args.timeout_s:g}s; log tail:\n{result.log_tail[-1500:]}",
                             output=result)
        if time.monotonic() - last_say > 15:
            ctx.say(f"waiting for {label} on port {port} ({time.monotonic() - t0:.0f}s)")
            last_say = time.monotonic()
        time.sleep(0.25)


def _launch(ctx: ToolContext, args: LaunchInput) -> LaunchResult:
    """One start of launch_server (see there)."""
    engine = ctx.engine_named(args.engine) if args.engine else ctx.engine_for(args.command)
    argv, env, port = _launch_argv(ctx, args, engine)
    label = re.sub(r"[^A-Za-z0-9_.-]+", "-", args.label) or "server"
    log = args.log_path or f"{ctx.run_dir}/{label}-{int(time.time())}-{port}.log"
    offset = _log_offset(ctx, args)
    env_cmd, env_part = _env_words(args, env)
    run = " ".join(["setsid", "nohup", *env_cmd, *([env_part] if env_part else []), shlex.join(argv)])
    if args.session is not None:
        log = args.log_path or ""  # no file: the output goes to the window, as it did before
        ctx.say(f"launching {label} on port {port} in {args.session.where()}")
        pid = _start_in_session(ctx, args, [*env_cmd, *([env_part] if env_part else [])], argv, log, label)
    else:
        pid = _start_detached(ctx, args, run, port, log, label)
    # setsid (not a group leader in a non-interactive sh, so it does not fork) makes the pid its own group id;
    # reading /proc/PID/stat right away could race the setsid() call and see the launching shell's group.
    # tmux and screen make each window's process a session (and group) leader too.
    pgid = pid
    result = LaunchResult(pids=[pid], pgid=pgid, port=port, log_path=log, argv=argv, env=redact_env(env),
                          label=label)
    if args.own:
        _record(ctx, {"pgid": pgid, "pids": [pid], "port": port, "log": log, "label": label, "time": time.time()})
    _wait_healthy(ctx, args, engine, result, pgid, offset)
    # the main process first, whatever its number: pids wrap, so a worker may have a smaller one than its parent
    result.pids = [pid, *sorted(set(_group_pids(ctx.host, pgid)) - {pid})]
    ctx.say(f"{label} ready on port {port} after {result.ready_seconds:.1f}s")
    return result


def _start_detached(ctx: ToolContext, args: LaunchInput, run: str, port: int, log: str, label: str) -> int:
    """Start the server detached (setsid nohup) with its output in `log`; its pid (= its process group)."""
    # The host records the group itself, in the same command that starts it: a link dropped right after the
    # start (before we read the pid) must not leave a server that a later stop_server/resume cannot find.
    rest = json.dumps({"port": port, "log": log, "label": label, "time": time.time()})[1:]
    script = (f"mkdir -p {shlex.quote(ctx.run_dir)} && "
              + (f"cd {shlex.quote(args.cwd)} && " if args.cwd else "")
              + f"{{ {run} {'>>' if args.log_path else '>'} {shlex.quote(log)} 2>&1 < /dev/null & }} && pid=$! && "
              + (f"printf '{{\"pgid\": %s, \"pids\": [%s], %s\\n' \"$pid\" \"$pid\" {shlex.quote(rest)} "
                 f">> {shlex.quote(ctx.run_dir + '/started.json')}; " if args.own else "")
              + "echo $pid")
    ctx.say(f"launching {label} on port {port}")
    res = ctx.host.run(Raw(script), check="ignore", timeout=60)
    pid_s = res.stdout.strip().splitlines()[-1] if res.stdout.strip() else ""
    if not res.ok or not pid_s.isdigit():
        raise ToolFailed(f"could not start the server: {(res.stderr or res.stdout).strip()[:300]}")
    return int(pid_s)


def _start_in_session(ctx: ToolContext, args: LaunchInput, env_words: list[str], argv: list[str], log: str,
                      label: str) -> int:
    """Start the server as a new window of a tmux/screen session; its pid (the window's own process).

    The launch line, full environment included, reaches the host on stdin into a 0600 launcher that deletes itself
    as it starts: a whole environment is too long for a tmux/screen command, and stays off every command line."""
    assert args.session is not None
    stem = f"{ctx.run_dir}/.launch-{label}-{int(time.time() * 1000)}"
    launcher, pidfile = f"{stem}.sh", f"{stem}.pid"
    # The new window's own location ($TMUX_PANE, $WINDOW...) replaces the recorded one under `env -i`.
    keep = [f'${{{v}+"{v}=${v}"}}' for v in LOCATION_VARS] if args.replace_env else []
    lines = ['rm -f "$0"', f"echo $$ > {shlex.quote(pidfile)}"]
    if args.cwd:
        lines.append(f"cd {shlex.quote(args.cwd)} || exit 1")
    redirect = f" >> {shlex.quote(log)} 2>&1" if log else ""
    lines.append(" ".join(["exec", *env_words, *keep, shlex.join(argv)]) + redirect)
    ctx.host.run(Raw(f"umask 077 && mkdir -p {shlex.quote(ctx.run_dir)} && cat > {shlex.quote(launcher)}"),
                 stdin=("\n".join(lines) + "\n").encode(), timeout=60)
    res = ctx.host.run(start_in_session_script(args.session, launcher, args.cwd, new_session=args.new_session,
                                               pidfile=pidfile), check="ignore", timeout=60)
    pid_s = res.stdout.strip().splitlines()[-1] if res.stdout.strip() else ""
    if not res.ok or not pid_s.isdigit():  # the launcher never ran: it must not stay behind with the environment
        ctx.host.run(["rm", "-f", launcher, pidfile], check="ignore")
        raise ToolFailed(f"could not start the server in {args.session.where()}: "
                         f"{(res.stderr or res.stdout).strip()[:300]}")
    return int(pid_s)


class StopInput(BaseModel):
    """Arguments of stop_server."""

    pgid: int | None = Field(default=None, description="A group specdoctor started (default: all of this run's).")
    grace_s: float = Field(default=10.0, description="Seconds between SIGTERM and SIGKILL.")


class StopResult(BaseModel):
    """Which recorded process groups were stopped."""

    stopped: list[int] = Field(default_factory=list, description="Process group ids now gone.")
    stopped_pids: list[int] = Field(default_factory=list)
    still_running: list[int] = Field(default_factory=list)

    def summary_line(self) -> str:
        extra = f"; STILL RUNNING: {self.still_running}" if self.still_running else ""
        return f"stopped {len(self.stopped)} server group(s){extra}"


def _started(ctx: ToolContext) -> list[dict[str, Any]]:
    """Groups started in this run: ctx.cache plus the host's started.json (a resumed run has only the file)."""
    entries = list(ctx.cache.get("started", []))
    res = ctx.host.run(["cat", f"{ctx.run_dir}/started.json"], check="ignore")
    for line in res.stdout.splitlines():
        try:
            e = json.loads(line)
        except ValueError:
            continue
        if isinstance(e, dict) and isinstance(e.get("pgid"), int):
            entries.append(e)
    stopped = {e["pgid"] for e in entries if e.get("stopped")}
    seen: dict[int, dict[str, Any]] = {}
    for e in entries:
        if not e.get("stopped") and e["pgid"] not in stopped:
            seen.setdefault(e["pgid"], e)
    return list(seen.values())


@tool(effect="disrupt")
def stop_server(ctx: ToolContext, args: StopInput) -> StopResult:
    """Stop server process groups that specdoctor started (SIGTERM, then SIGKILL); never anything else."""
    started = _started(ctx)
    if args.pgid is not None:
        targets = [e for e in started if e["pgid"] == args.pgid]
        if not targets:
            raise ToolFailed(f"process group {args.pgid} was not started by specdoctor in run {ctx.run_id}: refusing")
    else:
        targets = started
    out = StopResult()
    for e in targets:
        pgid = e["pgid"]
        if _kill_group(ctx.host, pgid, args.grace_s):
            out.stopped.append(pgid)
            out.stopped_pids.extend(e.get("pids", []))
            _record(ctx, {"pgid": pgid, "stopped": True, "time": time.time()})
        else:
            out.still_running.append(pgid)
    if out.still_running:
        raise ToolFailed(f"process group(s) {out.still_running} survived SIGKILL")
    return out
