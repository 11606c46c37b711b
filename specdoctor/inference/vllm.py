"""vLLM (0.26) behind the InferenceEngine protocol.

Facts from vLLM's v0.26.0 source (the PyPI wheel): titles `VLLM::EngineCore` and `VLLM::Worker[_TP<r>]`
(utils/system_utils.py:184 `set_process_title`, v1/engine/core.py:1270, v1/executor/multiproc_executor.py:1018-1046);
env it writes on import (env_override.py:101-120) and in workers (multiproc_executor.py:1077); endpoints `/health`,
`/version`, `/v1/models`, `/v1/completions`, `/metrics`, `/start_profile`/`/stop_profile` (when `--profiler-config`
names a profiler). See docs/real-gpu.md and shared/reference/vllm.md.
"""

from __future__ import annotations

import os
import re
from typing import Any

from specdoctor.inference.base import ProcessRole
from specdoctor.inference.profiling import ProfilerPlan
from specdoctor.models.phases import PhaseName
from specdoctor.parsers.environ import EnvironCatalog
from specdoctor.parsers.launch_args import LaunchArgs
from specdoctor.parsers.sglang import DecodeLine, MetaInfo, ServerInfo, split_command
from specdoctor.parsers.vllm import (
    accept_length_between,
    complete_meta,
    drop_vllm_speculative,
    parse_vllm_envs,
    parse_vllm_launch,
    parse_vllm_stats,
    read_completion,
    read_version,
    spec_counters,
    with_vllm_profiler,
)
from specdoctor.parsers.vllm_trace import RANK_TRACE, parse_vllm_trace

__all__ = ["VLLM", "VLLM_0_26_0"]

_PY = re.compile(r"^python[0-9.]*$")
# VLLM_PROCESS_NAME_PREFIX (default VLLM, envs.py:1725) '::' name ['_' suffix]
_ENGINE_CORE = re.compile(r"^[A-Za-z0-9]+::EngineCore(?:_DP\d+)?(?:$|\s)")
_WORKER = re.compile(r"^[A-Za-z0-9]+::Worker(?:_|$|\s)")
_RANK = re.compile(r"Worker((?:_DP\d+)?(?:_PP\d+)?(?:_PCP\d+)?_TP\d+(?:_DCP\d+)?(?:_EP\d+)?)")
_TP = re.compile(r"_TP(\d+)")
_FATAL = re.compile(r"Traceback \(most recent call last\)|^\S*(Error|Exception): |CUDA error|out of memory|"
                    r"Engine core initialization failed|\bFATAL\b|Killed$|(?i:address already in use)", re.M)
_PS_MAIN = re.compile(r"vllm serve|vllm[.]entrypoints[.]openai[.]api_server|vllm[.]entrypoints[.]cli[.]main serve")
_MODULES = ("vllm.entrypoints.openai.api_server",)

# What `import vllm` writes into os.environ in every vLLM process (env_override.py:101-120), and what the
# multiprocessing executor sets for its workers (multiproc_executor.py:1077).
_FORCED_0_26 = {"PYTORCH_NVML_BASED_CUDA_CHECK": "1 (always)", "TORCHINDUCTOR_COMPILE_THREADS": "1 (always)",
                "TRITON_CACHE_AUTOTUNING": "1 unless set by the user",
                "TILELANG_CLEANUP_TEMP_FILES": "1 unless set by the user",
                "OMP_NUM_THREADS": "1 unless set by the user (TP > 1 workers)"}


