"""`specdoctor scenarios list|show`: the simulated GPU hosts built into specdoctor."""

from __future__ import annotations

import json
from typing import Annotated

import typer

__all__ = ["register"]


def register(app: typer.Typer) -> None:
    group = typer.Typer(help="Built-in simulated GPU hosts (use them as --host sim:NAME).", no_args_is_help=True)

    @group.command("list")
    def list_cmd(as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False) -> None:
        """Name and one-line description of every built-in scenario."""
        from specdoctor.sim import list_scenarios, load_scenario

        rows = []
        for name, desc in list_scenarios(include_corpus=True):
            sc = load_scenario(name)
            hw = sc.hardware
            rows.append({"name": name, "description": desc, "box": f"{hw.gpu_count}x {hw.gpu_name} ({hw.interconnect})",
                         "sglang": sc.sglang.version})
        if as_json:
            typer.echo(json.dumps(rows, indent=2))
            return
        from specdoctor.commands.tabular import print_rows

        print_rows(["scenario", "box", "sglang", "description"],
                   [[f"sim:{r['name']}", r["box"], r["sglang"], r["description"]] for r in rows],
                   no_wrap=["scenario", "sglang"])

    @group.command("show")
    def show_cmd(
        name: Annotated[str, typer.Argument(help="Built-in name or path to a scenario YAML.")],
        truth: Annotated[bool, typer.Option("--truth", help="Also print the ground truth (spoils the diagnosis).")] = False,
        as_json: Annotated[bool, typer.Option("--json", help="Print the validated scenario as JSON.")] = False,
    ) -> None:
        """What a scenario's box looks like: hardware, checkout, patches, server, claims."""
        from rich.console import Console
        from rich.table import Table

        from specdoctor.sim import load_scenario

        sc = load_scenario(name)
        if as_json:
            data = sc.model_dump(mode="json", by_alias=True, exclude=None if truth else {"truth"})
            typer.echo(json.dumps(data, indent=2))
            return
        con = Console()
        hw = sc.hardware
        con.print(f"[bold]sim:{sc.name}[/bold] — {sc.description}", highlight=False)
        con.print(f"hardware: {hw.gpu_count}x {hw.gpu_name} ({hw.interconnect}), driver {hw.driver}, "
                  f"CUDA {hw.cuda}, NCCL {hw.nccl}", highlight=False)
        con.print(f"sglang {sc.sglang.version} checkout at {sc.sglang.dir} with {len(sc.sglang.patches)} local patches",
                  highlight=False)
        table = Table("patch", "file", "essential", "gate", "description")
        for p in sc.sglang.patches:
            table.add_row(p.id, p.file, "yes" if p.essential else "", p.gate.name if p.gate else "", p.description)
        con.print(table)
        con.print(f"server: {'already running' if sc.server.running else 'not running'}; launch: "
                  f"{' '.join(sc.server.launch.split())}", highlight=False)
        if sc.shell_env:
            con.print(f"launch shell exports: {sc.shell_env}", highlight=False)
        if sc.shell_profile:
            con.print("~/.bashrc: " + "; ".join(ln for ln in sc.shell_profile.splitlines() if ln.startswith("export")),
                      highlight=False)
        for proc in sc.gpu_processes:
            con.print(f"other GPU process: {proc.title} on GPUs {','.join(map(str, proc.gpus))}", highlight=False)
        for other in sc.other_servers:
            gpus = other.env.get("CUDA_VISIBLE_DEVICES", "all")
            con.print(f"other server {other.name} (user {other.user}) on GPUs {gpus}, port {other.port}",
                      highlight=False)
        con.print(f"user claims: {sc.hints.expect}", highlight=False)
        if truth:
            con.print(f"truth: {sc.truth.model_dump(exclude_none=True)}", highlight=False)

    app.add_typer(group, name="scenarios")
