"""A claimed figure against today's measured runs: reproduced, exceeded, or not reached, and in which reading."""

from __future__ import annotations

from typing import Any

from specdoctor.stats.comparator import compare_to_claim

__all__ = ["claim_outcome"]


def claim_outcome(samples: list[float], claimed: float, decode: list[float] | None = None) -> dict[str, Any]:
    """The claim against today's runs. A claim does not say how it was measured: over the whole request (the
    benchmark's tok/s) or with the prefill excluded (a server log's gen throughput, 1/TPOT), which reads a few %
    higher. When the decode-only runs are known, the claim is judged in the reading nearer to it (by at least a
    point when both fall short), so that a definition is never reported as a regression; `basis` says which one,
    `end_to_end` keeps the other."""
    whole = compare_to_claim(samples, claimed).model_dump()
    whole.update(claimed=claimed, basis="end-to-end")
    if not decode or len(decode) < 3 or whole["outcome"] != "DIFFERENT" or whole["pct_change"] >= 0:
        return whole
    alt = compare_to_claim(decode, claimed).model_dump()
    if alt["outcome"] == "DIFFERENT" and alt["pct_change"] < 0 and alt["pct_change"] - whole["pct_change"] < 1.0:
        return whole  # short in both readings, by about as much (a negligible prefill): the usual reading stands
    alt.update(claimed=claimed, basis="decode",
               end_to_end={k: whole[k] for k in ("median", "pct_change", "outcome")})
    return alt
