"""`specdoctor tools list|schema`: the registry as a table or as OpenAI/JSON schemas."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from specdoctor.errors import UsageError


def register(app: typer.Typer) -> None:
    group = typer.Typer(help="List the typed tools and export their schemas.", no_args_is_help=True)

    @group.command("list")
    def list_tools(as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False) -> None:
        """Name, effect and one-line description of every registered tool."""
        from specdoctor.toolkit import registry

        specs = registry.all()
        if as_json:
            typer.echo(json.dumps([{"name": s.name, "effect": s.effect, "description": s.summary_line}
                                   for s in specs], indent=2))
            return
        from rich.console import Console
        from rich.table import Table

        table = Table("tool", "effect", "description")
        for s in specs:
            table.add_row(s.name, s.effect, s.summary_line)
        Console().print(table)

    @group.command("schema")
    def schema(
        fmt: Annotated[str, typer.Option("--format", help="openai or json")] = "openai",
        name: Annotated[str | None, typer.Option("--tool", help="Only this tool.")] = None,
    ) -> None:
        """Print OpenAI function-calling schemas (or plain JSON Schemas) for the tools."""
        from specdoctor.toolkit import registry
        from specdoctor.toolkit.exports import openai_schema

        specs = [registry.get(name)] if name else registry.all()
        if fmt == "openai":
            out = [openai_schema(s) for s in specs]
        elif fmt == "json":
            out = [{"name": s.name, "effect": s.effect, "description": s.description,
                    "input": s.input_model.model_json_schema(), "output": s.output_model.model_json_schema()}
                   for s in specs]
        else:
            raise UsageError(f"unknown schema format {fmt!r} (openai or json)")
        typer.echo(json.dumps(out, indent=2))

    app.add_typer(group, name="tools")
