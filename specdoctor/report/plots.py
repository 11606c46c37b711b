"""The report's plots (matplotlib, Agg, no pyplot state) as PNG bytes: embedded in report.html, saved beside report.md.

Every plot labels its marks in words (values on bars, names on curves, text in heatmap cells), so nothing is
encoded by colour alone.
"""

from __future__ import annotations

import base64
import io
from pathlib import PurePosixPath

from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.colors import TwoSlopeNorm
from matplotlib.figure import Figure

from specdoctor.report import derive, fmt
from specdoctor.report.breakeven_view import curve_points, spec_tps
from specdoctor.report.model import NcclRow, Report

__all__ = ["render_plots", "render_plot_pngs", "throughput_plot", "breakeven_plot", "nccl_plot", "waterfall_plot",
           "bisection_plot", "PLOT_KEYS"]

_DPI = 100
PLOT_KEYS = ("waterfall", "throughput", "bisection", "nccl", "breakeven")
_K_STYLES = ["-", "--", "-.", ":", (0, (5, 1, 1, 1))]


def _png(fig: Figure) -> bytes:
    """Encode a figure as PNG (not SVG: keeps the page free of any URL, even xmlns)."""
    FigureCanvasAgg(fig)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=_DPI, bbox_inches="tight", metadata={"Software": None})
    return buf.getvalue()


def throughput_plot(report: Report) -> bytes | None:
    """Box + strip plot of per-run throughput per configuration, with the claimed figures as lines."""
    ms = [m for m in report.measurements + (report.stash.measurements if report.stash else []) if m.samples]
    if not ms:
        return None
    fig = Figure(figsize=(8, 1.4 + 0.55 * len(ms)))
    ax = fig.add_subplot()
    data = [m.samples for m in ms]
    ax.boxplot(data, orientation="horizontal", widths=0.5, showfliers=False,
               medianprops={"color": "#b3261e", "linewidth": 2})
    for i, xs in enumerate(data, 1):
        offsets = [((j * 0.618) % 1.0 - 0.5) * 0.3 for j in range(len(xs))]   # deterministic jitter
        ax.scatter(xs, [i + o for o in offsets], s=16, color="#1f5fa8", alpha=0.8, zorder=3)
    for c in report.claims:
        if c.claimed is not None:
            ax.axvline(c.claimed, color="#555555", linestyle="--", linewidth=1)
            ax.text(c.claimed, 0.98, f"claimed {c.metric} {fmt.num(c.claimed)}", rotation=90, va="top",
                    ha="right", fontsize=8, color="#333333", transform=ax.get_xaxis_transform())
    ax.set_yticks(range(1, len(ms) + 1), [f"{m.label} (median {fmt.num(m.median)})" for m in ms])
    ax.set_xlabel(f"{ms[0].metric} ({ms[0].unit}), one point per run")
    ax.grid(axis="x", alpha=0.3)
    ax.invert_yaxis()
    return _png(fig)


