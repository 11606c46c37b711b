"""What is identical to the reference needs no trial: digests compared, and claims already settled, before the stop.

Decided once, read-only, before the plan is printed (the plan step records `facts.identity`); the predicates that
gate the launching steps and the plan's count read the same record, so the dry run and the run agree.
"""

from __future__ import annotations

from typing import Any

from specdoctor.engine.state import StateView
from specdoctor.models import Claims, Fingerprint
from specdoctor.models.identity import IdentityFact, Sameness
from specdoctor.tools.environment.digests import env_digest, launch_digest

__all__ = ["RUNNING_SERVER_KEYS", "decide_identity", "identity_of"]

RUNNING_SERVER_KEYS = frozenset({"spec", "accept_len", "tpot_ms"})
"""Claims the running speculative server measures by itself (a baseline claim needs a launch without speculation;
verify/draft times come from the phase profile, which runs later)."""


def _same(a: str | None, b: str | None) -> Sameness:
    if not a or not b:
        return "unknown"
    return "identical" if a == b else "differs"


def _short(d: str | None) -> str:
    return d[:12] if d else "none"


def _claims_hold(view: StateView, expected: set[str]) -> tuple[bool, str]:
    claims = (view.fact("claims", Claims) or Claims({})).root
    if not claims or not expected:
        return False, "no claim was judged on the running server"
    if not expected <= RUNNING_SERVER_KEYS:
        return False, f"{', '.join(sorted(expected - RUNNING_SERVER_KEYS))} needs a launch to be measured"
    missing = expected - set(claims)
    if missing:
        return False, f"{', '.join(sorted(missing))} not measured on the running server"
    bad = [k for k, c in claims.items() if c.not_reached or c.outcome not in ("SAME", "DIFFERENT")]
    if bad:
        return False, f"{', '.join(bad)} not reproduced (or undecided) on the running server"
    return True, "every claim holds on the running server: " + ", ".join(
        f"{k} {c.claimed:g} {c.unit} → {c.outcome}" for k, c in claims.items() if c.claimed is not None)


def decide_identity(view: StateView, good: dict[str, Any] | None, expected: set[str]) -> IdentityFact:
    """Today's fingerprint and the running server against the good run's; `expected` are the claimed keys."""
    fp = view.latest(Fingerprint)
    out = IdentityFact()
    if isinstance(good, dict) and fp is not None:
        today_launch = fp.launch_digest or launch_digest(view.run_facts.launch)
        ref_launch = good.get("launch_digest") or launch_digest(good.get("launch"))
        ref_env = good.get("env_digest") or (env_digest(good["worker_env"]) if isinstance(good.get("worker_env"),
                                                                                        dict) else None)
        out.code = _same(fp.code_digest, good.get("code_digest"))
        out.launch = _same(today_launch, ref_launch)
        out.env = _same(fp.env_digest, ref_env)
        out.notes.append(f"code digest {_short(fp.code_digest)} vs the good run's {_short(good.get('code_digest'))}: "
                         f"{out.code}")
        out.notes.append(f"launch line (port, host aside) {_short(today_launch)} vs {_short(ref_launch)}: {out.launch}")
        out.notes.append(f"workers' tuning variables {_short(fp.env_digest)} vs {_short(ref_env)}: {out.env}")
    else:
        out.notes.append("no good run's fingerprint to compare digests with: every trial is planned")
    out.claims_hold_running, why = _claims_hold(view, expected)
    out.notes.append(why)
    return out


def identity_of(view: StateView) -> IdentityFact:
    """The recorded decision (an empty one, which spares nothing, before the plan step ran)."""
    return view.fact("identity", IdentityFact) or IdentityFact()

