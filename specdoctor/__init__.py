"""specdoctor: diagnoses speculative-decoding performance regressions on SGLang GPU servers."""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

__all__ = ["Client", "__version__", "connect", "investigate"]

# Lazy attributes: `import specdoctor` stays fast (no pydantic/paramiko/langgraph until first use).
_LAZY = {"Client": "specdoctor.embed.client", "connect": "specdoctor.embed.client",
         "investigate": "specdoctor.embed.run"}

if TYPE_CHECKING:
    from specdoctor.embed.client import Client, connect
    from specdoctor.embed.run import investigate


def __getattr__(name: str) -> Any:
    if name in ("tools", "embed"):  # `specdoctor.tools.as_openai(...)` after a bare `import specdoctor`
        return import_module(f"specdoctor.{name}")
    if name in _LAZY:
        value = getattr(import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'specdoctor' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