def waterfall_plot(report: Report) -> bytes | None:
    """From the reference figure to the measured one: one bar per cause (95% CI), then the rest."""
    att = derive.attribution(report)
    if att is None:
        return None
    causes = [c for c in att.in_unit() if c.confirmed]  # another figure's causes are not steps of this gap
    labels = [f"{att.reference_label}\n{fmt.num(att.reference)}"]
    fig = Figure(figsize=(8, 3.6))
    ax = fig.add_subplot()
    ax.bar(0, att.reference, color="#8c959f", edgecolor="black")
    level = att.reference
    x = 1
    for c in causes:
        ax.bar(x, c.delta, bottom=level, color="#cf222e" if c.delta < 0 else "#1a7f37", edgecolor="black")
        if c.ci_low is not None and c.ci_high is not None:
            end = level + c.delta
            ax.errorbar(x, end, yerr=[[max(0.0, c.delta - c.ci_low)], [max(0.0, c.ci_high - c.delta)]],
                        color="black", capsize=5, linewidth=1.2)
        ax.text(x, level + c.delta / 2, f"{c.delta:+.1f}", ha="center", va="center", fontsize=9,
                color="white", fontweight="bold")
        labels.append("\n".join(_wrap(c.name, 18)))
        level += c.delta
        x += 1
    rest = att.unexplained
    ax.bar(x, rest, bottom=level, color="white", edgecolor="black", hatch="//")
    ax.text(x, level + rest / 2, f"{rest:+.1f}", ha="center", va="center", fontsize=9,
            bbox={"facecolor": "white", "edgecolor": "none", "pad": 1})
    labels.append("rest: noise or\nunexplained")
    x += 1
    ax.bar(x, att.measured, color="#1f5fa8", edgecolor="black")
    if att.measured_ci_low is not None and att.measured_ci_high is not None:
        ax.errorbar(x, att.measured, yerr=[[att.measured - att.measured_ci_low], [att.measured_ci_high - att.measured]],
                    color="black", capsize=5, linewidth=1.2)
    labels.append(f"measured\n{fmt.num(att.measured)}")
    ax.set_xticks(range(x + 1), labels, fontsize=8)
    lo = min(att.reference, att.measured, level) * 0.8
    ax.set_ylim(lo, max(att.reference, att.measured, level) * 1.05)
    ax.set_ylabel(f"{att.metric} ({att.unit})")
    ax.grid(axis="y", alpha=0.3)
    ax.set_title(f"gap {att.gap:+.1f} {att.unit}: bars are causes (error bars: 95% CI); hatched: the rest",
                 fontsize=9)
    return _png(fig)


def _wrap(text: str, width: int) -> list[str]:
    words, lines, cur = text.split(), [], ""
    for w in words:
        if cur and len(cur) + 1 + len(w) > width:
            lines.append(cur)
            cur = w
        else:
            cur = f"{cur} {w}".strip()
    return [*lines, cur][:3]


def _cycle_band(report: Report, k: int) -> tuple[float, float] | None:
    """Cycle time at k draft steps when only the measured k's total cycle is known: a range, not a guess.

    Verify costs at least one plain decode step, so one draft step costs between 0 and (cycle − decode)/k₀."""
    b = report.breakeven
    if b is None or b.cycle_ms <= 0 or b.steps < 1:
        return None
    d_max = max(0.0, (b.cycle_ms - b.decode_ms - b.overhead_ms) / b.steps)
    a, c = b.cycle_ms, b.cycle_ms + (k - b.steps) * d_max
    lo, hi = min(a, c), max(a, c)
    return (lo, hi) if lo > 0 else None


