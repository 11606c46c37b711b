"""Fixtures for the NCCL tests: a LocalHost whose PATH has the test all_reduce_perf, HOME in tmp.

The engine is named (SGLang, as the launch lines here are): found from this machine's processes it would depend on
what other tests happen to be serving at the time."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from specdoctor.host import LocalHost
from specdoctor.inference import get_engine
from specdoctor.toolkit import ToolContext

BIN = Path(__file__).parent / "bin"
FIXTURES = Path(__file__).parent.parent / "fixtures" / "nccl"


@pytest.fixture
def fixture_text():
    """Read a copied nccl sample by file name."""
    return lambda name: (FIXTURES / name).read_text()


@pytest.fixture
def perf_ctx(tmp_path) -> ToolContext:
    """A context on this machine where `all_reduce_perf` is the env-sensitive test stand-in."""
    host = LocalHost(base_env={"PATH": f"{BIN}:{os.environ['PATH']}", "HOME": str(tmp_path)})
    return ToolContext(host=host, run_id="t", run_engine=get_engine("sglang"))


@pytest.fixture
def bare_ctx(tmp_path) -> ToolContext:
    """A context on this machine with no all_reduce_perf on PATH (the torchrun harness is used)."""
    path = os.pathsep.join(p for p in os.environ["PATH"].split(os.pathsep) if not (Path(p) / "all_reduce_perf").exists())
    host = LocalHost(base_env={"PATH": path, "HOME": str(tmp_path)})
    return ToolContext(host=host, run_id="t", run_engine=get_engine("sglang"))
