"""`specdoctor sweep-nccl`: the nccl-sweep playbook (inventory → all-reduce sweep → with --yes, promotion)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any

import typer

from specdoctor.commands.hostopts import Identity, KnownHosts
from specdoctor.errors import UsageError

if TYPE_CHECKING:  # rich's console and tables load when a command prints (a fast --help)
    from rich.console import Console
    from rich.table import Table

__all__ = ["register", "run_sweep"]


def _fmt(x: float | None, spec: str = ".1f") -> str:
    return "—" if x is None else format(x, spec)


class _ProgressView:
    """The engine's view for this command: progress lines to a callback, nothing else.

    Not a NullView subclass: importing the engine here would load it (scipy, langgraph) for `--help`."""

    def __init__(self, progress: Callable[[str], None] | None):
        self._say = progress

    def start(self, plan: list[tuple[str, str, str, str]]) -> None:
        """Nothing to show before the sweep's own lines."""

    def step_started(self, step_id: str) -> None:
        """Only finished steps are reported."""

    def progress(self, message: str, done: int | None = None, total: int | None = None) -> None:
        if self._say:
            self._say(message)

    def step_finished(self, step_id: str, status: str, summary: str) -> None:
        if self._say:
            self._say(f"{step_id} [{status}] {summary}")


def run_sweep(host_spec: str, *, port: int | None, launch: str | None, python: str | None, grid: list[str],
              repeats: int, yes: bool, progress: Callable[[str], None] | None = None,
              accept_new_host_key: bool = False, inventory: dict[str, Any] | None = None,
              promote_port: int | None = None, out: str | None = None, known_hosts: str | None = None,
              identity_files: list[str] | None = None) -> dict[str, Any]:
    """Run the nccl-sweep playbook through the engine (audit, checkpoint, approvals, report, safety net).

    Returns {'inventory', 'sweep', 'promotion', 'run'} as JSON-able dicts; --yes approves the relaunches.
    """
    from specdoctor.engine.runner import InvestigateOptions, investigate
    from specdoctor.tools.nccl.nccl_grid import parse_grid_option

    params: dict[str, Any] = {"repeats": repeats, "promote_port": promote_port, **(inventory or {})}
    if grid:
        params["grid"] = parse_grid_option(grid)
    options = InvestigateOptions(host=host_spec, playbook="nccl-sweep", port=port, launch=launch, python=python,
                                 yes=yes, out=out, params={k: v for k, v in params.items() if v is not None},
                                 accept_new_host_key=accept_new_host_key, known_hosts=known_hosts,
                                 identity_files=identity_files or [])
    outcome = investigate(options, view=_ProgressView(progress))
    results = outcome.results
    result: dict[str, Any] = {"run": {"run_id": outcome.run_id, "out_dir": outcome.out_dir,
                                      "status": outcome.status, "verdict": outcome.verdict}}
    for key, step in (("inventory", "inventory"), ("sweep", "nccl")):
        r = results.get(step) or {}
        if r.get("status") != "ok":
            why = f"{r.get('status')}: {r.get('summary')}" if r else "did not run"
            raise UsageError(f"nccl_{'inventory' if step == 'inventory' else 'sweep'} {why} "
                             f"(report: {outcome.out_dir})")
        result[key] = r.get("output")
    promo = results.get("nccl_promote")
    if promo is not None:
        result["promotion"] = promo.get("output") if promo.get("output") is not None else {
            "status": promo.get("status"), "summary": promo.get("summary")}
    return result


def _render_inventory(inv: dict[str, Any], console: Console) -> None:
    """The inventory table, then (before any latency or tuning claim) whether the launcher drops NCCL variables."""
    from rich.table import Table

    t = Table(title="NCCL inventory", show_header=False)
    for k in ("interconnect", "gpus", "tp", "nccl_version", "engine", "engine_version", "hidden_size", "draft_tokens",
              "bench_tool"):
        t.add_row(k, str(inv.get(k)))
    t.add_row("sizes", ", ".join(f"{s['label']}: {s['bytes']} B" for s in inv.get("sizes", [])))
    forced = inv.get("engine_forced_env") or inv.get("sglang_forced_env")
    if forced:
        t.add_row(f"{inv.get('engine') or 'the engine'} forces", ", ".join(f"{k}={v}" for k, v in forced.items()))
    console.print(t)
    if inv.get("launcher_drops"):  # before any latency or tuning claim
        console.print("[bold red]Propagation first:[/bold red] " + (inv.get("notes") or [""])[0], highlight=False)


