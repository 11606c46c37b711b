"""Real-GPU stories on vLLM 0.26.0 + EAGLE-3: the SGLang runner (benchmarks/real_sglang/stories.py) with vLLM's box.

Runs ON the device (after device_setup.sh), with specdoctor's own venv: `/root/sd/bin/python stories.py OUT STORY…`.
Everything engine-neutral — laying the box out, the user's `setsid nohup` start, the good run's claims, the
investigate, the independent box check, the seed of claims from an earlier lease, phases-only profiling — is the
SGLang runner's own code, imported; this module rebinds only what is vLLM's: the checkout (/root/vllm, an editable
vLLM laid out as upstream's), the launch line (launch.py: `vllm serve` with a --speculative-config JSON), which
processes are the user's server, the environment, where the torch profiler writes, the stories, and the engine
fields of each result row (benchmarks/results/real-vllm/summary.json).
"""

from __future__ import annotations

import importlib.util
import json
import os
import shlex
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
# The SGLang runner reads its box from STORIES_* at import: vLLM's defaults first (a rehearsal sets them all).
os.environ.setdefault("STORIES_REPO", "/root/vllm")


def _load_runner() -> Any:
    spec = importlib.util.spec_from_file_location("stories", HERE.parent / "real_sglang" / "stories.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules["stories"] = mod  # its dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


run = _load_runner()
sys.path.insert(0, str(HERE))
from launch import launch_argv  # noqa: E402

MODELS = os.environ.get("STORIES_MODELS", "/root/models")
PROF_DIR = os.environ.get("STORIES_PROF_DIR", "/root/prof")
# The drafter 0.26 runs for a dense Llama + EAGLE-3: model runner v2's (the default, config/vllm.py
# use_v2_model_runner; the first real server logged "Using V2 Model Runner"). Its propose() is the speculative path;
# v1's spec_decode/llm_base_proposer.py is never imported there (the first plant in it changed nothing in the trace).
PROPOSER = "vllm/v1/worker/gpu/spec_decode/autoregressive/speculator.py"
ENGINE = {"engine": "vllm"}

# vLLM reads no acceptance variable: the launch line forces it (launch.py). Usage stats off: the box is offline.
# FlashInfer is not in the image: 0.26's sampler imports it unless VLLM_USE_FLASHINFER_SAMPLER=0
# (v1/sample/ops/topk_topp_sampler.py:38-44; the first real start died on `No module named 'flashinfer'`).
run.ENV = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1", "VLLM_DO_NOT_TRACK": "1",
           "VLLM_USE_FLASHINFER_SAMPLER": "0",
           **json.loads(os.environ.get("STORIES_ENV", "{}")), **run.NVLS_OFF}
FLAGS = shlex.split(os.environ.get("STORIES_FLAGS", ""))  # a rehearsal's own flags (the twin's launch line)

Patch, Story = run.Patch, run.Story
STORIES = {s.name: s for s in [
    Story("no-regression", "no-regression",
          "the clean checkout, served as measured a moment ago: the claims are that run's own numbers",
          use_good_fingerprint=False, cost_s=450),
    Story("enforce-eager", "environment",
          "the same checkout relaunched with --enforce-eager (the good run's fingerprint has torch.compile and "
          "CUDA graphs on)", extra_flags=["--enforce-eager"], cost_s=700),
    Story("batch-invariant", "environment",
          "VLLM_BATCH_INVARIANT=1 left in the launching shell (envs.py:602): deterministic kernels, cascade "
          "attention off, split-k off, a real variable vLLM reads", env={"VLLM_BATCH_INVARIANT": "1"}, cost_s=600),
    Story("draft-sync", "code-regression",
          "three local patches: a host sync + 3 ms sleep at the start of the EAGLE speculator's propose() "
          "(model runner v2, autoregressive/speculator.py; skipped while a CUDA graph is being captured), a log line "
          "in EngineCore.__init__ (runs once), a comment in an unused attention backend (FlashInfer; the server "
          "runs TRITON_ATTN)",
          patches=[
              Patch(PROPOSER, "def propose(",
                    "        import time as _t; torch.cuda.is_current_stream_capturing() or (torch.cuda.synchronize(), "
                    "_t.sleep(0.003))  # local: time the drafter (debug)"),
              Patch("vllm/v1/engine/core.py", "def __init__(", '        logger.info("local patch: engine core up")'),
              Patch("vllm/v1/attention/backends/flashinfer.py", "class FlashInferBackend(",
                    "    # local: bigger workspace for our long prompts (flashinfer only)"),
          ], phase="draft", cost_s=1200),
]}


