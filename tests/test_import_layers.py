"""Imports run one way: the import-linter contracts in pyproject.toml hold for the package as it is laid out."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_import_contracts_are_kept() -> None:
    lint = Path(sys.executable).with_name("lint-imports")
    res = subprocess.run([str(lint), "--no-cache"], cwd=ROOT,
                         env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}, capture_output=True, text=True,
                         timeout=300)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-2000:]
    assert "0 broken" in res.stdout and "Contracts: 8 kept" in res.stdout



def _circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while not comp or comp[-1] != v:
                comp.append(stack.pop())
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return sorted(out)


def test_the_circle_finder_finds_a_circle() -> None:
    assert _circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _circles({"a": {"b"}, "b": set()}) == []


def test_no_module_of_the_package_is_in_an_import_circle() -> None:
    # a circle (module-level or inside a function, grimp sees both) means a module can run half-initialised; the
    # tool and action catalogues exist so that no package imports its members only to have them registered
    import grimp

    graph = grimp.build_graph("specdoctor", exclude_type_checking_imports=True, cache_dir=None)  # a stale cache lies
    edges = {m: set(graph.find_modules_directly_imported_by(m)) for m in graph.modules}
    assert _circles(edges) == KNOWN_CIRCLES


# None left: the last (diagnosis.levers <-> nccl_lever) went when what both read moved to diagnosis.lever_model.
KNOWN_CIRCLES: list[list[str]] = []
