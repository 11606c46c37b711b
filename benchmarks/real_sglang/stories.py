"""Real-GPU stories: specdoctor investigates a real SGLang 0.5.17 EAGLE-3 server on the lent H200, end to end.

Runs ON the device (after device_setup.sh), with specdoctor's own venv: `/root/sd/bin/python stories.py OUT STORY…`.
Each story lays the box out as a user would have it — a server started with `setsid nohup … > server.log` from the
editable checkout `/root/sglang`, with the story's patches, flags or environment — then runs `specdoctor
investigate --host local --yes` against it, and checks independently of specdoctor what it left behind: the
server back on its port with the same argv/env/cwd and GPU memory held again (nvidia-smi), the checkout's files
byte-identical. The claims come from a good run measured here (story `no-regression`, saved in STATE/claims.json
with the good run's fingerprint), as a user would quote their own earlier numbers.

Writes OUT/STORY/{report.json,report.md,run.log,server.log,smi.csv,box.json} and appends to OUT/summary.json.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

# STORIES_* variables re-point the runner at another box layout (a rehearsal on the twin's sandbox, no GPU).
REPO = Path(os.environ.get("STORIES_REPO", "/root/sglang"))
WORK = Path(os.environ.get("STORIES_WORK", "/root/work"))  # the user's folder: server.log, the patch script
STATE = Path(os.environ.get("STORIES_STATE", "/root/state"))  # what a story leaves for the next (claims, fingerprint)
# Where claims come from when this lease has not measured a good run yet: a fresh machine starts empty, and a
# no-regression story first costs ~400 of the session's ~1800 device seconds. The folder holds an earlier lease's
# claims.json and good_fingerprint.json (benchmarks/results/real-sglang/); each row says which claims it used.
SEED_STATE = os.environ.get("STORIES_SEED_STATE", "")
MEASURED_HERE = "measured on this lease (story no-regression)"
PY = os.environ.get("STORIES_PY") or shutil.which("python3") or "python3"
SPECDOCTOR = os.environ.get("STORIES_SPECDOCTOR", "/root/sd/bin/specdoctor")
PORT = int(os.environ.get("STORIES_PORT", "30000"))
# NVLink multicast stays off in every process on the lent (shared) GPUs: a program that uses it can take the host's
# GPUs out of service. Set last, so that no story or STORIES_ENV can turn it back on; specdoctor's relaunches copy the
# user's server environment, so its trials inherit them.
NVLS_OFF = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}
ENV = {"SGLANG_IS_FLASHINFER_AVAILABLE": "false", "SGLANG_ENABLE_JIT_DEEPGEMM": "false", "HF_HUB_OFFLINE": "1",
       "TRANSFORMERS_OFFLINE": "1", "SGLANG_TORCH_PROFILER_DIR": "/root/prof", "SGLANG_SIMULATE_ACC_LEN": "3.0",
       **json.loads(os.environ.get("STORIES_ENV", "{}")), **NVLS_OFF}
TP = int(os.environ.get("STORIES_TP", "1"))  # tensor parallelism of the user's server and every story (#52)
FLAGS = os.environ.get("STORIES_FLAGS", "").split() or ("--model-path /root/models/target --load-format dummy --attention-backend triton --sampling-backend pytorch "
         f"--host 127.0.0.1 --port {PORT} --mem-fraction-static 0.35 --context-length 4096 --max-running-requests 8 "
         "--cuda-graph-max-bs 4 --disable-prefill-cuda-graph --enable-metrics --log-level info --decode-log-interval 40 "
         "--speculative-algorithm EAGLE3 --speculative-draft-model-path /root/models/draft "
         "--speculative-draft-load-format dummy --speculative-num-steps 3 --speculative-eagle-topk 1 "
         "--speculative-num-draft-tokens 4").split()
WORKER = "python/sglang/srt/speculative/eagle_worker_v2.py"
SMI_VIEWS = {"nvidia-smi.txt": ["nvidia-smi"], "nvidia-smi-q.txt": ["nvidia-smi", "-q"],
             "nvidia-smi-apps.csv": ["nvidia-smi", "--query-compute-apps=pid,process_name,used_memory",
                                     "--format=csv"]}
GOOD_RUN = "good-run"  # among the stories: measure the claims on this lease (no investigate)
PHASES_COST_S = 300  # a phases-only run: a warm server start (~60 s), 2x3 profiled runs, the trace written (~2 min)


@dataclass
class Patch:
    """One local edit: `text` inserted after the first line containing `anchor` (indentation of that line)."""

    file: str
    anchor: str
    text: str


@dataclass
class Story:
    name: str
    truth: str
    about: str
    patches: list[Patch] = field(default_factory=list)
    extra_flags: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    patch_script: bool = False
    use_good_fingerprint: bool = True
    cost_s: int = 420  # device seconds it took (server start + investigate), to skip a story that cannot finish
    phase: str | None = None  # the phase the plant moves (draft, verify, draft_extend): the report must name it


STORIES = {s.name: s for s in [
    Story("no-regression", "no-regression",
          "the clean checkout, served as measured a moment ago: the claims are that run's own numbers",
          use_good_fingerprint=False, cost_s=450),
    Story("launch-flag", "environment",
          "the same checkout relaunched with --disable-cuda-graph (the good run's fingerprint has graphs on)",
          extra_flags=["--disable-cuda-graph"], cost_s=700),  # reached its attribute step in 530 s (3rd contact)
    Story("env-var", "environment",
          "SGLANG_SIMULATE_ACC_LEN=1.6 left in the launching shell (the good run had 3.0): the engine forces a "
          "shorter accept length, a real variable it reads", env={"SGLANG_SIMULATE_ACC_LEN": "1.6"}, cost_s=520),
    Story("code-regression", "code-regression",
          "three local patches and a patch script: a host sync + 4 ms of extra work in every verify "
          "(eagle_worker_v2.py), a log line in the scheduler, a comment in an unused attention backend",
          patches=[
              Patch(WORKER, "def verify(", '        import time as _t; torch.cuda.synchronize(); _t.sleep(0.004)  '
                    '# local: check verify inputs are ready (debug)'),
              Patch("python/sglang/srt/managers/scheduler.py", "def init_model_worker(",
                    '        logger.info("local patch: init_model_worker")'),
              Patch("python/sglang/srt/layers/attention/flashinfer_backend.py", "class FlashInferAttnBackend(",
                    "    # local: tuned workspace size for our long prompts (flashinfer only)"),
          ], patch_script=True, cost_s=1200),  # reached the bisection in ~480 s (3rd contact); + bisect, phases, restart
    Story("draft-stall", "code-regression",
          "three local patches: a host sync + 3 ms sleep at the start of the draft worker's draft method, before the "
          "draft's GPU work (eagle_worker_v2.py), a log line in the detokenizer's __init__ (runs once), a comment in "
          "an unused attention backend",
          patches=[
              Patch(WORKER, "def draft(", '        import time as _t; torch.cuda.synchronize(); _t.sleep(0.003)  '
                    '# local: let the clock sampler see an idle GPU (debug)'),
              Patch("python/sglang/srt/managers/detokenizer_manager.py", "def __init__(",
                    '        logger.info("local patch: detokenizer up")'),
              Patch("python/sglang/srt/layers/attention/flashinfer_backend.py", "class FlashInferAttnBackend(",
                    "    # local: tuned workspace size for our long prompts (flashinfer only)"),
          ], phase="draft", cost_s=1200),
    Story("clear-culprit", "code-regression",
          "three local patches: ~2 ms of extra GPU work (torch.cuda._sleep) at the start of the draft-extend after "
          "each verify (_draft_extend_for_decode, eagle_worker_v2.py), a log line in the scheduler's "
          "init_model_worker (runs once), a comment in an unused attention backend",
          patches=[
              Patch(WORKER, "def _draft_extend_for_decode(", '        torch.cuda._sleep(4_000_000)  '
                    '# local: pad the draft-extend so the overlap scheduler hides the next plan (experiment)'),
              Patch("python/sglang/srt/managers/scheduler.py", "def init_model_worker(",
                    '        logger.info("local patch: init_model_worker")'),
              Patch("python/sglang/srt/layers/attention/flashinfer_backend.py", "class FlashInferAttnBackend(",
                    "    # local: tuned workspace size for our long prompts (flashinfer only)"),
          ], phase="draft_extend", cost_s=1200),
]}


def log(msg: str) -> None:
    print(f"[stories {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def sh(cmd: list[str] | str, check: bool = True, **kw) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, shell=isinstance(cmd, str), text=True, capture_output=True, check=check, **kw)


def http_status(path: str, timeout: float = 3.0) -> int | None:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{PORT}{path}", timeout=timeout) as r:
            return r.status
    except urllib.error.HTTPError as exc:
        return exc.code
    except OSError:
        return None


# -- the user's side of the box -------------------------------------------------------------------------------
def user_env(story: Story) -> dict[str, str]:
    """The launching shell's environment: the image's, less specdoctor's venv, plus the server's variables."""
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME")}
    venv = str(Path(PY).parent.parent)
    env["PATH"] = f"{venv}/bin:" + ":".join(p for p in env.get("PATH", "").split(":") if "/root/sd/" not in p)
    env["VIRTUAL_ENV"] = venv
    return {**env, **ENV, **story.env, **NVLS_OFF}


def launch_line(story: Story) -> list[str]:
    """The user's launch line: the flags, `--tp-size` when TP > 1, the story's flags; never NVLS."""
    tp = ["--tp-size", str(TP)] if TP > 1 else []
    argv = [PY, "-m", "sglang.launch_server", *FLAGS, *tp, *story.extra_flags]
    if "--enable-nccl-nvls" in argv:
        raise SystemExit("--enable-nccl-nvls is never used on the lent machines (NVLink multicast)")
    return argv


def start_user_server(story: Story, timeout: float = 400) -> float:
    """`setsid nohup python -m sglang.launch_server … > server.log 2>&1 &` from the user's folder; seconds to /health."""
    WORK.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    # through a shell that exits at once, as from a terminal: the server's parent is then init, not this runner
    subprocess.run(["bash", "-c", 'setsid nohup "$@" >> server.log 2>&1 < /dev/null &', "user-shell",
                    *launch_line(story)], cwd=WORK, env=user_env(story), check=True)
    while time.monotonic() - t0 < timeout:
        if http_status("/health") == 200:
            return time.monotonic() - t0
        time.sleep(1)
    raise SystemExit(f"the user's server did not become healthy in {timeout:.0f} s; log tail:\n"
                     + (WORK / "server.log").read_text(errors="replace")[-3000:])


