"""The inference-engine seam: everything specific to a serving engine (SGLang, vLLM) behind one protocol."""

from typing import Literal

from specdoctor.host.base import Host
from specdoctor.inference.base import InferenceEngine, ProcessRole
from specdoctor.inference.resolve import EngineUnknown, detect_engine, engine_of_argv, engine_of_launch
from specdoctor.inference.sglang import SGLANG_0_5_9, SGLANG_0_5_17, SGLANG_0_5_23, SGLang
from specdoctor.inference.vllm import VLLM, VLLM_0_26_0

__all__ = ["InferenceEngine", "ProcessRole", "SGLang", "SGLANG_0_5_9", "SGLANG_0_5_17", "SGLANG_0_5_23", "VLLM",
           "VLLM_0_26_0", "EngineName", "ENGINE_NAMES", "EngineUnknown", "get_engine", "known_engines",
           "engine_for_argv", "engine_for_launch", "resolve_engine"]

EngineName = Literal["sglang", "vllm"]
"""The engines `get_engine` knows: the type of every `engine` field a user or a model can fill."""

ENGINE_NAMES: tuple[str, ...] = ("sglang", "vllm")


def get_engine(name: str, version: str | None = None) -> InferenceEngine:
    """The engine implementation for `name` at `version` (None: tolerant of every supported version).

    The name is required: a run resolves its engine once (`ToolContext.engine`); nothing falls back to one.
    """
    key = name.lower()
    if key == "sglang":
        return SGLang(version)
    if key == "vllm":
        return VLLM(version)
    raise ValueError(f"unknown inference engine {name!r}: supported: {', '.join(ENGINE_NAMES)}")


def known_engines() -> list[InferenceEngine]:
    """Every engine, tolerant of all its versions (what detection tries)."""
    return [get_engine(n) for n in ENGINE_NAMES]


def engine_for_argv(argv: list[str]) -> InferenceEngine | None:
    """The engine whose main process `argv` is, None when it is no known server's."""
    return engine_of_argv(argv, known_engines())


def engine_for_launch(line: str | list[str]) -> InferenceEngine | None:
    """The engine a launch line starts, None when its entry point is no known engine's."""
    return engine_of_launch(line, known_engines())


def resolve_engine(host: Host, name: str | None = None, version: str | None = None) -> InferenceEngine:
    """A run's engine, once: the given name (`--engine`), else what the host shows (`detect_engine`)."""
    if name:
        return get_engine(name, version)
    return detect_engine(host, known_engines(), get_engine)
