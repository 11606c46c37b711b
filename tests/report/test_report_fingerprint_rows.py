"""Fingerprint record tables: rows alike but for identity and a per-rank number merge; anything else stays apart."""

from __future__ import annotations

from specdoctor.report.doc import Table, _records_table


def _text(t: Table) -> list[list[str]]:
    return [[str(cell[0]) for cell in row] for row in t.rows]


def test_rank_numbered_workers_merge_into_one_row() -> None:
    recs = [{"pid": 100 + i, "name": f"sglang::scheduler_TP{i}", "used_mib": 90061} for i in range(8)]
    t = _records_table("gpu_processes", recs)
    assert _text(t) == [["100–107", "sglang::scheduler_TP0–7", "90061", "8"]]


def test_a_neighbour_job_and_unlike_rows_stay_apart() -> None:
    recs = [{"pid": 100 + i, "name": f"sglang::scheduler_TP{i}", "used_mib": 90061} for i in range(2)]
    recs += [{"pid": 900, "name": "python", "used_mib": 4000},                    # another user's job
             {"pid": 901, "name": "sglang::scheduler_TP9", "used_mib": 1200}]     # same name shape, other memory
    rows = _text(_records_table("gpu_processes", recs))
    assert ["100–101", "sglang::scheduler_TP0–1", "90061", "2"] in rows
    assert ["900", "python", "4000", "1"] in rows and ["901", "sglang::scheduler_TP9", "1200", "1"] in rows
    apart = _text(_records_table("x", [{"pid": 1, "name": "job-a"}, {"pid": 2, "name": "job-b"}]))
    assert apart == [["1", "job-a"], ["2", "job-b"]]                             # letters differ: never merged
