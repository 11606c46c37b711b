"""One trial primitive: launch a configuration, wait until healthy, measure, and stop it whatever happens.

    config = LaunchConfig(command=launch, speculative=False, env={"NCCL_PROTO": "LL"}, label="baseline")
    with trial(ctx, config) as handle:            # launch_server → healthy (or LaunchFailed)
        m = measure(handle, runs=5)               # benchmark → BenchmarkResult (or MeasureFailed)
    # stop_server ran here, also on an exception or Ctrl-C

Every step is a registered tool call (launch_server, benchmark, stop_server), so each command is evidence;
`record(key, ToolResult)` lets a playbook action keep those results in its state.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from pydantic import BaseModel, Field

from specdoctor.errors import ToolRetry, Unresolved
from specdoctor.inference import EngineName, InferenceEngine, engine_for_launch, get_engine
from specdoctor.models.phases import PhaseTimes
from specdoctor.toolkit import ToolContext, ToolResult, registry
from specdoctor.tools.serving.launch import LaunchResult
from specdoctor.tools.serving.measure import BenchmarkResult

__all__ = ["LaunchConfig", "TrialHandle", "LaunchFailed", "MeasureFailed", "Recorder", "trial",
           "measure", "profile", "profiled", "AUTO_PORT", "PROFILE_RUNS"]

PROFILE_RUNS = 2
"""Benchmark runs a trial's phase profile takes with the profiler on (and as many without, for its overhead)."""

"""What `measure` returns: per-run tok/s samples, median with CI, TPOT, accept length, log findings."""

Recorder = Callable[[str, ToolResult], None]
AUTO_PORT = 0
"""`LaunchConfig.port` value asking launch_server for a port that is free on the host."""


class LaunchConfig(BaseModel):
    """One server configuration: which code, which interpreter, which launch line, which environment."""

    command: str | list[str] = Field(description="The engine's launch line (as the user runs it).")
    tree: str | None = Field(default=None, description="Code tree the server must import the engine from "
                             "(e.g. an isolated trial tree); None: whatever the interpreter finds, as today.")
    python: str | None = Field(default=None, description="Interpreter replacing a leading python/python3.")
    cwd: str | None = Field(default=None, description="Working directory of the server (default: the tree).")
    env: dict[str, str] = Field(default_factory=dict, description="Environment overrides (K=V).")
    unset: list[str] = Field(default_factory=list, description="Variables removed from the environment (env -u).")
    speculative: bool = Field(default=True, description="False: drop every speculative-decoding flag.")
    port: int | None = Field(default=None, ge=0, le=65535, description="None: the launch line's port; 0: a free port.")
    label: str = Field(default="server", description="Names the log file and the recorded results.")
    timeout_s: float = Field(default=600, gt=0, description="How long to wait until healthy.")
    engine: EngineName | None = Field(default=None, description="Inference engine (specdoctor.inference); None: "
                                      "the one the launch line's entry point names.")
    engine_version: str | None = None
    replace_env: bool = Field(default=False, description="env = the whole environment (env -i), not overrides.")
    log_path: str | None = Field(default=None, description="Append output here (None: a new log in the run folder).")

    def inference(self) -> InferenceEngine:
        """The engine this configuration starts: the named one, else the one its launch line's entry point names."""
        if self.engine:
            return get_engine(self.engine, self.engine_version)
        found = engine_for_launch(self.command)
        if found is None:
            raise ToolRetry("the launch line names no known engine's entry point (sglang, vllm): name the engine")
        return found

    def launch_args(self) -> dict[str, Any]:
        """The launch_server input for this configuration."""
        env = dict(self.env)
        if self.tree:
            # The tree's package first on the path, so `import sglang` resolves there (checked by the caller's
            # evidence: the server log names the files it imported from).
            path = self.inference().tree_import_path(self.tree)
            env["PYTHONPATH"] = f"{path}:{env['PYTHONPATH']}" if env.get("PYTHONPATH") else path
        args: dict[str, Any] = {"command": self.command, "env": env, "drop_speculative": not self.speculative,
                                "label": self.label, "timeout_s": self.timeout_s, "engine": self.engine}
        if self.replace_env:
            args["replace_env"] = True
        if self.unset:
            args["unset"] = list(self.unset)
        for key, value in (("python", self.python), ("cwd", self.cwd or self.tree), ("port", self.port),
                           ("log_path", self.log_path)):
            if value is not None:
                args[key] = value
        return args

    @classmethod
    def from_running(cls, argv: list[str], *, env: dict[str, str] | None = None, cwd: str | None = None,
                     log_path: str | None = None, label: str = "user-server", **extra: Any) -> LaunchConfig:
        """Describe a running server so it can be started again as it was: its argv (port included), cwd, log
        file (appended to) and, when given, its whole environment (/proc/PID/environ, unredacted: env -i)."""
        return cls(command=list(argv), env=dict(env or {}), replace_env=env is not None, cwd=cwd,
                   log_path=log_path, label=label, **extra)


