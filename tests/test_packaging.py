"""Packaging proof: the wheel carries specdoctor.tools and the playbooks, and its CLI runs from a fresh venv."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = pytest.mark.packaging

ROOT = Path(__file__).resolve().parents[1]
_SKIP = shutil.ignore_patterns(".git", ".venv", "build", "dist", "*.egg-info", "__pycache__", ".hypothesis",
                               ".mypy_cache", ".ruff_cache", ".pytest_cache", "specdoctor-runs", "tests")
_PROBE = """
import importlib.resources as r, json, specdoctor, specdoctor.tools, specdoctor.tools.environment.host
print(json.dumps({
    "specdoctor": specdoctor.__file__,
    "tools": specdoctor.tools.__file__,
    "playbooks": sorted(p.name for p in r.files("specdoctor.playbooks").iterdir() if p.name.endswith(".yaml")),
    "remote": sorted(p.name for p in r.files("specdoctor.tools.remote").iterdir() if p.name.endswith((".py", ".sh"))),
}))
"""


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Build the wheel from a copy of the tree (so the checkout gets no build/ or egg-info litter)."""
    src = tmp_path_factory.mktemp("src") / "specdoctor"
    shutil.copytree(ROOT, src, ignore=_SKIP)
    out = tmp_path_factory.mktemp("dist")
    proc = subprocess.run([sys.executable, "-m", "build", "--wheel", "--no-isolation", "--skip-dependency-check", "--outdir", str(out), str(src)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    (whl,) = out.glob("specdoctor-*.whl")
    return whl


@pytest.fixture(scope="module")
def venv(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A fresh venv with only the wheel installed; dependencies are borrowed from this venv through a .pth
    line (a plain path, so this venv's editable-install hook is *not* executed there)."""
    env_dir = tmp_path_factory.mktemp("venv") / "v"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env_dir)], check=True, timeout=120)
    py = env_dir / "bin" / "python"
    proc = subprocess.run([sys.executable, "-m", "pip", "--python", str(py), "install", "--no-deps", "--no-index",
                           "--quiet", str(wheel)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    site = subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    (Path(site) / "zz_borrowed_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    yield env_dir


def _run(venv: Path, *argv: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    return subprocess.run([str(venv / "bin" / argv[0]), *argv[1:]], capture_output=True, text=True, cwd=cwd,
                          env=env, timeout=120)


def test_wheel_contains_every_package_tool_playbook_and_remote_script(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    expected = {f"specdoctor/{p.relative_to(ROOT / 'specdoctor')}" for p in (ROOT / "specdoctor").rglob("__init__.py")
                if "standin" not in p.parts}  # every sub-package: an unlisted one silently goes missing
    expected |= {f"specdoctor/tools/{p.relative_to(ROOT / 'specdoctor' / 'tools')}"
                 for ext in ("*.py", "*.sh") for p in (ROOT / "specdoctor" / "tools").rglob(ext)}
    expected |= {f"specdoctor/playbooks/{p.name}" for p in (ROOT / "specdoctor" / "playbooks").glob("*.yaml")}
    assert "specdoctor/tools/environment/host.py" in expected and "specdoctor/playbooks/__init__.py" in names
    assert sorted(expected - names) == []
    assert not any(n.startswith(("tools/", "playbooks/", "tests/")) for n in names)


def test_installed_wheel_runs_the_cli_and_finds_its_resources(venv: Path, tmp_path: Path) -> None:
    probe = _run(venv, "python", "-c", _PROBE, cwd=tmp_path)
    assert probe.returncode == 0, probe.stderr
    found = json.loads(probe.stdout)
    assert Path(found["specdoctor"]).is_relative_to(venv), found  # the wheel's copy, not the editable one
    assert Path(found["tools"]).is_relative_to(venv)
    assert found["playbooks"] == sorted(p.name for p in (ROOT / "specdoctor" / "playbooks").glob("*.yaml"))
    assert found["remote"] == sorted(p.name for p in (ROOT / "specdoctor" / "tools" / "remote").iterdir()
                                     if p.suffix in (".py", ".sh"))

    helped = _run(venv, "specdoctor", "--help", cwd=tmp_path)
    assert helped.returncode == 0 and "Usage: specdoctor" in helped.stdout, helped.stderr
    listed = _run(venv, "specdoctor", "tools", "list", "--json", cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    assert "host_facts" in {t["name"] for t in json.loads(listed.stdout)}
    table = _run(venv, "specdoctor", "tools", "list", cwd=tmp_path)
    assert table.returncode == 0 and "host_facts" in table.stdout


def test_installed_help_lists_every_command_issue_2_names(venv: Path, tmp_path: Path) -> None:
    helped = _run(venv, "specdoctor", "--help", cwd=tmp_path)
    listing = helped.stdout.split("\nCommands:\n", 1)[-1]  # click's plain help: "  name  description"
    commands = {line.split()[0] for line in listing.splitlines() if line.startswith("  ") and not line.startswith("   ")}
    wanted = {"investigate", "resume", "restore", "breakeven", "sweep-nccl", "tools", "mcp", "report", "scenarios"}
    assert sorted(wanted - commands) == []
