"""Fixtures for the server/measure/fingerprint tests: a LocalHost context that finds the fake SGLang."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from specdoctor.host import LocalHost
from specdoctor.toolkit import ToolContext, registry

from .helpers import FAKE


@pytest.fixture
def local_ctx(tmp_path) -> Iterator[ToolContext]:
    """A LocalHost context whose python finds the fake `sglang` package; stops every server it started."""
    host = LocalHost(base_env={"PYTHONPATH": str(FAKE), "HOME": str(tmp_path), "FAKE_MS_PER_TOKEN": "1"})
    ctx = ToolContext(host=host, run_id="t", auto_approve=True)
    try:
        yield ctx
    finally:
        registry.call(ctx, "stop_server", {"grace_s": 3})
