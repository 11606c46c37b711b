"""Causes of a gap that need no revert trial: the bisection's confirmed culprits, targeted measurements, /proc.

Both the attribute step (which adds its revert trials) and the verdict (when that step did not run) read them here.
"""

from __future__ import annotations

import shlex
import statistics
from pathlib import PurePosixPath

from specdoctor.diagnosis.facts import Case
from specdoctor.models import CauseFact, SubtractionFact
from specdoctor.stats.comparator import compare
from specdoctor.stats.summary import diff_of_medians_ci
from specdoctor.tools.checkout.bisect import BisectResult

__all__ = ["effect", "revert_patch_command", "non_revertible_causes", "confirming_share", "workload_cause",
           "CODE_CLEARED"]

CODE_CLEARED = "removing every non-essential patch changed nothing (comparator SAME)"
"""Why the local patches need no revert trial when the subtraction cleared them: good news for the code, said once."""


def effect(today: list[float], reverted: list[float]) -> tuple[float, float, float]:
    """Today minus reverted (negative: the delta slows the server), with a bootstrap CI over the run samples."""
    lo, hi = diff_of_medians_ci(reverted, today)
    return statistics.median(today) - statistics.median(reverted), lo, hi


def revert_patch_command(repo: str | None, path: str) -> str:
    """Save a file's local change as a patch, then reverse-apply it (the patch file keeps it recoverable)."""
    name = f"{PurePosixPath(path).stem}.revert.patch"
    r = f"-C {shlex.quote(repo)} " if repo else ""
    return f"git {r}diff HEAD -- {shlex.quote(path)} > {name} && git {r}apply -R {name}"


def _probe_causes(case: Case) -> list[CauseFact]:
    """Causes the hardware probe's targeted measurements confirmed (link, clocks, power, neighbours)."""
    probe = case.tools.hardware
    return list(probe.causes) if probe is not None else []


def confirming_share(bis: BisectResult, sub: SubtractionFact
                     ) -> tuple[tuple[float | None, float | None, float | None], str]:
    """The culprits' share from their own confirming comparison: the tree with every patch (a bisection trial, else
    the subtraction's all-patches arm, the same tree) against the tree with every patch but them (the bisection's
    confirming trial). ((effect, ci_low, ci_high), which comparison); no such trial with runs: (None x3, why)."""
    order = list(bis.order)
    without = [p for p in order if p not in bis.culprits]
    idx, fast = next(((i, t) for i, t in enumerate(bis.trials, 1)
                      if sorted(t.patches) == sorted(without) and len(t.samples) >= 2), (None, None))
    slow_t = next(((i, t) for i, t in enumerate(bis.trials, 1)
                   if sorted(t.patches) == sorted(order) and len(t.samples) >= 2), None)
    who = ", ".join(c.rsplit("/", 1)[-1] for c in bis.culprits)
    if fast is None:
        return (None, None, None), (f"no trial measured the tree with every patch but {who}: its share was not "
                                    "measured")
    if slow_t is not None:
        slow, slow_name = list(slow_t[1].samples), f"bisection trial {slow_t[0]} (all patches)"
    elif sub.all_patches is not None and len(sub.all_patches.samples) >= 2:
        slow, slow_name = list(sub.all_patches.samples), "the subtraction's all-patches arm"
    else:
        return (None, None, None), "no measurement of the tree with every patch: its share was not measured"
    eff = effect(slow, list(fast.samples))
    return eff, f"bisection trial {idx} (every patch but {who}) vs {slow_name}"


def _code_causes(case: Case) -> list[CauseFact]:
    """The bisection's culprits confirmed both ways, with the share their own confirming comparison measured."""
    bis = case.tools.bisect
    if bis is None or bis.verdict not in ("culprit", "interaction") or not bis.confirmed:
        return []
    repo = case.repo
    if len(bis.culprit_effects) > 1:  # independent culprits: each its own effect and share (one additive fit)
        fit = (f"its own effect, from one additive fit over the {len(bis.search)} effect-search trials and both "
               "references (independent culprits: their effects add up to the gap, checked)")
        return [CauseFact(name=f"local patch {c.path}", kind="code", key=c.path, effect_tps=c.effect_tps,
                          ci_low=c.ci_low, ci_high=c.ci_high, confirmed=True, method="bisection",
                          fix=revert_patch_command(repo, c.path), share_from=fit, evidence=["bisect"],
                          phase_effect=c.phase_effect,
                          detail=f"independent of {', '.join(x.path for x in bis.culprit_effects if x is not c)}: "
                                 f"{c.share:.0%} of the gap [{c.share_low:.0%}, {c.share_high:.0%}]")
                for c in bis.culprit_effects]
    eff, share_from = confirming_share(bis, case.facts.subtraction or SubtractionFact())
    # a set confirmed together carries one share (the report shows the members as one cause)
    return [CauseFact(name=f"local patch {c}", kind="code", key=c, effect_tps=eff[0], ci_low=eff[1], ci_high=eff[2],
                      confirmed=True, method="bisection", fix=revert_patch_command(repo, c), share_from=share_from,
                      evidence=["bisect"], phase_effect=bis.phase_effect,
                      together=[x for x in bis.culprits if x != c],
                      detail=("together with " + ", ".join(x for x in bis.culprits if x != c))
                      if len(bis.culprits) > 1 else "") for c in bis.culprits]


