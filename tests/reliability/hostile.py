"""Hostile-input campaign: shell-breaking strings in every string argument of every built-in tool.

Each case calls one tool through the registry against a real host whose commands run as an unprivileged
user inside a scratch folder. It passes when no shell interpreted the string (a canary file that every
payload would create never appears) and, over SSH, every argv/env a command was given arrives at the
program byte-identical (a tiny dumper program records what it received, then execs the real command).
Rejections (validation errors, `SpecdoctorError`s) are fine; any other exception is a crash.
"""

from __future__ import annotations

import json
import os
import pwd
import secrets
import shlex
import shutil
import sys
import tempfile
import time
import types
import typing
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from specdoctor.errors import SpecdoctorError
from specdoctor.host import LocalHost
from specdoctor.host.ssh import SSHHost
from specdoctor.toolkit import ToolContext, registry

__all__ = ["CANARY", "Campaign", "CaseOutcome", "ProbeLocalHost", "ProbeSSHHost", "Workspace", "hostile_text",
           "string_fields", "run_case", "run_campaign", "run_local_campaign", "default_budget", "ssh_budget", "ssh_probe_factory",
           "workspace"]

CANARY = Path(tempfile.gettempdir()) / f"specdoctor-canary-{os.getpid()}-{secrets.token_hex(4)}"
"""Created by every payload if (and only if) some shell interprets it."""

_C = str(CANARY)
# Each payload starts with a word, so a field that is a command line by design (launch_server.command)
# never runs `touch` as its program: the canary can only appear through shell interpretation.
PAYLOADS = [
    f"a;touch {_C}", f"a$(touch {_C})", f"a`touch {_C}`", f"a\ntouch {_C}", f"a&&touch {_C}", f"a|touch {_C}",
    f"a||touch {_C}", f"a'; touch {_C}; '", f'a"; touch {_C}; "', f"a$(touch {_C}", f"a\r\ntouch {_C}",
    f"a & touch {_C} &", f"a>{_C}", f"a $(touch${{IFS}}{_C})", f"x' \"$(touch {_C})\" '", f"a\\\ntouch {_C}",
    f"--upload-pack=touch {_C}", f"-c core.fsmonitor=touch {_C}", f"a;{{touch,{_C}}}", f"a\x0btouch {_C}",
]
NASTY = [";", "&&", "||", "|", "&", "$(", ")", "`", "'", '"', "\\", "\n", "\r", "\t", " ", "*", "?", "[", "]",
         "{", "}", "~", "!", "#", "<", ">", "$HOME", "${IFS}", "$(id)", "`id`", "-e", "--", "=", "%s", "..", "/",
         "é", "日本語", "🙂", "\u202e", "\x1b[31m", "\x01", "\x7f", "\x00", "*.py", "/etc/passwd", "../..", "-"]
_CHARS = st.characters(blacklist_categories=("Cs",))


def hostile_text() -> st.SearchStrategy[str]:
    """Payloads, metacharacter soup, NUL, globs, unicode and very long strings."""
    soup = st.lists(st.one_of(st.sampled_from(NASTY), st.text(_CHARS, max_size=4)), min_size=1, max_size=8).map(
        "".join)
    long = st.tuples(st.sampled_from(PAYLOADS), st.integers(1000, 20000)).map(lambda t: t[0] + "x" * t[1])
    mixed = st.tuples(soup, st.sampled_from(PAYLOADS), soup).map(lambda t: t[1] + t[0] + t[2])
    return st.one_of(st.sampled_from(PAYLOADS), mixed, soup, long)


# Fields that name a program by design get a prefix that makes the program not exist.
_EXEC_FIELDS = {"command", "launch", "python", "script"}
_NOPE = "/nonexistent/sd-nope "


def _kinds(annotation: Any) -> set[str]:
    """Which hostile shapes a field accepts: 'str', 'list', 'dict' (string leaves only)."""
    out: set[str] = set()
    args = typing.get_args(annotation)
    origin = typing.get_origin(annotation)
    if annotation is str:
        out.add("str")
    elif origin in (typing.Union, types.UnionType):
        for a in args:
            out |= _kinds(a)
    elif origin is list and args and args[0] is str:
        out.add("list")
    elif origin is dict and args and args[0] is str and args[1] is str:
        out.add("dict")
    return out


