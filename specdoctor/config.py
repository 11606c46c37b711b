"""The user's defaults: `$XDG_CONFIG_HOME/specdoctor/config.toml` plus `SPECDOCTOR_*` environment overrides.

Precedence, as click resolves each option: the command line, then the environment variable, then the
config file, then the option's own default. The CLI feeds the file in as click's `default_map` and names
the variables as each option's `envvar`, so one rule holds for every command that has the option.
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import TYPE_CHECKING, Any

from specdoctor.errors import UsageError

if TYPE_CHECKING:
    from specdoctor.config_model import Config, LLMConfig

__all__ = ["Config", "LLMConfig", "OPTION_ENV", "config_path", "file_option_defaults", "load_config"]

# CLI option name (click's parameter name) -> environment variable that overrides the config file.
OPTION_ENV: dict[str, str] = {
    "host": "SPECDOCTOR_HOST",
    "repo": "SPECDOCTOR_REPO",
    "known_hosts": "SPECDOCTOR_KNOWN_HOSTS",
    "identity": "SPECDOCTOR_IDENTITY",  # several keys: separated by whitespace, as click splits them
    "llm": "SPECDOCTOR_LLM_MODEL",
    "llm_base_url": "SPECDOCTOR_LLM_BASE_URL",
}


def config_path() -> Path:
    """`$SPECDOCTOR_CONFIG` if set, else `$XDG_CONFIG_HOME/specdoctor/config.toml` (XDG default ~/.config)."""
    explicit = os.environ.get("SPECDOCTOR_CONFIG")
    if explicit:
        return Path(explicit).expanduser()
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return Path(base) / "specdoctor" / "config.toml"


def __getattr__(name: str) -> Any:
    """`Config` and `LLMConfig` load pydantic: only when asked for (`--help` must not pay for it)."""
    if name in ("Config", "LLMConfig"):
        from specdoctor import config_model

        return getattr(config_model, name)
    raise AttributeError(f"module 'specdoctor.config' has no attribute {name!r}")


def file_option_defaults(path: Path | None = None) -> dict[str, object]:
    """`load_config(path).option_defaults()`, without importing pydantic when there is no file to read."""
    path = path or config_path()
    if not os.environ.get("SPECDOCTOR_CONFIG") and not path.exists():
        return {}
    return load_config(path).option_defaults()


def load_config(path: Path | None = None) -> Config:
    """The config file's contents, or an empty Config when there is none; a broken file is a UsageError."""
    from pydantic import ValidationError

    from specdoctor.config_model import Config

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