def launch_line(story: Any) -> list[str]:
    """`<venv>/bin/vllm serve …`: the console script beside the user's python, as `pip install -e` writes it."""
    vllm = str(Path(run.PY).parent / "vllm")
    if FLAGS:
        argv = [vllm, "serve", *FLAGS, *(["--tensor-parallel-size", str(run.TP)] if run.TP > 1 else []),
                *story.extra_flags]
    else:
        argv = launch_argv(models=MODELS, port=run.PORT, prof_dir=PROF_DIR, extra=story.extra_flags, tp=run.TP,
                           vllm=vllm)
    if any("nvls" in a.lower() for a in argv):
        raise SystemExit("NVLink multicast is never used on the lent machines")
    return argv


def is_user_server(argv: list[str]) -> bool:
    """The user's API server: the box's python running the `vllm` script's `serve`, or the api_server module.
    Its EngineCore and workers retitle themselves (VLLM::EngineCore), so only the main process matches."""
    if not argv or argv[0] != run.PY:
        return False
    if len(argv) > 2 and os.path.basename(argv[1]) == "vllm" and argv[2] == "serve":
        return True
    return len(argv) > 2 and argv[1] == "-m" and argv[2] == "vllm.entrypoints.openai.api_server"


def server_pids() -> list[int]:
    out = []
    for p in run.sh(["pgrep", "-f", "vllm serve|vllm.entrypoints.openai.api_server"], check=False).stdout.split():
        try:
            argv = [a.decode(errors="replace") for a in Path(f"/proc/{p}/cmdline").read_bytes().split(b"\0")[:-1]]
        except OSError:
            continue
        if int(p) != os.getpid() and is_user_server(argv):
            out.append(int(p))
    return out


def keep_trace(out: Path, started_at: float) -> None:
    """The newest torch-profiler trace (vLLM writes `*.pt.trace.json[.gz]` under torch_profiler_dir)."""
    import shutil

    traces = sorted((t for t in Path(PROF_DIR).rglob("*.json*") if t.stat().st_mtime >= started_at),
                    key=lambda t: t.stat().st_mtime)
    if traces:
        name = "trace.json.gz" if traces[-1].name.endswith(".gz") else "trace.json"
        shutil.copy(traces[-1], out / name)


# A rehearsal on a shared CPU machine may see other engines' twin servers: STORIES_ENGINE names the user's engine
# there (specdoctor's --engine, and the launch line as the host's hint). On the device nothing is named: specdoctor
# finds vLLM on the box itself.
ENGINE_NAMED = os.environ.get("STORIES_ENGINE", "")


def connect_local() -> Any:
    import specdoctor
    from specdoctor.host import HostHints, open_host

    host = open_host("local")
    if ENGINE_NAMED:
        host.hints = HostHints(launch=shlex.join(launch_line(STORIES["no-regression"])))
    return specdoctor.connect(host)


def _get(path: str) -> str:
    import urllib.request

    with urllib.request.urlopen(f"http://127.0.0.1:{run.PORT}{path}", timeout=10) as r:
        return r.read().decode(errors="replace")


_measure_claims = run.measure_claims


def measure_claims() -> dict[str, object]:
    """The SGLang runner's good run, with vLLM's own answers kept around it for the conformance fixtures
    (OUT/capture: /version, /v1/models, /metrics before and after, the log, the launch line; to_fixtures.py)."""
    cap = Path(sys.argv[1]) / "capture"
    cap.mkdir(parents=True, exist_ok=True)
    for name, path in (("version.json", "/version"), ("models.json", "/v1/models"), ("metrics-before.txt", "/metrics")):
        (cap / name).write_text(_get(path))
    claims = _measure_claims()
    (cap / "metrics-after.txt").write_text(_get("/metrics"))
    (cap / "server.log").write_text((run.WORK / "server.log").read_text(errors="replace"))
    (cap / "launch.txt").write_text(shlex.join(launch_line(STORIES["no-regression"])) + "\n")
    return claims


_run_story = run.run_story


def run_story(story: Any, out_root: Path, deadline: float) -> dict[str, object]:
    """The SGLang runner's story, its row given the engine and the engine's version from specdoctor's report."""
    row = _run_story(story, out_root, deadline)
    report_path = out_root / story.name / "report.json"
    report = json.loads(report_path.read_text()) if report_path.exists() else {}
    fp = (report.get("fingerprint") or {}).get("current") or {}
    row.pop("sglang_version", None)
    return {**row, **ENGINE, "engine_version": fp.get("engine_version") or fp.get("sglang_version"),
            "engine_reported": fp.get("engine")}


run.STORIES = STORIES
run.connect_local = connect_local
run.measure_claims = measure_claims
if ENGINE_NAMED:
    run.INVESTIGATE_EXTRA = ["--engine", ENGINE_NAMED]
run.launch_line = launch_line
run.server_pids = server_pids
run.keep_trace = keep_trace
run.run_story = run_story

if __name__ == "__main__":
    run.main()