class VLLM:
    """vLLM at one version (None: tolerant; the shapes are 0.26's)."""

    name: str = "vllm"
    display_name: str = "vLLM"
    package: str = "vllm"
    # parsers/vllm_trace.py: propose (draft), execute_model (verify), sample; the draft runs no extend forward
    phases: tuple[PhaseName, ...] = ("draft", "verify", "sample")
    health_path: str = "/health"  # serve/instrumentator/health.py:22 (checks the engine core)
    liveness_path: str = "/version"  # serve/instrumentator/basic.py:53 (answers without the engine)
    generate_path: str = "/v1/completions"
    metrics_path: str | None = "/metrics"
    server_info_paths: tuple[str, ...] = ("/version",)
    model_info_paths: tuple[str, ...] = ("/v1/models",)
    ps_main_pattern: re.Pattern[str] = _PS_MAIN
    fatal_log: re.Pattern[str] = _FATAL
    env_patterns: tuple[str, ...] = ("VLLM_*", "NCCL_*", "CUDA_*", "TORCH_NCCL_*")
    relaunch_env_prefixes: tuple[str, ...] = ("NCCL_", "VLLM_", "CUDA_", "TORCH_", "PYTORCH_", "NVIDIA_")
    # No variable forces acceptance: 0.26 forces it with speculative-config keys instead (force_accept_argv).
    simulate_accept_env: str | None = None
    run_identity_env: frozenset[str] = frozenset()
    gate_catalog_paths: tuple[str, ...] = ("vllm/envs.py",)

    def __init__(self, version: str | None = None):
        self.version: str | None = version

    def __repr__(self) -> str:
        return f"VLLM({self.version!r})"

    @property
    def forced_env_names(self) -> frozenset[str]:
        return frozenset(_FORCED_0_26)

    def forced_env(self) -> dict[str, str]:
        return dict(_FORCED_0_26) if self.version else {}

    # -- processes ------------------------------------------------------------------------------
    def is_main_process(self, cmdline: list[str]) -> bool:
        for i, t in enumerate(cmdline[:-1]):
            if t == "-m" and cmdline[i + 1] in _MODULES:
                return True  # the module run, not a mention (a grep, an editor)
            if os.path.basename(t) == "vllm" and cmdline[i + 1] == "serve":
                return True
            if t == "vllm.entrypoints.cli.main" and cmdline[i + 1] == "serve":
                return True
        return False

    def process_role(self, title: str) -> ProcessRole:
        # At TP=1 the engine core runs the model itself (uniproc executor); at TP>1 its Worker_TP<r> children do.
        if _WORKER.match(title) or _ENGINE_CORE.match(title):
            return "worker"
        return "other"

    def worker_rank(self, title: str) -> str | None:
        m = _RANK.search(title)
        if m:
            return m.group(1).lstrip("_")
        return "EngineCore" if _ENGINE_CORE.match(title) else None

    def rank_order(self, title: str) -> int:
        m = _TP.search(title)
        if m:
            return int(m.group(1))
        return 10**5 if _ENGINE_CORE.match(title) else 10**6

    # -- launch lines ---------------------------------------------------------------------------
    def parse_launch(self, command: str | list[str]) -> LaunchArgs:
        return parse_vllm_launch(command)

    def drop_speculative(self, command: str | list[str]) -> list[str]:
        return drop_vllm_speculative(command)

    def relaunch_argv(self, command: str | list[str], *, python: str | None, speculative: bool,
                      port: int | None) -> list[str]:
        tokens = split_command(command) if speculative else drop_vllm_speculative(command)
        parsed = parse_vllm_launch(tokens)
        n_env = len(tokens) - len(parsed.prefix) - len(parsed.flags)
        argv = tokens[n_env:]
        if parsed.entry == "bare":
            argv = [python or "python3", "-m", "vllm.entrypoints.openai.api_server", *parsed.flags]
        elif python:
            base = os.path.basename(argv[0])
            if _PY.match(base):
                argv = [python, *argv[1:]]
            elif base == "vllm":
                argv = [os.path.join(os.path.dirname(python), "vllm"), *argv[1:]]
        if port is not None:
            out, i = [], 0
            while i < len(argv):
                if argv[i] == "--port":
                    i += 2
                    continue
                if argv[i].startswith("--port="):
                    i += 1
                    continue
                out.append(argv[i])
                i += 1
            argv = [*out, "--port", str(port)]
        return argv

    def tree_import_path(self, tree: str) -> str:
        # An editable vLLM checkout keeps the package at the top (vllm/...): the tree itself goes on the path.
        return tree.rstrip("/")

    # -- HTTP -----------------------------------------------------------------------------------
    def generate_payload(self, prompt: str, max_new_tokens: int, temperature: float = 0.0) -> dict[str, Any]:
        # completion/protocol.py:45-80: `model` optional (the served one), `ignore_eos` a vLLM extension.
        return {"prompt": prompt, "max_tokens": max_new_tokens, "temperature": temperature, "ignore_eos": True}

    def read_meta(self, body: Any) -> MetaInfo:
        return read_completion(body)

    def read_server_info(self, body: Any) -> ServerInfo:
        return read_version(body)

    def accept_length_from_metrics(self, before: str, after: str) -> float | None:
        """Mean acceptance length between two /metrics scrapes (the spec counters' growth)."""
        return accept_length_between(spec_counters(before), spec_counters(after))

    def meta_from_metrics(self, meta: MetaInfo, before: str, after: str) -> MetaInfo:
        return complete_meta(meta, before, after)

    def parse_gate_catalog(self, text: str) -> EnvironCatalog:
        return parse_vllm_envs(text)

    # -- profiler -------------------------------------------------------------------------------
    def profiler_launch_argv(self, command: str | list[str], folder: str) -> list[str] | None:
        """0.26 takes its torch profiler only at launch (`--profiler-config`): a line whose own config already
        writes a readable trace is kept as it is; any other gets a torch profiler writing into `folder`."""
        tokens = split_command(command)
        if self.profiler_plan(parse_vllm_launch(tokens).as_args(), {}, folder, 1).missing is None:
            return None
        return with_vllm_profiler(tokens, folder)

    def profiler_plan(self, server_args: dict[str, Any], env: dict[str, str], run_folder: str,
                      num_steps: int) -> ProfilerPlan:
        """vLLM's profiler is configured at launch only (`--profiler-config`, config/profiler.py; no environment
        variable in 0.26): `/start_profile` takes no body (serve/profile/api_router.py) and each rank writes
        `rank<r>.<ns>.pt.trace.json.gz` into `torch_profiler_dir`, the API server its own `*.async_llm.*` file there
        too. The phases are read from the Python frames, so `torch_profiler_with_stack` must stay on (its default)."""
        cfg = server_args.get("profiler_config")
        cfg = cfg if isinstance(cfg, dict) else {}
        how = ("relaunch it with --profiler-config '{\"profiler\":\"torch\",\"torch_profiler_dir\":\"/abs/dir\"}' "
               "to time its phases")
        if cfg.get("profiler") != "torch":
            said = f"profiler {cfg['profiler']!r}" if cfg.get("profiler") else "no --profiler-config"
            return ProfilerPlan(missing=f"the vLLM server was started with {said}: {how}")
        folder = str(cfg.get("torch_profiler_dir") or "")
        if not folder:
            return ProfilerPlan(missing=f"the vLLM server's --profiler-config names no torch_profiler_dir: {how}")
        if cfg.get("torch_profiler_with_stack") in (False, "false", "False", 0):
            return ProfilerPlan(missing="the vLLM server's profiler runs with torch_profiler_with_stack=false: its "
                                "trace has no Python frames to find the phases in; relaunch without it")
        notes = [f"trace from the server's --profiler-config torch_profiler_dir={folder} (rank 0)"]
        if int(cfg.get("warmup_iterations") or 0) > 0 or int(cfg.get("max_iterations") or 0) > 0:
            notes.append("the server's profiler config limits the profiled iterations (warmup/active or "
                         "max_iterations): fewer cycles than requested may be in the trace")
        return ProfilerPlan(folder=folder, start_body=None, trace_name=RANK_TRACE, parse=parse_vllm_trace, rank="0",
                            notes=tuple(notes))

    # -- logs -----------------------------------------------------------------------------------
    def decode_lines(self, text: str) -> list[DecodeLine]:
        return parse_vllm_stats(text)

    def force_accept_argv(self, command: str | list[str], accept_length: float) -> list[str] | None:
        """The launch line with acceptance forced (config/speculative.py:216-236: `rejection_sample_method:
        synthetic` with `synthetic_acceptance_length`); None when the line has no speculative config to extend."""
        import json

        tokens = split_command(command)
        for i, tok in enumerate(tokens):
            name, eq, inline = tok.partition("=")
            if name in ("--speculative-config", "-sc"):
                raw = inline if eq else (tokens[i + 1] if i + 1 < len(tokens) else "")
                try:
                    spec = json.loads(raw)
                except json.JSONDecodeError:
                    return None
                spec.update({"rejection_sample_method": "synthetic", "synthetic_acceptance_length": accept_length})
                new = json.dumps(spec, separators=(",", ":"))
                return [*tokens[:i], f"{name}={new}", *tokens[i + (1 if eq else 2):]]
        return None


VLLM_0_26_0 = VLLM("0.26.0")