def breakeven_plot(report: Report) -> bytes | None:
    """Spec tok/s vs τ for k = 1…5, the baseline, measured τ and break-even τ*; bands where k's cost is unknown."""
    b = report.breakeven
    if b is None:
        return None
    curves = curve_points(b)
    fig = Figure(figsize=(8, 4.6))
    ax = fig.add_subplot()
    for k in range(1, 6):
        taus = [1.0 + k * i / 40 for i in range(41)]
        style = _K_STYLES[(k - 1) % len(_K_STYLES)]
        width = 2.4 if k == b.steps else 1.1
        if k in curves:
            pts = curves[k]
            ax.plot([p[0] for p in pts], [p[1] for p in pts], linestyle=style, linewidth=width, color="#1f5fa8")
            end = pts[-1]
        elif k == b.steps:
            ys = [spec_tps(t, b.cycle_ms) for t in taus]
            ax.plot(taus, ys, linestyle=style, linewidth=width, color="#1f5fa8")
            end = (taus[-1], ys[-1])
        else:
            band = _cycle_band(report, k)
            if band is None:
                continue
            fast = [spec_tps(t, band[0]) for t in taus]
            slow = [spec_tps(t, band[1]) for t in taus]
            ax.fill_between(taus, slow, fast, color="#1f5fa8", alpha=0.12, linewidth=0)
            ax.plot(taus, slow, linestyle=style, linewidth=width, color="#1f5fa8", alpha=0.6)
            ax.plot(taus, fast, linestyle=style, linewidth=width, color="#1f5fa8", alpha=0.6)
            end = (taus[-1], (fast[-1] + slow[-1]) / 2)
        ax.annotate(f"k={k}" + (" (measured)" if k == b.steps else ""), end, xytext=(4, 0),
                    textcoords="offset points", fontsize=8, va="center")
    ax.axhline(b.baseline_tps, color="black", linestyle="--", linewidth=1.2)
    ax.text(1.02, b.baseline_tps, f" baseline {fmt.num(b.baseline_tps)} tok/s", fontsize=8, va="bottom")
    if b.accept_len is not None:
        ax.axvline(b.accept_len, color="#b3261e", linestyle="-.", linewidth=1.2)
        ax.text(b.accept_len, 0.02, f" measured τ = {fmt.num(b.accept_len, 2)}", fontsize=8, color="#b3261e",
                rotation=90, va="bottom", transform=ax.get_xaxis_transform())
        if b.spec_tps is not None:
            ax.scatter([b.accept_len], [b.spec_tps], s=40, color="#b3261e", zorder=4, marker="D")
    ax.axvline(b.tau_star, color="#1a7f37", linestyle=":", linewidth=2)
    ax.text(b.tau_star, 0.02, f" τ* = {fmt.num(b.tau_star, 2)} (break-even)", fontsize=8, color="#1a7f37",
            rotation=90, va="bottom", transform=ax.get_xaxis_transform())
    ax.set_xlim(1.0, 6.6)
    ax.set_xlabel("accept length τ (tokens per verify, bonus included)")
    ax.set_ylabel("speculative tok/s")
    ax.grid(alpha=0.3)
    if b.predictions and b.phase_source:
        ax.set_title(f"other k from measured phases ({b.phase_source}): draft {fmt.num(b.draft_ms, 2)} ms per step, "
                     f"verify {fmt.num(b.verify_ms, 2)} ms", fontsize=8)
    if not b.predictions:
        ax.set_title("only the measured k's cycle time is known: other k are ranges (draft step between free "
                     "and all of cycle − decode)", fontsize=8)
    return _png(fig)


_Cells = list[tuple[NcclRow, list[float]]]


def _nccl_matrix(rows_in: list[NcclRow], ref_row: NcclRow) -> tuple[_Cells, list[int]]:
    """(row, % latency change per size) sorted by mean change, and the message sizes."""
    sizes = sorted({p.size_bytes for r in rows_in for p in r.points})
    ref = {p.size_bytes: p.latency_us for p in ref_row.points}
    rows: _Cells = []
    for row in rows_in:
        lat = {p.size_bytes: p.latency_us for p in row.points}
        rows.append((row, [100.0 * (lat[s] - ref[s]) / ref[s] if s in lat and ref.get(s) else float("nan")
                           for s in sizes]))
    rows.sort(key=lambda rv: sum(v for v in rv[1] if v == v) / max(1, sum(1 for v in rv[1] if v == v)))
    return rows, sizes


def _nccl_cells(ax: Axes, rows: _Cells, ref_row: NcclRow, lim: float) -> None:
    """Each cell's text: 'now' on the workers' row, '—' where unmeasured, else the signed % change."""
    for i, (row, vs) in enumerate(rows):
        for j, v in enumerate(vs):
            text = "now" if row is ref_row else ("—" if v != v else f"{v:+.0f}%")
            ax.text(j, i, text, ha="center", va="center", fontsize=7,
                    color="white" if v == v and abs(v) > 0.6 * lim else "black")


def _nccl_ylabels(ax: Axes, rows: _Cells, ref_row: NcclRow, all_rows: list[NcclRow]) -> None:
    """Row labels: the workers' setting marked and bold, promoted settings named."""
    ylabels = [("▶ " if row is ref_row else "") + derive.nccl_label(row, all_rows)
               + (" (workers now)" if row is ref_row else "") + (" (promoted)" if row.promoted else "")
               for row, _ in rows]
    ax.set_yticks(range(len(rows)), ylabels, fontsize=7)
    for lbl, (row, _) in zip(ax.get_yticklabels(), rows, strict=True):
        if row is ref_row:
            lbl.set_fontweight("bold")


