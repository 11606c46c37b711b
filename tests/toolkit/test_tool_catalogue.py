"""The tool catalogue (`specdoctor.tools`) names every family that registers tools, and no family imports another
only to have it registered (such imports made the package's import circles)."""

from __future__ import annotations

import re
from pathlib import Path

import grimp

import specdoctor.tools as tools

TOOLS = Path(tools.__file__).parent


def test_the_catalogue_lists_exactly_the_modules_that_register_tools() -> None:
    registering = {p.stem for p in TOOLS.glob("*.py") if re.search(r"^@tool\(", p.read_text(), re.M)}
    assert set(tools.FAMILIES) == registering
    assert all(hasattr(tools, name) for name in tools.FAMILIES)


def test_no_family_imports_another_only_to_register_it() -> None:
    bare = re.compile(r"^from specdoctor\.tools import \w+ as _\w+ +# noqa: E402,F401", re.M)
    offenders = [p.name for p in TOOLS.glob("*.py") if p.name != "__init__.py" and bare.search(p.read_text())]
    assert offenders == []


def test_the_tools_package_has_no_import_circle() -> None:
    graph = grimp.build_graph("specdoctor", exclude_type_checking_imports=True)
    families = {m for m in graph.modules if m.startswith("specdoctor.tools.")}
    circles = [(a, b) for a in sorted(families) for b in sorted(families) if a < b
               and graph.chain_exists(importer=a, imported=b, as_packages=False)
               and graph.chain_exists(importer=b, imported=a, as_packages=False)]
    assert circles == []
