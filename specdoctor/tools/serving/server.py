"""Server tools: find SGLang processes, read their environments, check env propagation, query server_info."""

from __future__ import annotations

import fnmatch
import json
import re
from typing import Any, NamedTuple

import httpx
from pydantic import BaseModel, Field

from specdoctor.errors import NoData, ToolFailed, ToolRetry
from specdoctor.host import http
from specdoctor.host.base import Host, Raw
from specdoctor.host.redact import redact_env, redact_value
from specdoctor.inference import InferenceEngine, get_engine, known_engines
from specdoctor.models import EnvRow as SharedEnvRow
from specdoctor.models import EnvStatus
from specdoctor.parsers.proc_table import parse_proc_table
from specdoctor.parsers.sections import split_sections
from specdoctor.parsers.sglang import BodyError, ServerInfo, parse_body
from specdoctor.toolkit import ToolContext, tool
from specdoctor.tools.environment.startup_hooks import parse_hooks, probe_env
from specdoctor.tools.remote import remote_command, remote_text

__all__ = [
    "Proc", "Server", "FindServersInput", "ServerList", "find_server_processes", "list_processes", "find_servers",
    "select_server", "locate_servers",
    "ReadEnvInput", "ProcessEnv", "read_process_env", "read_environs", "server_environs", "ServerEnvs",
    "SGLANG_ORIGIN", "resolve_origin",
    "PropagationInput", "EnvRow", "Propagation", "check_env_propagation",
    "ServerInfoInput", "ServerInfoOutput", "server_info", "http_get", "FORCED_BY_SGLANG",
]

FORCED_BY_SGLANG = set(get_engine("sglang").forced_env_names)  # kept for readers of the old name; ask ctx.engine

# One round-trip for the whole process table, one grep over every stat and cmdline (parsers/proc_table.py).
_PS_SCRIPT = Raw(remote_text("proc_table.sh").rstrip("\n"))


class Proc(BaseModel):
    """One process: pid, parent, short name (comm) and full command line."""

    pid: int
    ppid: int
    title: str = Field(description="comm (what setproctitle/prctl set, max 15 chars).")
    cmdline: list[str] = Field(default_factory=list)

    @property
    def line(self) -> str:
        return " ".join(self.cmdline) or self.title


class Server(BaseModel):
    """One inference server: its main process, its workers (by TP rank), detokenizer, parsed args."""

    main: Proc
    workers: list[Proc] = Field(default_factory=list)
    ranks: dict[str, int] = Field(default_factory=dict, description="Rank label (TP0, ...) -> worker pid.")
    detokenizer: Proc | None = None
    env_witnesses: list[int] = Field(default_factory=list, description="Untitled python children of the main (e.g. "
                                     "multiprocessing's resource_tracker): spawned from the same os.environ as the "
                                     "workers, their /proc/PID/environ is intact where a worker's was overwritten.")
    port: int
    argv: list[str] = Field(default_factory=list)
    engine: str | None = Field(default=None, description="The engine whose main process this is (sglang, vllm).")
    args: dict[str, Any] = Field(default_factory=dict)
    launch_env: dict[str, str] = Field(default_factory=dict, description="Leading K=V of the command (redacted).")
    log_path: str | None = Field(default=None, description="File the main process writes stderr (else stdout) "
                                 "to, as the kernel sees it (/proc/PID/fd/2, fd/1); None: a tty, pipe or unknown.")
    cwd: str | None = Field(default=None, description="The main process's working directory (/proc/PID/cwd).")
    uid: int | None = Field(default=None, description="Owner of the main process (/proc/PID).")

    def label(self) -> str:
        return f"port {self.port} (pid {self.main.pid}" + (f", cwd {self.cwd}" if self.cwd else "") + ")"


class FindServersInput(BaseModel):
    """Arguments of find_server_processes."""

    port: int | None = Field(default=None, description="Only the server listening on this port.")
    repo: str | None = Field(default=None, description="Only the server running from this checkout (its cwd, "
                             "argv[0] or PYTHONPATH inside it).")
    exactly_one: bool = Field(default=False, description="The one server meant: several candidates is an error "
                              "listing them (never the first found).")


class ServerList(BaseModel):
    """Inference servers found on the host (the host user's own; others' are only counted)."""

    servers: list[Server] = Field(default_factory=list)
    other_users: list[str] = Field(default_factory=list, description="Servers of other users, never examined.")
    notes: list[str] = Field(default_factory=list)

    def summary_line(self) -> str:
        return "; ".join(f"port {s.port}: main {s.main.pid}, {len(s.workers)} workers" for s in self.servers)


