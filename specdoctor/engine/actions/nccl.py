"""Promote the NCCL sweep's significant winners to an end-to-end A/B (the tool proves propagation first)."""

from __future__ import annotations

from typing import Any

from specdoctor.engine.actions import ActionOutcome, action, call_tool
from specdoctor.engine.state import Decision, StateView
from specdoctor.toolkit import registry
from specdoctor.tools.nccl import NcclSweep
from specdoctor.tools.nccl_promote import DEBUG_ENV, NcclPromotion
from specdoctor.tools.server import Propagation

__all__ = ["promote_nccl"]


@action("disrupt")
def promote_nccl(deps, view: StateView, step, args: dict[str, Any]) -> ActionOutcome:
    """Relaunch under each configuration the comparator called better, prove the workers see it, compare."""
    out = ActionOutcome()
    sweep = view.result("nccl", NcclSweep)
    results = sweep.results if sweep is not None else []
    candidates: list[dict[str, Any]] = [{"label": r.label, "env": r.env} for r in results if r.promote]
    # Also try each single variable of a promoted setting on its own: the one doing the work may be alone.
    singles = [r for r in results if len(r.env) == 1]
    for c in list(candidates):
        for k, v in c["env"].items():
            single = next((r for r in singles if r.env == {k: v}), None)
            if single and single.label not in {x["label"] for x in candidates}:
                candidates.append({"label": single.label, "env": single.env})
    launch = view.get("facts.launch")
    current = _workers_nccl(view)
    good = _good_nccl(view)
    # The workers' current setting is the reference; 'remove' and 'as in the good run' join a promotion that runs
    # anyway, and a good run whose NCCL setting differs from today's is a reason to run one.
    if not launch or not (candidates or (good is not None and good != current)):
        out.status = "skipped"
        out.summary = ("no NCCL configuration was significantly better than the default" if launch
                       else "no launch command to relaunch with")
        out.decisions.append(Decision(step=step.id, title=step.title, status="skipped", checked="sweep winners",
                                      found=out.summary, decided="no end-to-end A/B",
                                      why="only comparator-DIFFERENT (better) settings are promoted"))
        return out
    res = call_tool(deps, "nccl_promote", {
        "command": launch, "candidates": candidates, "current": current, "good": good,
        "not_removable": _not_removable(view),
        "python": view.params.get("python"),
        "port": view.params.get("promote_port") or view.get("facts.trial_port"), "runs": view.params.get("runs", 5)}, out.results, key=step.id)
    o = registry.typed_output(res, NcclPromotion, where=step.id)
    out.status, out.summary = res.status, res.summary
    best = o.best if o is not None else None
    out.facts["nccl"] = {"best": best, "best_gain_pct": o.best_gain_pct if o is not None else None,
                         "launcher_drops": o.launcher_drops if o is not None else None,
                         "env": o.best_env if o is not None else None, "unset": o.best_unset if o is not None else []}
    out.decisions.append(Decision(
        step=step.id, title=step.title, tool="nccl_promote", status=res.status,
        checked=f"end-to-end A/B of {', '.join(c['label'] for c in candidates)}", found=res.summary,
        decided=f"recommend {best}" if best else "no recommendation",
        why=((o.launcher_report or "") + (" " + o.where_to_set if best else "")) if o is not None else "",
        evidence=[e.command for e in res.evidence][:40]))
    return out


def _workers_nccl(view: StateView) -> dict[str, str]:
    """The NCCL variables the running server's workers have now (/proc, via the propagation table); what the
    engine forces itself and the debug switches the A/B adds are not settings to compare."""
    prop = view.latest(Propagation)
    out: dict[str, str] = {}
    for row in prop.rows if prop else []:
        values = [v for v in row.workers.values() if v is not None]
        if row.name.startswith("NCCL_") and values and not row.forced_by_sglang and row.name not in DEBUG_ENV \
                and "REDACTED" not in values[0]:
            out[row.name] = max(set(values), key=values.count)
    return out


def _good_nccl(view: StateView) -> dict[str, str] | None:
    """The good run's workers' NCCL variables (its fingerprint), when one was given as data."""
    good = view.params.get("good_fingerprint")
    env = good.get("worker_env") if isinstance(good, dict) else None
    if not isinstance(env, dict):
        return None
    if env and all(isinstance(v, dict) for v in env.values()):  # per rank: rank 0's view
        env = env[sorted(env, key=lambda k: (len(str(k)), str(k)))[0]]
    return {str(k): str(v) for k, v in env.items() if str(k).startswith("NCCL_") and v is not None
            and str(k) not in DEBUG_ENV}


def _not_removable(view: StateView) -> list[str]:
    """Variables set inside every process (sitecustomize.py, nccl.conf): a relaunch without them still has them."""
    prop = view.latest(Propagation)
    return sorted(r.name for r in prop.rows if r.from_sitecustomize or r.from_nccl_conf) if prop else []
