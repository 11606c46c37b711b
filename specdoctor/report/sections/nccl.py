"""The "NCCL sweep" section: all-reduce latency per setting and size, the promoted A/B, and propagation."""

from __future__ import annotations

from specdoctor.report import derive, fmt
from specdoctor.report.blocks import Code, Details, Figure, Para, Section, Span, Table
from specdoctor.report.model import NcclRow, NcclSection, Report
from specdoctor.report.sections.cells import NOT_RUN, ci_text, ev_link, table_row

__all__ = ["nccl_section"]


_NCCL_MD_ROWS = 6


def _row_cells(row: NcclRow, rows: list[NcclRow], sizes: list[int], cur_row: NcclRow | None,
               ref: dict[int, float], cycle: bool = False) -> list[list[Span]]:
    """One configuration's latencies per size, each with its change against the workers' row."""
    lat = {p.size_bytes: p.latency_us for p in row.points}
    label = (derive.nccl_label(row, rows) + (" (promoted to the A/B)" if row.promoted else "")
             + (" ← workers now" if row is cur_row else ""))
    cells = []
    if cycle:
        base_c = cur_row.cycle_us if cur_row is not None else None
        c = row.cycle_us
        rel = (f" ({100 * (c - base_c) / base_c:+.0f}%)" if c is not None and base_c and row is not cur_row else "")
        cells.append(fmt.num(c) + rel)
    for sz in sizes:
        v, base = lat.get(sz), ref.get(sz)
        rel = f" ({100 * (v - base) / base:+.0f}%)" if v is not None and base and row is not cur_row else ""
        cells.append(fmt.num(v) + rel)
    return table_row(label, *cells)


def _ab_table(n: NcclSection, n_commands: int) -> Table:
    return Table(["config", "median", "95% CI", "change", "outcome", "p", "evidence"],
                 [table_row(c.metric, fmt.num(c.median, unit=c.unit), ci_text(c.ci_low, c.ci_high),
                            fmt.pct(c.pct_change), c.outcome or fmt.DASH, fmt.pval(c.p_value),
                            ev_link(c.evidence, n_commands))
                  for c in n.ab], caption="Promoted configurations, end-to-end A/B")


def _propagation(n: NcclSection) -> Para:
    if n.propagated is True:
        return Para(["Propagation checked: the promoted variables reached every TP worker."])
    if n.propagated is False:
        return Para(["Propagation checked: the variables did NOT reach every TP worker."])
    if not n.ab:
        return Para(["Propagation to the workers was not checked: no setting was promoted to an end-to-end A/B."])
    return Para(["Propagation to the workers was not recorded for the A/B."])


def nccl_section(r: Report, s: Section) -> Section:
    n = r.nccl
    if n is None or not n.rows:
        s.blocks.append(NOT_RUN)
        return s
    sizes = sorted({p.size_bytes for row in n.rows for p in row.points})
    cur = derive.workers_nccl_row(r)
    cur_row = cur[0] if cur else None
    ref = {p.size_bytes: p.latency_us for p in cur_row.points} if cur_row else {}

    cycle = n.weighting is not None and all(row.cycle_us is not None for row in n.rows)

    def row_cells(row: NcclRow) -> list[list[Span]]:
        return _row_cells(row, n.rows, sizes, cur_row, ref, cycle)

    tp = f" on TP={n.tp}" if n.tp else ""
    if cur_row is not None:
        how = "the workers' current setting" if cur and cur[1] else "the row closest to the workers' current setting"
        s.blocks.append(Para([f"All-reduce latency in µs per message size{tp}; in brackets the change against "
                              f"{how}, ", Code(derive.nccl_label(cur_row, n.rows)),
                              " (negative is faster). ", *(ev_link(n.evidence, len(r.commands)) if n.evidence else [])]))
    heads = ["config", *(["µs per cycle"] if cycle else []), *[fmt.size(sz) for sz in sizes]]
    if cycle:  # said with the table's caption: one line, not another paragraph
        ranked = (f"Ranked by all-reduce time per speculative cycle at the cycle's own sizes ({n.weighting}), not by "
                  "a sum over sizes: a size the cycle does not send weighs nothing. ")
    else:
        ranked = ""
    s.blocks.append(Figure("nccl", "All-reduce latency per setting and message size, relative to the workers' "
                                   "current setting"))
    total = [(row.cycle_us or 0.0) if cycle else sum(p.latency_us for p in row.points) for row in n.rows]
    order = sorted(range(len(n.rows)), key=lambda i: total[i])
    short = [n.rows[i] for i in order[:_NCCL_MD_ROWS]]
    if cur_row is not None and cur_row not in short:
        short.append(cur_row)
    full = Table(heads, [row_cells(n.rows[i]) for i in order] if cycle else [row_cells(row) for row in n.rows],
                 caption=ranked.strip())
    s.blocks.append(Details(f"All {len(n.rows)} configurations", [full],
                            md_short=[Table(heads, [row_cells(row) for row in short],
                                            caption=ranked + f"Fastest {_NCCL_MD_ROWS} of {len(n.rows)} by "
                                                    + ("time per cycle" if cycle else "total latency") + ", "
                                                    "and the workers' setting (all in report.html)")]))
    if n.ab:
        s.blocks.append(_ab_table(n, len(r.commands)))
    s.blocks.append(_propagation(n))
    return s
