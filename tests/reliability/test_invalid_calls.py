"""Embedding agents' invalid tool calls come back as validation errors and never run a command."""

from __future__ import annotations

from .invalid_calls import invalid_calls, run_invalid_campaign


def test_every_tool_rejects_invalid_arguments_without_running_anything():
    results = run_invalid_campaign()
    assert len(results) >= 100 and len({r.tool for r in results}) >= 20
    bad = [r for r in results if r.status != "error" or r.ran]
    assert not bad, bad[:10]


def test_the_campaign_covers_missing_wrong_type_and_non_json():
    kinds = [a for _t, a in invalid_calls()]
    assert "{not json" in kinds and "[1, 2, 3]" in kinds
    assert any("$(id)" in a for a in kinds) and any("nested" in a for a in kinds)
