"""The inference-engine seam: everything specific to the serving engine (SGLang today) behind one protocol."""

from typing import Literal

from specdoctor.inference.base import InferenceEngine, ProcessRole
from specdoctor.inference.sglang import SGLANG_0_5_9, SGLANG_0_5_17, SGLANG_0_5_23, SGLang

__all__ = ["InferenceEngine", "ProcessRole", "SGLang", "SGLANG_0_5_9", "SGLANG_0_5_17", "SGLANG_0_5_23", "EngineName",
           "get_engine"]

EngineName = Literal["sglang"]
"""The engines `get_engine` knows: the type of every `engine` field a user or a model can fill."""


def get_engine(name: str = "sglang", version: str | None = None) -> InferenceEngine:
    """The engine implementation for `name` at `version` (None: tolerant of every supported version)."""
    if name.lower() != "sglang":
        raise ValueError(f"unknown inference engine {name!r}: supported: sglang")
    return SGLang(version)
