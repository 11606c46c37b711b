"""Where the built-in tool catalogue is, named rather than imported.

The toolkit is the framework tools are written with, so it sits below them (import-linter checks that): the
registry and the engine detection load the catalogue module by name on first use, the way a plugin host loads
its plugins. This module imports neither, so both can ask it without an import circle.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from functools import cache
from types import ModuleType
from typing import Any

__all__ = ["BUILTIN_CATALOGUE", "builtin_catalogue", "builtin_tools", "builtin_engine_detectors"]

BUILTIN_CATALOGUE = "specdoctor.tools.catalogue"
"""The module whose `TOOLS` the registry registers and whose `ENGINE_DETECTORS` a context asks."""


@cache
def builtin_catalogue() -> ModuleType:
    """The catalogue module, imported once."""
    return importlib.import_module(BUILTIN_CATALOGUE)


def builtin_tools() -> tuple[Callable[..., Any], ...]:
    """Every built-in tool function, as the catalogue lists them."""
    return tuple(builtin_catalogue().TOOLS)


def builtin_engine_detectors() -> tuple[Callable[..., Any], ...]:
    """The catalogue's ways to tell a host's engine from what runs on it, in order."""
    return tuple(builtin_catalogue().ENGINE_DETECTORS)
