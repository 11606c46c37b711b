"""Promote the NCCL sweep's significant winners to an end-to-end A/B (the tool proves propagation first)."""

from __future__ import annotations

import statistics
from typing import Any, NamedTuple

from specdoctor.engine.actions import ActionOutcome, action, run_tool
from specdoctor.engine.actions.measure import good_run
from specdoctor.engine.state import Decision, StateView
from specdoctor.models import Fingerprint, NcclFact
from specdoctor.models.delta import CauseFact, norm_value
from specdoctor.models.facts import ClaimFact, Claims
from specdoctor.stats.comparator import compare_to_claim
from specdoctor.toolkit import ToolResult
from specdoctor.tools.nccl.nccl import NcclSweep
from specdoctor.tools.nccl.nccl_promote import (
    DEBUG_ENV,
    NcclPromotion,
    PromotedResult,
    PromoteInput,
    nccl_promote,
    planned_launches,
)
from specdoctor.tools.serving.server import Propagation

__all__ = ["promote_nccl", "nccl_cause", "promote_launches"]


@action("disrupt")
def promote_nccl(deps, view: StateView, step, args: dict[str, Any]) -> ActionOutcome:
    """Relaunch under each configuration the comparator called better, prove the workers see it, compare."""
    out = ActionOutcome()
    launch = view.run_facts.launch
    good_fp = good_run(deps, view)
    request, held = _promote_request(view, good_fp)
    if request is None:
        return _nothing_to_promote(out, step, launch, held)
    current, good, candidates = request["current"], request["good"], request["candidates"]
    called = run_tool(deps, nccl_promote, request, out.results, key=step.id)
    res, o = called.result, called.output
    out.status, out.summary = res.status, res.summary
    out.facts.nccl = _promotion_fact(o)
    cause = nccl_cause(view, o, current, good, good_fp) if o is not None else None
    if cause is not None:
        out.facts.nccl_cause = cause
    out.decisions.append(_promotion_decision(step, res, o, candidates, cause))
    return out


def _promote_request(view: StateView, good_fp: dict[str, Any] | None
                     ) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    """nccl_promote's arguments as the step will pass them (None: nothing to promote), and the winners held back."""
    candidates = _sweep_candidates(view.result("nccl", NcclSweep))
    launch = view.run_facts.launch
    current = _workers_nccl(view)
    # A variable a sitecustomize.py sets inside every Python process overrides whatever a relaunch passes: a
    # setting that changes it cannot be tried end to end (its fix is that file, named by the propagation step).
    fixed = _set_by_sitecustomize(view)
    held = [c for c in candidates if any(k in fixed and current.get(k) != v for k, v in c["env"].items())]
    candidates = [c for c in candidates if c not in held]
    good = _good_nccl(view, good_fp)
    # The workers' current setting is the reference; 'remove' and 'as in the good run' join a promotion that runs
    # anyway, and a good run whose NCCL setting differs from today's is a reason to run one.
    if not launch or not (candidates or (good is not None and good != current)):
        return None, held
    return {"command": launch, "candidates": candidates, "current": current, "good": good,
            "not_removable": _not_removable(view), "reference_first": not _launcher_drops(view),
            "python": view.params.python,
            "port": view.params.promote_port or view.run_facts.trial_port,
            "runs": view.params.runs}, held


def promote_launches(deps: Any, view: StateView) -> int:
    """The launches the NCCL promotion step will make if it runs (the plan's rule, read before the stop): the
    current setting once, then one per candidate (0: nothing to promote)."""
    request, _held = _promote_request(view, good_run(deps, view))
    return 0 if request is None else planned_launches(PromoteInput.model_validate(request))


def _sweep_candidates(sweep: NcclSweep | None) -> list[dict[str, Any]]:
    """The sweep's promoted settings, then each single change of one of them that the sweep also ran alone."""
    results = sweep.results if sweep is not None else []
    candidates: list[dict[str, Any]] = [{"label": r.label, "env": r.env, "unset": r.unset}
                                        for r in results if r.promote]
    # Also try each single change of a promoted setting on its own (relative to the sweep's reference, the workers'
    # current setting): the one doing the work may be alone.
    ref = sweep.reference_env if sweep is not None else {}

    def changes(r: Any) -> dict[str, str]:
        return {k: v for k, v in r.env.items() if ref.get(k) != v}

    singles = [r for r in results if len(changes(r)) == 1 and not r.unset]
    for c in list(candidates):
        for k, v in c["env"].items():
            if ref.get(k) == v:
                continue
            single = next((r for r in singles if changes(r) == {k: v}), None)
            if single and single.label not in {x["label"] for x in candidates}:
                candidates.append({"label": single.label, "env": single.env, "unset": single.unset})
    return candidates


