"""Feature gates: env-var reads added by local patches, their defaults, and their ACTUAL values in every server process."""

from __future__ import annotations

import re
import shlex
from typing import Any, Literal

from pydantic import AliasChoices, BaseModel, ConfigDict, Field

from specdoctor.host.base import Raw
from specdoctor.host.redact import redact_env
from specdoctor.inference import InferenceEngine
from specdoctor.parsers.environ import EnvDecl, find_gate_reads, is_enabled_value
from specdoctor.toolkit import ToolContext, registry, tool
from specdoctor.tools.checkout.repo import full_diff, git, unquote_c_path

__all__ = ["GateInput", "Gate", "GateScan", "ServerProcess", "scan_feature_gates", "server_processes",
           "locate_environ_py"]

GateState = Literal["off-by-default-and-unset", "on-by-default-and-unset", "ENABLED-at-runtime", "set-but-default",
                    "unknown"]


class ServerProcess(BaseModel):
    """A process of the running server whose environment was read."""

    pid: int
    role: str = Field(description="'parent' or the process title (e.g. sglang::scheduler_TP3).")
    env: dict[str, str] | None = Field(default=None, description="None when /proc/PID/environ was unreadable.")


class Gate(BaseModel):
    """One env-var gate found in ADDED lines, with its runtime value in each server process."""

    model_config = ConfigDict(populate_by_name=True)

    name: str
    reader: str
    default: str | None
    file: str
    line: str
    declared_in_engine: EnvDecl | None = Field(default=None, validation_alias=AliasChoices(
        "declared_in_engine", "declared_in_sglang"), description="Its declaration in the engine's catalog.")
    state: GateState
    values: dict[str, str | None] = Field(default_factory=dict, description="process label → value (None: unset).")
    reason: str


class GateScan(BaseModel):
    """Gates in the local patches, verified against the running processes; the engine's own gate catalog."""

    model_config = ConfigDict(populate_by_name=True)

    repo: str
    gates: list[Gate] = Field(default_factory=list)
    processes: list[ServerProcess] = Field(default_factory=list)
    process_source: str = "none"
    environ_py: str | None = Field(default=None, description="Where the engine's catalog (SGLang's environ.py, "
                                   "vLLM's envs.py) was read on the host.")
    engine_gates: list[EnvDecl] = Field(default_factory=list, validation_alias=AliasChoices(
        "engine_gates", "sglang_gates"), description="Every variable the engine's catalog declares.")
    problems: list[str] = Field(default_factory=list)

    def summary_line(self) -> str:
        enabled = [g.name for g in self.gates if g.state == "ENABLED-at-runtime"]
        return (f"{len(self.gates)} gates in added lines, {len(self.processes)} server processes checked"
                + (f"; ENABLED at runtime: {', '.join(enabled)}" if enabled else "; none enabled at runtime")
                + f"; {len(self.engine_gates)} engine gates catalogued")


class GateInput(BaseModel):
    """Arguments of scan_feature_gates."""

    repo: str = Field(description="Path of the git checkout on the host.")
    port: int | None = Field(default=None, description="Port of the running server (None: any sglang server).")
    python: str | None = Field(default=None, description="Python of the server, to locate SGLang's environ.py.")
    include_catalog: bool = Field(default=True, description="Return SGLang's whole environ.py catalog.")


def _label(pid: int, title: str, parent: bool, engine: InferenceEngine) -> str:
    return "parent" if parent else (title.split()[0] if engine.process_role(title) != "other" else f"pid{pid}")


