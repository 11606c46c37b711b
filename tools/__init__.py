"""specdoctor's typed tools, one module per family; importing this package registers them all.

Shipped inside the wheel as `specdoctor.tools` (see pyproject's package-dir mapping).
"""

from collections.abc import Iterable
from importlib import import_module
from typing import Any

# Each family registers its tools on import; a family whose issue has not landed yet is simply absent.
_FAMILIES = ["host", "repo", "gates", "worktree", "bisect", "server", "measure", "fingerprint", "nccl", "breakeven"]

for _name in _FAMILIES:
    try:
        import_module(f"specdoctor.tools.{_name}")
    except ModuleNotFoundError as exc:  # only tolerate the family module itself being absent
        if exc.name != f"specdoctor.tools.{_name}":
            raise

__all__: list[str] = []


# The embedding API (specdoctor.embed.exports holds the implementation; imported lazily to keep this light).
def as_langchain(client: Any, effects: Iterable[str] | None = None) -> list[Any]:
    """LangChain StructuredTools bound to a `specdoctor.Client` (default: the effects the client allows)."""
    from specdoctor.embed.exports import as_langchain as _impl

    return _impl(client, effects)


def as_openai(client: Any = None, effects: Iterable[str] | None = None) -> list[dict[str, Any]]:
    """OpenAI function-calling tool schemas (default: the client's allowed effects, or read-only)."""
    from specdoctor.embed.exports import as_openai as _impl

    return _impl(client, effects)


__all__ += ["as_langchain", "as_openai"]