def string_fields() -> list[tuple[str, str, str]]:
    """(tool, field, shape) for every string-carrying argument of every built-in tool."""
    out = []
    for spec in registry.all():
        if not spec.fn.__module__.startswith("specdoctor.tools."):
            continue  # test-only tools other suites register
        for name, f in spec.input_model.model_fields.items():
            for kind in sorted(_kinds(f.annotation)):
                out.append((spec.name, name, kind))
    return out


@dataclass
class Workspace:
    """A scratch folder owned by the unprivileged user: a messy repo, a home, a cwd."""

    root: Path
    repo: str
    home: str
    cwd: str
    closed_port: int


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _base_args(tool: str, ws: Workspace) -> dict[str, Any]:
    """Valid, fast arguments; the hostile value replaces one field."""
    fast = {"timeout_s": 5}
    p = ws.closed_port
    return {
        "apply_patches": {"repo": ws.repo, **fast},
        "backup_worktree": {"repo": ws.repo},
        "benchmark": {"port": p, "runs": 1, "requests_per_run": 1, "warmup_runs": 0, "max_new_tokens": 2, **fast},
        "breakeven_empirical": {"command": f"{_NOPE}--port {p}", "port": p, "runs": 2, "requests_per_run": 1,
                                "warmup_runs": 0, "max_new_tokens": 2, "accept_lens": [1.5, 2.5], **fast},
        "bisect_patches": {"repo": ws.repo, "launch": f"{_NOPE}--port {p}", "port": p, "runs": 3, "max_runs": 3,
                           "requests_per_run": 1, "max_new_tokens": 2},
        "build_trial_tree": {"repo": ws.repo, "name": "hostile", "timeout_s": 5},
        "catalog_diffs": {"repo": ws.repo},
        "checkout_manifest": {"repo": ws.repo},
        "mirror_backup": {"repo": ws.repo},
        "remove_trial_tree": {},
        "engine_origin": {"python": "python3"},
        "sglang_origin": {"python": "python3"},
        "find_essential_patches": {"repo": ws.repo, "launch": f"{_NOPE}--port {p}", "port": p},
        "compare_samples": {"a": [1.0, 2.0, 3.0], "b": [1.0, 2.0, 3.0]},
        "fingerprint_diff": {"a": {}, "b": {}},
        "launch_server": {"command": f"{_NOPE}--port {p}", "port": p, **fast},
        "nccl_promote": {"command": f"{_NOPE}--port {p}", "port": p, "runs": 2, **fast,
                        "candidates": [{"label": "ll", "env": {"NCCL_PROTO": "LL"}}]},
        "nccl_sweep": {"sizes": [1024], "tp": 2, "repeats": 1, "screen_repeats": 1, "finalists": 1,
                       "tool": "allreduce_bench", "backend": "gloo", **fast},
        "read_process_env": {"pid": os.getpid()},
        "restore_worktree": {"repo": ws.repo},
        "scan_feature_gates": {"repo": ws.repo},
        "stash_all": {"repo": ws.repo},
        "stop_server": {"grace_s": 0.5},
        "triage_diffs": {"repo": ws.repo},
    }.get(tool, {})


def _shape(value: str, kind: str, fld: str) -> Any:
    v = _NOPE.strip() + value if fld in _EXEC_FIELDS else value
    return {"str": v, "list": [v, "ok"], "dict": {value: value, "SD_OK": v}}[kind]


class _Recorder:
    """Commands a probe host was asked to run, and (over SSH) what the programs actually received."""

    def __init__(self) -> None:
        self.sent: dict[str, tuple[list[str], dict[str, str]]] = {}
        self.commands = 0

    def expect(self, argv: list[str], env: dict[str, str]) -> str:
        tag = f"{self.commands}-{secrets.token_hex(3)}"
        self.commands += 1
        self.sent[tag] = (argv, env)
        return tag


def _privdrop() -> list[str]:
    """`setpriv` argv that runs a command as the unprivileged test user (only when we are root)."""
    if os.geteuid() != 0:
        return []
    from specdoctor.testing import ensure_user

    pw = pwd.getpwnam(ensure_user())
    return ["setpriv", f"--reuid={pw.pw_uid}", f"--regid={pw.pw_gid}", "--clear-groups", "--"]


