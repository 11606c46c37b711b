"""The action catalogue (`engine/actions/catalogue.py`) lists every `@action` function, and nothing registers an
action by being imported (the package's registration import made an import circle with each action module)."""

from __future__ import annotations

import importlib
import pkgutil
import subprocess
import sys
from pathlib import Path

import specdoctor.engine.actions as actions
from specdoctor.engine.actions import action_spec
from specdoctor.engine.actions.catalogue import ACTIONS


def test_the_catalogue_lists_every_declared_action() -> None:
    declared = {}
    for info in pkgutil.iter_modules([str(Path(actions.__file__).parent)]):
        mod = importlib.import_module(f"specdoctor.engine.actions.{info.name}")
        for value in vars(mod).values():
            spec = action_spec(value) if callable(value) else None
            if spec is not None and value.__module__ == mod.__name__:
                declared[spec.name] = spec
    assert declared == ACTIONS
    assert all(name == spec.fn.__name__ for name, spec in ACTIONS.items())


def test_importing_the_actions_package_imports_no_action_module() -> None:
    code = ("import sys, specdoctor.engine.actions\n"
            "print(sorted(m for m in sys.modules if m.startswith('specdoctor.engine.actions.')))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "[]"
