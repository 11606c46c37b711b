"""The tool catalogue (`specdoctor.tools.catalogue`) lists every tool, the registry is built from it and from nothing
else, and importing a family registers nothing (registration-only imports made the package's import circles)."""

from __future__ import annotations

import importlib
import pkgutil
import re
import subprocess
import sys
from pathlib import Path

import grimp

import specdoctor.tools as tools
from specdoctor.toolkit import registry
from specdoctor.toolkit.registry import tool_mark
from specdoctor.tools import catalogue

TOOLS = Path(tools.__file__).parent


def _declared() -> dict[str, object]:
    """Every function declared with @tool in a module of specdoctor/tools, by tool name."""
    out: dict[str, object] = {}
    for info in pkgutil.walk_packages([str(TOOLS)], "specdoctor.tools."):
        if info.name.startswith("specdoctor.tools.remote"):
            continue  # the host's scripts, never imported here
        mod = importlib.import_module(info.name)
        for value in vars(mod).values():
            mark = tool_mark(value) if callable(value) else None
            if mark is not None and getattr(value, "__module__", None) == mod.__name__:
                out[mark.name or value.__name__] = value
    return out


def test_the_registry_holds_exactly_the_catalogue() -> None:
    names = [tool_mark(fn).name or fn.__name__ for fn in catalogue.TOOLS]  # type: ignore[union-attr]
    assert len(names) == len(set(names))
    assert {s.name for s in registry.all()} == set(names)
    assert all(registry.get(n).fn is fn for n, fn in zip(names, catalogue.TOOLS, strict=True))


def test_every_declared_tool_is_in_the_catalogue() -> None:
    # a tool written but not listed would silently be missing from every playbook and export
    declared = _declared()
    assert set(declared) == {s.name for s in registry.all()}
    assert all(declared[n] is registry.get(n).fn for n in declared)


def test_the_families_are_the_modules_that_declare_tools() -> None:
    registering = {p.stem for p in TOOLS.rglob("*.py") if re.search(r"^@tool\(", p.read_text(), re.M)}
    assert set(catalogue.FAMILIES) == registering


def test_importing_a_family_registers_nothing() -> None:
    code = ("import specdoctor.tools.environment.fingerprint, specdoctor.tools.serving.server\n"
            "from specdoctor.toolkit.registry import registry\n"
            "print(len(registry._tools))\n"
            "print(len(registry.all()))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["0", str(len(catalogue.TOOLS))]


def test_no_module_imports_a_tool_module_only_to_register_it() -> None:
    root = TOOLS.parent
    offenders = [str(p.relative_to(root)) for p in root.rglob("*.py")
                 if re.search(r"^\s*import specdoctor\.tools\b.*noqa: F401|^from specdoctor\.tools import \w+ as _\w+",
                              p.read_text(), re.M)]
    assert offenders == []


def test_the_tools_package_has_no_import_circle() -> None:
    graph = grimp.build_graph("specdoctor", exclude_type_checking_imports=True)
    families = {m for m in graph.modules if m.startswith("specdoctor.tools.")}
    circles = [(a, b) for a in sorted(families) for b in sorted(families) if a < b
               and graph.chain_exists(importer=a, imported=b, as_packages=False)
               and graph.chain_exists(importer=b, imported=a, as_packages=False)]
    assert circles == []
