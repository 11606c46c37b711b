"""Helpers for tests/server: real-sample loader, free ports, the fake SGLang package path."""

from __future__ import annotations

import sys
from pathlib import Path

from specdoctor.sim.ports import free_port  # below the ephemeral range: no bind race

__all__ = ["SAMPLES", "FAKE", "PYTHON", "sample", "free_port"]

SAMPLES = Path(__file__).resolve().parents[1] / "fixtures" / "samples"
FAKE = Path(__file__).resolve().parent / "fakesglang"
PYTHON = sys.executable


def sample(rel: str) -> str:
    """A copied real sample without its two `# source/# context` header lines."""
    lines = (SAMPLES / rel).read_text(encoding="utf-8").splitlines(keepends=True)
    return "".join(ln for i, ln in enumerate(lines) if not (i < 2 and ln.startswith("# ")))
