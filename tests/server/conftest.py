"""Fixtures for the server/measure/fingerprint tests: a LocalHost context that finds the fake SGLang."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from specdoctor.host import LocalHost
from specdoctor.inference import get_engine
from specdoctor.toolkit import ToolContext, registry

from .helpers import FAKE

SGLANG = get_engine("sglang")  # these tools act on an SGLang checkout: no detection from stray processes


@pytest.fixture
def local_ctx(tmp_path) -> Iterator[ToolContext]:
    """A LocalHost context whose python finds the fake `sglang` package; stops every server it started."""
    host = LocalHost(base_env={"PYTHONPATH": str(FAKE), "HOME": str(tmp_path), "FAKE_MS_PER_TOKEN": "1"})
    ctx = ToolContext(host=host, run_id="t", auto_approve=True, run_engine=SGLANG)
    try:
        yield ctx
    finally:
        registry.call(ctx, "stop_server", {"grace_s": 3})