class ProbeLocalHost(LocalHost):
    """LocalHost for hostile inputs: clean env, scratch cwd/HOME, unprivileged, every command time-limited."""

    def __init__(self, ws: Workspace):
        super().__init__(name="probe-local", inherit_env=False, base_env={
            "PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": ws.home, "LANG": "C.UTF-8",
            "GIT_CEILING_DIRECTORIES": str(ws.root)})
        self.ws = ws
        self.rec = _Recorder()
        self.drop = _privdrop()

    def _exec(self, cmd, *, env, cwd, timeout, stdin):
        argv = ["sh", "-c", cmd] if isinstance(cmd, str) else list(cmd)
        self.rec.expect(argv, env)
        return super()._exec([*self.drop, *argv], env=env, cwd=cwd or self.ws.cwd,
                             timeout=min(timeout or 20, 20), stdin=stdin)

    def put(self, data: bytes | Path, remote_path: str, *, mode: int | None = None) -> None:
        """Written by the unprivileged user (LocalHost.put would write as the test's user)."""
        payload = data.read_bytes() if isinstance(data, Path) else data
        q = shlex.quote
        tmp = f"{remote_path}.specdoctor-tmp"
        script = f"mkdir -p {q(os.path.dirname(remote_path) or '.')} && cat > {q(tmp)}"
        script += (f" && chmod {mode:o} {q(tmp)}" if mode is not None else "") + f" && mv -f {q(tmp)} {q(remote_path)}"
        self.run(script, stdin=payload)


DUMPER = r"""#!/bin/sh
# Record argv (NUL-separated; NUL cannot occur in argv) and the environment exactly as received, then exec.
dir=$1; tag=$2; shift 2
printf '%s\000' "$@" > "$dir/$tag.argv"
env -0 > "$dir/$tag.env"
exec "$@"
"""


class ProbeSSHHost(SSHHost):
    """SSHHost whose every command first goes through DUMPER, which records argv/env as received, then execs it.

    `log` is a folder: one `<tag>.argv` and `<tag>.env` file per command.
    """

    def __init__(self, *a: Any, ws: Workspace, dumper: str, log: str, **kw: Any):
        self.ws, self.dumper, self.log = ws, dumper, log
        self.rec = _Recorder()
        super().__init__(*a, **kw)

    def _exec(self, cmd, *, env, cwd, timeout, stdin):
        argv = ["sh", "-c", cmd] if isinstance(cmd, str) else list(cmd)
        tag = self.rec.expect(argv, {**self.base_env, **env})
        return super()._exec(["sh", self.dumper, self.log, tag, *argv], env=env,
                             cwd=cwd or self.ws.cwd, timeout=min(timeout or 20, 20), stdin=stdin)

    def mismatches(self) -> list[str]:
        """Commands whose argv or env differed at the program from what specdoctor sent."""
        bad = []
        for tag, (argv, env) in self.rec.sent.items():
            argv_file, env_file = Path(self.log) / f"{tag}.argv", Path(self.log) / f"{tag}.env"
            if not argv_file.exists():
                continue  # never reached the program (cwd missing, NUL refused before sending)
            received = argv_file.read_bytes().split(b"\0")[:-1]
            if received != [a.encode("utf-8", "surrogateescape") for a in argv]:
                bad.append(f"argv {argv!r} arrived as {received!r}")
            renv = dict(e.split(b"=", 1) for e in env_file.read_bytes().split(b"\0") if b"=" in e)
            for k, v in env.items():
                if renv.get(k.encode()) != v.encode("utf-8", "surrogateescape"):
                    bad.append(f"env {k}={v!r} arrived as {renv.get(k.encode())!r}")
            argv_file.unlink()
            env_file.unlink(missing_ok=True)
        self.rec.sent.clear()
        return bad


