"""`specdoctor report show|diff|schema`: read saved reports in the terminal, compare two runs, print the schema."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

__all__ = ["register"]


def _run_path(text: str) -> Path:
    """An existing path as given; otherwise a run id (or unique prefix) from `specdoctor runs` → its folder."""
    path = Path(text)
    if path.exists():
        return path
    from specdoctor.commands.runs import resolve_run_id
    from specdoctor.engine.runs import load_record

    return Path(load_record(resolve_run_id(text)).out_dir)


def register(app: typer.Typer) -> None:
    group = typer.Typer(help="Show, compare and describe saved game-plan reports.", no_args_is_help=True)

    @group.command("show")
    def show(
        run_dir: Annotated[str, typer.Argument(help="Run id (as `specdoctor runs` prints it), run directory, or "
                                                    "report.json.")],
        section: Annotated[list[str] | None, typer.Option("--section", "-s", help="Only these section ids.")] = None,
        as_json: Annotated[bool, typer.Option("--json", help="Print the report JSON.")] = False,
    ) -> None:
        """Render a saved report.json in the terminal."""
        from specdoctor.errors import UsageError
        from specdoctor.report.doc import SECTION_IDS
        from specdoctor.report.show import print_report
        from specdoctor.report.writer import load_report, redact_report

        report = redact_report(load_report(_run_path(run_dir)))
        if as_json:
            typer.echo(report.model_dump_json(indent=2))
            return
        bad = [s for s in section or [] if s not in SECTION_IDS]
        if bad:
            raise UsageError(f"unknown section(s) {', '.join(bad)}; choose from {', '.join(SECTION_IDS)}")
        print_report(report, sections=section or None)

    @group.command("diff")
    def diff(
        a: Annotated[str, typer.Argument(help="Earlier run: id, directory or report.json.")],
        b: Annotated[str, typer.Argument(help="Later run: id, directory or report.json.")],
        as_json: Annotated[bool, typer.Option("--json", help="Print the diff as JSON.")] = False,
    ) -> None:
        """Compare two runs: verdicts, measurements (comparator outcomes) and fingerprints."""
        from rich.console import Console

        from specdoctor.report.diff import diff_reports
        from specdoctor.report.show import render_diff
        from specdoctor.report.writer import load_report, redact_report

        d = diff_reports(redact_report(load_report(_run_path(a))), redact_report(load_report(_run_path(b))))
        if as_json:
            typer.echo(json.dumps({**d.model_dump(mode="json"), "verdict_changed": d.verdict_changed}, indent=2))
            return
        Console().print(render_diff(d))

    @group.command("schema")
    def schema() -> None:
        """Print the JSON Schema of report.json."""
        from specdoctor.report.writer import report_schema

        typer.echo(json.dumps(report_schema(), indent=2))

    app.add_typer(group, name="report")
