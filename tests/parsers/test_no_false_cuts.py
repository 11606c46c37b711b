"""Must-not-fire: every real sample parses without a 'truncated' problem unless the file really is cut.

The cut checks follow each format's own structure (a row short of its header's cells, a block without its closing
rule, a line without its closing field); real text that is only padded, repeated or wide must not trip them.
Each file listed in REALLY_CUT was read: the text stops before the structure closes, for the reason given.
"""

from __future__ import annotations

import pytest

from .cases import CASES, fixture_text, problems_of
from .holdout import KIND_PARSERS, kinds

BY_NAME = {c.name: c for c in CASES}

_STOPS = "the excerpt stops inside the result block, before its closing '=====' rule"
REALLY_CUT: dict[str, str] = {
    "real/bench/deepgemm-pr183-sglang-sbo-bs32-origin-EXCERPT.txt": _STOPS + " (after 'P99 ITL'; index cut 'Max ITL')",
    "real/bench/rocm-vllm-pr920-indented-failed-maxconc-EXCERPT.txt": _STOPS + " (first 3 rows only)",
    "real/bench/sglang-issue6681-v0.4.3-reqeuest-typo-rate-128-EXCERPT.txt": _STOPS + " (at the E2E section rule)",
    "real/bench/sglang-pr23753-gsp-max-concurrency-16-peak-EXCERPT.txt": _STOPS + " (after 'Output token throughput')",
    "real/bench/sglang-pr9428-fa4-bench-one-batch-serving-block-EXCERPT.txt": _STOPS + " (after 'P99 ITL')",
    "real/bench/sglang-pr9812-bench-serving-vllm-chat-backend-vision-EXCERPT.txt": _STOPS + " (after 'Mean ITL')",
    "real/bench/vllm-pr10880-tqdm-bar-glued-to-header-EXCERPT.txt": _STOPS + " (after 'Output token throughput')",
    "real/bench/vllm-pr35714-peak-rows-two-blocks-EXCERPT.txt": "the second block stops after its first row",
    "samples/sglang-bench/v0.2-2024-08-h100-random-3000-oldest-layout.txt":
        "the copied docs range (lines 199-226) ends at 'P99 ITL', before the block's closing rule",
    "samples/sglang-bench/v0.3.x-2024-10-vllm-style-layout-no-backend-line-EXCERPT.txt": _STOPS + " (after TPOT)",
    "samples/sglang-bench/v0.4.0.post2-2025-01-typo-reqeuest-failed-requests-EXCERPT.txt": _STOPS + " (after TTFT)",
    "samples/sglang-bench/v0.5.6-2025-12-ascii-plot-before-result-block-EXCERPT.txt": _STOPS + " (2 rows only)",
    "samples/sglang-bench/v0.5.x-2025-antgroup-fork-terminal-padded-trailing-whitespace-EXCERPT.txt":
        _STOPS + " (first 7 lines)",
}


def _samples() -> list[tuple[str, str]]:
    return [(rel, name) for kind, files in kinds().items() if kind.startswith(("samples/", "real/"))
            for rel in files for name in KIND_PARSERS[kind]]


def _cuts(rel: str, name: str) -> list[str]:
    try:
        result = BY_NAME[name].parse(fixture_text(rel))
    except Exception:  # noqa: BLE001 - a parser refusing another kind's file says nothing about cuts
        return []
    return [p for p in problems_of(result) if "truncated" in p]


@pytest.mark.parametrize(("rel", "name"), _samples())
def test_real_sample_reads_without_a_false_cut(rel, name):
    cuts = _cuts(rel, name)
    if rel in REALLY_CUT:
        return
    assert not cuts, f"{name} says {rel} is cut, but it is whole: {cuts[:2]}"


@pytest.mark.parametrize("rel", sorted(REALLY_CUT))
def test_really_cut_sample_is_reported(rel):
    kind = rel.rsplit("/", 1)[0]
    assert any(_cuts(rel, name) for name in KIND_PARSERS[kind]), f"{rel} is cut ({REALLY_CUT[rel]}), not reported"
