"""docs/architecture.md's checkable claims: every package and top-level module of specdoctor/ is in its packages
table, and the engine package touches the host only where the doc says it does."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOC = (ROOT / "docs" / "architecture.md").read_text()
PKG = ROOT / "specdoctor"

# The engine modules that reach the host themselves: none (the doc says so); every host command goes through a tool.
ENGINE_HOST_USERS: set[str] = set()
HOST_CALLS = {"run", "read", "put", "write", "forward"}


def _table_rows() -> str:
    start = DOC.index("## Packages and owners")
    return DOC[start:DOC.index("\n## ", start + 1)]


def test_every_package_and_top_level_module_is_in_the_packages_table() -> None:
    rows = _table_rows()
    packages = [p.name for p in PKG.iterdir() if p.is_dir() and (p / "__init__.py").exists()]
    missing = [f"specdoctor/{name}/" for name in packages if f"`specdoctor/{name}/`" not in rows]
    modules = [p.name for p in PKG.glob("*.py") if p.name not in ("__init__.py", "__main__.py")]
    missing += [f"specdoctor/{m}" for m in modules if not re.search(rf"`(specdoctor/)?{re.escape(m)}`", rows)]
    assert not missing, f"not in docs/architecture.md's packages table: {missing}"


def _host_calls(path: Path) -> list[str]:
    """`<something>.host.<run|read|put|…>(…)` and `host.run(…)`-style calls in one module."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in HOST_CALLS:
            target = node.func.value
            name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")
            if name == "host":
                found.append(f"{path.relative_to(PKG)}:{node.lineno}")
    return found


def test_the_engine_reaches_the_host_only_where_the_doc_says() -> None:
    calls = [c for f in sorted((PKG / "engine").rglob("*.py")) for c in _host_calls(f)]
    users = {c.split(":")[0] for c in calls}
    assert users <= ENGINE_HOST_USERS, f"the engine runs host commands outside tools: {sorted(calls)}"
    assert all(module in DOC for module in ENGINE_HOST_USERS), "the doc names every engine module that does"
    assert "The engine runs no host command itself" in DOC, "the doc says what this test checks"


def test_the_host_call_finder_sees_a_host_command() -> None:
    # a tool that runs host commands itself (`host.run`), and the `ctx.host.read` form the engine once used
    assert _host_calls(PKG / "tools" / "serving" / "port_hold.py"), "the finder must see port_hold.py's host.run"
    assert _host_calls(PKG / "tools" / "environment" / "fingerprint.py"), "and fingerprint.py's ctx.host.read"
