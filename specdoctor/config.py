"""The user's defaults: `$XDG_CONFIG_HOME/specdoctor/config.toml` plus `SPECDOCTOR_*` environment overrides.

Precedence, as click resolves each option: the command line, then the environment variable, then the
config file, then the option's own default. The CLI feeds the file in as click's `default_map` and names
the variables as each option's `envvar`, so one rule holds for every command that has the option.
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from specdoctor.errors import UsageError

__all__ = ["Config", "LLMConfig", "OPTION_ENV", "config_path", "load_config"]

# CLI option name (click's parameter name) -> environment variable that overrides the config file.
OPTION_ENV: dict[str, str] = {
    "host": "SPECDOCTOR_HOST",
    "repo": "SPECDOCTOR_REPO",
    "known_hosts": "SPECDOCTOR_KNOWN_HOSTS",
    "identity": "SPECDOCTOR_IDENTITY",  # several keys: separated by whitespace, as click splits them
    "llm": "SPECDOCTOR_LLM_MODEL",
    "llm_base_url": "SPECDOCTOR_LLM_BASE_URL",
}


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


def config_path() -> Path:
    """`$SPECDOCTOR_CONFIG` if set, else `$XDG_CONFIG_HOME/specdoctor/config.toml` (XDG default ~/.config)."""
    explicit = os.environ.get("SPECDOCTOR_CONFIG")
    if explicit:
        return Path(explicit).expanduser()
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return Path(base) / "specdoctor" / "config.toml"


def load_config(path: Path | None = None) -> Config:
    """The config file's contents, or an empty Config when there is none; a broken file is a UsageError."""
    path = path or config_path()
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        if os.environ.get("SPECDOCTOR_CONFIG"):
            raise UsageError(f"config file {path} (from SPECDOCTOR_CONFIG) does not exist") from None
        return Config()
    except OSError as exc:
        raise UsageError(f"config file {path}: {exc.strerror or exc}") from None
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise UsageError(f"config file {path} is not valid TOML: {exc}") from None
    try:
        return Config.model_validate(data)
    except ValidationError as exc:
        e = exc.errors()[0]
        where = ".".join(str(p) for p in e["loc"])
        raise UsageError(f"config file {path}: {where}: {e['msg']}") from None