@contextmanager
def workspace() -> Iterator[Workspace]:
    """A 0o777 scratch root with home/, cwd/ and a messy repo made by the unprivileged user."""
    root = Path(tempfile.mkdtemp(prefix="sd-hostile-"))
    os.chmod(root, 0o777)
    ws = Workspace(root=root, repo=str(root / "repo"), home=str(root / "home"), cwd=str(root / "cwd"),
                   closed_port=_free_port())
    try:
        host = ProbeLocalHost(ws)
        host.run(["mkdir", "-p", ws.home, ws.cwd], cwd=str(root))
        _repo_helpers().make_messy_repo(host, ws.repo)
        yield ws
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _repo_helpers() -> Any:
    """tests/repo/helpers.py (the messy-repo builder), loaded by path: tests/repo is not a package."""
    import importlib.util

    name = "specdoctor_tests_repo_helpers"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, Path(__file__).resolve().parents[1] / "repo" / "helpers.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


@dataclass
class CaseOutcome:
    """One hostile call: what came back, whether a shell interpreted it, whether argv changed on the way."""

    tool: str
    field: str
    outcome: str
    escaped: bool
    mismatches: list[str]
    detail: str = ""
    seconds: float = 0.0


@dataclass
class Campaign:
    """Totals of a campaign (the benchmark prints these)."""

    cases: list[CaseOutcome] = field(default_factory=list)
    commands: int = 0

    @property
    def escapes(self) -> list[CaseOutcome]:
        return [c for c in self.cases if c.escaped]

    @property
    def altered(self) -> list[CaseOutcome]:
        return [c for c in self.cases if c.mismatches]

    @property
    def crashes(self) -> list[CaseOutcome]:
        return [c for c in self.cases if c.outcome == "crash"]

    def by_outcome(self) -> Counter[str]:
        return Counter(c.outcome for c in self.cases)

    def tools_covered(self) -> set[str]:
        return {c.tool for c in self.cases}


def run_case(host: ProbeLocalHost | ProbeSSHHost, ws: Workspace, tool: str, fld: str, kind: str,
             value: str, ctx: ToolContext | None = None) -> CaseOutcome:
    """Call `tool` with `value` in `fld` (shaped as str/list/dict) and judge the result."""
    args = _base_args(tool, ws)
    args[fld] = _shape(value, kind, fld)
    ctx = ctx or ToolContext(host=host, run_id="adhoc", auto_approve=True)
    detail = ""
    t0 = time.perf_counter()
    try:
        res = registry.call(ctx, tool, args)
        outcome = res.status
        detail = res.summary[:200]
    except SpecdoctorError as exc:
        outcome, detail = f"rejected:{exc.code}", str(exc)[:200]
    except Exception as exc:  # a crash: reported, and the suite fails on it
        outcome, detail = "crash", f"{type(exc).__name__}: {exc}"[:300]
    escaped = CANARY.exists() or CANARY.is_symlink()
    if escaped:
        CANARY.unlink()
    bad = host.mismatches() if isinstance(host, ProbeSSHHost) else []
    return CaseOutcome(tool, fld, outcome, escaped, bad, detail, round(time.perf_counter() - t0, 3))


# Seconds per case differ 50x between tools (a sweep or a bisection launches servers); slow ones get fewer cases.
_VERY_SLOW = {"nccl_sweep", "bisect_patches", "nccl_inventory", "find_essential_patches", "fingerprint"}
_SLOW = {"apply_patches", "check_env_propagation", "scan_feature_gates", "launch_server", "stash_all",
         "nccl_promote", "breakeven_empirical", "triage_diffs", "backup_worktree", "build_trial_tree",
         "checkout_manifest", "mirror_backup", "engine_origin", "sglang_origin"}


def default_budget(scale: float) -> Callable[[str, str], int]:
    """Cases per (tool, field): 85*scale for quick tools, 8*scale for slow ones, 2*scale for the slowest."""
    def budget(tool: str, fld: str) -> int:
        base = 2 if tool in _VERY_SLOW else 8 if tool in _SLOW else 85
        return max(1, round(base * scale))

    return budget


def ssh_budget(tool: str, fld: str) -> int:
    """~100 cases over SSH: 7 per quick pair, 1 per slow pair; the slowest tools only run over LocalHost."""
    return 0 if tool in _VERY_SLOW else 1 if tool in _SLOW else 7


