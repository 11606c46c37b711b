"""`specdoctor breakeven`: the break-even accept length from a few measurements, as a table or JSON."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from specdoctor.errors import UsageError

if TYPE_CHECKING:  # pydantic and rich load when the command runs: `specdoctor --help` must not load them
    from pydantic import ValidationError
    from rich.console import Console

__all__ = ["register", "render"]


def _validation_message(exc: ValidationError) -> str:
    e = exc.errors()[0]
    where = ".".join(str(p) for p in e["loc"]).replace("_", "-")
    return f"--{where}: {e['msg']}" + (f" (and {len(exc.errors()) - 1} more)" if len(exc.errors()) > 1 else "")


def _pairs(items: list[str], what: str) -> dict[str, str]:
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key or not value:
            raise UsageError(f"{what} takes KEY=VALUE, got {item!r}")
        out[key.strip().lstrip("-").replace("-", "_")] = value.strip()
    return out


def _verify_points(items: list[str]) -> list[dict[str, float]]:
    out = []
    for item in items:
        n, sep, ms = item.partition(":")
        try:
            out.append({"draft_tokens": int(n), "verify_ms": float(ms)})
        except ValueError:
            raise UsageError(f"--verify-point takes N:MS (draft tokens : verify ms), got {item!r}") from None
        if not sep:
            raise UsageError(f"--verify-point takes N:MS, got {item!r}")
    return out


def _fmt(x: float | None, spec: str = ".2f") -> str:
    return "—" if x is None else format(x, spec)


def render(a, console: Console) -> None:  # a: BreakevenAnalysis (import kept lazy for --help speed)
    """Rich tables for one analysis."""
    from rich.table import Table

    t = Table(title="break-even", show_header=False)
    t.add_column("quantity")
    t.add_column("value")
    t.add_row("plain decode", f"{a.decode_ms:.2f} ms/token ({a.baseline_tps:.1f} tok/s)")
    t.add_row("speculative cycle", f"{a.cycle_ms:.2f} ms (from {a.cycle_source})")
    t.add_row("break-even τ*", f"[bold]{a.tau_star:.2f}[/bold]")
    if a.tau_star_components is not None and a.tau_star_shortcut is not None:
        t.add_row("τ* (components / shortcut)", f"{a.tau_star_components:.2f} / {a.tau_star_shortcut:.2f}")
    if a.accept_len is not None:
        colour = "red" if (a.margin or 0) < 0 else "green"
        t.add_row("accept length τ", f"{a.accept_len:.2f} (margin [{colour}]{a.margin:+.2f}[/{colour}])")
        pred = " (predicted)" if a.spec_tps_predicted else ""
        t.add_row("speculative tok/s", f"{_fmt(a.spec_tps, '.1f')}{pred}, speedup {_fmt(a.speedup)}×")
        t.add_row("acceptance α", f"{_fmt(a.alpha, '.3f')} at k = {a.steps}{' (assumed)' if a.steps_assumed else ''}")
    for term in a.terms:
        t.add_row(f"cycle term: {term.name}", f"{term.ms:.2f} ms ({term.share:.0%})"
                  + (" ← dominant" if term.name == a.dominant_term else ""))
    t.add_row("verify model", a.verify_model)
    console.print(t)
    req = Table("target speedup", "τ needed", f"α needed (k={a.steps})", "best k", "α at best k", title="what a drafter must reach")
    for r in a.targets:
        req.add_row(f"{r.speedup:g}×", f"{r.tau_needed:.2f}", _fmt(r.alpha_needed, ".3f") if r.alpha_needed is not None
                    else f"unreachable (τ > {r.steps + 1})", "—" if r.best_steps is None else str(r.best_steps),
                    _fmt(r.alpha_at_best, ".3f"))
    console.print(req)
    if a.predictions:
        p = Table("k", "N", "τ(α)", "cycle ms", "tok/s", "speedup", title=f"predicted at α = {a.alpha:.3f}")
        for row in a.predictions:
            mark = " ←" if row.steps == a.best_steps else ""
            p.add_row(str(row.steps), str(row.draft_tokens), f"{row.accept_len:.2f}", f"{row.cycle_ms:.2f}",
                      f"{row.tps:.1f}{mark}", _fmt(row.speedup))
        console.print(p)
    if a.changes:
        c = Table("term", "good ms", "this ms", "Δ ms", "Δτ*", title=f"what moved (vs reference): {a.moved_term}")
        for ch in a.changes:
            c.add_row(ch.name, f"{ch.before_ms:.2f}", f"{ch.after_ms:.2f}", f"{ch.delta_ms:+.2f}", f"{ch.delta_tau_star:+.3f}")
        console.print(c)
    console.print(f"[bold]{a.verdict}[/bold]")
    for n in a.notes:
        console.print(f"note: {n}", markup=False)


def register(app: typer.Typer) -> None:
    @app.command("breakeven")
    def breakeven_cmd(
        baseline_tps: Annotated[float | None, typer.Option(help="Plain-decode tok/s.")] = None,
        decode_ms: Annotated[float | None, typer.Option(help="Plain-decode ms per token.")] = None,
        spec_tps: Annotated[float | None, typer.Option(help="Speculative tok/s.")] = None,
        accept_len: Annotated[float | None, typer.Option(help="Measured accept length τ (bonus included).")] = None,
        verify_ms: Annotated[float | None, typer.Option(help="Verify forward per cycle, ms.")] = None,
        draft_ms: Annotated[float | None, typer.Option(help="One draft step, ms.")] = None,
        steps: Annotated[int | None, typer.Option(help="Draft steps k per cycle.")] = None,
        draft_tokens: Annotated[int | None, typer.Option(help="Tokens verified per cycle N.")] = None,
        overhead_ms: Annotated[float | None, typer.Option(help="Other per-cycle overhead, ms.")] = None,
        verify_point: Annotated[list[str] | None, typer.Option(help="N:MS extra verify cost point (repeat).")] = None,
        target: Annotated[list[float] | None, typer.Option(help="Target speedup (repeat); default 1.0 1.2 1.5.")] = None,
        max_steps: Annotated[int, typer.Option(help="Predict tok/s for k = 1..this.")] = 8,
        ref: Annotated[list[str] | None, typer.Option(help="The good run, KEY=VALUE (e.g. verify-ms=19) (repeat).")] = None,
        as_json: Annotated[bool, typer.Option("--json", help="Print the BreakevenAnalysis as JSON.")] = False,
    ) -> None:
        """Break-even accept length τ*, margin, α, best k, and the α a drafter needs for a target speedup."""
        from rich.console import Console

        from specdoctor.tools.breakeven.breakeven import BreakevenInput, analyze

        data: dict[str, object] = {k: v for k, v in dict(baseline_tps=baseline_tps, decode_ms=decode_ms, spec_tps=spec_tps,
                                      accept_len=accept_len, verify_ms=verify_ms, draft_ms=draft_ms, steps=steps,
                                      draft_tokens=draft_tokens, overhead_ms=overhead_ms).items() if v is not None}
        data["verify_points"] = _verify_points(verify_point or [])
        data["max_steps"] = max_steps
        if target:
            data["target_speedups"] = target
        if ref:
            data["reference"] = _pairs(ref, "--ref")
        from pydantic import ValidationError

        try:
            inp = BreakevenInput.model_validate(data)
        except ValidationError as exc:
            raise UsageError(_validation_message(exc)) from None
        result = analyze(inp)
        if as_json:
            typer.echo(result.model_dump_json(indent=2))
            return
        render(result, Console())
