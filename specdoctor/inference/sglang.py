"""SGLang 0.5.9, 0.5.17 and 0.5.23 behind the InferenceEngine protocol.

Facts: shared/reference/sglang.md; 0.5.17 as a real server showed it (tests/fixtures/sglang-0.5.17-h200/).
"""

from __future__ import annotations

import os
import re
from typing import Any

from specdoctor.inference.base import ProcessRole
from specdoctor.inference.profiling import ProfilerPlan
from specdoctor.models.phases import PhaseName
from specdoctor.parsers.environ import EnvironCatalog, parse_environ_py
from specdoctor.parsers.sglang import (
    DecodeLine,
    LaunchArgs,
    MetaInfo,
    ServerInfo,
    drop_speculative_flags,
    normalise_meta_info,
    normalise_server_info,
    parse_decode_lines,
    parse_launch_command,
    split_command,
)
from specdoctor.parsers.sglang_trace import TRACE_NAME, parse_sglang_trace

_PROFILER_DIR_ENV = "SGLANG_TORCH_PROFILER_DIR"

__all__ = ["SGLang", "SGLANG_0_5_9", "SGLANG_0_5_17", "SGLANG_0_5_23", "version_tuple"]

_PY = re.compile(r"^python[0-9.]*$")
# Titles set by setproctitle in scheduler/detokenizer children (sglang.md §6): sglang::scheduler_TP3, ...
_WORKER_PREFIX = "sglang::schedul"
_DETOK_PREFIX = "sglang::detoken"
_RANK = re.compile(r"((?:DP\d+_)?TP\d+(?:_EP\d+)?)")
_TP = re.compile(r"TP(\d+)")
_FATAL = re.compile(r"Traceback \(most recent call last\)|^\S*(Error|Exception): |CUDA error|out of memory|"
                    r"\bFATAL\b|Killed$|(?i:address already in use)", re.M)
_PS_MAIN = re.compile(r"sglang[.]launch_server|sglang serve|sglang[.]srt[.]server")


def version_tuple(version: str | None) -> tuple[int, ...] | None:
    """'0.5.23.post1' → (0, 5, 23); None when it has no leading number."""
    m = re.match(r"(\d+)\.(\d+)(?:\.(\d+))?", version or "")
    return tuple(int(x) for x in m.groups() if x is not None) if m else None


# What the children of a real 0.5.17 server carry that its main process lacks (procs.json): the server args
# mirrored into the environment for the subprocesses, and a fresh id per launch.
_FROM_ARGS_0517 = {"SGLANG_ENABLE_TORCH_COMPILE": "--enable-torch-compile as 0/1 (always)",
                   "SGLANG_ENABLE_DETERMINISTIC_INFERENCE": "--enable-deterministic-inference as 0/1 (always)",
                   "SGLANG_DISABLE_OUTLINES_DISK_CACHE": "--disable-outlines-disk-cache as 0/1 (always)",
                   "SGLANG_USE_CUDA_IPC_TRANSPORT": "1 when multimodal features go over CUDA IPC (the default "
                                                    "on one node)",
                   "SGLANG_OPT_FP8_WO_A_GEMM": "from the FP8 GEMM choice (False unless enabled)",
                   "SGLANG_RUN_ID": "a new id per launch (always)"}


def _forced(v: tuple[int, ...] | None) -> dict[str, str]:
    """What `_set_envs_and_config` writes into os.environ before spawning workers (sglang.md §6); None: every
    supported version's names (how: the newest's)."""
    if v is not None and v < (0, 5):
        return {"NCCL_CUMEM_ENABLE": "0 (always)", "NCCL_NVLS_ENABLE": "--enable-nccl-nvls (always)",
                "CUDA_DEVICE_MAX_CONNECTIONS": "4 (always)", "TORCH_NCCL_AVOID_RECORD_STREAMS": "1 (always)"}
    out = {"NCCL_CUMEM_ENABLE": "0 unless set by the user", "NCCL_NVLS_ENABLE": "0 unless set by the user",
           "CUDA_DEVICE_MAX_CONNECTIONS": "8 (always)"}
    if v is None or v < (0, 5, 18):
        out["CUDA_MODULE_LOADING"] = "AUTO (always)"  # 0.5.9 and the real 0.5.17 children; gone by 0.5.23
    if v is None or (0, 5, 17) <= v < (0, 5, 18):  # seen on 0.5.17; the other versions keep the documented set
        out.update(_FROM_ARGS_0517)
    return out


