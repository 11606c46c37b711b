"""Fixtures for the report tests: the two hand-built scenarios and a headless-Chromium screenshot helper."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from specdoctor.report.model import Report

from .report_builders import code_regression_report, seed_report

CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--enable-logging=stderr", "--v=0"]


@pytest.fixture
def seed() -> Report:
    return seed_report()


@pytest.fixture
def code_regression() -> Report:
    return code_regression_report()


@pytest.fixture
def chromium_shot(tmp_path: Path):
    """Render an HTML file in headless Chromium; returns (screenshot path, console lines)."""
    exe = shutil.which("chromium") or "/usr/bin/chromium"
    assert Path(exe).exists(), "Debian package `chromium` is required for the HTML screenshot test"

    def shot(html: Path, size: str = "1280,2000") -> tuple[Path, list[str]]:
        png = tmp_path / f"{html.stem}.png"
        profile = tmp_path / f"profile-{html.stem}"
        proc = subprocess.run([exe, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", f"--screenshot={png}",
                               f"--window-size={size}", html.resolve().as_uri()],
                              capture_output=True, text=True, timeout=90)
        assert proc.returncode == 0, proc.stderr[-2000:]
        console = [line for line in proc.stderr.splitlines() if ":CONSOLE" in line or "Uncaught" in line]
        return png, console

    return shot
