"""Scheduler (one per TP rank) and detokenizer processes: titled like SGLang's, dying with their parent.

Each child is started with argv == [title] (so /proc/PID/cmdline reads `sglang::scheduler_TP3`) and reads
a tiny bootstrap from stdin that puts the venv's site-packages on sys.path and runs its sitecustomize,
exactly what the interpreter does at startup for a normally started process: site-packages comes after the
PYTHONPATH entries, so a `sitecustomize` on PYTHONPATH (a revert trial's shadow module) is the one imported.
Only then is site-packages moved first, so the stand-in `sglang` wins over a tree's sources.
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import socket
import subprocess
import sys
import time

from .config import load_twin, log, sandbox_root
from .perf import evaluate, live_contention, patch_present

__all__ = ["proc_starttime", "source_tree", "spawn_children", "start_resource_tracker", "worker_main"]

PR_SET_NAME = 15
PR_SET_PDEATHSIG = 1

_BOOT = """import os, site, sys
sys.path[:] = [p for p in sys.path if 'site-packages' not in p and 'dist-packages' not in p]
site.addsitedir({site!r})
sys.modules.pop('sitecustomize', None)
site.execsitecustomize()
sys.path.insert(0, {site!r})
import json
from {pkg}._twin.workers import worker_main
worker_main({role!r}, {rank!r}, json.loads({payload!r}))
"""
_PKG = __name__.split(".")[0]  # sglang, or vllm on a vLLM box (the same twin code under the engine's package)


def proc_starttime(pid: int) -> int | None:
    """Field 22 of /proc/PID/stat: together with the PID it names one process (PIDs get reused)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as fh:
            data = fh.read()
    except OSError:
        return None
    return int(data.rsplit(")", 1)[1].split()[19])


def _site_dir() -> str:
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def titles(engine: str, tp: int) -> list[tuple[str, str, int]]:
    """(title, role, rank) of a server's children: SGLang's sglang::scheduler[_TP{i}] and sglang::detokenizer;
    vLLM 0.26's VLLM::EngineCore (the model runs in it at TP=1) and VLLM::Worker_TP{i} at TP>1
    (utils/system_utils.py:184, v1/engine/core.py:1270, v1/executor/multiproc_executor.py:1046)."""
    if engine == "vllm":
        if tp == 1:
            return [("VLLM::EngineCore", "scheduler", 0)]
        return [(f"VLLM::Worker_TP{i}", "scheduler", i) for i in range(tp)] + [("VLLM::EngineCore", "detokenizer", 0)]
    roles = [(f"sglang::scheduler_TP{i}" if tp > 1 else "sglang::scheduler", "scheduler", i) for i in range(tp)]
    return [*roles, ("sglang::detokenizer", "detokenizer", 0)]


def spawn_children(tp: int, env: dict[str, str], payload: dict) -> list[tuple[str, subprocess.Popen]]:
    """Start the engine's children (`titles`); each learns its title from the payload."""
    children = []
    roles = titles(payload.get("engine") or "sglang", tp)
    for title, role, rank in roles:
        code = _BOOT.format(site=_site_dir(), role=role, rank=rank, pkg=_PKG,
                            payload=json.dumps({**payload, "title": title}))
        proc = subprocess.Popen([title], executable=sys.executable, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                env=env, close_fds=True)
        assert proc.stdin is not None
        proc.stdin.write(code.encode())
        proc.stdin.close()
        children.append((title, proc))
    return children


def start_resource_tracker(env: dict[str, str]) -> subprocess.Popen:
    """multiprocessing's resource_tracker, as the real main starts it: untitled, reading a pipe until it closes."""
    read_fd, write_fd = os.pipe()
    env = {**env, "KMP_DUPLICATE_LIB_OK": "True", "KMP_INIT_AT_FORK": "FALSE",
           "TORCHINDUCTOR_CACHE_DIR": os.path.join(env.get("HOME", "/tmp"), ".cache", "torchinductor")}
    proc = subprocess.Popen([sys.executable, "-B", "-c", f"from multiprocessing.resource_tracker import main;main({read_fd})"],
                            pass_fds=(read_fd,), env=env, stdin=subprocess.DEVNULL)
    os.close(read_fd)
    os.set_inheritable(write_fd, False)
    proc.twin_pipe = write_fd  # type: ignore[attr-defined]  # held open for the server's lifetime
    return proc


def _hide_environ(keep: list[str]) -> None:
    """What setproctitle leaves in /proc/PID/environ on the real 0.5.17 children: only the variables SGLang
    added last (procs.json); the launch environment is overwritten by the title. C getenv keeps working
    because the environment is first copied off the area, as setproctitle does."""
    with open("/proc/self/stat", encoding="utf-8") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    start, end = int(fields[47]), int(fields[48])  # env_start, env_end (proc(5) fields 50 and 51)
    libc = ctypes.CDLL(None, use_errno=True)
    items = dict(os.environ)
    libc.clearenv()
    for k, v in items.items():
        libc.setenv(k.encode(), v.encode(), 1)
    blob = b"".join(f"{k}={items[k]}\0".encode() for k in keep if k in items)[: end - start]
    ctypes.memmove(start, blob.ljust(end - start, b"\0"), end - start)


def _prctl(title: str) -> None:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        libc.prctl(PR_SET_NAME, ctypes.c_char_p(title[:15].encode()), 0, 0, 0)
    except (OSError, AttributeError):
        pass


