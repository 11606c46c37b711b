"""Promote the NCCL sweep's significant winners to an end-to-end A/B (the tool proves propagation first)."""

from __future__ import annotations

from typing import Any

from specdoctor.engine.actions import ActionOutcome, action, call_tool
from specdoctor.engine.state import Decision, StateView

__all__ = ["promote_nccl"]


@action("disrupt")
def promote_nccl(deps, view: StateView, step, args: dict[str, Any]) -> ActionOutcome:
    """Relaunch under each configuration the comparator called better, prove the workers see it, compare."""
    out = ActionOutcome()
    sweep = view.output("nccl") or {}
    results = sweep.get("results") or []
    candidates = [{"label": r.get("label"), "env": r.get("env") or {}} for r in results if r.get("promote")]
    # Also try each single variable of a promoted setting on its own: the one doing the work may be alone.
    singles = {r.get("label"): r for r in results if len(r.get("env") or {}) == 1}
    for c in list(candidates):
        for k, v in c["env"].items():
            single = next((r for r in singles.values() if (r.get("env") or {}) == {k: v}), None)
            if single and single.get("label") not in {x["label"] for x in candidates}:
                candidates.append({"label": single.get("label"), "env": single.get("env") or {}})
    launch = view.get("facts.launch")
    if not candidates or not launch:
        out.status = "skipped"
        out.summary = ("no NCCL configuration was significantly better than the default" if launch
                       else "no launch command to relaunch with")
        out.decisions.append(Decision(step=step.id, title=step.title, status="skipped", checked="sweep winners",
                                      found=out.summary, decided="no end-to-end A/B",
                                      why="only comparator-DIFFERENT (better) settings are promoted"))
        return out
    res = call_tool(deps, "nccl_promote", {
        "command": launch, "candidates": candidates, "python": view.params.get("python"),
        "port": view.params.get("promote_port") or view.get("facts.trial_port"), "runs": view.params.get("runs", 5)}, out.results, key=step.id)
    o = res.output or {}
    out.status, out.summary = res.status, res.summary
    out.facts["nccl"] = {"best": o.get("best"), "best_gain_pct": o.get("best_gain_pct"),
                         "launcher_drops": o.get("launcher_drops"),
                         "env": next((c["env"] for c in candidates if c["label"] == o.get("best")), None)}
    out.decisions.append(Decision(
        step=step.id, title=step.title, tool="nccl_promote", status=res.status,
        checked=f"end-to-end A/B of {', '.join(c['label'] for c in candidates)}", found=res.summary,
        decided=(f"recommend {o.get('best')}" if o.get("best") else "no recommendation"),
        why=(o.get("launcher_report") or "") + (" " + o.get("where_to_set", "") if o.get("best") else ""),
        evidence=[e.command for e in res.evidence][:40]))
    return out
