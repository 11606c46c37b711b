"""`-v/--verbose` and `-q/--quiet` for every command: the `logging` level of specdoctor's loggers on stderr."""

from __future__ import annotations

import logging
import sys
from typing import Annotated, Any

import typer

__all__ = ["add_verbosity_options", "configure_logging", "level_for"]

_HANDLER_NAME = "specdoctor-cli"


def level_for(verbose: int, quiet: bool, default: int = logging.WARNING) -> int:
    """-q: errors only; default: warnings (the live view shows progress); -v: info; -vv and more: debug."""
    if quiet:
        return logging.ERROR
    if verbose >= 2:
        return logging.DEBUG
    if verbose == 1:
        return min(default, logging.INFO)
    return default


def configure_logging(level: int, *, fmt: str = "specdoctor %(levelname)s %(name)s: %(message)s") -> None:
    """One stderr handler on the `specdoctor` logger (replaced, not stacked, when called again); -vvv
    also lets paramiko's transport log through."""
    logger = logging.getLogger("specdoctor")
    for h in [h for h in logger.handlers if h.get_name() == _HANDLER_NAME]:
        logger.removeHandler(h)
    handler = logging.StreamHandler(sys.stderr)
    handler.set_name(_HANDLER_NAME)
    handler.setFormatter(logging.Formatter(fmt))
    logger.addHandler(handler)
    logger.setLevel(level)
    logger.propagate = False
    logging.getLogger("paramiko").setLevel(logging.DEBUG if level < logging.DEBUG else logging.WARNING)


def _probe_params() -> list[Any]:
    """The two options as the click objects typer builds (whichever click typer uses: its own or the package)."""
    probe = typer.Typer(add_completion=False)

    @probe.command()
    def _p(
        verbose: Annotated[int, typer.Option("--verbose", "-v", count=True,
                                             help="More log lines on stderr (-v info, -vv debug, -vvv ssh too).")] = 0,
        quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Only errors on stderr.")] = False,
    ) -> None:  # pragma: no cover - never invoked, only inspected
        pass

    return list(typer.main.get_command(probe).params)


def _apply(ctx: Any, param: Any, value: Any) -> Any:
    # options are parsed in command-line order; the level is decided once both are known, from ctx.meta
    meta = ctx.meta.setdefault("specdoctor.verbosity", {"verbose": 0, "quiet": False})
    if param.name == "verbose":
        meta["verbose"] = max(meta["verbose"], int(value or 0))
    elif value:
        meta["quiet"] = True
    configure_logging(level_for(meta["verbose"], meta["quiet"], ctx.meta.get("specdoctor.default_level",
                                                                           logging.WARNING)))
    return value


def add_verbosity_options(command: Any) -> None:
    """Add -v/-q to `command` and to every command below it (groups included: `specdoctor -v tools list`)."""
    names = {p.name for p in command.params}
    if "verbose" not in names and "quiet" not in names:
        for p in _probe_params():
            p.expose_value = False  # the command functions never see them; the callback sets the level
            p.callback = _apply
            command.params.append(p)
    for sub in getattr(command, "commands", {}).values():
        add_verbosity_options(sub)
