"""The engine-neutral shape of a parsed launch line: every engine's `parse_launch` returns it."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

__all__ = ["LaunchArgs"]


class LaunchArgs(BaseModel):
    """A server launch line parsed into engine-neutral fields (named as SGLang's `server_args` dests, the first
    engine's; other engines fill the same fields from their own flags and list them in `derived`)."""

    argv: list[str] = Field(default_factory=list, description="The whole command as tokens.")
    env: dict[str, str] = Field(default_factory=dict, description="Leading `K=V` / `env K=V` assignments and "
                                "`export K=V` lines before the command (values the lines cannot resolve are in "
                                "`unresolved`, not here).")
    prefix: list[str] = Field(default_factory=list, description="Tokens before the server flags (program, -m ...).")
    entry: str = Field(default="bare", description="launch_server | serve | bare (flag list only).")
    python: str | None = None
    flags: list[str] = Field(default_factory=list, description="The server flags as given.")
    model_path: str | None = None
    host: str = "127.0.0.1"
    port: int = 30000
    tp_size: int = 1
    speculative_algorithm: str | None = None
    speculative_draft_model_path: str | None = None
    speculative_num_steps: int | None = None
    speculative_eagle_topk: int | None = None
    speculative_num_draft_tokens: int | None = None
    attention_backend: str | None = None
    disable_cuda_graph: bool = False
    cuda_graph_max_bs: int | None = None
    disable_custom_all_reduce: bool = False
    extra: dict[str, Any] = Field(default_factory=dict, description="Every other flag by dest name.")
    derived: list[str] = Field(default_factory=list, description="Fields above read from another flag, not flags "
                               "of this engine themselves (vLLM's tp_size from --tensor-parallel-size, speculative_* "
                               "from --speculative-config): launch-flag comparisons and reverts skip them.")
    problems: list[str] = Field(default_factory=list)
    unresolved: dict[str, str] = Field(default_factory=dict, description="dest (or 'env.NAME') -> the value as "
                                       "written when the given lines cannot resolve it ($VAR, $(...), a "
                                       "non-number for a number flag); the typed field keeps its default.")

    @property
    def speculative(self) -> bool:
        """Whether a draft algorithm is on (unset, empty and NONE all mean off)."""
        alg = self.speculative_algorithm
        if not alg:
            return False
        return alg.upper() != "NONE"

    def as_args(self) -> dict[str, Any]:
        """The server args as a flat dict (what `find_server_processes` reports)."""
        d = self.model_dump(exclude={"argv", "env", "prefix", "flags", "extra", "problems", "python", "entry",
                                     "derived"})
        d.update(self.extra)
        return d
