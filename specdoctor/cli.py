"""The `specdoctor` command line (typer + rich). The only layer that prints to the terminal.

Each command group lives in `specdoctor/commands/<name>.py` with a `register(app)` function; heavy
imports (langgraph, openai, matplotlib) happen inside the commands so `--help` stays fast.
Every SpecdoctorError becomes a one-line error with its stable exit code, never a traceback.
"""

from __future__ import annotations

import os
import sys
from importlib import import_module

import typer
from rich.console import Console

from specdoctor.errors import SpecdoctorError

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Diagnose speculative-decoding performance regressions on SGLang GPU servers.")
err_console = Console(stderr=True, highlight=False, soft_wrap=True)  # one-line errors stay one line

# Order here is the order in `specdoctor --help`.
_COMMAND_MODULES = ["investigate", "resume", "restore", "runs", "breakeven", "sweep_nccl", "tools", "mcp",
                    "report", "scenarios", "survey"]

for _mod in _COMMAND_MODULES:
    try:
        import_module(f"specdoctor.commands.{_mod}").register(app)
    except ModuleNotFoundError as exc:
        if exc.name != f"specdoctor.commands.{_mod}":
            raise


def main() -> None:
    """Console-script entry point: run the app, mapping specdoctor's errors to one-line messages."""
    os.environ.setdefault("LANGGRAPH_STRICT_MSGPACK", "true")
    try:
        rc = app(standalone_mode=False)
        # typer turns Ctrl-C into Exit(130) and, outside standalone mode, *returns* that code: honour it
        if isinstance(rc, int) and not isinstance(rc, bool) and rc:
            if rc == 130:
                err_console.print("specdoctor: interrupted", markup=False)
            sys.exit(rc)
    except SpecdoctorError as exc:
        one_line = " ".join(str(exc).split())  # e.g. a YAML or pydantic message spans lines: the contract is one
        err_console.print(f"specdoctor: error [{exc.code}]: {one_line}", markup=False)
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        err_console.print("specdoctor: interrupted", markup=False)
        sys.exit(130)
    except (typer.Exit, SystemExit) as exc:
        code = getattr(exc, "exit_code", None)
        if code is None:
            code = getattr(exc, "code", 0)
        sys.exit(code or 0)
    except Exception as exc:  # click usage errors and the like
        import click

        if isinstance(exc, click.exceptions.ClickException):
            exc.show()
            sys.exit(exc.exit_code)
        if isinstance(exc, click.exceptions.Abort):
            err_console.print("specdoctor: aborted", markup=False)
            sys.exit(130)
        err_console.print(f"specdoctor: internal error: {type(exc).__name__}: {exc}", markup=False)
        sys.exit(70)


if __name__ == "__main__":
    main()