def server_pids() -> list[int]:
    """The user's servers: `sglang.launch_server` run by this box's python (never another user's or sandbox's)."""
    out = []
    for p in sh(["pgrep", "-f", "sglang.launch_server"], check=False).stdout.split():
        try:
            argv0 = Path(f"/proc/{p}/cmdline").read_bytes().split(b"\0")[0].decode(errors="replace")
        except OSError:
            continue
        if int(p) != os.getpid() and argv0 == PY:
            out.append(int(p))
    return out


def stop_user_server() -> None:
    """The user stopping their own server between stories (its whole process group)."""
    for pid in server_pids():
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(os.getpgid(pid), signal.SIGTERM)
    for _ in range(60):
        if not server_pids() and not gpu_apps():
            return
        time.sleep(1)
    for pid in server_pids():
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(os.getpgid(pid), signal.SIGKILL)
    time.sleep(3)


def gpu_apps() -> list[dict[str, str]]:
    res = sh(["nvidia-smi", "--query-compute-apps=pid,process_name,used_memory", "--format=csv,noheader,nounits"],
             check=False)
    rows = [r.split(", ") for r in res.stdout.strip().splitlines() if r.strip()]
    return [{"pid": r[0], "name": r[1], "mib": r[2]} for r in rows if len(r) == 3]