def list_processes(host: Host) -> list[Proc]:
    """Every process on the host with pid/ppid/comm/cmdline, in one command."""
    res = host.run(_PS_SCRIPT, check="ignore", timeout=60)
    procs = []
    for row in parse_proc_table(res.stdout):
        argv = row.argv
        if len(argv) == 1 and " " in argv[0] and \
                any(e.process_role(argv[0].split()[0]) != "other" for e in known_engines()):
            argv = argv[0].split()  # setproctitle writes one string
        procs.append(Proc(pid=row.pid, ppid=row.ppid, title=row.comm, cmdline=argv))
    return procs


def _title(p: Proc, engine: InferenceEngine) -> str:
    """The process title: setproctitle rewrites argv[0] (comm is cut at 15 chars)."""
    first = p.cmdline[0] if p.cmdline else ""
    return first if first and engine.process_role(first) != "other" else p.title


def find_servers(procs: list[Proc], port: int | None = None,
                 engine: InferenceEngine | None = None) -> list[Server]:
    """Group processes into servers: mains by command line, workers/detokenizer by title, as descendants; without
    an engine, every known engine's servers (each read by its own engine)."""
    if engine is None:
        return [s for e in known_engines() for s in find_servers(procs, port, e)]
    children: dict[int, list[Proc]] = {}
    for p in procs:
        children.setdefault(p.ppid, []).append(p)
    servers = []
    mains = [p for p in procs if engine.is_main_process(p.cmdline)]
    main_pids = {p.pid for p in mains}
    for main in mains:
        if any(a in main_pids for a in _ancestors(main, procs)):
            continue  # a re-exec'd child of another main (e.g. `sglang serve` -> python)
        desc: list[Proc] = []
        stack = list(children.get(main.pid, []))
        while stack:
            c = stack.pop()
            desc.append(c)
            stack.extend(children.get(c.pid, []))
        workers = sorted((d for d in desc if engine.process_role(_title(d, engine)) == "worker"),
                         key=lambda d: (engine.rank_order(_title(d, engine)), d.pid))
        detok = next((d for d in desc if engine.process_role(_title(d, engine)) == "detokenizer"), None)
        parsed = engine.parse_launch(main.cmdline)
        ranks = {}
        for i, w in enumerate(workers):
            ranks[engine.worker_rank(_title(w, engine)) or f"W{i}"] = w.pid
        witnesses = [c.pid for c in children.get(main.pid, [])
                     if engine.process_role(_title(c, engine)) == "other" and c.cmdline
                     and re.match(r"python[0-9.]*$", c.cmdline[0].rsplit("/", 1)[-1])]
        s = Server(main=main, workers=workers, ranks=ranks, detokenizer=detok, port=parsed.port, argv=main.cmdline,
                   engine=engine.name, args=parsed.as_args(), launch_env=redact_env(parsed.env), env_witnesses=witnesses)
        if port is None or s.port == port:
            servers.append(s)
    return servers


def _ancestors(p: Proc, procs: list[Proc]) -> list[int]:
    by_pid = {q.pid: q for q in procs}
    out, cur, seen = [], p.ppid, set()
    while cur in by_pid and cur not in seen:
        seen.add(cur)
        out.append(cur)
        cur = by_pid[cur].ppid
    return out


_FDS = ('printf "%s" "$(id -u)"; for p in {pids}; do printf "\\036%s" "$p"; for f in fd/2 fd/1 cwd; do '
        'printf "\\037%s" "$(readlink /proc/$p/$f 2>/dev/null)"; done; '
        'printf "\\037%s" "$(stat -c %u /proc/$p 2>/dev/null)"; done; true')


def _where(host: Host, servers: list[Server]) -> int | None:
    """Each main's log target (stderr, else stdout, when a file), cwd and owner, read from /proc in one command;
    returns the host user's uid."""
    res = host.run(Raw(_FDS.format(pids=" ".join(str(int(s.main.pid)) for s in servers))), check="ignore")
    recs = res.stdout.split("\x1e")
    me = int(recs[0].strip()) if recs and recs[0].strip().isdigit() else None
    by_pid: dict[int, list[str]] = {}
    for rec in recs[1:]:
        pid_s, *cells = rec.split("\x1f")
        if pid_s.strip().isdigit() and len(cells) == 4:
            by_pid[int(pid_s)] = [c.strip() for c in cells]
    for s in servers:
        err, out, cwd, uid = by_pid.get(s.main.pid, ["", "", "", ""])
        for target in (err, out):
            if target.startswith("/") and not target.startswith(("/dev/", "/proc/")):
                s.log_path = target
                break
        s.cwd = cwd if cwd.startswith("/") else None
        s.uid = int(uid) if uid.isdigit() else None
    return me


def _inside(path: str | None, root: str) -> bool:
    if not path or not path.startswith("/"):
        return False
    root = root.rstrip("/") or "/"
    return path == root or path.startswith(root + "/")


