"""`specdoctor.tools.as_langchain` / `as_openai`: the registry's exports, scoped to what a Client allows."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Literal

from specdoctor.toolkit import Effect, registry
from specdoctor.toolkit.exports import langchain_tools, openai_schema

__all__ = ["as_langchain", "as_openai"]


def _effects(client: Any, effects: Iterable[str] | None) -> tuple[Effect, ...]:
    if effects is not None:
        return tuple(effects)  # type: ignore[arg-type]
    return tuple(getattr(client, "effects", ("read",)))


def as_langchain(client: Any, effects: Iterable[str] | None = None) -> list[Any]:
    """LangChain StructuredTools calling `client.call` (for `ToolNode` / `create_react_agent`).

    Each returns the ToolResult as JSON; a mutating tool on a read-only client returns `needs_approval`.
    """
    return langchain_tools(client, _effects(client, effects))


def as_openai(client: Any = None, effects: Iterable[str] | None = None,
              api: Literal["chat", "responses"] = "chat") -> list[dict[str, Any]]:
    """OpenAI `tools=[...]` entries, all strict: Chat Completions' form, or the Responses API's (`api`)."""
    reg = getattr(client, "registry", registry)
    return [openai_schema(s, api) for s in reg.all(_effects(client, effects))]