def ssh_probe_factory(sshd: Any) -> Callable[[Workspace], ProbeSSHHost]:
    """Probe hosts logged in to the test sshd (`specdoctor.testing.SSHServer`) with the dumper in the workspace."""
    def make(ws: Workspace) -> ProbeSSHHost:
        dumper, log = ws.root / "dumper.sh", ws.root / "argv"
        dumper.write_text(DUMPER)
        log.mkdir(mode=0o777)
        os.chmod(log, 0o777)
        return ProbeSSHHost(sshd.host, user=sshd.user, port=sshd.port, identity_files=[str(sshd.key_path)],
                            known_hosts=str(sshd.known_hosts), allow_agent=False,
                            ssh_config=str(sshd.root / "ssh_config"), ws=ws, dumper=str(dumper), log=str(log),
                            base_env={"HOME": ws.home, "GIT_CEILING_DIRECTORIES": str(ws.root)})

    return make


def _fuzz_pair(camp: Campaign, host: Any, ws: Workspace, pair: tuple[str, str, str], n: int) -> None:
    ctx = ToolContext(host=host, run_id="adhoc", auto_approve=True)  # one backup per pair

    @settings(max_examples=n, deadline=None, database=None, derandomize=True,
              phases=[Phase.explicit, Phase.generate], suppress_health_check=list(HealthCheck))
    @given(value=hostile_text())
    def one(value: str) -> None:
        camp.cases.append(run_case(host, ws, *pair, value, ctx=ctx))

    one()
    registry.call(ctx, "stop_server", {"grace_s": 1})


def run_campaign(host_factory: Callable[[Workspace], Any], budget: int | Callable[[str, str], int], *,
                 only: Callable[[str], bool] | None = None, shard: tuple[int, int] = (0, 1)) -> Campaign:
    """Hypothesis-generated cases for every (tool, string field) pair (`budget` each); never raises on a bad case.

    `shard=(i, k)` takes every k-th pair starting at i (for parallel workers).
    """
    pairs = [p for p in string_fields() if only is None or only(p[0])][shard[0]::shard[1]]
    camp = Campaign()
    with workspace() as ws:
        host = host_factory(ws)
        try:
            for tool, fld, kind in pairs:
                n = budget if isinstance(budget, int) else budget(tool, fld)
                if n <= 0:
                    continue
                _fuzz_pair(camp, host, ws, (tool, fld, kind), n)
            camp.commands = host.rec.commands
        finally:
            host.close()
    return camp


def run_local_campaign(scale: float = 1.0, workers: int = 2) -> Campaign:
    """The LocalHost campaign in `workers` child processes, run as the unprivileged user when we are root."""
    import subprocess

    out = Path(tempfile.mkdtemp(prefix="sd-hostile-out-"))
    os.chmod(out, 0o777)
    if os.geteuid() == 0:
        from specdoctor.testing.sshd import ensure_traversable

        ensure_traversable(sys.executable)  # a pyenv interpreter under root's 0700 home
    env = {**os.environ, "HOME": str(out), "PYTHONPATH": str(Path(__file__).resolve().parents[1]),
           "PYTHONDONTWRITEBYTECODE": "1"}
    try:
        procs = [subprocess.Popen([*_privdrop(), sys.executable, "-m", "reliability.hostile", str(scale),
                                   f"{i}/{workers}", str(out / f"shard{i}.json")], cwd=out, env=env,
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT) for i in range(workers)]
        camp = Campaign()
        for i, proc in enumerate(procs):
            log, _ = proc.communicate(timeout=900)
            if proc.returncode != 0:
                raise RuntimeError(f"hostile shard {i} failed:\n{log.decode(errors='replace')[-3000:]}")
            data = json.loads((out / f"shard{i}.json").read_text())
            camp.cases += [CaseOutcome(**c) for c in data["cases"]]
            camp.commands += data["commands"]
        return camp
    finally:
        shutil.rmtree(out, ignore_errors=True)


def _main(argv: list[str]) -> int:
    scale, shard, dest = float(argv[0]), argv[1], argv[2]
    i, k = (int(x) for x in shard.split("/"))
    camp = run_campaign(ProbeLocalHost, default_budget(scale), shard=(i, k))
    Path(dest).write_text(json.dumps({"cases": [c.__dict__ for c in camp.cases], "commands": camp.commands}))
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