# Where `import <engine>` resolves (find_spec only: the engine itself is not imported) and its PEP 610 editable
# source; the package name comes in SD_PKG (sglang, vllm).
SGLANG_ORIGIN = remote_text("engine_origin.py")


def resolve_origin(host: Host, python: str, env: dict[str, str], cwd: str | None,
                   package: str) -> tuple[dict[str, Any] | None, str]:
    """Run SGLANG_ORIGIN for `package` with exactly this interpreter, environment and cwd: (its answer, or None;
    stderr's last line)."""
    res = host.run(["env", "-i", *[f"{k}={v}" for k, v in env.items()], f"SD_PKG={package}", python, "-c",
                    SGLANG_ORIGIN], cwd=cwd,
                   check="ignore", timeout=60)
    try:
        return json.loads(res.stdout.strip().splitlines()[-1]), ""
    except (ValueError, IndexError):
        return None, (res.stderr.strip().splitlines() or ["no output"])[-1][:200]


def _imports_from(host: Host, s: Server, root: str) -> bool:
    """The server's own interpreter, with its own environment and cwd, resolves `sglang` inside `root` (an editable
    install of the checkout: what the real H200 box had, where neither cwd, argv[0] nor PYTHONPATH names it)."""
    env = read_environs(host, [s.main.pid]).get(s.main.pid)
    if not s.engine:
        return False
    info = resolve_origin(host, s.argv[0], env, s.cwd, get_engine(s.engine).package)[0] \
        if env is not None and s.argv else None
    if info is None:
        return False
    editable = str(info.get("editable") or "").removeprefix("file://")
    seen = [x for x in [info.get("origin"), *(info.get("locations") or [])] if x]
    return bool(seen) and all(_inside(x, root) for x in seen) or bool(editable) and _inside(editable, root)


def _runs_from(host: Host, servers: list[Server], repo: str) -> list[Server]:
    """The servers whose checkout or cwd is `repo`: cwd, argv[0] (a venv in the checkout) or PYTHONPATH inside it."""
    root = repo.rstrip("/")
    if not root.startswith("/"):
        res = host.run(["sh", "-c", 'cd "$1" 2>/dev/null && pwd -P', "sh", repo], check="ignore")
        root = res.stdout.strip() or root
    hits = [s for s in servers if _inside(s.cwd, root) or _inside((s.argv or [""])[0], root)]
    if hits:
        return hits
    envs = read_environs(host, [s.main.pid for s in servers])
    hits = [s for s in servers if any(_inside(p, root) for p in ((envs.get(s.main.pid) or {}).get("PYTHONPATH") or
                                                                 "").split(":"))]
    return hits or [s for s in servers if _imports_from(host, s, root)]


def select_server(servers: list[Server], *, port: int | None = None, repo: str | None = None,
                  by_repo: list[Server] | None = None) -> Server:
    """Exactly the server meant: the one on `port`; else the one(s) running from `repo`; else the only one.

    None → NoData saying so; several and nothing says which → ToolRetry, one line listing them. Never the first.
    """
    if port is not None:
        cands = [s for s in servers if s.port == port]
        hint = f" on port {port}"
    elif repo:
        cands = by_repo if by_repo is not None else [s for s in servers if _inside(s.cwd, repo.rstrip("/"))]
        hint = f" running from {repo}"
    else:
        cands, hint = servers, ""
    if not cands:
        running = f" (running: {', '.join(s.label() for s in servers)})" if servers else ""
        raise NoData(f"no inference server{hint}{running}")
    if len(cands) > 1:
        raise ToolRetry(f"{len(cands)} inference servers{hint} and nothing says which one to examine: "
                        f"{'; '.join(s.label() for s in cands)} — pass --port (or --launch with --port) or --repo")
    return cands[0]


def locate_servers(host: Host, port: int | None = None, repo: str | None = None, *,
                   exactly_one: bool = False) -> ServerList:
    """The host user's engine servers (with log, cwd, owner), narrowed by port or checkout; see find_server_processes."""
    servers = find_servers(list_processes(host), port)
    if not servers:
        where = f" on port {port}" if port else ""
        raise NoData(f"no inference server running{where} (looked for sglang.launch_server / sglang serve / "
                     "vllm serve / vllm.entrypoints.openai.api_server)")
    me = _where(host, servers)
    others = [s for s in servers if me is not None and s.uid is not None and s.uid != me]
    mine = [s for s in servers if s not in others]
    out = ServerList(other_users=[f"{s.label()} of uid {s.uid}" for s in others])
    if not mine:
        raise NoData(f"no inference server of this user{' on port ' + str(port) if port else ''} "
                     f"(other users': {'; '.join(out.other_users)}; never examined)")
    by_repo = _runs_from(host, mine, repo) if repo and port is None else None
    if by_repo == [] and len(mine) == 1:  # the only server of this user; /proc does not tie it to the checkout
        out.notes.append(f"the only inference server ({mine[0].label()}) does not run from {repo} as far as "
                         "/proc shows (cwd, argv[0], PYTHONPATH); examined as the server meant")
        by_repo = mine
    if exactly_one:
        out.servers = [select_server(mine, port=port, repo=repo, by_repo=by_repo)]
    elif by_repo is not None:
        if not by_repo:
            select_server(mine, repo=repo, by_repo=by_repo)  # raises NoData naming what runs
        out.servers = by_repo
    else:
        out.servers = mine
    return out


