"""An embedding script names its engine as `--engine` does: no guess from the host's processes."""

from __future__ import annotations

import pytest

import specdoctor


@pytest.mark.parametrize("name", ["sglang", "vllm"])
def test_connect_names_the_engine_every_tool_then_speaks(name: str) -> None:
    with specdoctor.connect("local", engine=name) as client:
        assert client.ctx.run_engine is not None and client.ctx.engine.name == name


def test_an_unknown_engine_is_refused_before_anything_runs() -> None:
    with pytest.raises(ValueError, match="unknown inference engine 'nope'"):
        specdoctor.connect("local", engine="nope")
