"""Fixtures for the GPU-validation prep tests: the benchmark modules (they live in benchmarks/, not a package)."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _load(name: str) -> ModuleType:
    bench = str(ROOT / "benchmarks")
    if bench not in sys.path:
        sys.path.insert(0, bench)
    return importlib.import_module(name)


@pytest.fixture(scope="session", autouse=True)
def _one_torch_thread() -> None:
    """The tiny model is far too small for intra-op threads; on a busy 2-core box they only add spin waits."""
    import torch

    torch.set_num_threads(1)


@pytest.fixture(scope="session")
def spec_model() -> ModuleType:
    """benchmarks/spec_model.py."""
    return _load("spec_model")


@pytest.fixture(scope="session")
def validation() -> ModuleType:
    """benchmarks/spec_model_validation.py."""
    return _load("spec_model_validation")


@pytest.fixture(scope="session")
def root() -> Path:
    return ROOT