def _nothing_to_promote(out: ActionOutcome, step, launch: Any, held: list[dict[str, Any]]) -> ActionOutcome:
    """Skipped: no launch line, only winners a sitecustomize.py overrides, or no winner at all."""
    out.status = "skipped"
    out.summary = ("no launch command to relaunch with" if not launch else
                   "the sweep's winners change a variable sitecustomize.py sets in every process, so a relaunch "
                   "cannot try them: " + ", ".join(c["label"] for c in held) if held else
                   "no NCCL configuration was significantly better than the default")
    out.decisions.append(Decision(step=step.id, title=step.title, status="skipped", checked="sweep winners",
                                  found=out.summary, decided="no end-to-end A/B",
                                  why="only comparator-DIFFERENT (better) settings are promoted"))
    return out


def _promotion_fact(o: NcclPromotion | None) -> NcclFact:
    """The `nccl` fact: the recommended setting and its gain (all None when the promotion returned nothing)."""
    return NcclFact.model_validate({
        "best": o.best if o is not None else None, "best_gain_pct": o.best_gain_pct if o is not None else None,
        "launcher_drops": o.launcher_drops if o is not None else None,
        "env": o.best_env if o is not None else None, "unset": o.best_unset if o is not None else []})


def _promotion_decision(step, res: ToolResult, o: NcclPromotion | None, candidates: list[dict[str, Any]],
                        cause: CauseFact | None) -> Decision:
    best = o.best if o is not None else None
    return Decision(
        step=step.id, title=step.title, tool="nccl_promote", status=res.status,
        checked=f"end-to-end A/B of {', '.join(c['label'] for c in candidates)}", found=res.summary,
        decided=(f"recommend {best}" if best else "no recommendation")
        + (f"; cause of the gap: {cause.name} ({cause.effect_tps:+.1f} tok/s)" if cause is not None
           and cause.effect_tps is not None else ""),
        why=((o.launcher_report or "") + (" " + o.where_to_set if best else "")) if o is not None else "",
        evidence=[e.command for e in res.evidence][:40])


def _claimed_figure(view: StateView, good: dict[str, Any] | None) -> tuple[float, str] | None:
    """The figure the end-to-end A/B is compared with: the user's claimed speculative tok/s, else the good run's."""
    claimed = (view.params.expect or {}).get("spec")
    if claimed is not None:
        return float(claimed), "claims"
    meas = good.get("measurements") if isinstance(good, dict) else None
    if isinstance(meas, dict) and meas.get("spec_tps") is not None:
        return float(meas["spec_tps"]), "good run"
    return None


def _good_nccl_version(good: dict[str, Any] | None) -> str | None:
    if not isinstance(good, dict):
        return None
    value = good.get("nccl_version", good.get("nccl"))
    return norm_value(value)


class _Change(NamedTuple):
    """What the winner changes against the workers' setting, in the words its cause is named with."""

    changed: dict[str, str]
    removed: list[str]
    what: str
    fix: str | None


class _Basis(NamedTuple):
    """What every cause the winner can be named as shares: the change, the settings compared, the evidence."""

    change: _Change
    current: dict[str, str]
    good: dict[str, str] | None
    label: str
    versions: tuple[str | None, str | None]
    effect: dict[str, float | None]
    evidence: list[str]


