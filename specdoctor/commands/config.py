"""`specdoctor config path|show`: where the config file is and the defaults every command would use now."""

from __future__ import annotations

import json
from typing import Annotated

import typer

__all__ = ["register"]


def register(app: typer.Typer) -> None:
    group = typer.Typer(help="The config file (~/.config/specdoctor/config.toml) and SPECDOCTOR_* overrides.",
                        no_args_is_help=True)

    @group.command("path")
    def path_cmd() -> None:
        """Print the config file's path (it need not exist)."""
        from specdoctor.config import config_path

        typer.echo(str(config_path()))

    @group.command("show")
    def show_cmd(
        host: Annotated[str | None, typer.Option(help="As --host elsewhere.")] = None,
        repo: Annotated[str | None, typer.Option(help="As --repo elsewhere.")] = None,
        known_hosts: Annotated[str | None, typer.Option(help="As --known-hosts elsewhere.")] = None,
        identity: Annotated[list[str] | None, typer.Option("--identity", "-i", help="As -i elsewhere.")] = None,
        llm: Annotated[str | None, typer.Option(help="As --llm elsewhere.")] = None,
        llm_base_url: Annotated[str | None, typer.Option(help="As --llm-base-url elsewhere.")] = None,
    ) -> None:
        """Print, as JSON, the value each option resolves to (command line > SPECDOCTOR_* > file > default)."""
        from specdoctor.config import config_path

        typer.echo(json.dumps({"config_file": str(config_path()), "host": host, "repo": repo,
                               "known_hosts": known_hosts, "identity": identity or [], "llm": llm,
                               "llm_base_url": llm_base_url}, indent=2))

    app.add_typer(group, name="config")