@tool(effect="read")
def find_server_processes(ctx: ToolContext, args: FindServersInput) -> ServerList:
    """Find running inference servers (SGLang, vLLM): main process, workers per TP rank (sglang::scheduler_TP<r>,
    VLLM::Worker_TP<r> or the engine core), detokenizer, parsed args, and where the main process logs and runs
    (its stderr/stdout file and cwd, from /proc).

    Only the host user's servers; `port` or `repo` (its checkout or cwd) narrows to the one meant, and
    `exactly_one` makes several candidates an error that lists them."""
    out = locate_servers(ctx.host, args.port, args.repo, exactly_one=args.exactly_one)
    ctx.cache["servers"] = out.servers
    return out


# -- environments ---------------------------------------------------------------------------------------

class ReadEnvInput(BaseModel):
    """Arguments of read_process_env."""

    pid: int = Field(description="Process id on the host.")


class ProcessEnv(BaseModel):
    """A process's initial environment (/proc/PID/environ), secrets redacted."""

    pid: int
    env: dict[str, str] = Field(default_factory=dict)
    readable: bool = True

    def summary_line(self) -> str:
        return f"pid {self.pid}: {len(self.env)} variables" if self.readable else f"pid {self.pid}: not readable"


def _parse_environ(data: str) -> dict[str, str]:
    env = {}
    for item in data.split("\x00"):
        if "=" in item:
            k, _, v = item.partition("=")
            if k:
                env[k] = v
    return env


def read_environs(host: Host, pids: list[int]) -> dict[int, dict[str, str] | None]:
    """Raw environments of several processes in one command (None: unreadable or gone). Not redacted."""
    if not pids:
        return {}
    script = ("for p in " + " ".join(str(int(p)) for p in pids) + "; do printf '\\036%s\\037' \"$p\"; "
              "if [ -r /proc/$p/environ ] && cat /proc/$p/environ 2>/dev/null; then printf '\\035ok'; fi; done; true")
    res = host.run(Raw(script), check="ignore", timeout=60)
    out: dict[int, dict[str, str] | None] = {p: None for p in pids}
    for rec in res.stdout.split("\x1e"):
        pid_s, sep, data = rec.partition("\x1f")
        if not sep or not pid_s.strip().isdigit():
            continue
        if data.endswith("\x1dok"):
            out[int(pid_s)] = _parse_environ(data[:-3])
    return out


class ServerEnvs(BaseModel):
    """The main's and each worker's environment as the processes hold it (None: unreadable), and how it was read."""

    main: dict[str, str] | None = None
    workers: dict[str, dict[str, str] | None] = Field(default_factory=dict, description="Rank label -> env.")
    overwritten: list[str] = Field(default_factory=list, description="Ranks whose environ their title overwrote.")
    notes: list[str] = Field(default_factory=list)


#: Fewest leading variables lost before a worker's environ counts as overwritten from its start (a launcher that
#: drops one or two variables which happen to come first is still seen dropping them).
PREFIX_LOST_MIN = 3


def overwritten(env: dict[str, str], main: dict[str, str]) -> bool:
    """A worker's /proc/PID/environ that its title overwrote (setproctitle reuses the argv+environ area from its
    start). Seen twice on real servers: SGLang 0.5.17's sglang::scheduler keeps only SGLang's own additions
    (written last; PATH and most of the main's gone); vLLM 0.26's VLLM::EngineCore keeps the later part of the
    area (PATH, CUDA_HOME, VLLM_NO_USAGE_STATS) and loses its first variables (CUDA_VERSION, NCCL_VERSION,
    VLLM_DO_NOT_TRACK, …). A worker spawned from the main's os.environ lists the variables in the main's order, so
    the second shape is every lost variable standing before every kept one. A launcher drops variables by name,
    wherever they stand, and leaves PATH and the rest in place."""
    if "PATH" in main and "PATH" not in env and len(set(main) & set(env)) < len(main) / 2:
        return True
    lost = [i for i, name in enumerate(main) if name not in env]
    kept = [i for i, name in enumerate(main) if name in env]
    return bool(kept) and len(lost) >= PREFIX_LOST_MIN and max(lost) < min(kept)


