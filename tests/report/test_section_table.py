"""The report's sections come from one table (`report.doc.SECTIONS`): every builder under `report/sections/` is in it
once, every row's heading is what the rendered report shows, and the ids are what `specdoctor report --section`
accepts."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import specdoctor.report.sections
from specdoctor.report.blocks import Section
from specdoctor.report.doc import SECTION_IDS, SECTIONS, build
from specdoctor.report.model import Report


def _builders() -> set[str]:
    found = set()
    for info in pkgutil.iter_modules(specdoctor.report.sections.__path__):
        module = importlib.import_module(f"specdoctor.report.sections.{info.name}")
        for name, fn in inspect.getmembers(module, inspect.isfunction):
            if name.endswith("_section") and fn.__module__ == module.__name__:
                found.add(f"{info.name}.{name}")
    return found


def test_every_section_builder_is_in_the_table_once() -> None:
    listed = [f"{spec.build.__module__.rsplit('.', 1)[1]}.{spec.build.__name__}" for spec in SECTIONS]
    assert len(listed) == len(set(listed)), listed
    assert set(listed) == _builders()
    assert SECTION_IDS == [spec.id for spec in SECTIONS]
    assert len(set(SECTION_IDS)) == len(SECTION_IDS)


def test_the_rendered_sections_are_the_table_s_ids_and_headings_in_order() -> None:
    doc = build(Report(verdict="inconclusive"))
    assert [(s.id, s.title) for s in doc.sections] == [(spec.id, spec.title) for spec in SECTIONS]


def test_a_builder_fills_the_section_it_is_handed() -> None:
    spec = SECTIONS[0]
    given = Section(spec.id, spec.title)
    assert spec.build(Report(verdict="inconclusive"), given) is given
    assert given.blocks