@dataclasses.dataclass(frozen=True)
class TrialHandle:
    """A launched, healthy server inside `with trial(...)`: what was started and how to reach it."""

    config: LaunchConfig
    launch: LaunchResult
    ctx: ToolContext = dataclasses.field(repr=False)
    record: Recorder | None = dataclasses.field(default=None, repr=False)

    @property
    def pids(self) -> list[int]:
        return self.launch.pids

    @property
    def pgid(self) -> int | None:
        return self.launch.pgid

    @property
    def port(self) -> int:
        return self.launch.port

    @property
    def log_path(self) -> str:
        return self.launch.log_path

    @property
    def ready_seconds(self) -> float | None:
        return self.launch.ready_seconds


class LaunchFailed(Unresolved):
    """The configuration did not come up (exit, fatal log line, timeout, busy port); `result` is the evidence."""

    def __init__(self, result: ToolResult):
        self.result = result
        super().__init__(result.summary, output=result.output)


class MeasureFailed(Unresolved):
    """The benchmark of a running trial failed; `result` is the evidence."""

    def __init__(self, result: ToolResult):
        self.result = result
        super().__init__(result.summary, output=result.output)


def _call(ctx: ToolContext, name: str, args: dict[str, Any], record: Recorder | None, key: str) -> ToolResult:
    result = registry.call(ctx, name, args)
    if record is not None:
        record(key, result)
    return result


@contextmanager
def trial(ctx: ToolContext, config: LaunchConfig, *, record: Recorder | None = None) -> Iterator[TrialHandle]:
    """Launch `config`, wait until healthy, yield its handle; stop it on exit, whatever happens.

    The caller's disruptive step was approved as a whole, so the inner tool calls run pre-approved. A
    start that fails raises LaunchFailed (the failed group is already stopped by launch_server). If the
    process dies between launch and `yield` (e.g. SIGKILL), the group is in the run's started.json and
    the run's safety net stops it.
    """
    inner = dataclasses.replace(ctx, auto_approve=True)
    label = config.label
    started = _call(inner, "launch_server", config.launch_args(), record, f"launch_{label}")
    if not started.ok or started.output is None:
        raise LaunchFailed(started)
    handle = TrialHandle(config=config, launch=LaunchResult.model_validate(started.output), ctx=inner,
                         record=record)
    try:
        yield handle
    except BaseException:
        try:  # the original failure is what the caller must see; a failing stop is in the evidence
            _call(inner, "stop_server", {"pgid": handle.pgid}, record, f"stop_{label}")
        except Exception:  # noqa: BLE001
            pass
        raise
    else:
        _call(inner, "stop_server", {"pgid": handle.pgid}, record, f"stop_{label}")


def measure(handle: TrialHandle, *, runs: int = 5, requests_per_run: int = 3, max_new_tokens: int = 128,
            warmup_runs: int = 1, label: str | None = None, key: str | None = None,
            prompts: list[str] | None = None, temperature: float = 0.0) -> BenchmarkResult:
    """Benchmark the trial's server (batch-1 decode, one tok/s per run); MeasureFailed when it cannot.
    `prompts`/`temperature`: a recorded workload's (default: the benchmark's fixed chat prompts, greedy)."""
    label = label or handle.config.label
    extra: dict[str, Any] = {"prompts": prompts} if prompts else {}
    if temperature:
        extra["temperature"] = temperature
    res = _call(handle.ctx, "benchmark", {
        "port": handle.port, "runs": runs, "requests_per_run": requests_per_run, "max_new_tokens": max_new_tokens,
        "warmup_runs": warmup_runs, "log_path": handle.log_path, "label": label, **extra},
        handle.record, key or f"bench_{handle.config.label}")
    out = registry.typed_output(res, BenchmarkResult, where=key or f"bench_{handle.config.label}")
    if out is None:
        raise MeasureFailed(res)
    return out


def profiled(ctx: ToolContext, config: LaunchConfig) -> LaunchConfig:
    """`config` as a trial whose phases will be read launches it: with the engine's launch-time profiler settings
    where it takes them only at launch (vLLM 0.26's `--profiler-config`, traces into this run's profile folder);
    unchanged where `/start_profile` configures it (SGLang). A trial is specdoctor's own server, so adding a flag
    there is fine; the user's server is never relaunched with a line other than its own."""
    engine = config.inference() if config.engine else ctx.engine_for(config.command)
    argv = engine.profiler_launch_argv(config.command, f"{ctx.run_dir}/profile")
    return config if argv is None else config.model_copy(update={"command": argv})


def profile(handle: TrialHandle, *, runs: int = PROFILE_RUNS, requests_per_run: int = 2, max_new_tokens: int = 128,
            key: str | None = None) -> tuple[PhaseTimes | None, str]:
    """The trial server's phase times from the engine's profiler (tool `phase_times` on its port): (times, "") or
    (None, why). A profile that fails never fails the trial: the phase effect is then simply not claimed."""
    res = _call(handle.ctx, "phase_times", {"port": handle.port, "runs": runs, "requests_per_run": requests_per_run,
                                           "max_new_tokens": max_new_tokens, "label": f"phases {handle.config.label}"},
                handle.record, key or f"phases_{handle.config.label}")
    out = registry.typed_output(res, PhaseTimes, where=key or f"phases_{handle.config.label}")
    return (out, "") if out is not None else (None, res.summary[:200])
