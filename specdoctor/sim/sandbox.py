"""Lay a scenario out as a sandbox: venv with the stand-in sglang, a real git checkout, models, bin/ tools."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from importlib import resources
from pathlib import Path

import httpx
from pydantic import BaseModel

from specdoctor.errors import ScenarioError
from specdoctor.host import http
from specdoctor.host.base import Host, HostHints, Raw
from specdoctor.sim.digest import code_digest
from specdoctor.sim.history import layout_history, twin_entries
from specdoctor.sim.model_size import GIB, weights_bytes, write_safetensors_index
from specdoctor.sim.ports import free_port
from specdoctor.sim.scenario import Patch, Scenario, base_tree, load_scenario

__all__ = ["Launched", "Sandbox", "build_sandbox"]

_SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
_GIT_DATE = "2026-01-12T09:30:00+00:00"
_BUS_IDS = ["16", "38", "49", "5A", "98", "B8", "C9", "DA", "1B", "2C", "3D", "4E", "8F", "A0", "B1", "C2"]


def _subst(text: str, ctx: dict[str, str]) -> str:
    for key, value in ctx.items():
        text = text.replace("{" + key + "}", value)
    return text


def _apply_patch(content: str, patch: Patch) -> str:
    if patch.replace is not None:
        if patch.replace not in content:
            raise ScenarioError(f"patch {patch.id}: text to replace not found in {patch.file}")
        return content.replace(patch.replace, patch.add, 1)
    lines = content.splitlines(keepends=True)
    add = patch.add if patch.add.endswith("\n") else patch.add + "\n"
    if patch.after is None:
        return content + ("" if content.endswith("\n") or not content else "\n") + add
    for i, line in enumerate(lines):
        if patch.after in line:
            return "".join(lines[: i + 1]) + add + "".join(lines[i + 1:])
    raise ScenarioError(f"patch {patch.id}: anchor {patch.after!r} not found in {patch.file}")


def _present(content: str, patch: Patch) -> bool:
    have = {ln.strip() for ln in content.splitlines()}
    want = [ln.strip() for ln in patch.add.splitlines() if ln.strip()]
    return bool(want) and all(ln in have for ln in want)


def _git(repo: Path, *args: str, env: dict[str, str]) -> str:
    res = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, env=env, check=False)
    if res.returncode != 0:
        raise ScenarioError(f"git {' '.join(args)} failed: {res.stderr.strip()}")
    return res.stdout.strip()


def _proc_starttime(pid: int) -> int | None:
    try:
        data = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(data.rsplit(")", 1)[1].split()[19])


class Launched(BaseModel):
    """A background launch: the PID the shell started, whether /health answered, where the log is."""

    pid: int
    port: int
    healthy: bool
    log: str
    seconds: float


class Sandbox:
    """A laid-out scenario. Everything a host command needs is in `base_env` and absolute paths."""

    def __init__(self, scenario: Scenario, root: Path, base_env: dict[str, str], repo: str, python: str,
                 hints: HostHints, port: int, launch: str, server_log: str):
        self.scenario = scenario
        self.root = root
        self.base_env = base_env
        self.repo = repo
        self.python = python
        self.hints = hints
        self.port = port
        self.launch = launch
        self.server_log = server_log

    def save(self) -> None:
        """Record how to reattach (a later process resumes a run on the same sandbox)."""
        data = {"scenario": self.scenario.model_dump(mode="json"), "base_env": self.base_env, "repo": self.repo,
                "python": self.python, "hints": self.hints.model_dump(mode="json"), "port": self.port,
                "launch": self.launch, "server_log": self.server_log}
        (self.root / ".sim" / "sandbox.json").write_text(json.dumps(data))

    @classmethod
    def attach(cls, root: Path) -> Sandbox:
        """The sandbox laid out earlier under `root` (by a process that may since have died)."""
        path = Path(root) / ".sim" / "sandbox.json"
        if not path.is_file():
            raise ScenarioError(f"no simulated-host sandbox at {root}")
        d = json.loads(path.read_text())
        return cls(Scenario.model_validate(d["scenario"]), Path(root), d["base_env"], d["repo"], d["python"],
                   HostHints.model_validate(d["hints"]), d["port"], d["launch"], d["server_log"])

    @property
    def pid_dir(self) -> Path:
        return self.root / "run" / "pids"

    def server_pids(self) -> list[int]:
        """PIDs (main first, then workers) of every live server the sandbox's pidfiles list (not other users')."""
        out = []
        for entry in self._pidfile_procs(others=False):
            out.append(entry[0])
        return out

    def checkout_state(self, host: Host) -> str:
        """What a user would compare to see their checkout left as found: status with untracked files, the diff
        against HEAD, and the stash list (read through `host`, as the user who runs specdoctor)."""
        return "\n--\n".join(host.run(["git", "-C", self.repo, *args]).stdout for args in (
            ["status", "--porcelain=v1", "-uall"], ["diff", "HEAD"], ["stash", "list"]))

    def other_server_pids(self) -> list[tuple[int, int | None]]:
        """(pid, starttime) of the other users' servers' processes that are still alive."""
        return self._pidfile_procs(others=True)

    def _other_mains(self) -> set[int]:
        path = self.root / ".sim" / "others.json"
        try:
            return {int(p) for p in json.loads(path.read_text())}
        except (OSError, ValueError):
            return set()

    def _pidfile_procs(self, others: bool | None = None) -> list[tuple[int, int | None]]:
        procs: list[tuple[int, int | None]] = []
        other_mains = self._other_mains()
        for f in sorted(self.pid_dir.glob("*.json")) if self.pid_dir.is_dir() else []:
            if others is not None and (int(f.stem) in other_mains) != others:
                continue
            try:
                data = json.loads(f.read_text())
            except (OSError, ValueError):
                continue
            for p in data.get("procs", []):
                if _proc_starttime(int(p["pid"])) == p.get("starttime"):
                    procs.append((int(p["pid"]), p.get("starttime")))
        return procs

    def launch_server(self, host: Host | None = None, *, line: str | None = None, env: dict[str, str] | None = None,
               log: str | None = None, port: int | None = None, timeout: float = 20.0,
               cwd: str | None = None) -> Launched:
        """Run a launch line in the background on `host` (as its user), cwd = the repo; wait for /health or exit.

        `line` defaults to the scenario's launch; `env` is added to the host's base env. Never raises on a
        failed start: `Launched.healthy` is False and the log says why.
        """
        host = host or self._setup_host()
        log = log or self.server_log
        exports = " ".join(shlex.quote(f"{k}={v}") for k, v in (env or {}).items())
        script = Raw(f"cd {shlex.quote(cwd or self.repo)} && {'env ' + exports + ' ' if exports else ''}"
                     f"nohup {line or self.launch} > {shlex.quote(log)} 2>&1 < /dev/null & echo $!")
        t0 = time.monotonic()
        pid = int(host.run(script, timeout=30).stdout.strip().splitlines()[-1])
        return self._wait_healthy(pid, port or self.port, log, t0, timeout)

    def _setup_host(self) -> Host:
        from specdoctor.host.local import LocalHost

        return LocalHost(name="sim-setup", base_env=self.base_env, inherit_env=False)

    def _wait_healthy(self, pid: int, port: int, log: str, t0: float, timeout: float) -> Launched:
        healthy = False
        while time.monotonic() - t0 < timeout:
            if not Path(f"/proc/{pid}").exists() or _is_zombie(pid):
                break
            try:  # our server (its pidfile exists) and healthy: not some other server on the same port
                if self._started_by(pid) and \
                        http.get(f"http://127.0.0.1:{port}/health", timeout=1.0).status_code == 200:
                    healthy = True
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.02)
        return Launched(pid=pid, port=port, healthy=healthy, log=log, seconds=time.monotonic() - t0)

    # -- the user's terminal session (server.supervisor: tmux | screen) ------------------------------------------

    @property
    def tmux_socket(self) -> Path:
        """The private socket of the twin's tmux server (`tmux -S` it to look inside)."""
        return self.root / ".sim" / "tmux.sock"

    @property
    def screen_dir(self) -> Path:
        """The twin's private screen socket folder ($SCREENDIR)."""
        return self.root / ".sim" / "screen"

    def _start_in_session(self, timeout: float) -> Launched:
        """Start the running server the way a user does in tmux/screen: a session whose window's shell runs the launch
        line (output to the log) and stays at a prompt afterwards. Real tmux/screen binaries, private sockets."""
        kind = self.scenario.server.supervisor
        self._stop_sessions()  # a start retried on another port: the first session (its shell at a prompt) goes
        env = dict(self.scenario.server.running_env)
        exports = " ".join(shlex.quote(f"{k}={v}") for k, v in env.items())
        pidfile = self.root / ".sim" / "session-shell.pid"
        pidfile.unlink(missing_ok=True)
        redirect = "" if self.scenario.server.terminal_output else f" > {shlex.quote(self.server_log)} 2>&1"
        inner = (f"echo $$ > {shlex.quote(str(pidfile))}; cd {shlex.quote(self.repo)} && "
                 f"{'env ' + exports + ' ' if exports else ''}{self.launch}{redirect}; "
                 "exec sh")
        name = self.scenario.server.session_name
        if kind == "tmux":
            start = (f"tmux -f /dev/null -S {shlex.quote(str(self.tmux_socket))} new-session -d -s {shlex.quote(name)} "
                     f"-x 160 -y 48 -c {shlex.quote(self.repo)} {shlex.quote(inner)}")
        else:
            self.screen_dir.mkdir(mode=0o700, exist_ok=True)
            self.screen_dir.chmod(0o700)  # screen refuses a socket folder others can enter
            start = (f"SCREENDIR={shlex.quote(str(self.screen_dir))} screen -dmS {shlex.quote(name)} "
                     f"sh -c {shlex.quote(inner)}")
        t0 = time.monotonic()
        res = self._setup_host().run(Raw(start), check="ignore", timeout=30)
        while not pidfile.is_file() or not pidfile.read_text().strip():
            if time.monotonic() - t0 > 10:
                raise ScenarioError(f"{kind} did not start the server's window: {(res.stderr or res.stdout)[-500:]}")
            time.sleep(0.02)
        return self._wait_healthy(int(pidfile.read_text()), self.port, self.server_log, t0, timeout)

    def _stop_sessions(self) -> None:
        """Kill the twin's tmux server and screen sessions (their windows' shells with them): no leftovers."""
        host = self._setup_host()
        if self.tmux_socket.exists():
            host.run(["tmux", "-S", str(self.tmux_socket), "kill-server"], check="ignore", timeout=30)
        if self.screen_dir.is_dir():
            env = {"SCREENDIR": str(self.screen_dir)}
            listed = host.run(["screen", "-ls"], env=env, check="ignore", timeout=30).stdout
            for sty in re.findall(r"^\s+(\d+\.\S+)", listed, flags=re.M):
                host.run(["screen", "-S", sty, "-X", "quit"], env=env, check="ignore", timeout=30)

    def start_running(self, host: Host | None = None, *, timeout: float = 20.0) -> Launched:
        """Start the scenario's 'already running' server as its supervisor does (nohup, a restart loop, tmux or
        screen). Never raises on a failed start (see `launch_server`)."""
        if self.scenario.server.supervisor in ("tmux", "screen"):
            return self._start_in_session(timeout)
        return self.launch_server(host, line=self.running_line(), env=dict(self.scenario.server.running_env),
                                  timeout=timeout)

    def _started_by(self, pid: int) -> bool:
        """A server of this sandbox is `pid` or its child (a restart loop's shell is not the server itself)."""
        if (self.pid_dir / f"{pid}.json").exists():
            return True
        for f in self.pid_dir.glob("*.json") if self.pid_dir.is_dir() else []:
            try:
                if int(Path(f"/proc/{f.stem}/stat").read_text().rsplit(")", 1)[1].split()[1]) == pid:
                    return True
            except (OSError, ValueError, IndexError):
                continue
        return False

    def running_line(self) -> str:
        """How the 'already running' server was started: its launch, or a shell loop restarting it when it exits
        (`server.supervisor: restarter`; the loop ends with the sandbox)."""
        if self.scenario.server.supervisor == "restarter":
            loop = f"while [ -d {shlex.quote(str(self.root))} ]; do {self.launch}; sleep 1; done"
            return f"sh -c {shlex.quote(loop)}"
        return self.launch

    def start_server(self, host: Host | None = None, *, timeout: float = 20.0) -> list[int]:
        """Start the scenario's 'already running' server (with its extra env) and return its PIDs."""
        res = self.start_running(host, timeout=timeout)
        if not res.healthy:
            tail = Path(res.log).read_text(errors="replace")[-2000:] if Path(res.log).exists() else ""
            raise ScenarioError(f"simulated server did not become healthy on port {res.port}:\n{tail}")
        return self.server_pids()

    def stop_all(self, grace: float = 2.0) -> list[int]:
        """Stop, by PID, every process the sandbox's servers recorded (SIGTERM, then SIGKILL)."""
        procs = self._pidfile_procs()
        for pid, _ in procs:
            try:
                os.kill(pid, signal.SIGTERM)
            except (ProcessLookupError, PermissionError):
                pass
        deadline = time.monotonic() + grace
        alive = procs
        while alive and time.monotonic() < deadline:
            time.sleep(0.05)
            alive = [(p, st) for p, st in alive if _proc_starttime(p) == st and not _is_zombie(p)]
        for pid, st in alive:
            if _proc_starttime(pid) == st:
                try:
                    os.kill(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
        for f in self.pid_dir.glob("*.json") if self.pid_dir.is_dir() else []:
            f.unlink(missing_ok=True)
        self._stop_sessions()
        for f in (self.root / "run" / "gpu-procs").glob("*.pid"):
            try:
                pid = int(f.read_text().strip())
                if _cmdline_has(pid, str(self.root)):
                    os.kill(pid, signal.SIGKILL)
            except (OSError, ValueError):
                pass
        return [p for p, _ in procs]

    def start_others(self) -> None:
        """Start the box's other (unrelated) SGLang servers and GPU jobs, as they run before specdoctor comes."""
        sc = self.scenario
        ctx = self.context()
        for proc in sc.gpu_processes:
            _start_gpu_process(self, proc.id, proc.title)
        mains = sorted(self._other_mains())
        for other in sc.other_servers:
            own = {**ctx, "port": str(free_port(other.port))}  # {port} in its launch line is its own port
            env = {"USER": other.user, **{k: _subst(v, own) for k, v in other.env.items()}}
            log = Path(_subst(other.log, own))
            log.parent.mkdir(parents=True, exist_ok=True)
            res = self.launch_server(line=_subst(other.launch, own), env=env, log=str(log),
                                     port=int(own["port"]), cwd=_subst(other.dir, own))
            if not res.healthy:
                tail = Path(res.log).read_text(errors="replace")[-2000:] if Path(res.log).exists() else ""
                raise ScenarioError(f"the other server {other.name!r} did not start on port {other.port}:\n{tail}")
            mains.append(res.pid)
            (self.root / ".sim" / "others.json").write_text(json.dumps(mains))

    def context(self) -> dict[str, str]:
        """The placeholder values of this sandbox ({root}, {home}, {models}, {repo}, {port}, {python})."""
        return {"root": str(self.root), "home": str(self.root / "home"), "models": str(self.root / "models"),
                "port": str(self.port), "python": str(self.root / "bin" / "python"), "repo": self.repo}

    def remove(self) -> None:
        """Stop everything, then delete the sandbox folder."""
        self.stop_all()
        shutil.rmtree(self.root, ignore_errors=True)


def _cmdline_has(pid: int, text: str) -> bool:
    try:
        return text in Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    except OSError:
        return False


_JOB = """import signal, sys, time
signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))
while True:
    time.sleep(3600)
"""


def _start_gpu_process(box: Sandbox, pid_id: str, title: str) -> int:
    """A long-running non-SGLang job (its argv is the scenario's title), detached from whoever laid the box out."""
    job_dir = box.root / "srv" / "jobs" / pid_id
    job_dir.mkdir(parents=True, exist_ok=True)
    words = shlex.split(title)
    script = next((w for w in words if w.endswith(".py")), "job.py")
    (job_dir / script).write_text(_JOB)
    argv = [str(box.root / "bin" / "python"), *words[1:]] if words and words[0].startswith("python") \
        else [str(box.root / "bin" / "python"), script]
    # Through a shell that backgrounds it: the job outlives whoever laid the box out, and no Popen is left behind.
    line = f"cd {shlex.quote(str(job_dir))} && exec {' '.join(shlex.quote(a) for a in argv)} " \
           "</dev/null >/dev/null 2>&1 & echo $!"
    out = subprocess.run(["sh", "-c", line], env=box.base_env, capture_output=True, text=True, check=True).stdout
    pid = int(out.strip().splitlines()[-1])
    pid_dir = box.root / "run" / "gpu-procs"
    pid_dir.mkdir(parents=True, exist_ok=True)
    (pid_dir / f"{pid_id}.pid").write_text(str(pid))
    return pid


def _is_zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def _layout_python(root: Path, scenario: Scenario, twin_root: str) -> tuple[Path, Path]:
    base = Path(getattr(sys, "_base_executable", sys.executable)).resolve()
    ver = f"python{sys.version_info.major}.{sys.version_info.minor}"
    site = root / "lib" / ver / "site-packages"
    site.mkdir(parents=True)
    (root / "bin").mkdir()
    (root / "pyvenv.cfg").write_text(f"home = {base.parent}\ninclude-system-site-packages = false\n"
                                     f"version = {sys.version.split()[0]}\n")
    python = root / "bin" / "python"
    python.symlink_to(base)
    (root / "bin" / "python3").symlink_to("python")
    engine = scenario.engine
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    src = resources.files("specdoctor.sim.standin").joinpath("sglang")
    with resources.as_file(src) as src_path:
        if engine == "vllm":  # vLLM's stand-in front over the same twin model, under the engine's own package
            with resources.as_file(resources.files("specdoctor.sim.standin").joinpath("vllm")) as vsrc:
                shutil.copytree(vsrc, site / "vllm", ignore=ignore)
            shutil.copytree(Path(src_path) / "_twin", site / "vllm" / "_twin", ignore=ignore)
        else:
            shutil.copytree(src_path, site / "sglang", ignore=ignore)
    (site / engine / "_twin" / "location.txt").write_text(twin_root + "\n")
    # A process that imports sglang from a checkout (a trial tree on PYTHONPATH) runs the stand-in, origin kept.
    finder = resources.files("specdoctor.sim.standin").joinpath("twin_checkout_import.py").read_text()
    (site / "twin_checkout_import.py").write_text(finder)
    (site / "twin_checkout_import.pth").write_text("import twin_checkout_import\n")
    (site / engine / "version.py").write_text(f'__version__ = "{scenario.sglang.version}"\n')
    for dist, version in ((f"{engine}-{scenario.sglang.version}", scenario.sglang.version),
                          (f"nvidia_nccl_cu12-{scenario.hardware.nccl}", scenario.hardware.nccl),
                          (f"torch-{scenario.hardware.torch}", scenario.hardware.torch)):
        info = site / f"{dist}.dist-info"
        info.mkdir()
        name = dist.rsplit("-", 1)[0].replace("_", "-")
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    if scenario.sitecustomize:
        (site / "sitecustomize.py").write_text(scenario.sitecustomize)
    bin_src = resources.files("specdoctor.sim.standin").joinpath("bin")
    with resources.as_file(bin_src) as bin_path:
        for tool in sorted(Path(bin_path).iterdir()):
            if tool.name.startswith((".", "_")) or tool.suffix == ".pyc" or tool.is_dir():
                continue
            if tool.name in ("sglang", "vllm") and tool.name != engine:  # only the box's own engine's command
                continue
            target = root / "bin" / tool.name
            # The box's tools read the twin model from the engine's package (sglang._twin or vllm._twin).
            target.write_text(f"#!{python}\n" + tool.read_text().replace("from sglang._twin", f"from {engine}._twin"))
            target.chmod(0o755)
    return python, site


def build_sandbox(scenario: Scenario | str, root: Path | None = None, *, start_server: bool | None = None,
                  port: int | None = None) -> Sandbox:
    """Lay out `scenario` under `root` (a fresh temp dir by default); start its running server if it has one.

    The sandbox is world-readable/writable so commands may arrive over sshd as another user.
    """
    sc = load_scenario(scenario) if isinstance(scenario, str) else scenario
    root = Path(tempfile.mkdtemp(prefix=f"specdoctor-sim-{sc.name}-")) if root is None else Path(root)
    root.mkdir(parents=True, exist_ok=True)
    root = root.resolve()
    for sub in ("home", "models", "etc", "run/pids", ".sim"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    home = root / "home"
    chosen = port or free_port(sc.server.port)
    ctx = {"root": str(root), "home": str(home), "models": str(root / "models"), "port": str(chosen),
           "python": str(root / "bin" / "python")}
    repo = Path(_subst(sc.sglang.dir, ctx))
    ctx["repo"] = str(repo)
    python, _site = _layout_python(root, sc, str(root))
    ctx["site"] = str(_site)  # the interpreter's site-packages: a scenario's start-up hooks (.pth files) go there
    if sc.sglang.install == "editable":  # pip's PEP 610 record of `pip install -e <repo>`: where sglang comes from
        (_site / f"{sc.engine}-{sc.sglang.version}.dist-info" / "direct_url.json").write_text(
            json.dumps({"url": repo.as_uri(), "dir_info": {"editable": True}}))
    base_env = {"PATH": f"{root / 'bin'}:{_SYSTEM_PATH}", "HOME": str(home), "LANG": "C.UTF-8"}
    nccl_conf = root / "etc" / "nccl.conf"
    if sc.nccl_conf:
        nccl_conf.write_text(sc.nccl_conf)
        base_env["NCCL_CONF_FILE"] = str(nccl_conf)
    base_env.update({k: _subst(v, ctx) for k, v in sc.shell_env.items()})
    if sc.shell_profile:
        profile = _subst(sc.shell_profile, ctx)
        (home / ".bashrc").write_text(profile)
        (home / ".profile").write_text("# ~/.profile: login shells read ~/.bashrc\n[ -f ~/.bashrc ] && . ~/.bashrc\n")
        base_env.update(_profile_exports(profile))
    (home / ".gitconfig").write_text("[user]\n\tname = GPU Box User\n\temail = user@gpu-box\n"
                                     "[safe]\n\tdirectory = *\n[init]\n\tdefaultBranch = main\n")
    git_env = {**base_env, "GIT_AUTHOR_DATE": _GIT_DATE, "GIT_COMMITTER_DATE": _GIT_DATE}
    commit = _layout_repo(repo, sc, git_env, ctx)
    ctx["commit"] = commit
    for f in sc.files:
        target = Path(_subst(f.path, ctx))
        target.parent.mkdir(parents=True, exist_ok=True)
        content = _subst(f.content, ctx)
        for p in sc.sglang.patches:
            content = content.replace(f"@@PATCH:{p.id}@@", json.dumps({"file": p.file, "after": p.after,
                                                                       "add": p.add}))
        target.write_text(content)
        target.chmod(f.mode)
    _layout_model(Path(_subst(sc.server.model_path, ctx)), sc.server.model_config_json, sc.gpu_memory.weights_gb)
    if sc.server.draft_model_path:
        _layout_model(Path(_subst(sc.server.draft_model_path, ctx)), sc.server.draft_config or {},
                      sc.gpu_memory.draft_gb)
    for extra in sc.server.extra_models:
        _layout_model(Path(_subst(extra.path, ctx)), extra.config, None)
    for other in sc.other_servers:
        _layout_tree(Path(_subst(other.dir, ctx)), other.base, {}, git_env, f"{other.user}'s sglang")
    good = None
    if sc.good_fingerprint is not None:
        good = home / "fingerprints" / "good-run.json"
        good.parent.mkdir(parents=True, exist_ok=True)
        text = json.dumps(sc.good_fingerprint, indent=2)
        if "{code_digest}" in text:  # the good run had this very checkout (a story of identical code)
            ctx["code_digest"] = code_digest(repo, git_env)
        good.write_text(_subst(text, ctx))
    _write_twin(root, sc, str(repo), nccl_conf if sc.nccl_conf else None, ctx)
    _open_permissions(root)
    launch = _subst(sc.server.launch, ctx)
    hints = HostHints(repo=str(repo), python=str(python), launch=launch, expect=dict(sc.hints.expect),
                      patch_script=_subst(sc.hints.patch_script, ctx) if sc.hints.patch_script else None,
                      essential=list(sc.hints.essential), good_fingerprint=str(good) if good else None,
                      description=sc.description)
    box = Sandbox(sc, root, base_env, str(repo), str(python), hints, chosen, launch,
                  _subst(sc.server.log, ctx))
    box.save()
    try:
        box.start_others()
    except ScenarioError:
        box.remove()
        raise
    if start_server if start_server is not None else sc.server.running:
        for attempt in range(3):  # another process may take the port between our check and the bind
            res = box.start_running()
            if res.healthy:
                break
            log = Path(res.log).read_text(errors="replace") if Path(res.log).exists() else ""
            if "address already in use" not in log or port is not None or attempt == 2:
                box.remove()
                raise ScenarioError(f"simulated server did not become healthy on port {res.port}:\n{log[-2000:]}")
            box.port = free_port(0)
            ctx["port"] = str(box.port)
            box.launch = _subst(sc.server.launch, ctx)
            box.hints.launch = box.launch
            box.save()
    return box


def _profile_exports(text: str) -> dict[str, str]:
    """`export K=V` lines of a shell profile (what a login shell would have in its environment)."""
    out = {}
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip() if not line.strip().startswith("export") else line.strip()
        if not line.startswith("export "):
            continue
        for word in shlex.split(line[len("export "):], comments=True):
            if "=" in word:
                key, _, value = word.partition("=")
                out[key] = value
    return out


def _layout_model(mdir: Path, config: dict, weights_gb: float | None) -> None:
    """A model directory as on disk: its config and a safetensors index whose total size is the weights' (the
    scenario's figure, else the config's parameter count × dtype), which the stand-in's GPU memory loads."""
    mdir.mkdir(parents=True, exist_ok=True)
    config = {k: v for k, v in config.items() if v is not None}  # a fleet override's null: the key is absent
    (mdir / "config.json").write_text(json.dumps(config, indent=2))
    try:
        size = int(weights_gb * GIB) if weights_gb is not None else weights_bytes(config)
    except (KeyError, TypeError, ValueError):  # a config without hidden_size: no index, the stand-in's default
        return
    write_safetensors_index(mdir, size)


def _layout_tree(repo: Path, base: str, extra: dict[str, str], env: dict[str, str], message: str) -> str:
    files = dict(base_tree(base))
    files.update(extra)
    repo.mkdir(parents=True, exist_ok=True)
    for rel, content in files.items():
        target = repo / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content)
    _git(repo, "init", "-q", env=env)
    _git(repo, "add", "-A", env=env)
    _git(repo, "commit", "-q", "-m", message, env=env)
    return _git(repo, "rev-parse", "HEAD", env=env)


def _layout_repo(repo: Path, sc: Scenario, env: dict[str, str], ctx: dict[str, str] | None = None) -> str:
    commit = _layout_tree(repo, sc.sglang.base, sc.sglang.files, env, sc.sglang.commit_message)
    if sc.sglang.history:  # upstream commits after the base; {good_commit} is the one the good run used
        shas = layout_history(repo, sc.sglang.history, env, _GIT_DATE)
        if ctx is not None:
            ctx["base_commit"] = commit
            ctx["good_commit"] = shas[sc.sglang.good_commit] if sc.sglang.good_commit else commit
        commit = _git(repo, "rev-parse", "HEAD", env=env)
    for patch in sc.sglang.patches:
        target = repo / patch.file
        if patch.untracked:
            if target.exists():
                raise ScenarioError(f"patch {patch.id}: untracked file {patch.file} already exists in the base")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(patch.add if patch.add.endswith("\n") else patch.add + "\n")
            continue
        if not target.exists():
            raise ScenarioError(f"patch {patch.id}: {patch.file} is not in base tree {sc.sglang.base}")
        before = target.read_text()
        if _present(before, patch):
            raise ScenarioError(f"patch {patch.id}: its added lines are already in the base {patch.file}")
        target.write_text(_apply_patch(before, patch))
    for patch in sc.sglang.patches:
        if not _present((repo / patch.file).read_text(), patch):
            raise ScenarioError(f"patch {patch.id} is not detectable after applying (later patch overwrote it?)")
    return commit


def _subst_paths(obj, ctx: dict[str, str]):
    if isinstance(obj, str):
        return _subst(obj, ctx)
    if isinstance(obj, list):
        return [_subst_paths(v, ctx) for v in obj]
    if isinstance(obj, dict):
        return {k: _subst_paths(v, ctx) for k, v in obj.items()}
    return obj


def _write_twin(root: Path, sc: Scenario, repo: str, nccl_conf: Path | None, ctx: dict[str, str]) -> None:
    hw = sc.hardware.model_dump()
    hw["bus_ids"] = sc.hardware.bus_ids or [f"00000000:{b}:00.0" for b in _BUS_IDS[: sc.hardware.gpu_count]]
    hw["pcie_per_gpu"] = {str(i): sc.hardware.pcie_per_gpu.get(i, sc.hardware.pcie).model_dump()
                          for i in range(sc.hardware.gpu_count)}
    mc = sc.server.model_config_json
    hidden = mc.get("hidden_size") or (mc.get("text_config") or {}).get("hidden_size") or 7168
    twin = {
        "name": sc.name, "engine": sc.engine, "version": sc.sglang.version, "seed": sc.seed, "time_scale": sc.time_scale, "repo": repo,
        "sglang_install": sc.sglang.install, "launch_time": sc.server.launch_time.model_dump(),
        "hardware": hw,
        "patches": [{"id": p.id, "file": p.file, "add": p.add, "after": p.after, "essential": p.essential,
                     "missing_error": p.missing_error} for p in sc.sglang.patches] + twin_entries(sc.sglang.history),
        "server": {"worker_env_drop": sc.server.worker_env_drop, "worker_env_set": sc.server.worker_env_set,
                   "hidden_size": hidden, "max_total_num_tokens": sc.server.max_total_num_tokens},
        "perf": _subst_paths(sc.perf.model_dump(by_alias=True), ctx),
        "drafts": _drafts(sc, ctx),
        "gpu_processes": [p.model_dump() for p in sc.gpu_processes],
        "gpu_memory": sc.gpu_memory.model_dump(),
        "other_trees": [_subst(o.dir, ctx) for o in sc.other_servers],
        "allreduce": sc.allreduce.model_dump(by_alias=True),
        "nccl_conf_default": str(nccl_conf) if nccl_conf else None,
    }
    (root / ".sim" / "twin.json").write_text(json.dumps(twin, indent=1))
    (root / ".sim" / "launches").write_text("0")


def _drafts(sc: Scenario, ctx: dict[str, str]) -> dict[str, dict]:
    """Draft directories on the box and the acceptance each gives (None: the scenario's perf.alpha)."""
    out: dict[str, dict] = {}
    if sc.server.draft_model_path:
        out[os.path.normpath(_subst(sc.server.draft_model_path, ctx))] = {"alpha": None}
    for extra in sc.server.extra_models:
        out[os.path.normpath(_subst(extra.path, ctx))] = {"alpha": extra.alpha}
    return out


def _open_permissions(root: Path) -> None:
    """a+rwX everywhere: the sshd test user (not the owner) must read, write and git-commit here."""
    for dirpath, _dirnames, filenames in os.walk(root):
        os.chmod(dirpath, 0o777)
        for name in filenames:
            p = os.path.join(dirpath, name)
            if os.path.islink(p):
                continue
            mode = os.stat(p).st_mode
            os.chmod(p, 0o777 if mode & 0o111 else 0o666)