def nccl_plot(report: Report) -> bytes | None:
    """A heatmap: each setting × message size, latency change in % against the workers' current setting."""
    n = report.nccl
    cur = derive.workers_nccl_row(report)
    if n is None or cur is None or not any(r.points for r in n.rows):
        return None
    ref_row = cur[0]
    rows, sizes = _nccl_matrix(n.rows, ref_row)
    vals = [v for _, vs in rows for v in vs if v == v]
    lim = max(5.0, max((abs(v) for v in vals), default=5.0))
    fig = Figure(figsize=(7.5, 1.6 + 0.24 * len(rows)))
    ax = fig.add_subplot()
    img = ax.imshow([vs for _, vs in rows], aspect="auto", cmap="RdBu_r",
                    norm=TwoSlopeNorm(vcenter=0.0, vmin=-lim, vmax=lim))
    _nccl_cells(ax, rows, ref_row, lim)
    _nccl_ylabels(ax, rows, ref_row, n.rows)
    ax.set_xticks(range(len(sizes)), [fmt.size(s) for s in sizes], fontsize=8)
    ax.xaxis.tick_top()
    ax.set_xlabel("all-reduce message size; cells: latency vs the workers' setting (negative = faster)", fontsize=8)
    cb = fig.colorbar(img, ax=ax, fraction=0.04, pad=0.02)
    cb.set_label("% latency vs workers' setting", fontsize=8)
    return _png(fig)


def bisection_plot(report: Report) -> bytes | None:
    """Trials left to right: a filled square where a patch was in, the outcome written above each trial."""
    trials = report.bisection
    if not trials:
        return None
    patches = list(dict.fromkeys(p for t in trials for p in t.patches))
    culprits = set(report.stash.culprits if report.stash else [])
    fig = Figure(figsize=(max(6.0, 1.6 + 1.4 * len(trials)), 1.6 + 0.4 * max(1, len(patches))))
    ax = fig.add_subplot()
    marks = {"regressed": ("X", "#cf222e"), "same": ("o", "#1a7f37"), "unresolved": ("s", "#9a6700")}
    n = len(patches)
    for t in trials:
        for j, p in enumerate(patches):
            inside = p in t.patches
            ax.scatter([t.index], [n - 1 - j], marker="s", s=160, color="#57606a" if inside else "white",
                       edgecolors="#57606a", zorder=2)
        mk, col = marks.get(t.outcome, ("D", "#57606a"))
        ax.scatter([t.index], [n + 0.2], marker=mk, s=70, color=col, zorder=3)
        med = f" · {fmt.num(t.median)} tok/s" if t.median is not None else ""
        ax.text(t.index, n + 0.55, f"{t.outcome}{med}", ha="center", va="bottom", fontsize=8)
    names = [PurePosixPath(p).name + (" (culprit)" if p in culprits else "") for p in patches]
    ax.set_yticks([n - 1 - j for j in range(n)], names, fontsize=8)
    ax.set_xticks([t.index for t in trials], [f"trial {t.index}" for t in trials], fontsize=8)
    ax.set_ylim(-0.7, n + 1.3)
    ax.set_xlim(0.4, len(trials) + 0.6)
    ax.set_title("filled square: patch applied in that trial; above: outcome and median tok/s", fontsize=8)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    return _png(fig)


_PLOTS = {"waterfall": waterfall_plot, "throughput": throughput_plot, "bisection": bisection_plot,
          "nccl": nccl_plot, "breakeven": breakeven_plot}


def render_plot_pngs(report: Report) -> dict[str, bytes]:
    """Every plot the report has data for, keyed like `doc.Figure.key`, as PNG bytes."""
    out: dict[str, bytes] = {}
    for key in PLOT_KEYS:
        png = _PLOTS[key](report)
        if png is not None:
            out[key] = png
    return out


def render_plots(report: Report) -> dict[str, str]:
    """The same plots as base64 strings, for embedding."""
    return {k: base64.b64encode(v).decode("ascii") for k, v in render_plot_pngs(report).items()}
