"""The "Fingerprint" section: the box's scalar facts, its structured facts as tables, and changes since the
previous run."""

from __future__ import annotations

import re
from typing import Any

from specdoctor.report import fmt
from specdoctor.report.blocks import Block, Code, Details, Para, Section, Table
from specdoctor.report.model import FingerprintSection, Report
from specdoctor.report.sections.cells import NOT_RUN, ev_link, table_row

__all__ = ["fingerprint_section", "records_table"]


_IDENTITY = ("index", "uuid", "bus_id", "pid", "id")


def _scalar(v: object) -> bool:
    return v is None or isinstance(v, (str, int, float, bool))


def _fp_value(v: object) -> str:
    if v is None:
        return "not found"
    if isinstance(v, (list, dict)) and not v:
        return "none"
    return fmt.value(v)


def _ranges(values: list[str]) -> str:
    """'0–3, 5' for integer labels; otherwise a count."""
    if all(v.isdigit() for v in values):
        nums = sorted(int(v) for v in values)
        out, start, prev = [], nums[0], nums[0]
        for n in [*nums[1:], None]:
            if n is not None and n == prev + 1:
                prev = n
                continue
            out.append(str(start) if start == prev else f"{start}–{prev}")
            if n is not None:
                start = prev = n
        return ", ".join(out)
    return values[0] if len(values) == 1 else f"{len(values)} values"


_NUMBERED = re.compile(r"(?<=[A-Za-z_])\d+$")


def _numbered(values: list[str]) -> str:
    """One value, or 'name_TP0–7' for values that differ only by a trailing number."""
    if len(set(values)) == 1:
        return values[0]
    stem = _NUMBERED.sub("", values[0])
    return stem + _ranges([v[len(stem):] for v in values])


def records_table(name: str, recs: list[dict[str, Any]]) -> Table:
    """A list of records as one table; rows equal but for identity columns (index, uuid, pid…) are merged."""
    cols = list(dict.fromkeys(k for rec in recs for k in rec))
    ident = [c for c in cols if c.lower() in _IDENTITY or c.lower().endswith("_id")]
    rest = [c for c in cols if c not in ident]
    groups: dict[tuple[str, ...], list[dict[str, Any]]] = {}
    for rec in recs:  # names numbered per rank (scheduler_TP0…TP7) group as one name with a range
        groups.setdefault(tuple(_NUMBERED.sub("#", _fp_value(rec.get(c))) for c in rest), []).append(rec)
    merged = len(groups) < len(recs)
    heads = ([ident[0]] if merged and ident else ident) + rest + (["count"] if merged else [])
    rows = []
    for members in groups.values():
        if merged:
            id_cell = [_ranges([_fp_value(m.get(ident[0])) for m in members])] if ident else []
            rows.append(table_row(*id_cell, *[_numbered([_fp_value(m.get(c)) for m in members]) for c in rest],
                                  str(len(members))))
        else:
            m = members[0]
            rows.append(table_row(*[_fp_value(m.get(c)) for c in ident], *[_fp_value(m.get(c)) for c in rest]))
    return Table(heads, rows, caption=name + (" (identical rows merged)" if merged else ""))


def _fp_blocks(name: str, value: Any) -> list[Block]:
    """A structured fingerprint value as tables: records, key/value maps, or a matrix of maps."""
    if isinstance(value, list) and value and all(isinstance(x, dict) for x in value):
        return [records_table(name, value)]
    if isinstance(value, dict) and value:
        if all(isinstance(x, dict) and all(_scalar(y) for y in x.values()) for x in value.values()):
            cols = list(dict.fromkeys(k for x in value.values() for k in x))
            rows = [table_row(k, *[_fp_value(x.get(c)) for c in cols]) for k, x in value.items()]
            return [Table(["", *cols], rows, caption=name)]
        if all(_scalar(x) for x in value.values()):
            return [Table(["key", "value"], [table_row([Code(str(k))], _fp_value(v)) for k, v in value.items()],
                          caption=name)]
        out: list[Block] = []
        for k, v in value.items():
            out += _fp_blocks(f"{name}.{k}", v) if not _scalar(v) else []
        return out
    return []


def _flat_table(fp: FingerprintSection) -> Table | None:
    """The scalar keys (and lists of scalars) as one key/value table; two pairs a row when it is long."""
    flat = [(k, v) for k, v in sorted(fp.current.items()) if _scalar(v) or (isinstance(v, (list, dict)) and not v)
            or (isinstance(v, list) and all(_scalar(x) for x in v))]
    if not flat:
        return None
    pairs = [table_row([Code(k)], _fp_value(", ".join(map(str, v)) if isinstance(v, list) and v else v))
             for k, v in flat]
    if len(pairs) <= 8:
        return Table(["key", "value"], pairs)
    half = (len(pairs) + 1) // 2  # two key/value pairs per row: the same table at half the length
    rows = [pairs[i] + (pairs[i + half] if i + half < len(pairs) else table_row("", "")) for i in range(half)]
    return Table(["key", "value", "key", "value"], rows)


def _nested_blocks(fp: FingerprintSection) -> list[Block]:
    """Maps and lists of records, each as its tables; maps (topology, env) one click away in HTML."""
    out: list[Block] = []
    for k, v in sorted(fp.current.items()):
        sub = _fp_blocks(k, v)
        if isinstance(v, dict) and sub:
            out.append(Details(f"{k} ({len(sub)} table{'s' if len(sub) > 1 else ''})", sub,
                               md_short=[Para([Code(k), ": in report.html and report.json."])]))
        else:
            out += sub
    return out


def _comparison(fp: FingerprintSection, n_commands: int) -> tuple[list[Block], FingerprintSection]:
    """Against the previous run: none, identical, or its changes (the evidence then said once, at the end)."""
    if fp.previous_run is None:
        para = Para(["No previous run to compare with." + (" Recorded by " if fp.evidence else ""),
                     *(ev_link(fp.evidence, n_commands) if fp.evidence else [])])
        return [para], fp.model_copy(update={"evidence": None})
    if not fp.changes:
        return [Para([f"Identical to run {fp.previous_run}."])], fp
    return [Table(["key", "before", "after", "impact"],
                  [table_row([Code(c.key)], fmt.value(c.before), fmt.value(c.after), c.impact) for c in fp.changes],
                  caption=f"Changes since run {fp.previous_run}")], fp


def fingerprint_section(r: Report, s: Section) -> Section:
    fp = r.fingerprint
    if fp is None:
        s.blocks.append(NOT_RUN)
        return s
    flat = _flat_table(fp)
    if flat is not None:
        s.blocks.append(flat)
    s.blocks += _nested_blocks(fp)
    blocks, fp = _comparison(fp, len(r.commands))
    s.blocks += blocks
    if fp.evidence:
        s.blocks.append(Para(["Recorded by ", *ev_link(fp.evidence, len(r.commands))]))
    return s