def server_environs(host: Host, s: Server) -> ServerEnvs:
    """Read the main's and the workers' environments; a worker environ overwritten by its title is read from a
    witness (an untitled python child of the main, spawned from the same os.environ) plus what the worker's own
    area still shows, else marked unreadable — never taken for 'the workers lack these variables'."""
    envs = read_environs(host, [s.main.pid, *s.ranks.values(), *s.env_witnesses])
    main = envs.get(s.main.pid)
    out = ServerEnvs(main=main)
    witness = next(((w, e) for w in s.env_witnesses if (e := envs.get(w)) is not None and main is not None
                    and not overwritten(e, main)), None)
    for rank, pid in s.ranks.items():
        env = envs.get(pid)
        if env is not None and main is not None and overwritten(env, main):
            out.overwritten.append(rank)
            if witness is not None:
                env = {**witness[1], **env}
                out.notes.append(f"worker {rank} (pid {pid}): its /proc/PID/environ was overwritten by its process "
                                 f"title; its inherited variables were read from pid {witness[0]}, an untitled child "
                                 "the main spawned from the same environment, plus what the worker's area still shows")
            else:
                env = None
                out.notes.append(f"worker {rank} (pid {pid}): its /proc/PID/environ was overwritten by its process "
                                 "title and no untitled sibling shows the inherited environment: not readable")
        out.workers[rank] = env
    return out


@tool(effect="read")
def read_process_env(ctx: ToolContext, args: ReadEnvInput) -> ProcessEnv:
    """Read /proc/PID/environ of one process (its environment at exec time); secret-looking values are redacted."""
    env = read_environs(ctx.host, [args.pid]).get(args.pid)
    if env is None:
        raise ToolFailed(f"cannot read /proc/{args.pid}/environ (process gone or owned by another user)")
    return ProcessEnv(pid=args.pid, env=redact_env(env))


class PropagationInput(BaseModel):
    """Arguments of check_env_propagation."""

    port: int | None = Field(default=None, description="Server port (default: the only server, or the one of repo).")
    repo: str | None = Field(default=None, description="The checkout the server runs from (when no port).")
    names: list[str] | None = Field(default=None, description="Variables (glob patterns allowed); default NCCL_*, "
                                    "CUDA_*, SGLANG_*, TORCH_NCCL_* set anywhere.")
    shell_env: dict[str, str] | None = Field(default=None, description="The launch shell's env, if known.")
    python: str | None = Field(default=None, description="The server's python (default: the main's executable).")


Status = EnvStatus


class EnvRow(SharedEnvRow):
    """The shared env row as this tool emits it: the status is always one of `EnvStatus`."""

    status: Status


class Propagation(BaseModel):
    """The env-propagation table of one server, plus where injected values come from."""

    port: int
    main_pid: int
    worker_pids: dict[str, int] = Field(default_factory=dict)
    shell_source: str = Field(description="'given', 'parent-process PID' or 'login env' (env -0).")
    rows: list[EnvRow] = Field(default_factory=list)
    sitecustomize: str | None = Field(default=None, description="Path of the sitecustomize.py the server imports.")
    sitecustomize_vars: dict[str, str] = Field(default_factory=dict, description="Variables the interpreter's "
                                               "start-up hooks set (sitecustomize, .pth files, usercustomize).")
    startup_hooks: dict[str, str] = Field(default_factory=dict, description="Variable -> the start-up hook file "
                                          "that set it, observed by running the hooks one at a time.")
    nccl_conf: dict[str, str] = Field(default_factory=dict)
    nccl_conf_files: list[str] = Field(default_factory=list)
    problems: list[str] = Field(default_factory=list)

    @property
    def dropped(self) -> list[str]:
        return [r.name for r in self.rows if r.status == "dropped-for-workers"]

    def summary_line(self) -> str:
        lost = self.dropped
        head = f"{len(self.rows)} variables across parent + {len(self.worker_pids)} workers"
        return head + (f"; present in shell/parent but ABSENT in workers: {', '.join(lost)}" if lost else
                       "; nothing dropped for the workers")


_SITE_RE = [
    re.compile(r"""os\.environ\[\s*['"]([A-Za-z_][A-Za-z0-9_]*)['"]\s*\]\s*=\s*['"]([^'"]*)['"]"""),
    re.compile(r"""os\.environ\.setdefault\(\s*['"]([A-Za-z_][A-Za-z0-9_]*)['"]\s*,\s*['"]([^'"]*)['"]"""),
    re.compile(r"""os\.putenv\(\s*['"]([A-Za-z_][A-Za-z0-9_]*)['"]\s*,\s*['"]([^'"]*)['"]"""),
]


