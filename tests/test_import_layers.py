"""Imports run one way: the import-linter contracts in pyproject.toml hold for the package as shipped."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _mirror(tmp: Path) -> Path:
    """The package laid out as the wheel ships it (`tools/` becomes `specdoctor/tools`), as symlinks."""
    pkg = tmp / "specdoctor"
    shutil.copytree(ROOT / "specdoctor", pkg, symlinks=False, copy_function=lambda s, d: Path(d).symlink_to(s),
                    ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(ROOT / "tools", pkg / "tools", copy_function=lambda s, d: Path(d).symlink_to(s),
                    ignore=shutil.ignore_patterns("__pycache__"))
    return tmp


def test_import_contracts_are_kept(tmp_path: Path) -> None:
    root = _mirror(tmp_path)
    lint = Path(sys.executable).with_name("lint-imports")
    res = subprocess.run([str(lint), str(ROOT / "pyproject.toml"), "--no-cache"], cwd=root,
                         env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"}, capture_output=True, text=True,
                         timeout=300)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-2000:]
    assert "0 broken" in res.stdout and "Contracts: 5 kept" in res.stdout