def _nccl_debug(rank: int, twin: dict, env: dict[str, str]) -> None:
    if env.get("NCCL_DEBUG", "").upper() not in ("INFO", "TRACE"):
        return
    host = socket.gethostname()
    pid = os.getpid()
    cuda = twin["hardware"].get("cuda", "12.9")
    pre = f"{host}:{pid}:{pid} [{rank}] NCCL INFO "
    lines = [f"NCCL version {twin['hardware']['nccl']}+cuda{cuda}"]
    conf = env.get("NCCL_CONF_FILE")
    if conf and os.path.exists(conf):
        lines.append(f"NCCL_CONF_FILE set by environment to {conf}")
    for key in sorted(env):
        if key.startswith("NCCL_") and key not in ("NCCL_DEBUG", "NCCL_CONF_FILE"):
            lines.append(f"{key} set by environment to {env[key]}")
    for line in lines:
        sys.stderr.write(pre + line + "\n")
    sys.stderr.flush()


def source_tree(environ: dict[str, str], twin: dict, cwd: str | None = None) -> str:
    """The checkout this server runs: a PYTHONPATH entry `<tree>/python`, else the launch directory when it is
    a checkout (`<cwd>/python/sglang`), else the scenario's editable install (its repo).

    The stand-in package itself always imports from the sandbox's site-packages (the trees hold SGLang's
    sources, not a runnable package); the tree found here is what the performance model reads.
    """
    if twin.get("engine") == "vllm":  # a vLLM checkout keeps the package at its top: the tree is the entry
        for entry in (environ.get("PYTHONPATH") or "").split(os.pathsep):
            entry = entry.rstrip("/")
            if entry and os.path.isdir(os.path.join(entry, "vllm")) and os.path.isfile(os.path.join(entry, "setup.py")):
                return entry
        if twin.get("sglang_install") == "wheel":
            return os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        here = cwd if cwd is not None else os.getcwd()
        if here and os.path.isdir(os.path.join(here, "vllm")) and os.path.isfile(os.path.join(here, "setup.py")):
            return here
        return twin["repo"]
    for entry in (environ.get("PYTHONPATH") or "").split(os.pathsep):
        entry = entry.rstrip("/")
        if entry.endswith("/python") and os.path.isdir(os.path.join(entry, "sglang")):
            return os.path.dirname(entry)
    if twin.get("sglang_install") == "wheel":  # a stock wheel in site-packages: none of the checkout's patches
        return os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    here = cwd if cwd is not None else os.getcwd()
    if here and os.path.isdir(os.path.join(here, "python", "sglang")):
        return here
    return twin["repo"]


def _anchor_line(tree: str, patch: dict) -> int:
    """Where a real traceback would point in the patch's own file: the line the patch hangs off, else 1."""
    wanted = (patch.get("after") or "").strip() or \
        next((ln.strip() for ln in patch["add"].splitlines() if ln.strip()), "")
    try:
        with open(os.path.join(tree, patch["file"]), encoding="utf-8") as fh:
            for i, line in enumerate(fh, 1):
                if wanted and wanted in line:
                    return i
    except OSError:
        pass
    return 1


def _emit(obj: dict) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def worker_main(role: str, rank: int, payload: dict) -> None:
    """Body of a scheduler/detokenizer process: report readiness (TP0: the evaluated model), then idle."""
    title = payload.get("title") or f"sglang::{role}" + (f"_TP{rank}" if role == "scheduler" and payload["tp"] > 1 else "")
    _prctl(title)
    if os.getppid() != payload["parent"]:
        sys.exit(0)
    twin = load_twin()
    tag = f"TP{rank}" if payload["tp"] > 1 else ""
    if role == "scheduler":
        from .perf import effective_nccl_env

        env = {**os.environ, **effective_nccl_env(dict(os.environ), twin.get("nccl_conf_default"))}
        _nccl_debug(rank, twin, env)
    if role == "scheduler" and rank == 0:
        args = payload["args"]
        tree = source_tree(dict(os.environ), twin)
        foreign = tree in (twin.get("other_trees") or [])  # another user's checkout: none of our patches
        present = set() if foreign else {p["id"] for p in twin["patches"] if patch_present(tree, p)}
        broken = next((p for p in twin["patches"] if p.get("breaks") and p["id"] in present), None)
        if broken is not None:  # an upstream commit whose code cannot start (the tree's own bug, any launch)
            _emit({"error": broken["breaks"], "file": os.path.join(tree, broken["file"]),
                   "line": _anchor_line(tree, broken), "tree": tree})
            sys.exit(1)
        if args.get("speculative_algorithm") and not foreign:
            for p in twin["patches"]:
                if p.get("essential") and p["id"] not in present:
                    _emit({"error": p.get("missing_error") or f"essential patch {p['id']} is missing",
                           "file": os.path.join(tree, p["file"]), "line": _anchor_line(tree, p), "tree": tree})
                    sys.exit(1)
        result = evaluate(twin, dict(os.environ), args, present, live_contention(sandbox_root(), twin))
        if payload.get("engine") == "vllm":  # the vLLM front logs its own start-up lines
            _emit({"ready": True, "perf": result})
            if payload.get("title_hides_env") is not None:
                _hide_environ(payload["title_hides_env"])
            while True:
                time.sleep(3600)
        log("Init torch distributed begin.", tag)
        gpu_mem = float(twin["hardware"].get("memory_gb", 96.0))
        if payload.get("title_hides_env") is not None:  # 0.5.17: the parent logs loading (startup0517)
            log("Init torch distributed ends. elapsed=0.05 s, mem usage=0.09 GB", tag)
        else:
            log(f"Load weight begin. avail mem={gpu_mem - 1.2:.2f} GB", tag)
        _emit({"ready": True, "perf": result})
    else:
        _emit({"ready": True})
    if payload.get("title_hides_env") is not None:
        _hide_environ(payload["title_hides_env"])
    while True:  # idle until the parent goes (PDEATHSIG) or we are signalled
        time.sleep(3600)
