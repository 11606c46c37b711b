"""A claimed figure against today's measured runs: reproduced, exceeded, or not reached, and in which reading."""

from __future__ import annotations

from typing import Any

from specdoctor.models.facts import MATERIAL_SHORTFALL, Claims
from specdoctor.stats.comparator import compare_to_claim

__all__ = ["claim_outcome", "near_but_loose"]


def claim_outcome(samples: list[float], claimed: float, decode: list[float] | None = None,
                  claim_runs: int | None = None) -> dict[str, Any]:
    """The claim against today's runs. A claim does not say how it was measured: over the whole request (the
    benchmark's tok/s) or with the prefill excluded (a server log's gen throughput, 1/TPOT), which reads a few %
    higher. When the decode-only runs are known, the claim is judged in the reading nearer to it (by at least a
    point when both fall short), so that a definition is never reported as a regression; `basis` says which one,
    `end_to_end` keeps the other. `claim_runs`: see `compare_to_claim` (set when today's reading pooled more runs
    than the claim's)."""
    whole = compare_to_claim(samples, claimed, claim_runs=claim_runs).model_dump()
    whole.update(claimed=claimed, basis="end-to-end")
    if not decode or len(decode) < 3 or whole["outcome"] != "DIFFERENT" or whole["pct_change"] >= 0:
        return whole
    alt = compare_to_claim(decode, claimed, claim_runs=claim_runs).model_dump()
    if alt["outcome"] == "DIFFERENT" and alt["pct_change"] < 0 and alt["pct_change"] - whole["pct_change"] < 1.0:
        return whole  # short in both readings, by about as much (a negligible prefill): the usual reading stands
    alt.update(claimed=claimed, basis="decode",
               end_to_end={k: whole[k] for k in ("median", "pct_change", "outcome")})
    return alt


def near_but_loose(claims: Claims, material: float = MATERIAL_SHORTFALL) -> list[str]:
    """The tok/s claims whose reading is near the claim (its median short by less than a material shortfall) but
    too loose to decide: the interval reaches a material shortfall, or the comparator is undecided. More runs on a
    server that is up decide them for seconds of box time, where the trials a loose claim sets off cost launches.
    A claim bettered, held tightly, or found short (DIFFERENT: decided) needs no more runs."""
    out: list[str] = []
    for key, c in claims.root.items():
        if c.unit != "tok/s" or c.claimed is None or c.median is None or not c.claimed:
            continue
        if c.outcome == "DIFFERENT" and not c.not_reached:
            continue  # bettered
        worst = None if c.ci_low is None else (c.claimed - c.ci_low) / c.claimed
        short_at_median = (c.claimed - c.median) / c.claimed
        loose = c.outcome == "UNKNOWN" or (c.outcome == "SAME" and (worst is None or worst > material))
        if loose and short_at_median < material:
            out.append(key)
    return out