class _Injected(NamedTuple):
    """What the box adds to a process's environment outside the launch line: start-up hooks and nccl.conf."""

    site_path: str | None
    site_vars: dict[str, str]
    conf: dict[str, str]
    conf_files: list[str]
    hook_sources: dict[str, str]  # variable -> the start-up hook file that set it (observed)
    problems: list[str]


_INJECTED_SCRIPT = remote_command("injected_env.sh")


def _injected(host: Host, python: str, conf_file: str | None, path: str | None = None) -> _Injected:
    """The sitecustomize path, the variables the interpreter's start-up hooks set (observed stage by stage:
    tools/environment/startup_hooks.py; the sitecustomize text read too), nccl.conf values and the files read — one command."""
    # NCCL's order (src/misc/param.cc): the NCCL_CONF_FILE file, else ~/.nccl.conf, then /etc/nccl.conf; the first
    # file to set a name wins (setenv without overwrite), so the first value the script reads is the effective one.
    # Its last part is startup_hooks_probe.sh, verbatim.
    script = _INJECTED_SCRIPT
    env = probe_env(python, path)
    if path and "/" not in python:
        env["PATH"] = path  # resolve a bare `python` the way the server's own environment did
    if conf_file:
        env["SD_NCCL_CONF"] = conf_file
    res = host.run(Raw(script), env=env, check="ignore", timeout=60)
    sec = {k: "\n".join(v) for k, v in split_sections(res.stdout).items()}
    site_path = next((ln.strip() for ln in sec.get("site", "").splitlines() if ln.strip().endswith(".py")), None)
    hooks = parse_hooks(sec.get("hooks", ""))
    observed = [h for h in hooks.by_name().values() if h.value is not None]
    site_vars = {h.name: h.value for h in observed if h.value is not None}
    sources = {h.name: h.source for h in observed}
    if site_path:  # what the file's text says, for a hook the probe could not run (its value observed wins)
        src = host.run(["cat", site_path], check="ignore").stdout
        for rx in _SITE_RE:
            for m in rx.finditer(src):
                site_vars.setdefault(m.group(1), m.group(2))
                sources.setdefault(m.group(1), site_path)
    conf: dict[str, str] = {}
    files: list[str] = []
    for line in sec.get("conf", "").splitlines():
        if line.startswith("##file "):
            files.append(line[7:].strip())
            continue
        line = line.split("#", 1)[0].strip()
        if "=" in line:
            k, _, v = line.partition("=")
            conf.setdefault(k.strip(), v.strip())
    return _Injected(site_path, site_vars, conf, files, sources, hooks.problems if "hooks" in sec else [])


def _status(shell: str | None, parent: str | None, workers: dict[str, str | None], forced: bool,
            has_shell: bool) -> tuple[Status, str]:
    present = [v for v in workers.values() if v is not None]
    upstream = parent if parent is not None else shell
    if forced and (not present or any(v != upstream for v in present)):
        return "forced-by-sglang", "the engine sets this itself before starting its workers"
    return (_unreached_status(shell, parent, workers, has_shell)
            or _values_status(shell, parent, workers, has_shell))


def _unreached_status(shell: str | None, parent: str | None, workers: dict[str, str | None],
                      has_shell: bool) -> tuple[Status, str] | None:
    """A variable missing somewhere down the shell -> parent -> workers chain (None: it reached every process)."""
    vals = list(workers.values())
    present = [v for v in vals if v is not None]
    upstream = parent if parent is not None else shell
    if upstream is not None and workers and len(present) < len(vals):
        missing = [k for k, v in workers.items() if v is None]
        where = "parent" if parent is not None else "shell"
        return "dropped-for-workers", f"set in the {where} but absent in worker(s) {', '.join(missing)}"
    if has_shell and shell is not None and parent is None:
        return ("missing-in-parent" if present or not workers else "only-in-shell",
                "set in the launch shell but not in the server's main process")
    if upstream is None and present:
        return "only-in-workers", "not in the shell or parent environment: injected at or after start-up"
    return None


def _values_status(shell: str | None, parent: str | None, workers: dict[str, str | None],
                   has_shell: bool) -> tuple[Status, str]:
    """A variable every process has: do the values agree?"""
    present = [v for v in workers.values() if v is not None]
    upstream = parent if parent is not None else shell
    if len(set(present)) > 1 or (upstream is not None and any(v != upstream for v in present)):
        return "differs", "values differ between processes"
    if has_shell and shell is not None and parent is not None and shell != parent:
        return "differs", "the parent's value differs from the shell's"
    return "propagated", ""