def nccl_cause(view: StateView, o: NcclPromotion, current: dict[str, str], good: dict[str, str] | None,
               good_fp: dict[str, Any] | None) -> CauseFact | None:
    """The promoted setting as a cause of the gap, when it closes it: a claim is not reproduced today (comparator
    DIFFERENT, slower) and the winner's gain over the workers' setting reaches the speculative gap (the gap is not
    larger than the gain's CI allows: SAME or faster), or, with no claims checked, its runs reach the figure. `software` when the NCCL
    version changed since the good run (its default choice moved), `env` when the winner replaces or removes a
    variable the workers have now, or restores one the good run had. None otherwise (claims already reproduced,
    no winner, or nothing to name)."""
    figure = _claimed_figure(view, good_fp)
    winner = next((r for r in o.results if r.label == o.best), None) if o.best else None
    if figure is None or winner is None or len(winner.samples) < 3 or len(o.baseline_samples) < 3:
        return None
    claimed, label = figure
    now = compare_to_claim(o.baseline_samples, claimed)
    claims = (view.fact("claims", Claims) or Claims({})).root
    slower = [k for k, c in claims.items() if c.outcome == "DIFFERENT" and (c.pct_change or 0) < 0]
    gap = bool(slower) if claims else now.outcome == "DIFFERENT" and now.median < claimed
    if not gap:
        return None  # the claims are reproduced today: nothing for a setting to explain
    closes, closing = _closes_gap(o, winner, claims.get("spec"), claimed)
    if not closes:
        return None  # the winner helps but does not close the gap: a tuning, not the cause
    change = _winner_change(view, o, current)
    fp = view.result("fingerprint", Fingerprint)
    versions = _good_nccl_version(good_fp), norm_value(fp.nccl_version) if fp is not None else None
    effect = _effect(winner)
    evidence = [f"nccl_promote: {o.reference} {statistics.median(o.baseline_samples):.1f} tok/s vs {winner.label} "
                f"{statistics.median(winner.samples):.1f} tok/s ({winner.outcome}, {winner.pct_change:+.1f} %)",
                f"claimed spec {claimed:g} ({label}): {closing}"
                + (f"; claims not reproduced today: {', '.join(slower)}" if slower else "")]
    return _named_cause(_Basis(change, current, good, label, versions, effect, evidence))


def _closes_gap(o: NcclPromotion, winner: PromotedResult, spec: ClaimFact | None,
                claimed: float) -> tuple[bool, str]:
    """Whether the winner closes the gap to the claim, and the sentence saying how that was read."""
    base = statistics.median(o.baseline_samples)
    hi_pct = 100.0 * (winner.delta_ci or (0.0, 0.0))[1] / base if base else 0.0
    if spec is not None and spec.pct_change is not None and spec.pct_change > -100:
        # Like with like: the gap is today's speculative figure (as the claims were checked) vs the claim, the
        # effect is the winner vs the workers' setting in the same kind of launch; ratios, so that a trial launch
        # beside the user's server and the user's server itself need not read the same absolute tok/s.
        gap_pct = 100.0 * (1.0 / (1.0 + spec.pct_change / 100.0) - 1.0)
        # Today's figure has its own CI: the gap is as small as the claim over its upper end.
        gap_lo = 100.0 * (claimed / spec.ci_high - 1.0) if spec.ci_high else gap_pct
        return hi_pct >= min(gap_pct, gap_lo), (
            f"the gap to the claim is {gap_pct:+.1f} % (at least {min(gap_pct, gap_lo):+.1f} % by today's "
            f"95 % CI), the winner's gain up to {hi_pct:+.1f} % (95 % CI)")
    fixed = compare_to_claim(winner.samples, claimed)
    return (fixed.outcome == "SAME" or fixed.median >= claimed,
            f"with the winner the claim is {fixed.outcome} ({fixed.median:.1f} tok/s vs {claimed:g})")


def _winner_change(view: StateView, o: NcclPromotion, current: dict[str, str]) -> _Change:
    """The winner's variables set or removed against the workers' own, and the launch line that applies them."""
    changed = {k: v for k, v in (o.best_env or {}).items() if current.get(k) != v}
    removed = [n for n in o.best_unset if n in current]
    setting = " ".join([*(f"-u {n}" for n in removed), *(f"{k}={v}" for k, v in sorted(changed.items()))])
    launch = view.run_facts.launch
    fix = (f"env {setting}" + (f" {launch}" if isinstance(launch, str) and launch else "")) if setting else None
    what = " ".join([*(f"{k}={v}" for k, v in sorted(changed.items())), *(f"{n} removed" for n in removed)])
    return _Change(changed, removed, what, fix)


def _effect(winner: PromotedResult) -> dict[str, float | None]:
    """The cause's effect: what the winner's speed-up costs today (minus its delta and CI)."""
    lo, hi = winner.delta_ci or (None, None)
    return {"effect_tps": -(winner.delta or 0.0), "ci_low": -hi if hi is not None else None,
            "ci_high": -lo if lo is not None else None}


