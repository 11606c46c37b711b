"""Loader for the real samples under tests/fixtures/real (line 1 '# source:', line 2 '# context:')."""

from __future__ import annotations

from pathlib import Path

__all__ = ["REAL", "real", "real_files"]

REAL = Path(__file__).resolve().parents[1] / "fixtures" / "real"


def real(rel: str) -> str:
    """A real sample's text without its two header lines."""
    lines = (REAL / rel).read_text(encoding="utf-8").splitlines(keepends=True)
    assert lines[0].startswith("# source: ") and lines[1].startswith("# context: "), rel
    return "".join(lines[2:])


def real_files() -> list[str]:
    """Every real sample, relative to tests/fixtures/real."""
    return sorted(str(p.relative_to(REAL)) for p in REAL.rglob("*.txt"))
