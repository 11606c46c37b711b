"""The InferenceEngine protocol: what tools and actions may ask of a serving engine, and nothing else."""

from __future__ import annotations

import re
from typing import Any, Literal, Protocol, runtime_checkable

from specdoctor.inference.profiling import ProfilerPlan
from specdoctor.models.phases import PhaseName
from specdoctor.parsers.environ import EnvironCatalog
from specdoctor.parsers.launch_args import LaunchArgs
from specdoctor.parsers.sglang import DecodeLine, MetaInfo, ServerInfo

__all__ = ["InferenceEngine", "ProcessRole"]

ProcessRole = Literal["main", "worker", "detokenizer", "other"]


@runtime_checkable
class InferenceEngine(Protocol):
    """One serving engine at one version (None: accept every supported version's shapes).

    The parsed shapes (`LaunchArgs`, `ServerInfo`, `MetaInfo`, `DecodeLine`) are the engine-neutral
    vocabulary every caller reads; an implementation maps its own names onto them.
    """

    @property
    def name(self) -> str:
        """Short name of the engine (sglang, vllm)."""
        ...

    @property
    def display_name(self) -> str:
        """The engine's name as its project writes it (SGLang, vLLM): for the words a user reads."""
        ...

    @property
    def version(self) -> str | None:
        """The version this object speaks for; None: tolerant of every supported version."""
        ...

    @property
    def package(self) -> str:
        """Python import name of the engine (where `find_spec` looks, what a trial tree must provide)."""
        ...

    @property
    def phases(self) -> tuple[PhaseName, ...]:
        """The phases of one speculative cycle its profiler trace times, in order (SGLang: draft, verify,
        draft-extend; vLLM: draft, verify, sample): a phase the engine does not have is never shown as +0.00."""
        ...

    # -- processes ------------------------------------------------------------------------------
    def is_main_process(self, cmdline: list[str]) -> bool:
        """Is this command line the server's main (HTTP front-end) process?"""
        ...

    def process_role(self, title: str) -> ProcessRole:
        """Role of a child process from its title (setproctitle): worker (one per TP rank), detokenizer, other."""
        ...

    def worker_rank(self, title: str) -> str | None:
        """The rank label in a worker's title (TP0, DP0_TP1, TP3_EP3), None when the title carries none."""
        ...

    def rank_order(self, title: str) -> int:
        """Sort key of a worker title (TP rank), large when unknown."""
        ...

    @property
    def ps_main_pattern(self) -> re.Pattern[str]:
        """Matches a main process in `ps -eo args` output (fallback when /proc cmdlines are unavailable)."""
        ...

    # -- launch lines ---------------------------------------------------------------------------
    def parse_launch(self, command: str | list[str]) -> LaunchArgs:
        """Parse a launch line (leading K=V env, wrappers, entry point, flags)."""
        ...

    def relaunch_argv(self, command: str | list[str], *, python: str | None, speculative: bool,
                      port: int | None) -> list[str]:
        """The argv that starts this configuration: speculation dropped when asked, python swapped, port forced."""
        ...

    def drop_speculative(self, command: str | list[str]) -> list[str]:
        """The same launch line without any speculative-decoding flag (the baseline)."""
        ...

    def tree_import_path(self, tree: str) -> str:
        """The folder of a source checkout that must be on PYTHONPATH so the server imports the engine from it."""
        ...

    # -- HTTP -----------------------------------------------------------------------------------
    @property
    def health_path(self) -> str:
        """GET answering 200 once the server can generate."""
        ...

    @property
    def liveness_path(self) -> str:
        """GET answering 200 while the HTTP server is up (cheap)."""
        ...

    @property
    def server_info_paths(self) -> tuple[str, ...]:
        """Server-info endpoints, in the order this version prefers them."""
        ...

    @property
    def model_info_paths(self) -> tuple[str, ...]:
        """Model info paths."""
        ...

    @property
    def generate_path(self) -> str:
        """Generate path."""
        ...

    def generate_payload(self, prompt: str, max_new_tokens: int, temperature: float = 0.0) -> dict[str, Any]:
        """A batch-1 request body of fixed length (greedy unless a recorded workload sampled)."""
        ...

    def read_meta(self, body: Any) -> MetaInfo:
        """The response's per-request metadata (tokens, latency, spec verify counts) in neutral names."""
        ...

    def read_server_info(self, body: Any) -> ServerInfo:
        """The server-info body in neutral names."""
        ...

    @property
    def metrics_path(self) -> str | None:
        """Prometheus endpoint whose counters give the accept length of a window (None: read per request)."""
        ...

    def meta_from_metrics(self, meta: MetaInfo, before: str, after: str) -> MetaInfo:
        """A response's metadata completed from two scrapes of `metrics_path` around it (server-side latency, time
        to first token, drafts and accepted tokens); unchanged where the response already said it."""
        ...

    def force_accept_argv(self, command: str | list[str], accept_length: float) -> list[str] | None:
        """A launch line that forces the accept length through the engine's own config (None: no such key; see
        `simulate_accept_env` for an engine that forces it with a variable)."""
        ...

    def parse_gate_catalog(self, text: str) -> EnvironCatalog:
        """The engine's env-var catalog file (`gate_catalog_paths`) parsed into declarations."""
        ...

    def profiler_plan(self, server_args: dict[str, Any], env: dict[str, str], run_folder: str,
                      num_steps: int) -> ProfilerPlan:
        """How to profile the running server (its args, its environment) for about `num_steps` cycles: the trace's
        folder (`run_folder` where the server takes one per request), `/start_profile`'s body, the trace file and its
        reader; `missing` when the server as launched cannot be profiled."""
        ...

    def profiler_launch_argv(self, command: str | list[str], folder: str) -> list[str] | None:
        """The launch line a trial whose phases are read starts with, where the engine's profiler is configured at
        launch only (its traces into `folder`); None: the line can be profiled as it is (configured per request).
        Only for specdoctor's own trial servers: the user's server is never relaunched with another line."""
        ...

    # -- logs -----------------------------------------------------------------------------------
    def decode_lines(self, text: str) -> list[DecodeLine]:
        """Periodic decode-batch log lines (accept length, CUDA-graph use, gen throughput)."""
        ...

    @property
    def fatal_log(self) -> re.Pattern[str]:
        """A log line that means the server will not come up."""
        ...

    # -- environment ----------------------------------------------------------------------------
    @property
    def env_patterns(self) -> tuple[str, ...]:
        """Glob patterns of the variables that tune this engine and its collectives."""
        ...

    @property
    def relaunch_env_prefixes(self) -> tuple[str, ...]:
        """Prefixes of a running server's variables a relaunch must carry over."""
        ...

    @property
    def forced_env_names(self) -> frozenset[str]:
        """Variables the engine writes itself before spawning workers (passing them is pointless)."""
        ...

    def forced_env(self) -> dict[str, str]:
        """What this version forces, name → how ('8 (always)', '0 unless set by the user')."""
        ...

    @property
    def run_identity_env(self) -> frozenset[str]:
        """Variables the engine sets anew at every launch (a run id): a good run's value never matches today's."""
        ...

    @property
    def simulate_accept_env(self) -> str | None:
        """Variable that forces the accept length (a synthetic τ sweep), None when the engine has none."""
        ...

    @property
    def gate_catalog_paths(self) -> tuple[str, ...]:
        """Where the engine's env-var catalog lives, relative to a checkout (first match wins)."""
        ...
