"""Fixtures for the reliability suite: an isolated SPECDOCTOR_HOME per test."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _specdoctor_home(tmp_path, monkeypatch):
    """Run records and checkpoints of each test live under its own tmp folder."""
    monkeypatch.setenv("SPECDOCTOR_HOME", str(tmp_path / "sdhome"))
