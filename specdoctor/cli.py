"""The `specdoctor` command line (typer). The only layer that prints to the terminal.

Each command group lives in `specdoctor/commands/<name>.py` with a `register(app)` function; heavy
imports (langgraph, openai, matplotlib) happen inside the commands so `--help` stays fast.
Usage errors (missing or mistyped options, values of the wrong type) are typer's own: usage, then the
error, exit 2. Every SpecdoctorError becomes one line with its stable exit code, never a traceback.
"""

from __future__ import annotations

import copy
import inspect
import os
import sys
from importlib import import_module
from typing import Annotated, Any

import typer

from specdoctor import __version__
from specdoctor.errors import SpecdoctorError

__all__ = ["app", "build_command", "main"]

# rich_markup_mode=None: click's plain help, which wraps long option names and texts instead of cutting
# them at 80 columns (`--good-fingerpr…`), and plain `Usage: … Error: …` for usage errors.
app = typer.Typer(add_completion=True, no_args_is_help=True, pretty_exceptions_enable=False, rich_markup_mode=None)


def _say_error(text: str) -> None:
    """One line on stderr, never re-wrapped or marked up (rich loads only when there is an error to show)."""
    from rich.console import Console

    Console(stderr=True, highlight=False, soft_wrap=True).print(text, markup=False)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"specdoctor {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True,
                                          help="Print the version and exit.")] = False,
) -> None:
    """Diagnose speculative-decoding performance regressions on SGLang GPU servers.

    Defaults for --host, --repo, --known-hosts, -i/--identity, --llm and --llm-base-url come from
    $XDG_CONFIG_HOME/specdoctor/config.toml (~/.config/...) and SPECDOCTOR_HOST, SPECDOCTOR_REPO,
    SPECDOCTOR_KNOWN_HOSTS, SPECDOCTOR_IDENTITY, SPECDOCTOR_LLM_MODEL, SPECDOCTOR_LLM_BASE_URL;
    the command line wins over the environment, which wins over the file.
    """


# Order here is the order in `specdoctor --help`.
_COMMAND_MODULES = ["investigate", "resume", "restore", "runs", "breakeven", "sweep_nccl", "tools", "mcp",
                    "report", "scenarios", "config", "survey"]

for _mod in _COMMAND_MODULES:
    try:
        import_module(f"specdoctor.commands.{_mod}").register(app)
    except ModuleNotFoundError as exc:
        if exc.name != f"specdoctor.commands.{_mod}":
            raise


def _apply_config(command: Any, defaults: dict[str, object]) -> dict[str, Any]:
    """Name each option's SPECDOCTOR_* variable and build click's default_map (the config file) for the tree."""
    from specdoctor.config import OPTION_ENV

    dmap: dict[str, Any] = {}
    for p in command.params:
        if p.name in OPTION_ENV and getattr(p, "envvar", None) is None:
            p.envvar = OPTION_ENV[p.name]
            p.show_envvar = True
        if p.name in defaults:
            dmap[p.name] = defaults[p.name]
    for name, sub in getattr(command, "commands", {}).items():
        sub_map = _apply_config(sub, defaults)
        if sub_map:
            dmap[name] = sub_map
    return dmap


def _full_short_help(command: Any) -> None:
    """Command lists show each command's whole first paragraph (wrapped), not one cut at the terminal width."""
    for sub in getattr(command, "commands", {}).values():
        if not sub.short_help and sub.help:
            sub.short_help = " ".join(sub.help.strip().split("\n\n")[0].split())
        _full_short_help(sub)


def _command_names() -> dict[str, Any]:
    """Every top-level command's name → its typer registration (a CommandInfo or a TyperInfo), in help order."""
    names: dict[str, Any] = {}
    for info in app.registered_commands:
        names[info.name or typer.main.get_command_name(info.callback.__name__)] = info  # type: ignore[union-attr]
    for group in app.registered_groups:
        names[group.name] = group  # type: ignore[index]
    return names


def _only(name: str | None) -> typer.Typer:
    """The root app with one command (its whole tree), or with every command as a parameterless stand-in that
    carries its help (name None): enough for `--help`, `--version` and completing a command's name.

    typer builds every option of every command up front (a quarter of a second here); a command line names
    at most one command, so only that one is built.
    """
    registered = _command_names()
    sub = copy.copy(app)
    if name is not None:
        sub.registered_commands = [i for i in app.registered_commands if registered.get(name) is i]
        sub.registered_groups = [g for g in app.registered_groups if registered.get(name) is g]
        return sub
    sub.registered_commands, sub.registered_groups = [], []
    for cmd, info in registered.items():
        if isinstance(info, typer.models.TyperInfo):
            text = typer.main.solve_typer_info_help(info)
        else:
            text = info.help if info.help is not None else inspect.getdoc(info.callback) or ""
        sub.command(cmd, help=text, hidden=bool(getattr(info, "hidden", False)))(_stand_in)
    return sub


def _stand_in() -> None:  # pragma: no cover - listed in help, never run (a named command is built for real)
    """A command's place in the root help."""


def _named_command(argv: list[str]) -> str | None:
    """The top-level command this command line (or the shell's completion request) names, if any."""
    names = _command_names()
    if os.environ.get("_SPECDOCTOR_COMPLETE"):
        import shlex

        raw = os.environ.get("COMP_WORDS") or os.environ.get("_TYPER_COMPLETE_ARGS") or ""
        try:
            words = shlex.split(raw)[1:]
        except ValueError:
            return None
        return next((w for w in words if w in names), None)
    first = next((a for a in argv if not a.startswith("-")), None)
    return first if first in names else None


def build_command(defaults: dict[str, object] | None = None, *,
                  argv: list[str] | None = None) -> tuple[Any, dict[str, Any]]:
    """The click command tree with -v/-q on every command and the config applied: (command, default_map).

    With `argv`, only the command it names is built (or stand-ins for the root help when it names none).
    """
    from specdoctor.commands.verbosity import add_verbosity_options

    command = typer.main.get_command(app if argv is None else _only(_named_command(argv)))
    add_verbosity_options(command)
    _full_short_help(command)
    return command, _apply_config(command, defaults or {})


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point: typer handles usage errors (exit 2); specdoctor's errors are one line."""
    os.environ.setdefault("LANGGRAPH_STRICT_MSGPACK", "true")
    try:
        from specdoctor.config import file_option_defaults

        args = sys.argv[1:] if argv is None else argv
        command, default_map = build_command(file_option_defaults(), argv=args)
        command.main(args=args, prog_name="specdoctor", default_map=default_map, standalone_mode=True)
    except SpecdoctorError as exc:
        one_line = " ".join(str(exc).split())  # e.g. a YAML or pydantic message spans lines: the contract is one
        _say_error(f"specdoctor: error [{exc.code}]: {one_line}")
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        _say_error("specdoctor: interrupted")
        sys.exit(130)
    except SystemExit as exc:
        from specdoctor.commands.interrupt import InterruptReported

        if exc.code == 130 and not isinstance(exc, InterruptReported):  # typer turns Ctrl-C into 130 silently
            _say_error("specdoctor: interrupted")
        raise
    except Exception as exc:
        _say_error(f"specdoctor: internal error: {type(exc).__name__}: {exc}")
        sys.exit(70)


if __name__ == "__main__":
    main()
