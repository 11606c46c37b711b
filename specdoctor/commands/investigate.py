"""`specdoctor investigate`: run a playbook against a host and write the game-plan report."""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer

from specdoctor.errors import UsageError

__all__ = ["register", "parse_expect", "make_view", "approver_for"]


def parse_expect(text: str | None) -> dict[str, float]:
    """`baseline=89,spec=94` → {'baseline': 89.0, 'spec': 94.0}."""
    out: dict[str, float] = {}
    for part in (text or "").split(","):
        if not part.strip():
            continue
        key, sep, value = part.partition("=")
        if not sep or key.strip() not in ("baseline", "spec"):
            raise UsageError(f"--expect takes baseline=N,spec=N (tok/s), got {part.strip()!r}")
        try:
            out[key.strip()] = float(value)
        except ValueError:
            raise UsageError(f"--expect: {value.strip()!r} is not a number") from None
    return out


def parse_params(items: list[str] | None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep:
            raise UsageError(f"--param takes NAME=VALUE, got {item!r}")
        try:
            out[key] = json.loads(value)
        except json.JSONDecodeError:
            out[key] = value
    return out


def make_view(plain: bool):
    from specdoctor.report.live import LiveView

    return LiveView(plain=plain)


def approver_for(view):
    def approve(payload: dict[str, Any]) -> bool:
        text = (f"Step {payload.get('step')}: {payload.get('title')}\n"
                f"  runs {payload.get('target')} ({payload.get('effect')}) with arguments:\n"
                f"  {json.dumps(payload.get('args'), default=str)}")
        return bool(view.ask_approval(text))

    return approve


def show_outcome(view, outcome, as_json: bool) -> None:
    """The summary panel (live view) and where the files are; JSON on stdout with --json."""
    from specdoctor.report.writer import load_report

    try:
        view.finish(load_report(outcome.out_dir))
    except Exception as exc:  # the files are written; a display problem must not hide them
        typer.echo(f"(could not render the summary: {exc})", err=True)
    if as_json:
        typer.echo(outcome.model_dump_json(indent=2))
    else:
        typer.echo(f"verdict: {outcome.verdict}")
        for kind, path in outcome.files.items():
            typer.echo(f"{kind}: {path}")


def register(app: typer.Typer) -> None:
    @app.command()
    def investigate(
        host: Annotated[str, typer.Option(help="user@host[:port], ssh://..., local, sim:NAME or sim:file.yaml")],
        repo: Annotated[str | None, typer.Option(help="SGLang checkout on the host.")] = None,
        python: Annotated[str | None, typer.Option(help="Python on the host that runs SGLang.")] = None,
        launch: Annotated[str | None, typer.Option(help="SGLang launch command (default: the running server's).")] = None,
        port: Annotated[int | None, typer.Option(help="Port of the running server to examine.")] = None,
        expect: Annotated[str | None, typer.Option(help="Earlier figures, e.g. baseline=89,spec=94 (tok/s).")] = None,
        essential: Annotated[list[str] | None, typer.Option(help="A patch (file) the server needs; repeatable.")] = None,
        patch_script: Annotated[str | None, typer.Option(help="Script that re-applies essential patches.")] = None,
        good_fingerprint: Annotated[str | None, typer.Option(help="Fingerprint JSON of an earlier good run (host path).")] = None,
        reference: Annotated[str | None, typer.Option(help="fleet:RUN: a survey's majority fingerprint as the good run.")] = None,
        playbook: Annotated[str, typer.Option(help="Built-in playbook name or a YAML file.")] = "regression",
        param: Annotated[list[str] | None, typer.Option(help="Playbook parameter NAME=VALUE; repeatable.")] = None,
        yes: Annotated[bool, typer.Option("--yes", "-y", help="Approve mutating/disruptive steps.")] = False,
        dry_run: Annotated[bool, typer.Option(help="Show the plan and commands; change nothing.")] = False,
        out: Annotated[str | None, typer.Option(help="Output folder (default ./specdoctor-runs/RUN_ID).")] = None,
        checkpoint: Annotated[str | None, typer.Option(help="SQLite file or postgres:// URL for checkpoints.")] = None,
        llm: Annotated[str | None, typer.Option(help="Model name for the optional LLM advisor.")] = None,
        llm_base_url: Annotated[str | None, typer.Option(help="OpenAI-compatible endpoint for --llm.")] = None,
        accept_new_host_key: Annotated[bool, typer.Option(help="Trust and record an unknown SSH host key.")] = False,
        known_hosts: Annotated[str | None, typer.Option(help="known_hosts file (default ~/.ssh/known_hosts).")] = None,
        identity: Annotated[list[str] | None, typer.Option("--identity", "-i", help="SSH private key; repeatable.")] = None,
        as_json: Annotated[bool, typer.Option("--json", help="Plain output; print the outcome as JSON.")] = False,
    ) -> None:
        """Run a playbook against a host and write report.md, report.json, report.html and audit.jsonl."""
        import sys

        from specdoctor.engine.runner import InvestigateOptions
        from specdoctor.engine.runner import investigate as run

        if reference:  # the fleet's majority, placed on the host, is the good run's fingerprint
            from specdoctor.fleet.reference import reference_on_host

            good_fingerprint = reference_on_host(reference, host, checkpoint=checkpoint, known_hosts=known_hosts,
                                                 identity_files=identity, accept_new_host_key=accept_new_host_key)
        opts = InvestigateOptions(
            host=host, repo=repo, python=python, launch=launch, port=port, expect=parse_expect(expect),
            essential=essential or [], patch_script=patch_script, good_fingerprint=good_fingerprint,
            playbook=playbook, params=parse_params(param), yes=yes, dry_run=dry_run, out=out, checkpoint=checkpoint,
            llm=llm, llm_base_url=llm_base_url, accept_new_host_key=accept_new_host_key, known_hosts=known_hosts,
            identity_files=identity or [])
        view = make_view(plain=as_json or not sys.stdout.isatty())
        outcome = run(opts, view=view, approver=approver_for(view))
        show_outcome(view, outcome, as_json)