def identity() -> dict[str, object]:
    """What the user would call 'my server': the main process's argv, cwd and environment, and its GPU memory."""
    pids = server_pids()  # the children retitle themselves (sglang::scheduler): only the main still matches
    if not pids:
        return {"running": False}
    proc = Path(f"/proc/{min(pids)}")
    env = dict(kv.split("=", 1) for kv in proc.joinpath("environ").read_bytes().decode(errors="replace").split("\0")
               if "=" in kv)
    apps = gpu_apps()
    return {"running": True, "argv": proc.joinpath("cmdline").read_bytes().decode(errors="replace").split("\0")[:-1],
            "cwd": os.readlink(proc / "cwd"), "env": env, "health": http_status("/health"),
            "gpu_mib": sum(int(a["mib"]) for a in apps if a["mib"].isdigit()), "gpu_apps": [a["name"] for a in apps]}


def manifest() -> dict[str, str]:
    """Every tracked or untracked (not ignored) file of the checkout with its sha256, HEAD, stashes: what 'untouched'
    means, computed here without specdoctor's code."""
    files = sh(["git", "-C", str(REPO), "ls-files", "-z", "--cached", "--others", "--exclude-standard"]).stdout
    out = {"HEAD": sh(["git", "-C", str(REPO), "rev-parse", "HEAD"]).stdout.strip(),
           "stash": sh(["git", "-C", str(REPO), "stash", "list"]).stdout,
           "status": sh(["git", "-C", str(REPO), "status", "--porcelain=v1"]).stdout}
    for name in sorted(set(files.split("\0")) - {""}):
        p = REPO / name
        out[name] = hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "(missing)"
    return out