def _dropped_causes(case: Case) -> list[CauseFact]:
    """Variables the launch shell/parent has and no TP worker receives (/proc): the launcher drops them."""
    prop = case.tools.propagation
    out = []
    for r in prop.rows if prop else []:
        if r.status != "dropped-for-workers":
            continue
        value = r.shell if r.shell is not None else r.parent
        out.append(CauseFact(name=f"{r.name}={value} dropped by the launcher before the TP workers", kind="env",
                             key=r.name, confirmed=True, method="targeted-measurement",
                             evidence=["propagation"],
                             fix=f"pass {r.name}={value} where the TP workers inherit it (the launch environment, "
                                 "not sitecustomize.py); check /proc/<worker>/environ",
                             detail="set in the launch shell/parent, absent in every worker (/proc/PID/environ)"))
    return out


def _commit_causes(case: Case) -> list[CauseFact]:
    """Upstream commits the commit bisection confirmed both ways (it slow, its parent fast, each with the
    essentials), with the parent-vs-commit effect [CI] and the phase it moved."""
    cb = case.tools.commit_bisect
    if cb is None:
        return []
    repo = f"-C {shlex.quote(case.repo)} " if case.repo else ""
    return [CauseFact(name=f"upstream commit {c.sha[:10]} '{c.subject}'", kind="commit", key=c.sha,
                      effect_tps=c.effect_tps, ci_low=c.ci_low, ci_high=c.ci_high, confirmed=True, method="bisection",
                      fix=f"git {repo}revert --no-edit {c.sha[:12]}" + (" -m 1" if c.merge else ""),
                      evidence=["bisect_commits"], phase_effect=c.phase_effect,
                      detail=f"files {', '.join(c.files[:4])}" + (f"; PR #{c.pr}" if c.pr else "")
                      + f"; vs its parent {c.parent[:10]}: {c.comparison}")
            for c in cb.culprits]


def workload_cause(today: list[float], like: list[float], diffs: list[str], source: str) -> CauseFact | None:
    """The workload as a cause of the gap between the claims and today's benchmark, when the like-for-like
    measurement (the same server's runs with the workload `source` recorded) differs from today's (comparator
    DIFFERENT): effect = today's minus the recorded workload's. `diffs`: how the two workloads differ."""
    if len(like) < 3 or len(today) < 3:
        return None
    c = compare(like, today, unit="tok/s")
    if c.outcome != "DIFFERENT":
        return None
    key = "dataset" if any(d.startswith("dataset") for d in diffs) else diffs[0].split(":", 1)[0].replace(" ", "_")
    return CauseFact(name=f"workload: {'; '.join(diffs)}", kind="workload", key=key, metric="spec",
                     effect_tps=c.delta, ci_low=c.delta_ci[0], ci_high=c.delta_ci[1], confirmed=True,
                     method="workload-rerun", fix=f"benchmark with the workload recorded by {source} (or re-state "
                     "the claims for today's workload)", evidence=["reproduce: bench_spec_running vs the recorded "
                     f"workload: {c.summary_line()}"],
                     detail=f"the same server: {c.median_a:.1f} tok/s with the recorded workload, {c.median_b:.1f} "
                            "with today's prompts")


def non_revertible_causes(case: Case) -> list[CauseFact]:
    """Causes established without a revert trial: bisection (patches and commits), hardware probe, NCCL A/B,
    dropped variables."""
    out = _code_causes(case) + _commit_causes(case) + _probe_causes(case)
    if case.facts.nccl_cause is not None:
        out.append(case.facts.nccl_cause)
    seen = {(c.kind, c.key) for c in out}
    out += [c for c in _dropped_causes(case) if (c.kind, c.key) not in seen]
    return out
