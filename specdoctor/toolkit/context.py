"""ToolContext: what a tool call may use besides its arguments (injected, never in the schema)."""

from __future__ import annotations

import hashlib
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

from specdoctor.host.base import Host
from specdoctor.inference import InferenceEngine, engine_for_launch, get_engine, resolve_engine
from specdoctor.toolkit.builtin import builtin_engine_detectors

__all__ = ["ToolContext", "ApprovalRequest", "register_engine_detector", "run_engine_on"]

EngineDetector = Callable[[Host], "InferenceEngine | None"]
_DETECTORS: list[EngineDetector] = []


def register_engine_detector(detector: EngineDetector) -> None:
    """A way to tell the engine from what runs on a host, for an embedder: tried, in order, when a context's
    engine was not given, after the host's launch hint and the catalogue's own (the tools' process listing)."""
    if detector not in _DETECTORS:
        _DETECTORS.append(detector)


def run_engine_on(host: Host, name: str | None = None) -> InferenceEngine:
    """A run's engine, once: the named one (`--engine`), else the one the host shows (`_detect`)."""
    return get_engine(name) if name else _detect(host)


def _detect(host: Host) -> InferenceEngine:
    """The host's engine: its launch hint, else the registered detectors, else `resolve_engine`'s `ps` look."""
    hint = host.hints.launch if host.hints is not None else None
    found = engine_for_launch(hint) if hint else None
    for detector in [*builtin_engine_detectors(), *_DETECTORS] if found is None else []:
        found = detector(host)
        if found is not None:
            break
    return found if found is not None else resolve_engine(host)


@dataclass
class ApprovalRequest:
    """Shown to a person before a mutating/disruptive call: the tool, its arguments, its effect."""

    tool: str
    effect: str
    arguments: dict[str, Any]
    description: str


@dataclass
class ToolContext:
    """Run dependencies for tools: the host, where to keep run files on it, approval and progress hooks.

    `approve` returns True to let a mutate/disrupt call proceed; None means "nobody to ask", and such calls
    come back with status `needs_approval` unless `auto_approve` is set (`--yes`).
    """

    host: Host
    run_id: str = "adhoc"
    auto_approve: bool = False
    approve: Callable[[ApprovalRequest], bool] | None = None
    progress: Callable[[str], None] | None = None
    cache: dict[str, Any] = field(default_factory=dict)
    run_engine: InferenceEngine | None = None
    """The serving engine of this run, resolved once (`--engine`, or the runner's detection); None: found on first
    use from the host (its launch hint or its server's process), never assumed."""

    @property
    def engine(self) -> InferenceEngine:
        """The run's engine (see `run_engine`): every tool asks this, none picks one itself."""
        if self.run_engine is None:
            self.run_engine = _detect(self.host)
        return self.run_engine

    def engine_at(self, version: str | None) -> InferenceEngine:
        """The run's engine, speaking for `version` when one is known (a version-specific answer)."""
        engine = self.engine
        if not version or version == engine.version:
            return engine
        return get_engine(engine.name, version)

    def engine_for(self, command: str | list[str] | None) -> InferenceEngine:
        """The engine a launch line starts: the run's when the line is the run's engine's (its version kept) or
        names none; another engine's when its entry point says so (a vLLM line on an SGLang run's host)."""
        found = engine_for_launch(command) if command else None
        if found is None:
            return self.engine
        if self.run_engine is None:
            self.run_engine = found
        return self.run_engine if self.run_engine.name == found.name else found

    def engine_named(self, name: str | None, version: str | None = None) -> InferenceEngine:
        """An input's explicit engine (`engine` field of a tool's input), else the run's."""
        if name is None or name == self.engine.name:
            return self.engine_at(version)
        return get_engine(name, version)

    def say(self, message: str) -> None:
        """A one-line progress message for the live view (never printed by tools themselves)."""
        if self.progress:
            self.progress(message)

    @property
    def state_dir(self) -> str:
        """specdoctor's folder on the host (backups, logs, shipped scripts)."""
        return f"{self.host.home()}/.specdoctor"

    @property
    def run_dir(self) -> str:
        return f"{self.state_dir}/runs/{self.run_id}"

    def remote_script(self, name: str) -> str:
        """Upload `specdoctor/tools/remote/NAME` to a content-hashed folder on the host once; return its path."""
        key = f"remote:{name}"
        if key in self.cache:
            return self.cache[key]
        data = resources.files("specdoctor.tools.remote").joinpath(name).read_bytes()
        digest = hashlib.sha256(data).hexdigest()[:16]
        path = f"{self.state_dir}/remote/{digest}/{name}"
        if not self.host.run(["test", "-f", path], check="ignore").ok:
            self.host.put(data, path, mode=0o755)
        self.cache[key] = path
        return path

    def sh(self, *argv: str) -> str:
        """Quote argv for a shell script fragment (for pipelines built by specdoctor itself)."""
        return shlex.join(argv)