def reset_checkout() -> None:
    sh(["git", "-C", str(REPO), "checkout", "-q", "--", "."])
    sh(["git", "-C", str(REPO), "clean", "-fdq"])


def _signature_end(lines: list[str], i: int) -> int:
    """The line that ends a `def`/`class` statement starting at `i` (its signature may span lines: 0.5.17 writes
    long ones one argument a line); `i` itself for any other line."""
    if not lines[i].lstrip().startswith(("def ", "async def ", "class ")):
        return i
    depth = 0
    for j in range(i, len(lines)):
        code = lines[j].split("#", 1)[0]
        depth += code.count("(") + code.count("[") - code.count(")") - code.count("]")
        if depth <= 0 and code.rstrip().endswith(":"):
            return j
    return i


def apply(patch: Patch) -> None:
    """Insert the patch's text after the first line containing its anchor (after the whole signature when the
    anchor starts a `def` or `class`)."""
    path = REPO / patch.file
    lines = path.read_text().splitlines(keepends=True)
    for i, line in enumerate(lines):
        if patch.anchor in line:
            lines.insert(_signature_end(lines, i) + 1, patch.text + "\n")
            path.write_text("".join(lines))
            return
    raise SystemExit(f"anchor {patch.anchor!r} not in {patch.file}")


PATCH_SCRIPT = """#!/usr/bin/env bash
# re-applies our local scheduler log line after a pull (idempotent, as such scripts are)
f=python/sglang/srt/managers/scheduler.py
if grep -q 'local patch: init_model_worker' "$f"; then echo "SKIP scheduler log line (already applied)"
else sed -i '/def init_model_worker(/a\\        logger.info("local patch: init_model_worker")' "$f" && echo "APPLIED scheduler log line"; fi
grep -q 'check verify inputs are ready' python/sglang/srt/speculative/eagle_worker_v2.py \\
  || echo "WARN verify debug patch not present (apply it by hand if you need it)"
"""


# -- specdoctor's side ---------------------------------------------------------------------------------------
# more `investigate` flags: a rehearsal on a shared CPU machine names its engine (STORIES_ENGINE), since other tests'
# twin servers of another engine may run beside it; on the device the engine is found from the user's server
INVESTIGATE_EXTRA: list[str] = ["--engine", os.environ["STORIES_ENGINE"]] if os.environ.get("STORIES_ENGINE") else []


def connect_local():  # noqa: ANN201 - specdoctor's Client
    """specdoctor's client on this box, as the user's own script would open it."""
    import specdoctor

    return specdoctor.connect("local", engine="sglang")  # as a user's script would name it: no guess from `ps`


