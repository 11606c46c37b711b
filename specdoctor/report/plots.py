"""The report's plots (matplotlib, Agg, no pyplot state) as base64 PNGs for embedding in report.html."""

from __future__ import annotations

import base64
import io

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from specdoctor.report import fmt
from specdoctor.report.breakeven_view import curve_points
from specdoctor.report.model import Report

__all__ = ["render_plots", "throughput_plot", "breakeven_plot", "nccl_plot"]

_DPI = 100


def _png(fig: Figure) -> str:
    """Encode a figure as base64 PNG; PNG (not SVG) keeps the page free of any URL, even xmlns."""
    FigureCanvasAgg(fig)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=_DPI, bbox_inches="tight", metadata={"Software": None})
    return base64.b64encode(buf.getvalue()).decode("ascii")


def throughput_plot(report: Report) -> str | None:
    """Box + strip plot of per-run throughput per configuration, with the claimed figures as lines."""
    ms = [m for m in report.measurements if m.samples]
    if not ms:
        return None
    fig = Figure(figsize=(9, 1.2 + 0.55 * len(ms)))
    ax = fig.add_subplot()
    data = [m.samples for m in ms]
    ax.boxplot(data, orientation="horizontal", widths=0.5, showfliers=False,
               medianprops={"color": "#d62728", "linewidth": 2})
    for i, xs in enumerate(data, 1):
        offsets = [((j * 0.618) % 1.0 - 0.5) * 0.3 for j in range(len(xs))]   # deterministic jitter
        ax.scatter(xs, [i + o for o in offsets], s=18, color="#1f77b4", alpha=0.8, zorder=3)
    for c in report.claims:
        if c.claimed is not None:
            ax.axvline(c.claimed, color="#7f7f7f", linestyle="--", linewidth=1)
            ax.text(c.claimed, 0.98, f"claimed {c.metric} {fmt.num(c.claimed)}", rotation=90, va="top",
                    ha="right", fontsize=8, color="#555555", transform=ax.get_xaxis_transform())
    ax.set_yticks(range(1, len(ms) + 1), [m.label for m in ms])
    ax.set_xlabel(f"{ms[0].metric} ({ms[0].unit}), one point per run")
    ax.grid(axis="x", alpha=0.3)
    ax.invert_yaxis()
    return _png(fig)


def breakeven_plot(report: Report) -> str | None:
    """Predicted spec tok/s vs τ for k = 1…5, the baseline line, measured τ and break-even τ*."""
    b = report.breakeven
    curves = curve_points(b) if b else {}
    if b is None or not curves:
        return None
    fig = Figure(figsize=(8, 4.5))
    ax = fig.add_subplot()
    for k, pts in curves.items():
        ax.plot([p[0] for p in pts], [p[1] for p in pts], label=f"k = {k}", linewidth=2.0 if k == b.steps else 1.0)
    preds = [p for p in b.predictions if p.steps in curves]
    if preds:
        ax.scatter([p.accept_len for p in preds], [p.tps for p in preds], s=16, color="black", zorder=3,
                   label=f"at α = {fmt.num(b.alpha, 2)}" if b.alpha is not None else "predicted")
    ax.axhline(b.baseline_tps, color="black", linestyle="--", linewidth=1.2,
               label=f"baseline {fmt.num(b.baseline_tps)} tok/s")
    if b.accept_len is not None:
        ax.axvline(b.accept_len, color="black", linestyle="-.", linewidth=1.2,
                   label=f"measured τ = {fmt.num(b.accept_len, 2)}")
    ax.axvline(b.tau_star, color="#2ca02c", linestyle=":", linewidth=1.8, label=f"τ* = {fmt.num(b.tau_star, 2)}")
    ax.set_xlabel("accept length τ (tokens per verify, bonus included)")
    ax.set_ylabel("predicted tok/s")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
    return _png(fig)


def nccl_plot(report: Report) -> str | None:
    """All-reduce latency vs message size (log-log), one line per NCCL setting."""
    n = report.nccl
    if n is None or not any(r.points for r in n.rows):
        return None
    fig = Figure(figsize=(8, 4.5))
    ax = fig.add_subplot()
    for row in n.rows:
        pts = sorted((p.size_bytes, p.latency_us) for p in row.points)
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", markersize=3,
                linewidth=2.2 if row.promoted else 1.0, label=row.config + (" (promoted)" if row.promoted else ""))
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    sizes = sorted({p.size_bytes for r in n.rows for p in r.points})
    ax.set_xticks(sizes, [fmt.size(s) for s in sizes])
    ax.set_xlabel("message size")
    ax.set_ylabel("all-reduce latency (µs)")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8)
    return _png(fig)


def render_plots(report: Report) -> dict[str, str]:
    """Every plot the report has data for, keyed like `doc.Figure.key`, as base64 PNG."""
    out: dict[str, str] = {}
    for key, fn in (("throughput", throughput_plot), ("breakeven", breakeven_plot), ("nccl", nccl_plot)):
        png = fn(report)
        if png is not None:
            out[key] = png
    return out