def _named_cause(b: _Basis) -> CauseFact | None:
    """The cause in words: a workers' variable the winner replaces (several replaced at once: an unconfirmed cause
    naming them all, for the revert trials to split — one trial cannot clear the ones that rode along), else the
    NCCL version that moved, else a variable the good run had; None when none of these names it."""
    changed, removed, what, fix = b.change
    current, good, label, effect, evidence = b.current, b.good, b.label, b.effect, b.evidence
    replaced = removed + [k for k in changed if k in current]
    restored = [k for k in changed if good is not None and good.get(k) == changed[k]]
    then, today = b.versions
    if len(replaced) == 1:
        key = replaced[0]
        return CauseFact(name=f"{key}={current[key]} in the workers' environment; {what} restores", kind="env",
                         key=key, metric="spec", confirmed=True, method="revert-trial", fix=fix, evidence=evidence,
                         detail=f"the workers run {_pairs(current)}; {what} reaches the {label} figure", **effect)
    if replaced:  # one trial changed them together: it cannot say which matters (an innocent one rode along)
        names = ", ".join(f"{k}={current[k]}" for k in replaced)
        return CauseFact(name=f"one of {names} in the workers' environment; {what} restores", kind="env",
                         key=",".join(replaced), metric="spec", confirmed=False, method="revert-trial", fix=fix,
                         evidence=evidence, detail=f"the workers run {_pairs(current)}; {what} together reaches the "
                         f"{label} figure: the revert trials single out which of them it is", **effect)
    if then and today and then != today:
        return CauseFact(name=f"NCCL {then} → {today} (its default {', '.join(k.removeprefix('NCCL_') for k in changed)} "
                         f"choice); {what} restores", kind="software", key="nccl", metric="spec", confirmed=True,
                         method="revert-trial", fix=fix, evidence=evidence,
                         detail=f"NCCL {today} with the workers' setting ({_pairs(current) or 'NCCL defaults'}) is "
                                f"slower than the {label} figure; {what} reaches it", **effect)
    if restored:
        return CauseFact(name=f"{', '.join(restored)} missing from the workers (the good run had it); {what} restores",
                         kind="env", key=restored[0], metric="spec", confirmed=True, method="revert-trial", fix=fix,
                         evidence=evidence, detail=f"the good run's workers had {_pairs(good or {})}", **effect)
    return None


def _pairs(env: dict[str, str]) -> str:
    return " ".join(f"{k}={v}" for k, v in sorted(env.items()))


def _workers_nccl(view: StateView) -> dict[str, str]:
    """The NCCL variables the running server's workers have now (/proc, via the propagation table); what the
    engine forces itself and the debug switches the A/B adds are not settings to compare."""
    prop = view.latest(Propagation)
    out: dict[str, str] = {}
    for row in prop.rows if prop else []:
        values = [v for v in row.workers.values() if v is not None]
        if row.name.startswith("NCCL_") and values and not row.forced_by_engine and row.name not in DEBUG_ENV \
                and "REDACTED" not in values[0]:
            out[row.name] = max(set(values), key=values.count)
    return out


def _good_nccl(view: StateView, good: dict[str, Any] | None) -> dict[str, str] | None:
    """The good run's workers' NCCL variables (its fingerprint); a variable the engine forces today to the same
    value is not a setting to compare (a relaunch gets it anyway)."""
    env = good.get("worker_env") if isinstance(good, dict) else None
    if not isinstance(env, dict):
        return None
    if env and all(isinstance(v, dict) for v in env.values()):  # per rank: rank 0's view
        env = env[sorted(env, key=lambda k: (len(str(k)), str(k)))[0]]
    prop = view.latest(Propagation)
    forced = {r.name: [v for v in r.workers.values() if v is not None] for r in (prop.rows if prop else [])
              if r.forced_by_engine}
    return {str(k): str(v) for k, v in env.items() if str(k).startswith("NCCL_") and v is not None
            and str(k) not in DEBUG_ENV and not (str(k) in forced and str(v) in forced[str(k)])}


def _launcher_drops(view: StateView) -> bool:
    """The propagation table shows variables the workers lost: the first relaunch must prove propagation first."""
    prop = view.latest(Propagation)
    return prop is not None and any(r.status == "dropped-for-workers" for r in prop.rows)


def _set_by_sitecustomize(view: StateView) -> set[str]:
    prop = view.latest(Propagation)
    return {r.name for r in prop.rows if r.from_sitecustomize} if prop else set()


def _not_removable(view: StateView) -> list[str]:
    """Variables set inside every process (sitecustomize.py, nccl.conf): a relaunch without them still has them."""
    prop = view.latest(Propagation)
    return sorted(r.name for r in prop.rows if r.from_sitecustomize or r.from_nccl_conf) if prop else []
