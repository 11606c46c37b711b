"""What config.toml may hold, as pydantic models (apart from config.py so a bare `--help` needs no pydantic)."""

from __future__ import annotations

import os

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["Config", "LLMConfig"]


class LLMConfig(BaseModel):
    """The optional LLM advisor's endpoint (`[llm]` table)."""

    model_config = ConfigDict(extra="forbid")

    model: str | None = Field(default=None, description="Model name (what --llm takes).")
    base_url: str | None = Field(default=None, description="OpenAI-compatible endpoint (what --llm-base-url takes).")


class Config(BaseModel):
    """What config.toml may hold; an unknown key is an error (a typo must not be silently ignored)."""

    model_config = ConfigDict(extra="forbid")

    host: str | None = Field(default=None, description="Default --host (user@host[:port], ssh://..., sim:NAME).")
    repo: str | None = Field(default=None, description="Default --repo: the SGLang checkout on the host.")
    known_hosts: str | None = Field(default=None, description="Default --known-hosts file.")
    identity: list[str] = Field(default_factory=list, description="Default -i/--identity keys.")
    llm: LLMConfig = Field(default_factory=LLMConfig)

    def option_defaults(self) -> dict[str, object]:
        """The file's values keyed by CLI option name (paths with `~` expanded); unset ones left out."""
        out: dict[str, object] = {"host": self.host, "repo": self.repo, "llm": self.llm.model,
                                  "llm_base_url": self.llm.base_url,
                                  "known_hosts": os.path.expanduser(self.known_hosts) if self.known_hosts else None,
                                  "identity": [os.path.expanduser(p) for p in self.identity] or None}
        return {k: v for k, v in out.items() if v is not None}