class _EnvSources(NamedTuple):
    """Where a variable can be seen: the launch shell, the main process, each worker, sitecustomize, nccl.conf."""

    shell: dict[str, str]
    parent: dict[str, str]
    workers: dict[str, dict[str, str] | None]
    site_path: str | None
    site_vars: dict[str, str]
    conf: dict[str, str]
    hook_sources: dict[str, str]  # variable -> the start-up hook file that set it


_STATUS_ORDER = {"dropped-for-workers": 0, "missing-in-parent": 1, "differs": 2, "only-in-workers": 3,
                 "forced-by-sglang": 4, "only-in-shell": 5, "propagated": 6}
"""Row order of the table: the worst propagation first."""


@tool(effect="read")
def check_env_propagation(ctx: ToolContext, args: PropagationInput) -> Propagation:
    """Table of NCCL_/CUDA_/SGLANG_/TORCH_NCCL_ variables: launch shell vs main process vs every TP worker.

    Flags variables SGLang forces itself, ones injected by a sitecustomize.py, and /etc/nccl.conf values, so
    "present in shell and parent, absent in workers" (status dropped-for-workers) stands out.
    """
    procs = list_processes(ctx.host)
    s = locate_servers(ctx.host, args.port, args.repo, exactly_one=True).servers[0]
    by_pid = {p.pid: p for p in procs}
    parent_of_main = by_pid.get(s.main.ppid)
    use_parent_shell = args.shell_env is None and parent_of_main is not None and s.main.ppid > 1
    envs = read_environs(ctx.host, [s.main.ppid]) if use_parent_shell else {}
    server_envs = server_environs(ctx.host, s)
    problems: list[str] = list(server_envs.notes)
    parent_env = server_envs.main
    if parent_env is None:
        problems.append(f"cannot read the environment of the main process {s.main.pid}")
        parent_env = {}
    shell_env, source = _shell_env(ctx.host, args.shell_env, parent_of_main if use_parent_shell else None, envs)
    worker_envs: dict[str, dict[str, str] | None] = dict(server_envs.workers)
    problems += _unreadable_workers(worker_envs, server_envs.overwritten, s)
    python = args.python or _server_python(ctx.host, s.main)
    inj = _injected(ctx.host, python, parent_env.get("NCCL_CONF_FILE"), parent_env.get("PATH"))
    problems += inj.problems
    engine = ctx.engine
    src = _EnvSources(shell_env, parent_env, worker_envs, inj.site_path, inj.site_vars, inj.conf, inj.hook_sources)
    rows = [_env_row(name, src, forced=name in engine.forced_env_names)
            for name in _variable_names(src, args.names, args.names or list(engine.env_patterns))]
    rows.sort(key=lambda r: (_STATUS_ORDER.get(r.status, 9), r.name))
    return Propagation(port=s.port, main_pid=s.main.pid, worker_pids=dict(s.ranks), shell_source=source, rows=rows,
                       sitecustomize=inj.site_path, sitecustomize_vars=redact_env(inj.site_vars),
                       nccl_conf=redact_env(inj.conf), nccl_conf_files=inj.conf_files,
                       startup_hooks=dict(inj.hook_sources), problems=problems)


def _shell_env(host: Host, given: dict[str, str] | None, shell_proc: Proc | None,
               envs: dict[int, dict[str, str] | None]) -> tuple[dict[str, str], str]:
    """The launch shell's environment and where it came from: given, the main's parent process, else `env -0`."""
    if given is not None:
        return dict(given), "given"
    if shell_proc is not None and envs.get(shell_proc.pid) is not None:
        return envs[shell_proc.pid] or {}, f"parent-process {shell_proc.pid} ({shell_proc.title})"
    res = host.run(["env", "-0"], check="ignore")
    return _parse_environ(res.stdout), "login env (env -0)"


def _unreadable_workers(worker_envs: dict[str, dict[str, str] | None], overwritten_ranks: list[str],
                        s: Server) -> list[str]:
    """One problem per worker whose environment could not be read (an overwritten one has its own note)."""
    return [f"cannot read the environment of worker {r} (pid {s.ranks[r]})" for r, e in worker_envs.items()
            if e is None and r not in overwritten_ranks]


def _variable_names(src: _EnvSources, asked: list[str] | None, patterns: list[str]) -> list[str]:
    """The variables of the table: every name seen anywhere that matches a pattern, plus the literal names asked."""
    candidates: set[str] = set(src.shell) | set(src.parent) | set(src.site_vars) | set(src.conf)
    for e in src.workers.values():
        candidates |= set(e or {})
    names = sorted(n for n in candidates if any(fnmatch.fnmatchcase(n, pat) for pat in patterns))
    if asked:
        names = sorted(set(names) | {n for n in asked if not any(c in n for c in "*?[")})
    return names