def _latency_table(sw: dict[str, Any]) -> Table:
    """One row per swept configuration: latency per size, the score, the change vs the default, the verdict."""
    from rich.table import Table

    sizes = sw.get("sizes", [])
    lat = Table("config", *[f"{s} B (µs)" for s in sizes], "Σ µs", "vs default", "verdict",
                title=f"all-reduce latency, TP {sw.get('tp')} ({sw.get('tool')})")
    for r in sw.get("results", []):
        pts = {p["size"]: p.get("latency_us") for p in r.get("points", [])}
        verdict = r.get("failed") or (f"{r.get('outcome')} {r.get('verdict')}" if r.get("outcome") else "screened")
        name = r["label"] + (" ★" if r.get("promote") else "")
        lat.add_row(name, *[_fmt(pts.get(s)) for s in sizes], _fmt(r.get("score_median")),
                    "—" if r.get("pct_change") is None else f"{r['pct_change']:+.1f} %", verdict)
    return lat


def _render_sweep(sw: dict[str, Any], inv: dict[str, Any], console: Console) -> None:
    """The latency table, the skipped configurations, and the notes (the inventory's first one, already shown
    when the launcher drops variables, is left out)."""
    console.print(_latency_table(sw))
    for s in sw.get("skipped", []):
        console.print(f"skipped {s['label']}: {s['reason']}", markup=False)
    for n in inv.get("notes", [])[1 if inv.get("launcher_drops") else 0:] + sw.get("notes", []):
        console.print(f"note: {n}", markup=False)


def _render_unconfirmed(sw: dict[str, Any], console: Console, yes: bool) -> None:
    """No end-to-end run: what was promoted (and how to confirm it), or that the defaults stay."""
    if sw.get("promoted") and not yes:
        console.print("Promoted: " + ", ".join(sw["promoted"]) + " — rerun with --yes to relaunch the server "
                      "under each and confirm end to end (with proof the workers see the variables).")
    elif not sw.get("promoted"):
        console.print("No configuration beat NCCL's defaults by the comparator: keep the defaults.")


def _e2e_table(pr: dict[str, Any]) -> Table:
    """One row per relaunched configuration: propagated?, tok/s and its CI, the change vs the default, the outcome."""
    from rich.table import Table

    e2e = Table("config", "propagated", "tok/s", "95% CI", "vs default", "outcome",
                title=f"end to end (default {_fmt(pr.get('baseline_median'))} tok/s)")
    for r in pr.get("results", []):
        ci = f"[{_fmt(r.get('ci_low'))}, {_fmt(r.get('ci_high'))}]" if r.get("ci_low") is not None else "—"
        e2e.add_row(r["label"], "yes" if r.get("propagated") else "NO", _fmt(r.get("median")), ci,
                    "—" if r.get("pct_change") is None else f"{r['pct_change']:+.1f} %",
                    r.get("skipped") or f"{r.get('outcome')} {r.get('verdict')}")
    return e2e


def _render_propagation(pr: dict[str, Any], console: Console) -> None:
    """Per configuration and variable: what the workers saw and in how many processes NCCL logged it."""
    for r in pr.get("results", []):
        for p in r.get("propagation", []):
            workers = ", ".join(f"{k}={v}" for k, v in sorted(p.get("workers", {}).items())) or "not read"
            console.print(f"  {r['label']}: {p['name']}={p['expected']} → workers {workers}; NCCL logged it in "
                          f"{len(p.get('logged_pids', []))} processes", markup=False)


