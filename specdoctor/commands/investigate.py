"""`specdoctor investigate`: run a playbook against a host and write the game-plan report."""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer

from specdoctor.commands.hostopts import AcceptNewHostKey, Identity, KnownHosts
from specdoctor.commands.preflight import parse_expect, parse_params

__all__ = ["RUN_EXIT_CODES", "register", "parse_expect", "make_view", "approver_for", "exit_for",
           "run_reporting_interrupt"]

# How a run that wrote its report ended → the process's exit code (documented in README.md).
RUN_EXIT_CODES: dict[str, int] = {"finished": 0, "error": 3, "needs-restore": 21}


def budget_params(params: dict[str, Any], budget: float | None) -> dict[str, Any]:
    """--budget MINUTES as the run's `budget_minutes` parameter (engine/budget.py reads it)."""
    if budget is None:
        return params
    if not budget > 0:
        raise typer.BadParameter("--budget takes box minutes above zero")
    return {**params, "budget_minutes": float(budget)}


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


def exit_for(outcome) -> None:
    """Exit non-zero (one line on stderr) when the run ended in error or left the tree unrestored."""
    code = RUN_EXIT_CODES.get(outcome.status, 1)
    if code:
        what = ("ended in error" if outcome.status == "error" else
                "could not put the tree back: run `specdoctor restore`" if outcome.status == "needs-restore"
                else f"ended {outcome.status}")
        typer.echo(f"specdoctor: run {outcome.run_id} {what} (verdict {outcome.verdict}; partial report in "
                   f"{outcome.out_dir})", err=True)
        raise typer.Exit(code)


def run_reporting_interrupt(start, view):
    """Run `start()`; on Ctrl-C, after the engine's clean-up, print the run id, what the clean-up did and the exact
    `specdoctor resume RUN`, then exit 130 (a second Ctrl-C during the clean-up is told, not obeyed)."""
    from specdoctor.commands.interrupt import InterruptReported, interrupted_lines, sigint_during_cleanup
    from specdoctor.engine.runner import RunInterrupted

    try:
        with sigint_during_cleanup():
            return start()
    except RunInterrupted as exc:
        view.close()
        for line in interrupted_lines(exc.outcome, view):
            typer.echo(line, err=True)
        raise InterruptReported() from None


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
        expect: Annotated[str | None, typer.Option(help="Earlier figures: baseline=89,spec=94 (tok/s), verify_ms, draft_ms, tpot_ms, accept_len. "
                                                       "Default: the good fingerprint's measurements.")] = None,
        essential: Annotated[list[str] | None, typer.Option(help="A patch (file) the server needs; repeatable.")] = None,
        patch_script: Annotated[str | None, typer.Option(help="Script that re-applies essential patches.")] = None,
        good_fingerprint: Annotated[str | None, typer.Option(help="Fingerprint JSON of an earlier good run (host path).")] = None,
        good_ref: Annotated[str | None, typer.Option(help="The good run's commit: a sha, a tag or a date (YYYY-MM-DD: "
                                                     "the last first-parent commit before it); upstream commits since "
                                                     "are bisected. Default: the good fingerprint's commit.")] = None,
        reference: Annotated[str | None, typer.Option(help="fleet:RUN: a survey's majority fingerprint as the good run.")] = None,
        playbook: Annotated[str, typer.Option(help="Built-in playbook name or a YAML file.")] = "regression",
        param: Annotated[list[str] | None, typer.Option(help="Playbook parameter NAME=VALUE; repeatable.")] = None,
        yes: Annotated[bool, typer.Option("--yes", "-y", help="Approve mutating/disruptive steps.")] = False,
        dry_run: Annotated[bool, typer.Option(help="Show the plan and commands; change nothing.")] = False,
        budget: Annotated[float | None, typer.Option(help="Box minutes the launches may take; a step that would "
                                                      "overrun is not started, and your server is put back.")] = None,
        out: Annotated[str | None, typer.Option(help="Output folder (default ./specdoctor-runs/RUN_ID).")] = None,
        checkpoint: Annotated[str | None, typer.Option(help="SQLite file or postgres:// URL for checkpoints.")] = None,
        llm: Annotated[str | None, typer.Option(help="Model name for the optional LLM advisor.")] = None,
        llm_base_url: Annotated[str | None, typer.Option(help="OpenAI-compatible endpoint for --llm.")] = None,
        accept_new_host_key: AcceptNewHostKey = False,
        known_hosts: KnownHosts = None,
        identity: Identity = None,
        as_json: Annotated[bool, typer.Option("--json", help="Plain output; print the outcome as JSON.")] = False,
        engine: Annotated[str | None, typer.Option(help="Serving engine: sglang or vllm (default: found on the "
                                                   "host from the launch line or the running server).")] = None,
    ) -> None:
        """Run a playbook against a host and write report.md, report.json, report.html and audit.jsonl."""
        import sys

        from specdoctor.commands.good_ref import check_good_ref, good_ref_params
        from specdoctor.commands.preflight import check_inputs
        from specdoctor.engine.runner import InvestigateOptions
        from specdoctor.engine.runner import investigate as run
        from specdoctor.host import open_host

        if reference:  # the fleet's majority, placed on the host, is the good run's fingerprint
            from specdoctor.commands.fleet_reference import reference_on_host

            good_fingerprint = reference_on_host(reference, host, checkpoint=checkpoint, known_hosts=known_hosts,
                                                 identity_files=identity, accept_new_host_key=accept_new_host_key)
        opts = InvestigateOptions(
            host=host, repo=repo, python=python, launch=launch, port=port, expect=parse_expect(expect),
            essential=essential or [], patch_script=patch_script, good_fingerprint=good_fingerprint,
            playbook=playbook, params=good_ref_params(budget_params(parse_params(param), budget), good_ref), yes=yes, dry_run=dry_run, out=out, checkpoint=checkpoint,
            llm=llm, llm_base_url=llm_base_url, accept_new_host_key=accept_new_host_key, known_hosts=known_hosts,
            identity_files=identity or [], engine=engine)
        opened = open_host(host, accept_new_host_key=accept_new_host_key, known_hosts=known_hosts,
                           identity_files=identity or None)
        try:
            check_inputs(opened, repo=repo, python=python, launch=launch)  # read-only, before any launch
            check_good_ref(opened, repo or getattr(opened.hints, "repo", None), opts.params.get("good_ref"))
            view = make_view(plain=as_json or not sys.stdout.isatty())
            outcome = run_reporting_interrupt(lambda: run(opts, view=view, approver=approver_for(view), host=opened),
                                              view)
        finally:
            opened.close()
        show_outcome(view, outcome, as_json)
        exit_for(outcome)
