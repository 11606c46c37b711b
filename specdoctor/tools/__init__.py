"""specdoctor's typed tools, one module per family; `catalogue.py` lists them, and the registry is built from it.

Importing this package imports no family: a family is imported where it is used, and the registry imports the
catalogue (`specdoctor.tools.catalogue`) on first use. What is here is the embedding API over the registry.
"""

from collections.abc import Iterable
from typing import Any, Literal

from specdoctor.toolkit import Effect, registry

__all__: list[str] = []


# The embedding API: the registry's exports, scoped to what a `specdoctor.Client` allows (the client is
# duck-typed: `.effects` and `.registry`, so this layer never imports the embed package above it).
def _effects(client: Any, effects: Iterable[str] | None) -> tuple[Effect, ...]:
    if effects is not None:
        return tuple(effects)  # type: ignore[arg-type]
    return tuple(getattr(client, "effects", ("read",)))


def as_langchain(client: Any, effects: Iterable[str] | None = None) -> list[Any]:
    """LangChain StructuredTools calling `client.call` (for `ToolNode` / `create_react_agent`).

    Each returns the ToolResult as JSON; a mutating tool on a read-only client returns `needs_approval`.
    """
    from specdoctor.toolkit.exports import langchain_tools

    return langchain_tools(client, _effects(client, effects))


def as_openai(client: Any = None, effects: Iterable[str] | None = None,
              api: Literal["chat", "responses"] = "chat") -> list[dict[str, Any]]:
    """OpenAI `tools=[...]` entries, all strict: Chat Completions' form, or the Responses API's (`api`)."""
    from specdoctor.toolkit.exports import openai_schema

    reg = getattr(client, "registry", registry)
    return [openai_schema(s, api) for s in reg.all(_effects(client, effects))]


__all__ += ["as_langchain", "as_openai"]
