"""`specdoctor survey`: survey a fleet read-only in parallel and name the odd hosts out (list/resume/show runs)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from specdoctor.errors import UsageError

__all__ = ["register"]


def _echo_run(run, out: str | None, as_json: bool) -> None:  # type: ignore[no-untyped-def]
    from specdoctor.fleet.report import write_fleet_report
    from specdoctor.report import fmt

    if run.analysis is None:
        typer.echo(f"survey {run.run_id}: {len(run.rows)}/{len(run.params.targets)} hosts surveyed, not finished "
                   f"(resume with --resume {run.run_id})")
        return
    folder = Path(out) if out else Path("specdoctor-runs") / f"survey-{run.run_id}"
    files = write_fleet_report(folder, run.run_id, run.rows, run.analysis)
    if as_json:
        typer.echo(run.model_dump_json(indent=2))
        return
    typer.echo(f"survey {run.run_id}: {len(run.rows)} hosts"
               + (f" ({len(run.resumed_rows)} surveyed by this process)" if run.resumed_rows else ""))
    for h in run.analysis.hosts:
        m = h.throughput
        top = h.deviations[0] if h.deviations else None
        figure = f"{fmt.num(m.median)} tok/s" if m else f"{h.status}: {h.error or ''}"[:100]
        mark = f"ODD ONE OUT ({h.direction})" if h.outlier else ""
        typer.echo(f"  {h.name:<12} {figure:<16} {mark} {('first departure ' + top.key) if top and h.outlier else ''}")
    typer.echo(f"odd ones out: {', '.join(run.analysis.outliers) or 'none'}; "
               f"not surveyed: {', '.join(run.analysis.unreachable) or 'none'}")
    for kind, path in files.items():
        typer.echo(f"{kind}: {path}")


def register(app: typer.Typer) -> None:
    @app.command()
    def survey(
        hosts: Annotated[str | None, typer.Option(help="Hosts file ('[NAME] SPEC [port=N]' a line) or h1,h2,...")] = None,
        parallel: Annotated[int, typer.Option(help="Hosts surveyed at once.")] = 8,
        runs: Annotated[int, typer.Option(help="Benchmark runs per host.")] = 8,
        max_new_tokens: Annotated[int, typer.Option(help="Tokens generated per benchmark request.")] = 256,
        min_effect: Annotated[float, typer.Option(help="Smallest gap to the fleet that matters, %.")] = 5.0,
        checkpoint: Annotated[str | None, typer.Option(help="SQLite file or postgres:// URL for the survey's "
                                                       "checkpoints (share one to list/resume from another box).")] = None,
        list_runs: Annotated[bool, typer.Option("--list", help="List the surveys in the checkpoint store.")] = False,
        resume: Annotated[str | None, typer.Option(help="Finish an interrupted survey (only hosts not done).")] = None,
        show: Annotated[str | None, typer.Option(help="Write the report of a finished survey again.")] = None,
        out: Annotated[str | None, typer.Option(help="Report folder (default ./specdoctor-runs/survey-RUN).")] = None,
        identity: Annotated[list[str] | None, typer.Option("--identity", "-i", help="SSH private key; repeatable.")] = None,
        known_hosts: Annotated[str | None, typer.Option(help="known_hosts file (default ~/.ssh/known_hosts).")] = None,
        ssh_config: Annotated[str | None, typer.Option(help="ssh_config file (default ~/.ssh/config).")] = None,
        accept_new_host_key: Annotated[bool, typer.Option(help="Trust and record unknown SSH host keys.")] = False,
        as_json: Annotated[bool, typer.Option("--json", help="Print the survey as JSON.")] = False,
    ) -> None:
        """Survey hosts read-only (fingerprint, launch flags, short benchmark, accept length) and name the odd ones out."""
        from specdoctor.engine.survey_graph import list_surveys, load_survey, resume_survey, run_survey
        from specdoctor.fleet.models import SurveyParams
        from specdoctor.fleet.targets import parse_hosts

        def say(msg: str) -> None:
            if not as_json:
                typer.echo(msg, err=True)

        if sum(bool(x) for x in (hosts, list_runs, resume, show)) != 1:
            raise UsageError("survey takes exactly one of --hosts, --list, --resume RUN, --show RUN")
        if list_runs:
            infos = list_surveys(checkpoint)
            if as_json:
                typer.echo("[" + ",".join(i.model_dump_json() for i in infos) + "]")
            for i in infos if not as_json else []:
                state = "finished" if i.finished else "interrupted"
                typer.echo(f"{i.run_id}  {i.surveyed}/{i.hosts} hosts  {state}  outliers: {', '.join(i.outliers) or '-'}")
            return
        if show:
            run = load_survey(show, checkpoint)
        elif resume:
            run = resume_survey(resume, checkpoint=checkpoint, parallel=parallel, say=say)
        else:
            assert hosts is not None
            params = SurveyParams(targets=parse_hosts(hosts), runs=runs, max_new_tokens=max_new_tokens,
                                  identity_files=identity or [], known_hosts=known_hosts, ssh_config=ssh_config,
                                  accept_new_host_key=accept_new_host_key, min_effect_pct=min_effect)
            run = run_survey(params, checkpoint=checkpoint, parallel=parallel, say=say)
        _echo_run(run, out, as_json)
