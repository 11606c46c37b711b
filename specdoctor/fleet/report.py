"""The fleet report: hosts × key figures, tok/s per host with CIs, the departures of each outlier (md/json/html)."""

from __future__ import annotations

import base64
import io
import json
from html import escape
from pathlib import Path
from typing import Any

from specdoctor.fleet.models import FleetAnalysis, HostSurvey, HostVerdict
from specdoctor.report import fmt

__all__ = ["throughput_plot", "render_markdown", "render_html", "render_json", "write_fleet_report"]


def _figure_png(fig: Any) -> str:
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(fig)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100, bbox_inches="tight", metadata={"Software": None})
    return base64.b64encode(buf.getvalue()).decode("ascii")


def throughput_plot(analysis: FleetAnalysis) -> str | None:
    """Median tok/s per host with its 95 % CI, the fleet median as a line; outliers in red (base64 PNG)."""
    from matplotlib.figure import Figure

    hosts = [h for h in analysis.hosts if h.throughput is not None and h.throughput.median is not None]
    if not hosts:
        return None
    fig = Figure(figsize=(9, 1.0 + 0.35 * len(hosts)))
    ax = fig.add_subplot()
    for i, h in enumerate(hosts):
        m = h.throughput
        assert m is not None and m.median is not None
        lo, hi = m.ci_low if m.ci_low is not None else m.median, m.ci_high if m.ci_high is not None else m.median
        color = "#d62728" if h.outlier else "#1f77b4"
        ax.errorbar([m.median], [i], xerr=[[m.median - lo], [hi - m.median]], fmt="o", color=color, capsize=3)
    centre = next((t.fleet_median for h in hosts for t in h.metrics if t.metric == "throughput"), None)
    if centre is not None:
        ax.axvline(centre, color="#7f7f7f", linestyle="--", linewidth=1)
        ax.text(centre, 1.0, f"fleet median {fmt.num(centre)}", transform=ax.get_xaxis_transform(), ha="left",
                va="bottom", fontsize=8, color="#555555")
    ax.set_yticks(range(len(hosts)), [h.name for h in hosts])
    ax.invert_yaxis()
    ax.set_xlabel("throughput (tok/s), median and 95 % CI per host")
    ax.grid(axis="x", alpha=0.3)
    return _figure_png(fig)


def _metric(h: HostVerdict, name: str) -> str:
    t = next((t for t in h.metrics if t.metric == name), None)
    return f"{t.robust_z:+.1f}" if t else fmt.DASH


def _rows(analysis: FleetAnalysis) -> tuple[list[str], list[list[str]]]:
    head = ["host", "status", "tok/s", "95 % CI", "vs fleet", "z", "accept length", "odd one out", "top departure"]
    rows = []
    for h in analysis.hosts:
        m = h.throughput
        tps = next((t for t in h.metrics if t.metric == "throughput"), None)
        top = h.deviations[0] if h.deviations else None
        rows.append([
            h.name, h.status if not h.error else f"{h.status}: {h.error[:80]}",
            fmt.num(m.median if m else None), f"[{fmt.num(m.ci_low)}, {fmt.num(m.ci_high)}]" if m else fmt.DASH,
            fmt.pct(tps.pct_change) if tps else fmt.DASH, _metric(h, "throughput"), fmt.num(h.accept_length, 2),
            f"yes ({h.direction})" if h.outlier else "no",
            f"{top.key}: {fmt.value(top.majority)} → {fmt.value(top.value)}" if top else fmt.DASH])
    return head, rows


def _md_table(head: list[str], rows: list[list[str]]) -> str:
    def cell(x: str) -> str:
        return x.replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(cell(c) for c in r) + " |" for r in rows]
    return "\n".join(lines)


def _summary(analysis: FleetAnalysis) -> list[str]:
    measured = sum(1 for h in analysis.hosts if h.throughput is not None)
    out = [f"{len(analysis.hosts)} hosts, {measured} measured, {len(analysis.unreachable)} not surveyed "
           f"({', '.join(analysis.unreachable) or 'none'})."]
    if analysis.outliers:
        out.append(f"Odd ones out: {', '.join(analysis.outliers)} (robust z beyond the limit, comparator "
                   f"DIFFERENT, at least {analysis.min_effect_pct:g} % from the fleet).")
    else:
        out.append("No host's performance differs from the fleet's.")
    return out + analysis.notes