class SGLang:
    """SGLang at one version (None: tolerant of 0.5.9, 0.5.17 and 0.5.23 shapes alike)."""

    name: str = "sglang"
    display_name: str = "SGLang"
    package: str = "sglang"
    # run_batch's ranges in parsers/sglang_trace.py: a draft-extend forward closes every decode cycle
    phases: tuple[PhaseName, ...] = ("draft", "verify", "draft_extend")
    health_path: str = "/health_generate"  # /health also generates by default, /health_generate always does
    liveness_path: str = "/health"
    generate_path: str = "/generate"
    ps_main_pattern: re.Pattern[str] = _PS_MAIN
    fatal_log: re.Pattern[str] = _FATAL
    env_patterns: tuple[str, ...] = ("NCCL_*", "CUDA_*", "SGLANG_*", "TORCH_NCCL_*")
    relaunch_env_prefixes: tuple[str, ...] = ("NCCL_", "SGLANG_", "CUDA_", "TORCH_", "PYTORCH_", "NVIDIA_")
    simulate_accept_env: str | None = "SGLANG_SIMULATE_ACC_LEN"
    # Set anew by every launch (0.5.17's children carry SGLANG_RUN_ID=sglang-run-<time>-<random>): never a difference
    run_identity_env: frozenset[str] = frozenset({"SGLANG_RUN_ID"})
    gate_catalog_paths: tuple[str, ...] = ("python/sglang/srt/environ.py", "sglang/srt/environ.py")

    def __init__(self, version: str | None = None):
        self.version: str | None = version
        self._v = version_tuple(version)

    def __repr__(self) -> str:
        return f"SGLang({self.version!r})"

    @property
    def legacy_endpoints(self) -> bool:
        """0.5.9 and older: /get_server_info and /get_model_info are the primary names (no deprecation)."""
        return self._v is not None and self._v < (0, 5, 10)

    @property
    def server_info_paths(self) -> tuple[str, ...]:
        return ("/get_server_info", "/server_info") if self.legacy_endpoints else ("/server_info", "/get_server_info")

    @property
    def model_info_paths(self) -> tuple[str, ...]:
        return ("/get_model_info", "/model_info") if self.legacy_endpoints else ("/model_info", "/get_model_info")

    @property
    def forced_env_names(self) -> frozenset[str]:
        return frozenset(_forced(self._v))

    def forced_env(self) -> dict[str, str]:
        return _forced(self._v) if self._v is not None else {}

    # -- processes ------------------------------------------------------------------------------
    def is_main_process(self, cmdline: list[str]) -> bool:
        if any(t == "sglang.launch_server" for t in cmdline):
            return True
        if "sglang.launch_server" in " ".join(cmdline):
            return False  # named only inside another argument (an editor, a grep), not the module run
        for i, t in enumerate(cmdline[:-1]):
            if t.rsplit("/", 1)[-1] in ("sglang", "sglang.cli.main") and cmdline[i + 1] == "serve":
                return True
        return False

    def process_role(self, title: str) -> ProcessRole:
        if title.startswith(_WORKER_PREFIX):
            return "worker"
        if title.startswith(_DETOK_PREFIX):
            return "detokenizer"
        return "other"

    def worker_rank(self, title: str) -> str | None:
        m = _RANK.search(title)
        return m.group(1) if m else None

    def rank_order(self, title: str) -> int:
        m = _TP.search(title)
        return int(m.group(1)) if m else 10**6

    # -- launch lines ---------------------------------------------------------------------------
    def parse_launch(self, command: str | list[str]) -> LaunchArgs:
        return parse_launch_command(command)

    def drop_speculative(self, command: str | list[str]) -> list[str]:
        return drop_speculative_flags(command)

    def relaunch_argv(self, command: str | list[str], *, python: str | None, speculative: bool,
                      port: int | None) -> list[str]:
        tokens = split_command(command) if speculative else drop_speculative_flags(command)
        parsed = parse_launch_command(tokens)
        argv = tokens[len(tokens) - len(parsed.prefix) - len(parsed.flags):]  # drop leading env/wrappers
        if parsed.entry == "bare":
            argv = [python or "python3", "-m", "sglang.launch_server", *parsed.flags]
        elif python:
            base = os.path.basename(argv[0])
            if _PY.match(base):
                argv = [python, *argv[1:]]
            elif parsed.entry == "serve" and base == "sglang":
                argv = [os.path.join(os.path.dirname(python), "sglang"), *argv[1:]]
        if port is not None:
            out, i = [], 0
            while i < len(argv):
                t = argv[i]
                if t == "--port":
                    i += 2
                    continue
                if t.startswith("--port="):
                    i += 1
                    continue
                out.append(t)
                i += 1
            argv = [*out, "--port", str(port)]
        return argv

    def tree_import_path(self, tree: str) -> str:
        # The repository keeps the package under python/ (python/sglang/...); a bare package tree is its own root.
        return tree.rstrip("/") + "/python"

    # -- HTTP -----------------------------------------------------------------------------------
    def generate_payload(self, prompt: str, max_new_tokens: int, temperature: float = 0.0) -> dict[str, Any]:
        return {"text": prompt, "sampling_params": {"temperature": temperature, "max_new_tokens": max_new_tokens,
                                                    "ignore_eos": True}}

    def read_meta(self, body: Any) -> MetaInfo:
        return normalise_meta_info(body.get("meta_info") if isinstance(body, dict) else None)

    def read_server_info(self, body: Any) -> ServerInfo:
        return normalise_server_info(body)

    metrics_path: str | None = None  # the accept length comes with each /generate response (meta_info)

    def meta_from_metrics(self, meta: MetaInfo, before: str, after: str) -> MetaInfo:
        return meta  # meta_info carries it all

    def force_accept_argv(self, command: str | list[str], accept_length: float) -> list[str] | None:
        return None  # SGLang forces it with a variable (simulate_accept_env)

    def parse_gate_catalog(self, text: str) -> EnvironCatalog:
        return parse_environ_py(text)

    # -- profiler -------------------------------------------------------------------------------
    def profiler_launch_argv(self, command: str | list[str], folder: str) -> list[str] | None:
        return None  # /start_profile configures the session (and its output_dir) per request: no launch flag

    def profiler_plan(self, server_args: dict[str, Any], env: dict[str, str], run_folder: str,
                      num_steps: int) -> ProfilerPlan:
        """`/start_profile` with `num_steps` into the server's SGLANG_TORCH_PROFILER_DIR (else `output_dir`: the
        run's folder); `<prefix>-<ts>-TP-<r>.trace.json.gz`, read by the SGLang range reader."""
        # num_steps bounds the session (a cycle makes at least one token) so the server ends it even if we cannot.
        # with_stack off: SGLang's default (True) records every Python frame, which on the real 0.5.17 made a 60 MB
        # trace that took over a minute to write; the phases need only the ranges and the GPU work they launch.
        body: dict[str, Any] = {"num_steps": num_steps, "activities": ["CPU", "GPU"], "profile_prefix": "specdoctor",
                                "with_stack": False, "record_shapes": False}
        folder = env.get(_PROFILER_DIR_ENV)
        if folder:
            note = f"trace from the server's {_PROFILER_DIR_ENV}={folder}"
        else:
            folder, body["output_dir"] = run_folder, run_folder
            note = f"the server has no {_PROFILER_DIR_ENV}: the trace was asked into {folder} (output_dir)"
        return ProfilerPlan(folder=folder, start_body=body, make_folder=body.get("output_dir") is not None,
                            trace_name=TRACE_NAME, parse=parse_sglang_trace, notes=(note,))

    # -- logs -----------------------------------------------------------------------------------
    def decode_lines(self, text: str) -> list[DecodeLine]:
        return parse_decode_lines(text)


SGLANG_0_5_9 = SGLang("0.5.9")
SGLANG_0_5_17 = SGLang("0.5.17")
SGLANG_0_5_23 = SGLang("0.5.23")