def measure_claims() -> dict[str, object]:
    """The good run, measured with specdoctor's own benchmark and fingerprint tools on the running server."""
    with connect_local() as client:
        bench = client.call("benchmark", port=PORT, runs=8, requests_per_run=3, log_path=str(WORK / "server.log"),
                            label="good-run")
        fp = client.call("fingerprint", port=PORT, repo=str(REPO))
    if bench.status != "ok" or fp.status != "ok":
        raise SystemExit(f"good run not measured: {bench.summary} / {fp.summary}")
    STATE.mkdir(parents=True, exist_ok=True)
    (STATE / "good_fingerprint.json").write_text(json.dumps(fp.output, indent=1))
    claims = {"spec": round(bench.output["median"], 1), "accept_length": bench.output.get("accept_length"),
              "good_run": bench.summary}
    (STATE / "claims.json").write_text(json.dumps(claims, indent=1))
    return claims


def investigate(story: Story, out: Path, claims: dict[str, object], timeout: float) -> tuple[int, float]:
    expect = ",".join(f"{k}={claims[k]}" for k in ("baseline", "spec") if claims.get(k))
    cmd = [SPECDOCTOR, "investigate", "--host", "local", "--repo", str(REPO), "--expect", expect, "--yes",
           "--out", str(out / "run"), "-v", *INVESTIGATE_EXTRA]
    if story.use_good_fingerprint and (STATE / "good_fingerprint.json").exists():
        cmd += ["--good-fingerprint", str(STATE / "good_fingerprint.json")]
    if story.patch_script:
        cmd += ["--patch-script", str(WORK / "apply_local_patches.sh")]
    log(f"[{story.name}] {' '.join(cmd)}")
    smi = subprocess.Popen(["nvidia-smi", "--query-gpu=timestamp,memory.used,utilization.gpu", "--format=csv",
                            "-lms", "1000"], stdout=open(out / "smi.csv", "w"), stderr=subprocess.DEVNULL)
    t0 = time.monotonic()
    with open(out / "run.log", "w") as runlog:
        proc = subprocess.Popen(cmd, stdout=runlog, stderr=subprocess.STDOUT, cwd=WORK,
                                env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
        try:
            rc = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:  # Ctrl-C, as a user would: specdoctor's safety net restarts the server
            log(f"[{story.name}] past {timeout:.0f} s: SIGINT")
            proc.send_signal(signal.SIGINT)
            try:
                rc = proc.wait(timeout=150)
            except subprocess.TimeoutExpired:
                proc.kill()
                rc = proc.wait()
    smi.terminate()
    return rc, time.monotonic() - t0


def lay_out(story: Story, out_root: Path) -> Path:
    """The box as the story's user has it before their server starts: a clean checkout with the story's patches,
    no server, no old log; returns the story's (emptied) output folder."""
    out = out_root / story.name
    shutil.rmtree(out, ignore_errors=True)
    WORK.mkdir(parents=True, exist_ok=True)
    out.mkdir(parents=True)
    stop_user_server()
    reset_checkout()
    (WORK / "server.log").unlink(missing_ok=True)
    for p in story.patches:
        apply(p)
    return out


def keep_trace(out: Path, started_at: float, keep: int = 6) -> None:
    """The profiler traces written since `started_at` beside the story's results: the newest as trace.json.gz, and up
    to `keep` of them in traces/ (every arm the run profiled — a stalled arm's trace, not only the fast one's)."""
    traces = [t for t in sorted(Path(ENV["SGLANG_TORCH_PROFILER_DIR"]).glob("*.trace.json.gz"),
                                key=lambda t: t.stat().st_mtime) if t.stat().st_mtime >= started_at]
    if traces:
        shutil.copy(traces[-1], out / "trace.json.gz")
        (out / "traces").mkdir(exist_ok=True)
        for t in traces[-keep:]:
            shutil.copy(t, out / "traces" / t.name)


def run_story(story: Story, out_root: Path, deadline: float) -> dict[str, object]:
    """`deadline` (time.monotonic()) is when the investigate gets its Ctrl-C: the user's server start counts against
    the device budget too, so the investigate's own timeout is what is left of it once the server is healthy."""
    out = lay_out(story, out_root)
    if story.patch_script:
        (WORK / "apply_local_patches.sh").write_text(PATCH_SCRIPT)
        os.chmod(WORK / "apply_local_patches.sh", 0o755)
    startup = start_user_server(story)
    log(f"[{story.name}] user's server healthy in {startup:.0f} s ({len(story.patches)} local patches)")
    claims = measure_claims() if story.name == "no-regression" else json.loads((STATE / "claims.json").read_text())
    before, tree_before = identity(), manifest()
    started_at = time.time()
    rc, wall = investigate(story, out, claims, max(60.0, deadline - time.monotonic()))
    time.sleep(2)
    after, tree_after = identity(), manifest()
    for name in ("report.json", "report.md"):
        if (out / "run" / name).exists():
            shutil.copy(out / "run" / name, out / name)
    shutil.copy(WORK / "server.log", out / "server.log")
    keep_trace(out, started_at)
    report = json.loads((out / "report.json").read_text()) if (out / "report.json").exists() else {}
    if story.name == "no-regression":  # the good run's baseline, as measured by specdoctor, for the later claims
        base = next((m for m in report.get("measurements", []) if m.get("label") == "baseline"), None)
        if base and base.get("median"):
            claims["baseline"] = round(base["median"], 1)
            (STATE / "claims.json").write_text(json.dumps(claims, indent=1))
    env_b, env_a = before.pop("env", {}), after.pop("env", {})
    env_diff = sorted(k for k in set(env_b) | set(env_a) if env_b.get(k) != env_a.get(k))
    before["env_keys"], after["env_keys"] = len(env_b), len(env_a)
    same_server = all(before.get(k) == after.get(k) for k in ("running", "argv", "cwd")) and not env_diff \
        and after.get("health") == 200
    diff = sorted(k for k in set(tree_before) | set(tree_after) if tree_before.get(k) != tree_after.get(k))
    box = {"server_before": before, "server_after": after, "same_server": same_server, "env_differences": env_diff,
           "checkout_identical": not diff, "checkout_differences": diff[:20]}
    (out / "box.json").write_text(json.dumps(box, indent=1))
    fp = (report.get("fingerprint") or {}).get("current") or {}
    gpus = fp.get("gpus") or []
    row = {"story": story.name, "about": story.about, "truth_verdict": story.truth, "verdict": report.get("verdict"),
           "exit_code": rc, "launches": report.get("launches_made"),
           "box_minutes": round(wall / 60, 1), "wall_s": round(wall, 1), "user_server_startup_s": round(startup, 1),
           "box_left_as_found": same_server and not diff,
           "box_left_as_found_by_specdoctor": _specdoctor_box_ok(report.get("box") or {}),
           "sglang_version": fp.get("engine_version") or fp.get("sglang_version"), "gpu": gpus[0].get("name") if gpus else None,
           "claims": {k: claims.get(k) for k in ("baseline", "spec")}, "summary": report.get("summary"),
           **details_checks(story, report, same_server)}
    log(f"[{story.name}] verdict {row['verdict']} (truth {story.truth}), rc {rc}, {wall:.0f} s, "
        f"launches {row['launches']}, left as found {row['box_left_as_found']}")
    return row


def details_checks(story: Story, report: dict, same_server: bool) -> dict[str, object]:
    """What a user acts on beside the verdict, checked against the plant: the phase named (the story's), the
    culprit's share against its confirming trial (recomputed from the report's trials, as the accuracy benchmark
    does), and specdoctor's box check never NOT when the independent check found the server identical."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("acc", Path(__file__).resolve().parents[1] / "diagnosis_accuracy.py")
    assert spec and spec.loader
    acc = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(acc)
    share, share_ok = acc.share_check(report)
    phases = sorted({c["phase_effect"]["phase"] for c in (report.get("attribution") or {}).get("causes") or []
                     if c.get("confirmed", True) and c.get("phase_effect")})
    server = (report.get("box") or {}).get("server") or {}
    outcome = server.get("outcome")
    not_as_found = bool(server.get("stopped")) and server.get("restarted") and not (
        server.get("healthy") and server.get("identity_before") == server.get("identity_after")
        and not server.get("differs") and outcome in ("SAME", "UNKNOWN", None))
    return {"phase_named": phases, "phase_ok": None if story.phase is None else phases == [story.phase],
            "share": share, "share_ok": share_ok, "box_throughput": outcome,
            "box_throughput_reason": server.get("throughput_reason"),
            "box_not_when_identical": bool(same_server and not_as_found and not (outcome == "DIFFERENT"
                                                                                 and (server.get("tps_after") or 0)
                                                                                 > (server.get("tps_before") or 0)))}


def phases_only(story: Story, out_root: Path) -> dict[str, object]:
    """The story's server laid out as for an investigate, profiled by specdoctor's own read-only `phase_times` tool
    (what the investigate's `phases` step runs), the trace kept: a real figure for the twin to be held to, at a
    fraction of an investigate's device time. The server is stopped afterwards (the next story lays out its own)."""
    out = lay_out(story, out_root)
    startup = start_user_server(story)
    log(f"[{story.name}] phases only: server healthy in {startup:.0f} s ({len(story.patches)} local patches)")
    started_at = time.time()
    with connect_local() as client:
        res = client.call("phase_times", port=PORT, runs=3, requests_per_run=2, label=f"{story.name} phases")
    shutil.copy(WORK / "server.log", out / "server.log")
    keep_trace(out, started_at)
    for name, argv in SMI_VIEWS.items():  # the GPU as the server holds it: fixtures for the nvidia-smi parsers
        (out / name).write_text(sh(argv, check=False).stdout)
    row = {"story": story.name, "about": story.about, "mode": "phases-only", "status": res.status,
           "summary": res.summary, "phase_times": res.output, "user_server_startup_s": round(startup, 1)}
    (out / "phases.json").write_text(json.dumps(row, indent=1, default=str))
    log(f"[{story.name}] phases: {res.status}: {res.summary}")
    stop_user_server()
    reset_checkout()
    return row


def good_run(out_root: Path) -> dict[str, object]:
    """The clean checkout served and measured with specdoctor's own benchmark and fingerprint (what story
    `no-regression` measures before its investigate), the claims and good fingerprint saved for the stories after it:
    a lease on another GPU model, or one without time for a whole no-regression investigate, still judges its stories
    against a good run of the same box."""
    out = lay_out(STORIES["no-regression"], out_root)
    startup = start_user_server(STORIES["no-regression"])
    claims = measure_claims()
    (out / "good_run.json").write_text(json.dumps({"startup_s": round(startup, 1), **claims}, indent=1))
    log(f"[{GOOD_RUN}] server healthy in {startup:.0f} s; {claims['good_run']}")
    return claims


def _gpu_names(fingerprint: dict) -> list[str]:
    return [g.get("name", "") for g in fingerprint.get("gpus") or []]


def _seed_for(root: Path, here: list[str]) -> Path:
    """The seed folder whose good run was measured on this box's GPU model: `root` or a subfolder of it holding
    claims.json and good_fingerprint.json (one per GPU model the leases have had); `root` when none matches."""
    seeds = [root, *sorted(d for d in root.iterdir() if d.is_dir())]
    seeds = [d for d in seeds if (d / "claims.json").exists() and (d / "good_fingerprint.json").exists()]
    match = [d for d in seeds if _gpu_names(json.loads((d / "good_fingerprint.json").read_text())) == here]
    return (match or seeds)[0]


def _gpu_names_here() -> list[str]:
    """This box's GPU models, as the fingerprint names them (empty when nvidia-smi cannot say)."""
    out = sh(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], check=False).stdout
    return [line.strip() for line in out.splitlines() if line.strip()]


def _specdoctor_box_ok(box: dict) -> bool | None:
    """What specdoctor's own report says: server healthy with the same identity, checkout identical."""
    server, checkout = box.get("server") or {}, box.get("checkout") or {}
    if not server and not checkout:
        return None
    if server and not server.get("stopped"):  # never stopped (the claims held on it, say): nothing to put back
        return bool(checkout.get("identical", True))
    return bool(server.get("healthy") and server.get("identity_before") == server.get("identity_after")
                and checkout.get("identical"))


def main() -> None:
    out_root = Path(sys.argv[1])
    names = sys.argv[2:] or list(STORIES)
    # `stories.py OUT --phases-only STORY…`: profile each story's server, no investigate; `phases:STORY` among the
    # stories does the same after the investigates before it (one device session for both)
    if names[0] == "--phases-only":
        out_root.mkdir(parents=True, exist_ok=True)
        rows = [phases_only(STORIES[n], out_root) for n in names[1:]]
        (out_root / "phases.json").write_text(json.dumps(rows, indent=1, default=str))
        return
    budget = float(os.environ.get("DEVICE_LEFT_S", "1e9"))  # device seconds left for every story together
    out_root.mkdir(parents=True, exist_ok=True)
    summary_path = out_root / "summary.json"
    rows = json.loads(summary_path.read_text()) if summary_path.exists() else []
    claims_from = MEASURED_HERE
    if not (STATE / "claims.json").exists() and names[0] not in ("no-regression", GOOD_RUN) and SEED_STATE \
            and set(names) != {"upstream"}:  # the upstream story measures its own good run
        here = _gpu_names_here()
        seed = _seed_for(Path(SEED_STATE), here)
        STATE.mkdir(parents=True, exist_ok=True)
        for f in ("claims.json", "good_fingerprint.json"):
            shutil.copy(seed / f, STATE / f)
        claims_from = f"an earlier lease's good run ({json.loads((STATE / 'claims.json').read_text()).get('good_run')})"
        log(f"claims and good fingerprint from {seed}: {claims_from}")
        seeded_on = _gpu_names(json.loads((STATE / "good_fingerprint.json").read_text()))
        if here and seeded_on != here and GOOD_RUN not in names:  # another GPU model's claims are not this box's
            log(f"the seed's good run was on {seeded_on}, this box has {here}: {GOOD_RUN} first")
            names = [GOOD_RUN, *names]
    t0 = time.monotonic()
    phase_rows: list[dict[str, object]] = []
    for name in names:
        left = budget - (time.monotonic() - t0)
        if name == GOOD_RUN:  # claims and good fingerprint measured on this lease, without a whole investigate
            claims = good_run(out_root)
            claims_from = f"measured on this lease (story {GOOD_RUN}: {claims['good_run']})"
            continue
        if name.startswith("phases:"):  # `phases:STORY` after investigates: that story's server profiled only
            story = STORIES[name.split(":", 1)[1]]
            if left < PHASES_COST_S:
                log(f"skip {name}: {left:.0f} s of device time left, it takes about {PHASES_COST_S} s")
                continue
            phase_rows.append(phases_only(story, out_root))
            (out_root / "phases.json").write_text(json.dumps(phase_rows, indent=1, default=str))
            continue
        if name == "upstream":  # the upstream story (#50, upstream_story.py): a history, over SSH
            import upstream_story

            if left < upstream_story.COST_S:
                log(f"skip {name}: {left:.0f} s of device time left, it takes about {upstream_story.COST_S} s")
                continue
            row = upstream_story.run(out_root, time.monotonic() + min(float(os.environ.get("STORY_TIMEOUT_S", "1500")),
                                                                      left - 120))
            rows = [r for r in rows if r["story"] != name] + [{**row, "claims_from": "its own good run"}]
            summary_path.write_text(json.dumps(rows, indent=1))
            continue
        if left < STORIES[name].cost_s:
            log(f"skip {name}: {left:.0f} s of device time left, it takes about {STORIES[name].cost_s} s")
            continue
        # the investigate gets Ctrl-C two minutes before the budget ends: its safety net restarts the user's server
        # (a real restart takes ~60-100 s)
        deadline = time.monotonic() + min(float(os.environ.get("STORY_TIMEOUT_S", "1500")), left - 120)
        row = run_story(STORIES[name], out_root, deadline)
        if name == "no-regression":  # it measures its own claims, and the later stories use them
            claims_from = MEASURED_HERE
        row["claims_from"] = claims_from
        rows = [r for r in rows if r["story"] != name] + [row]
        summary_path.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