def _render_promotion(pr: dict[str, Any], console: Console) -> None:
    """The end-to-end confirmation (or why it did not run), the best setting and where to set it."""
    if pr.get("status"):
        console.print(f"promotion {pr['status']}: {pr.get('summary')}", markup=False)
        return
    if pr.get("launcher_drops"):
        console.print(f"[bold red]The launcher drops NCCL variables before the workers start[/bold red]: "
                      f"{pr.get('launcher_report')}")
    console.print(_e2e_table(pr))
    _render_propagation(pr, console)
    if pr.get("best"):
        lo, hi = pr.get("best_delta_ci") or (None, None)
        console.print(f"[bold]best: {pr['best']}[/bold] {pr['best_gain_pct']:+.1f} % tok/s "
                      f"(Δ 95% CI [{_fmt(lo, '+.2f')}, {_fmt(hi, '+.2f')}] tok/s)")
    console.print(f"where to set it: {pr.get('where_to_set')}", markup=False)
    console.print(pr.get("not_sitecustomize", ""), markup=False)
    for n in pr.get("notes", []):
        console.print(f"note: {n}", markup=False)


def _render(out: dict[str, Any], console: Console, yes: bool) -> None:
    inv, sw, pr = out.get("inventory") or {}, out.get("sweep") or {}, out.get("promotion")
    _render_inventory(inv, console)
    _render_sweep(sw, inv, console)
    if pr is None:
        _render_unconfirmed(sw, console, yes)
    else:
        _render_promotion(pr, console)


def register(app: typer.Typer) -> None:
    @app.command("sweep-nccl")
    def sweep_nccl(
        host: Annotated[str, typer.Option(help="user@host, local, or sim:SCENARIO.")],
        port: Annotated[int | None, typer.Option(help="Port of the running SGLang server.")] = None,
        launch: Annotated[str | None, typer.Option(help="SGLang launch line (needed to promote).")] = None,
        python: Annotated[str | None, typer.Option(help="Python on the host.")] = None,
        grid: Annotated[list[str] | None, typer.Option(help="NAME=v1,v2 ('default' = unset; CHANNELS=4,16) (repeat).")] = None,
        repeats: Annotated[int, typer.Option(help="Runs for the default and each finalist (>= 5 to promote).")] = 5,
        yes: Annotated[bool, typer.Option("--yes", help="Relaunch the server to confirm promoted settings.")] = False,
        accept_new_host_key: Annotated[bool, typer.Option("--accept-new-host-key")] = False,
        known_hosts: KnownHosts = None,
        identity: Identity = None,
        promote_port: Annotated[int | None, typer.Option(help="Port for the relaunches (default: a port free on "
                                                         "the host).")] = None,
        tp: Annotated[int | None, typer.Option(help="TP size, when no server/launch line says it.")] = None,
        hidden_size: Annotated[int | None, typer.Option(help="Model hidden size, when config.json is not on the host.")] = None,
        draft_tokens: Annotated[int | None, typer.Option(help="Speculative draft tokens per verify.")] = None,
        as_json: Annotated[bool, typer.Option("--json", help="Print the three tool outputs as JSON.")] = False,
        out: Annotated[str | None, typer.Option(help="Folder for report.md/json/html and audit.jsonl.")] = None,
    ) -> None:
        """NCCL sweep: inventory, all-reduce latency over a grid at decode/verify sizes, end-to-end promotion."""
        from rich.console import Console

        err = Console(stderr=True)
        result = run_sweep(host, port=port, launch=launch, python=python, grid=grid or [], repeats=repeats, yes=yes,
                        progress=None if as_json else (lambda m: err.print(m, markup=False, style="dim")),
                        accept_new_host_key=accept_new_host_key, known_hosts=known_hosts, identity_files=identity,
                        inventory={k: v for k, v in dict(tp=tp, hidden_size=hidden_size, draft_tokens=draft_tokens).items()
                                   if v is not None}, promote_port=promote_port, out=out)
        if as_json:
            typer.echo(json.dumps(result, indent=2))
            return
        console = Console()
        _render(result, console, yes)
        run = result["run"]
        console.print(f"run {run['run_id']} ({run['status']}): report, audit and checkpoint in {run['out_dir']}",
                      markup=False)
