"""Which engine serves on a host, found once per run: from a launch line, a process's argv, or the host's processes.

Nothing here picks an engine by default: when no line and no process says which engine it is, resolution fails with
a one-line error that asks for `--engine`.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Iterable

from specdoctor.errors import ToolFailed
from specdoctor.host.base import Host
from specdoctor.inference.base import InferenceEngine

__all__ = ["engine_of_argv", "engine_of_launch", "detect_engine", "EngineUnknown"]


class EngineUnknown(ToolFailed):
    """No launch line or process on the host says which serving engine it runs (pass --engine)."""


def engine_of_argv(argv: list[str], engines: Iterable[InferenceEngine]) -> InferenceEngine | None:
    """The engine whose main process this argv is (None: none of them)."""
    for engine in engines:
        if engine.is_main_process(argv):
            return engine
    return None


def engine_of_launch(line: str | list[str], engines: Iterable[InferenceEngine]) -> InferenceEngine | None:
    """The engine a launch line starts: its entry point (`python -m sglang.launch_server`, `vllm serve`...), found
    after any leading `K=V` words and wrappers (env, nohup, numactl...)."""
    try:
        tokens = shlex.split(line) if isinstance(line, str) else list(line)
    except ValueError:
        return None
    for i in range(len(tokens)):
        found = engine_of_argv(tokens[i:], engines)
        if found is not None:
            return found
    return None


def detect_engine(host: Host, engines: Iterable[InferenceEngine],
                  make: Callable[[str, str | None], InferenceEngine]) -> InferenceEngine:
    """The engine on `host`: the hints' launch line first, else the main processes `ps` lists (exactly one engine
    among them). `make(name, version)` builds the engine object; the version is left to the server's own answer."""
    engines = list(engines)
    hints = host.hints
    if hints is not None and hints.launch:
        found = engine_of_launch(hints.launch, engines)
        if found is not None:
            return make(found.name, None)
    res = host.run(["ps", "-eo", "args="], check="ignore", timeout=30)
    names = set()
    for line in res.stdout.splitlines():
        hit = engine_of_launch(line.strip(), engines)
        if hit is not None:
            names.add(hit.name)
    if len(names) == 1:
        return make(names.pop(), None)
    which = f"servers of several engines run ({', '.join(sorted(names))})" if names else "no inference server runs"
    raise EngineUnknown(f"cannot tell the serving engine: {which} and no launch line names one; "
                        f"pass --engine {'|'.join(e.name for e in engines)}")
