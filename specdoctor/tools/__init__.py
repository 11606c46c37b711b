"""specdoctor's typed tools, one module per family, and the catalogue of those families.

The catalogue below is the one place that says which families exist: importing this package imports each of them
once, and each registers its tools with `specdoctor.toolkit.registry`. No family imports another only to have it
registered (those imports made the package's import circles), so a new family is one module plus one line here.
"""

from collections.abc import Iterable
from typing import Any, Literal

from specdoctor.toolkit import Effect, registry
from specdoctor.tools import (  # noqa: F401  (the catalogue: every family that registers tools)
    backup_mirror,
    bisect,
    breakeven,
    breakeven_empirical,
    commit_bisect,
    commits,
    deltas,
    fingerprint,
    gates,
    hardware_probe,
    host,
    launch,
    manifest,
    measure,
    nccl,
    nccl_promote,
    phase_times,
    plan,
    repo,
    server,
    trial_env,
    trial_tree,
    user_server,
    worktree,
)

FAMILIES = ("backup_mirror", "bisect", "breakeven", "breakeven_empirical", "commit_bisect", "commits", "deltas",
            "fingerprint", "gates", "hardware_probe", "host", "launch", "manifest", "measure", "nccl", "nccl_promote",
            "phase_times", "plan", "repo", "server", "trial_env", "trial_tree", "user_server", "worktree")
"""The tool families of the catalogue, by module name (a test checks it against the modules that register tools)."""

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