def _env_row(name: str, src: _EnvSources, forced: bool) -> EnvRow:
    """One variable's row: its value in each process, where it is injected, its status; values redacted."""
    workers = {r: (e.get(name) if e is not None else None) for r, e in src.workers.items() if e is not None}
    status, note = _status(src.shell.get(name), src.parent.get(name), workers, forced, has_shell=True)
    if name in src.site_vars and status in ("only-in-workers", "differs"):
        note = f"set by {src.hook_sources.get(name) or src.site_path}"
    row = EnvRow(name=name, shell=src.shell.get(name), parent=src.parent.get(name), workers=workers,
                 forced_by_engine=forced, from_sitecustomize=name in src.site_vars,
                 from_nccl_conf=name in src.conf, nccl_conf_value=src.conf.get(name), status=status, note=note)
    row.shell = redact_value(name, row.shell) if row.shell is not None else None
    row.parent = redact_value(name, row.parent) if row.parent is not None else None
    row.workers = {k: (redact_value(name, v) if v is not None else None) for k, v in row.workers.items()}
    row.nccl_conf_value = redact_value(name, row.nccl_conf_value) if row.nccl_conf_value is not None else None
    return row


def _server_python(host: Host, main: Proc) -> str:
    """The interpreter the server runs: argv[0] when it is a python (a venv's bin/python must be called by
    that path for its site-packages, and so its sitecustomize, to apply), else /proc/PID/exe."""
    first = main.cmdline[0] if main.cmdline else ""
    if "python" in first.rsplit("/", 1)[-1]:
        return first
    res = host.run(["readlink", f"/proc/{main.pid}/exe"], check="ignore")
    exe = res.stdout.strip()
    return exe if res.ok and exe else "python3"


# -- HTTP -------------------------------------------------------------------------------------------------

def http_get(host: Host, port: int, paths: list[str], timeout: float = 10.0) -> tuple[str, Any]:
    """GET the first path that answers 200 through host.forward(port); (path, parsed body). ToolFailed otherwise."""
    errors = []
    with host.forward(port) as local:
        with http.client(base_url=f"http://127.0.0.1:{local}", timeout=timeout) as client:
            for path in paths:
                try:
                    r = client.get(path)
                except httpx.HTTPError as exc:
                    errors.append(f"{path}: {type(exc).__name__}: {exc}")
                    continue
                if r.status_code != 200:
                    errors.append(f"{path}: HTTP {r.status_code}")
                    continue
                try:
                    return path, parse_body(r.text)
                except BodyError as exc:
                    errors.append(f"{path}: {exc}")
    raise ToolFailed(f"no usable answer from port {port}: " + "; ".join(errors))


class ServerInfoInput(BaseModel):
    """Arguments of server_info."""

    port: int = Field(default=30000, description="The server's HTTP port on the host.")


class ServerInfoOutput(ServerInfo):
    """Resolved server args (version-aware), accept length and last gen throughput, plus model info."""

    source: str = Field(default="", description="Which endpoint answered (/server_info or /get_server_info).")
    model_info: dict[str, Any] = Field(default_factory=dict)
    problems: list[str] = Field(default_factory=list)

    def summary_line(self) -> str:
        spec = (f"{self.speculative_algorithm} steps={self.speculative_num_steps} topk={self.speculative_eagle_topk} "
                f"draft_tokens={self.speculative_num_draft_tokens}" if self.speculative_algorithm else "no speculation")
        return (f"sglang {self.version or '?'}: tp={self.tp_size}, attention={self.attention_backend}, {spec}, "
                f"accept_length={self.accept_length}")


@tool(effect="read")
def server_info(ctx: ToolContext, args: ServerInfoInput) -> ServerInfoOutput:
    """Query /server_info (falling back to /get_server_info) and /model_info through a port forward."""
    engine = ctx.engine
    source, body = http_get(ctx.host, args.port, list(engine.server_info_paths))
    try:
        info = engine.read_server_info(body)
    except BodyError as exc:
        raise ToolFailed(f"{source} on port {args.port}: {exc}") from None
    out = ServerInfoOutput(**info.model_dump(), source=source)
    try:
        _, model = http_get(ctx.host, args.port, list(ctx.engine_at(info.version).model_info_paths))
        out.model_info = {k: v for k, v in model.items() if isinstance(v, (str, int, float, bool, list)) or v is None} \
            if isinstance(model, dict) else {}
    except ToolFailed as exc:
        out.problems.append(str(exc))
    return out


def _engine_on_host(host: Host) -> InferenceEngine | None:
    """The engine of the servers running on the host (one engine among them), None when none or several run."""
    names = {s.engine for s in find_servers(list_processes(host)) if s.engine}
    return get_engine(names.pop()) if len(names) == 1 else None