def _parse_environ(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in text.split("\x00"):
        k, sep, v = item.partition("=")
        if sep and k:
            out[k] = v
    return out


def _read_env(ctx: ToolContext, pid: int) -> dict[str, str] | None:
    res = ctx.host.run(["cat", f"/proc/{pid}/environ"], check="ignore")
    return redact_env(_parse_environ(res.stdout)) if res.ok else None  # kept in outputs and checkpoints


def server_processes(ctx: ToolContext, port: int | None,
                     repo: str | None = None) -> tuple[list[ServerProcess], str, list[str]]:
    """Parent and worker processes of the server meant (port, else the one running from repo, else the only one)
    with their environments; (procs, source, problems). Several candidates: none, and a problem listing them."""
    problems: list[str] = []
    query: dict[str, Any] = {"port": port, "exactly_one": True}
    if port is None and repo:
        query["repo"] = repo
    try:
        res = registry.call(ctx, "find_server_processes", query)
        from specdoctor.tools.serving.server import ServerList  # the server family registers after this one

        found = registry.typed_output(res, ServerList, where="find_server_processes")
        servers = [s.model_dump(mode="json") for s in found.servers] if found is not None else []
        if not res.ok:
            problems.append(f"find_server_processes: {res.status}: {res.summary}")
            if res.retryable:  # several servers and nothing says which: examine none rather than a guess
                return [], "none", problems
    except Exception as exc:  # the server tools may not be installed; fall back to ps
        servers, res, found = [], None, None
        problems.append(f"find_server_processes unavailable: {type(exc).__name__}")
    if servers and found is not None:
        from specdoctor.tools.serving.server import (
            server_environs,  # the server family registers after this one
        )

        s = servers[0]
        read = server_environs(ctx.host, found.servers[0])  # a worker environ its title overwrote, read right
        problems.extend(read.notes)
        by_pid = {pid: read.workers.get(rank) for rank, pid in found.servers[0].ranks.items()}
        by_pid[found.servers[0].main.pid] = read.main
        procs: list[ServerProcess] = []
        members = [(s.get("main") or {}, True)] + [(w, False) for w in s.get("workers") or []]
        for proc, parent in members:
            pid = int(proc.get("pid") or 0)
            argv = proc.get("cmdline") or []
            title = argv[0] if argv and ctx.engine.process_role(str(argv[0])) != "other" else proc.get("title") or ""
            if pid:
                env = by_pid[pid] if pid in by_pid else _read_env(ctx, pid)
                procs.append(ServerProcess(pid=pid, role=_label(pid, title, parent, ctx.engine),
                                           env=redact_env(env) if env is not None else None))
        return procs, "find_server_processes", problems
    return _ps_processes(ctx, port), "ps", problems


def _ps_processes(ctx: ToolContext, port: int | None) -> list[ServerProcess]:
    res = ctx.host.run(["ps", "-eo", "pid=,ppid=,args="], check="ignore")
    rows: list[tuple[int, int, str]] = []
    for line in res.stdout.splitlines():
        parts = line.strip().split(None, 2)
        if len(parts) == 3 and parts[0].isdigit() and parts[1].isdigit():
            rows.append((int(parts[0]), int(parts[1]), parts[2]))
    engine = ctx.engine
    mains = [r for r in rows if engine.ps_main_pattern.search(r[2]) and engine.process_role(r[2]) == "other"]
    if port is not None:
        mains = [r for r in mains if re.search(rf"--port[= ]{port}\b", r[2])] or \
            ([r for r in mains if "--port" not in r[2]] if port == 30000 else [])
    if len(mains) != 1:  # none, or several and nothing says which: never the first found
        return []
    main = mains[0]
    children: dict[int, list[tuple[int, int, str]]] = {}
    for r in rows:
        children.setdefault(r[1], []).append(r)
    out = [ServerProcess(pid=main[0], role="parent", env=_read_env(ctx, main[0]))]
    stack = list(children.get(main[0], []))
    while stack:
        r = stack.pop()
        if engine.process_role(r[2]) == "worker":
            out.append(ServerProcess(pid=r[0], role=_label(r[0], r[2], False, engine), env=_read_env(ctx, r[0])))
        stack.extend(children.get(r[0], []))
    return out


def locate_environ_py(ctx: ToolContext, repo: str, python: str | None) -> str | None:
    """The env-gate catalog the server imports: from the given python's engine package, else the checkout's copy."""
    engine = ctx.engine
    if python:
        code = (f"import importlib.util as u; s = u.find_spec({engine.package!r}); "
                "print(s.submodule_search_locations[0] if s and s.submodule_search_locations else '')")
        res = ctx.host.run([python, "-c", code], check="ignore", timeout=60)
        loc = res.stdout.strip().splitlines()[-1:] if res.ok else []
        # the catalog path inside the package: the repo-relative path without "<...>/<package>/"
        inner = engine.gate_catalog_paths[-1].split(f"{engine.package}/", 1)[-1]
        if loc and loc[0] and ctx.host.exists(f"{loc[0]}/{inner}"):
            return f"{loc[0]}/{inner}"
    for rel in engine.gate_catalog_paths:
        if ctx.host.exists(f"{repo.rstrip('/')}/{rel}"):
            return f"{repo.rstrip('/')}/{rel}"
    return None


def _added_lines(ctx: ToolContext, repo: str) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for pf in full_diff(ctx, repo):
        path = unquote_c_path(pf.target_file if pf.target_file != "/dev/null" else pf.source_file)
        out.extend((path, ln.value.rstrip("\n")) for h in pf for ln in h if ln.is_added)
    untracked = ctx.host.run(git(repo, "ls-files", "--others", "--exclude-standard", "-z")).stdout.split("\x00")
    for path in [p for p in untracked if p.endswith(".py")]:
        script = f"head -c 1000000 -- {shlex.quote(repo.rstrip('/') + '/' + path)}"
        res = ctx.host.run(Raw(script), check="ignore")
        out.extend((path, line) for line in res.stdout.splitlines())
    return out


def _state(default: str | None, values: dict[str, str | None]) -> tuple[GateState, str]:
    if not values:
        return "unknown", "no server process to read: the gate's runtime value is unknown"
    enabled = {k: v for k, v in values.items() if is_enabled_value(v, default)}
    if enabled:
        where = ", ".join(f"{k}={v}" for k, v in enabled.items())
        return "ENABLED-at-runtime", f"set away from its default ({default}) in {where}"
    if any(v is not None for v in values.values()):
        return "set-but-default", f"set to its default ({default}) in some processes"
    on = default is not None and default.strip().strip("'\"").lower() not in ("", "0", "false", "no", "none", "off")
    checked = len(values)
    return ("on-by-default-and-unset" if on else "off-by-default-and-unset",
            f"default {default}; verified unset in all {checked} server processes")


@tool(effect="read")
def scan_feature_gates(ctx: ToolContext, args: GateInput) -> GateScan:
    """Find env-var gates in the patches' ADDED lines and verify their value in every running server process.

    Readers: os.environ.get / os.environ[...] / os.getenv / get_bool_env_var / envs.SGLANG_X.get() /
    EnvBool(...)-style declarations. Values come from /proc/PID/environ of the parent and each
    sglang::scheduler_TP* worker. Also parses SGLang's own environ.py on the host (never imports it).
    """
    scan = GateScan(repo=args.repo)
    found: dict[str, Gate] = {}
    reads = [(path, r) for path, line in _added_lines(ctx, args.repo) for r in find_gate_reads(line)]
    scan.environ_py = locate_environ_py(ctx, args.repo, args.python)
    catalog = None
    if scan.environ_py:
        try:
            catalog = ctx.engine.parse_gate_catalog(ctx.host.read(scan.environ_py).decode("utf-8", "replace"))
            scan.engine_gates = catalog.fields if args.include_catalog else []
        except (SyntaxError, ValueError) as exc:  # a broken file on the host is a finding, not a crash
            scan.problems.append(f"could not parse {scan.environ_py}: {type(exc).__name__}: {exc}")
    procs, scan.process_source, problems = server_processes(ctx, args.port, args.repo)
    scan.processes, scan.problems = procs, scan.problems + problems
    for path, r in reads:
        if r.name in found:
            continue
        decl = catalog.get(r.name) if catalog else None
        default = r.default
        if default is None and decl is not None:
            default = decl.default_source
        values: dict[str, Any] = {}
        for p in procs:
            if p.env is not None:
                values[p.role if p.role not in values else f"{p.role}:{p.pid}"] = p.env.get(r.name)
        unreadable = [p.role for p in procs if p.env is None]
        state, reason = _state(default, values)
        if unreadable:
            reason += f" (could not read: {', '.join(unreadable)})"
        found[r.name] = Gate(name=r.name, reader=r.reader, default=default, file=path, line=r.line,
                             declared_in_engine=decl, state=state, values=values, reason=reason)
    scan.gates = sorted(found.values(), key=lambda g: (g.state != "ENABLED-at-runtime", g.name))
    return scan