def _departures(h: HostVerdict) -> list[tuple[str, str, str, str, str]]:
    return [(d.key, fmt.value(d.majority), fmt.value(d.value), d.impact, f"{d.agree}/{d.of}"
             + (f"; {d.why}" if d.why else "")) for d in h.deviations]


def render_markdown(run_id: str, analysis: FleetAnalysis, plot_file: str | None = None) -> str:
    parts = [f"# Fleet survey {run_id}", "", *_summary(analysis), "", "## Hosts", "", _md_table(*_rows(analysis))]
    if plot_file:
        parts += ["", f"![throughput per host]({plot_file})"]
    for h in analysis.hosts:
        if not (h.outlier or h.deviations):
            continue
        parts += ["", f"## {h.name}: {'odd one out (' + h.direction + ')' if h.outlier else 'departs from the majority'}"]
        parts += [f"- {t.metric}: {t.why}" for t in h.metrics if t.outlier]
        if h.deviations:
            parts += ["", _md_table(["field", "fleet majority", "this host", "impact", "hosts agreeing; why"],
                                    [list(d) for d in _departures(h)])]
    if analysis.split_fields:
        parts += ["", f"No majority on: {', '.join(analysis.split_fields)}."]
    return "\n".join(parts) + "\n"


def render_html(run_id: str, analysis: FleetAnalysis, plot_png: str | None) -> str:
    def table(head: list[str], rows: list[list[str]]) -> str:
        return ("<table><tr>" + "".join(f"<th>{escape(h)}</th>" for h in head) + "</tr>"
                + "".join("<tr>" + "".join(f"<td>{escape(c)}</td>" for c in r) + "</tr>" for r in rows) + "</table>")

    body = [f"<h1>Fleet survey {escape(run_id)}</h1>", *(f"<p>{escape(s)}</p>" for s in _summary(analysis)),
            "<h2>Hosts</h2>", table(*_rows(analysis))]
    if plot_png:
        body.append(f'<img alt="throughput per host" src="data:image/png;base64,{plot_png}">')
    for h in analysis.hosts:
        if h.outlier or h.deviations:
            title = f"odd one out ({h.direction})" if h.outlier else "departs from the majority"
            body.append(f"<h2>{escape(h.name)}: {escape(title)}</h2>")
            body += [f"<p>{escape(t.metric)}: {escape(t.why)}</p>" for t in h.metrics if t.outlier]
            if h.deviations:
                body.append(table(["field", "fleet majority", "this host", "impact", "hosts agreeing; why"],
                                  [list(d) for d in _departures(h)]))
    style = ("body{font-family:sans-serif;max-width:70em;margin:2em auto}table{border-collapse:collapse}"
             "td,th{border:1px solid #ccc;padding:.2em .5em;text-align:left}")
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>Fleet survey {escape(run_id)}</title>"
            f"<style>{style}</style></head><body>{''.join(body)}</body></html>\n")


def render_json(run_id: str, rows: list[HostSurvey], analysis: FleetAnalysis) -> str:
    data = {"run_id": run_id, "analysis": analysis.model_dump(mode="json"),
            "hosts": [r.model_dump(mode="json") for r in rows]}
    return json.dumps(data, indent=2)


def write_fleet_report(out_dir: str | Path, run_id: str, rows: list[HostSurvey],
                       analysis: FleetAnalysis) -> dict[str, str]:
    """Write fleet.md, fleet.json, fleet.html (and throughput.png); returns kind → path."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    png = throughput_plot(analysis)
    files: dict[str, str] = {}
    if png:
        (out / "throughput.png").write_bytes(base64.b64decode(png))
        files["plot"] = str(out / "throughput.png")
    (out / "fleet.md").write_text(render_markdown(run_id, analysis, "throughput.png" if png else None))
    (out / "fleet.json").write_text(render_json(run_id, rows, analysis))
    (out / "fleet.html").write_text(render_html(run_id, analysis, png))
    files.update(md=str(out / "fleet.md"), json=str(out / "fleet.json"), html=str(out / "fleet.html"))
    return files
