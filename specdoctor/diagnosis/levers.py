"""What-if models of the levers a run found: each one's modelled gain as a range with its assumptions, from the
measured phase times and the break-even cycle model, kept apart from what a trial measured for the same lever.

A lever changes one term of the speculative cycle (k·t_draft + t_verify + overhead) or the accept length τ; its
gain is today's measured speculative tok/s scaled by the modelled cycle (and τ) ratio, so a model's bias on the
absolute cycle cancels. Pure: it reads the `Case`, never a host.
"""

from __future__ import annotations

import shlex

from specdoctor.diagnosis.facts import Case
from specdoctor.diagnosis.lever_model import (
    REAL_VERIFY_OVER_DECODE,
    WORTH,
    Lever,
    LeverKind,
    confirmed_cause,
    tps_at,
    with_measured,
)
from specdoctor.diagnosis.nccl_lever import nccl_lever
from specdoctor.models import BreakevenAnalysis, CauseFact, MeasureFacts

__all__ = ["LeverKind", "Lever", "REAL_VERIFY_OVER_DECODE", "levers", "graph_lever", "steps_lever", "tps_at"]


def _verify_eager(case: Case, measure: MeasureFacts) -> bool:
    spec = measure.spec
    texts = spec.finding_texts() if spec else []
    return bool(case.facts.cuda_graph_off) or (spec is not None and spec.cuda_graph is False) or any(
        "CUDA graph" in t for t in texts)


def _flag_dropped(launch: str | None, flag: str) -> str | None:
    """The launch line without `flag` (a switch), or None when it does not carry it."""
    if not launch or flag not in launch.split():
        return None
    return " ".join(w for w in launch.split() if w != flag)


def _decode_ratio(case: Case, measure: MeasureFacts) -> float | None:
    """The plain-decode step's own eager/graph ratio, when the run measured both: the reference's baseline (claimed
    or the good run's, graph-replayed) against today's eager baseline. None unless today's decode runs eager."""
    base = measure.baseline
    claimed = case.expect.get("baseline")
    if base is None or base.median is None or base.cuda_graph is not False or not claimed:
        return None
    r = claimed / base.median
    return r if r > 1.0 else None


def graph_lever(case: Case) -> Lever | None:
    """Verify (or the whole server) on a CUDA graph, from the decode step it is measured against.

    Point: verify costs what the real engine's graph-replayed verify costs against its decode step
    (`REAL_VERIFY_OVER_DECODE`) times this run's graph-replayed decode step; when today's decode is eager too, the
    decode step's own eager/graph ratio measured in the run (reference against today) scales verify instead. Low:
    a graph removes only half of verify's excess over that point. High: verify as cheap as one graph-replayed
    decode step (no forward at this batch is cheaper)."""
    measure = case.facts.measure or MeasureFacts()
    be = case.tools.breakeven
    spec = measure.spec.median if measure.spec else None
    if be is None or be.verify_ms is None or be.accept_len is None or not spec or not _verify_eager(case, measure):
        return None
    ratio = _decode_ratio(case, measure)
    decode_graph = be.decode_ms / ratio if ratio else be.decode_ms
    floor = REAL_VERIFY_OVER_DECODE * decode_graph
    assumptions = [f"today: verify {be.verify_ms:.1f} ms eager, plain decode {be.decode_ms:.1f} ms a step "
                   + ("(eager too)" if ratio else "(graph-replayed)") + f", τ {be.accept_len:.2f} unchanged"]
    if ratio:
        point_v = be.verify_ms / ratio
        draft = (be.draft_ms or 0.0) / ratio
        assumptions.append(f"the decode step's own eager/graph ratio {ratio:.2f} (reference baseline against today's "
                           "eager baseline) applies to verify and the draft steps")
    else:
        point_v, draft = floor, be.draft_ms or 0.0
        assumptions.append(f"a graph-replayed verify of {be.steps + 1} tokens costs {REAL_VERIFY_OVER_DECODE:.2f} × "
                           "a graph-replayed decode step, as on the real engine (SGLang 0.5.17, H200 fixture)")
    if point_v >= be.verify_ms:
        return None  # verify is already as cheap as the model says a graph makes it: nothing to gain
    point_v = max(point_v, floor)
    low_v = be.verify_ms - 0.5 * (be.verify_ms - point_v)
    assumptions.append("low end: the graph removes only half of verify's excess over that; high end: verify as "
                       "cheap as one graph-replayed decode step")
    vals = [tps_at(be, spec, verify_ms=v, draft_ms=draft) for v in (point_v, low_v, min(decode_graph, point_v))]
    if any(v is None for v in vals):
        return None
    point, low, high = (float(v) - spec for v in vals if v is not None)
    dropped = _flag_dropped(case.facts.launch, "--disable-cuda-graph")
    whole = dropped is not None
    log = case.facts.server.log_path if case.facts.server else None
    check = (f"grep -n -i -E 'capture.*cuda graph|cuda graph: False|disable.cuda.graph' {shlex.quote(log)} | head -20"
             if log else None)
    title = ("Relaunch without --disable-cuda-graph (decode and verify replay CUDA graphs)" if whole else
             "Make verify replay a CUDA graph (it runs eager" + ("; the cycle is verify-bound)"
                                                                 if be.dominant_term == "verify" else ")"))
    lever = Lever(kind="cuda-graph" if whole else "verify-graph", title=title, today_tps=spec, gain_tps=point,
                  gain_low=min(low, point), gain_high=max(high, point), assumptions=assumptions, command=dropped or check,
                  risk="low (start-up captures the graphs: more memory, a longer start)")
    if not whole:
        lever.assumptions.append("why it runs eager is not known from the run: check the server's start-up log for "
                                 "the target-verify graph capture, --cuda-graph-max-bs against the batch, and "
                                 "--speculative-num-draft-tokens against the captured width")
    return with_measured(lever, confirmed_cause(case, ("cuda_graph", "cuda-graph")))


def steps_lever(case: Case, target_steps: int | None = None) -> Lever | None:
    """Draft steps k (topk 1: draft tokens k+1), from the break-even model at the measured α: τ(k) and the cycle
    with k draft steps. High: verify constant in its tokens (memory-bound); low: verify's excess over a decode step
    grows in proportion to its tokens; point: halfway. `target_steps`: the k a trial measured (else the best k);
    a k no trial measured is proposed only when its low end still gains 5 %."""
    measure = case.facts.measure or MeasureFacts()
    be = case.tools.breakeven
    spec = measure.spec.median if measure.spec else None
    if be is None or be.alpha is None or be.verify_ms is None or be.accept_len is None or not spec or be.steps_assumed:
        return None
    k = be.steps
    cause = confirmed_cause(case, ("speculative_num_steps", "speculative_num_draft_tokens"))
    if target_steps is None and cause is not None:
        target_steps = _reference_steps(case, cause)
    if target_steps is None:
        target_steps = max(range(1, 9), key=lambda s: tps_at(be, spec, steps=s, verify_ms=_mid_verify(be, s)) or 0.0)
    if target_steps == k:
        return None
    low_v = _grown_verify(be, target_steps)
    vals = [tps_at(be, spec, steps=target_steps, verify_ms=v) for v in ((be.verify_ms + low_v) / 2, low_v,
                                                                       be.verify_ms)]
    if any(v is None for v in vals):
        return None
    pt, lo, hi = sorted(float(v) - spec for v in vals if v is not None)[1], *sorted(
        float(v) - spec for v in vals if v is not None)[::2]
    if lo <= WORTH * spec and cause is None:
        return None  # proposed only when even verify growing with its tokens pays; a trial's k is always modelled
    lever = Lever(kind="draft-steps", title=f"Draft {target_steps} steps instead of {k} (--speculative-num-steps "
                  f"{target_steps} --speculative-num-draft-tokens {target_steps + 1})", today_tps=spec,
                  gain_tps=pt, gain_low=lo, gain_high=hi,
                  assumptions=[f"α {be.alpha:.2f} per token (from τ {be.accept_len:.2f} at k = {k}) holds at "
                               f"k = {target_steps}: τ = (1 − α^(k+1))/(1 − α)",
                               f"draft step {be.draft_ms or 0.0:.2f} ms each; verify {be.verify_ms:.1f} ms constant "
                               "in its tokens (low end: its excess over a decode step grows with them)"],
                  command=_steps_command(case.facts.launch, target_steps))
    return with_measured(lever, cause)


def _grown_verify(be: BreakevenAnalysis, steps: int) -> float:
    """Verify at k = `steps` when its excess over a decode step grows in proportion to its tokens."""
    assert be.verify_ms is not None
    excess = max(be.verify_ms - be.decode_ms, 0.0) / (be.steps + 1)
    return max(be.verify_ms + excess * (steps - be.steps), 1e-3)


def _mid_verify(be: BreakevenAnalysis, steps: int) -> float:
    assert be.verify_ms is not None
    return (be.verify_ms + _grown_verify(be, steps)) / 2


def _reference_steps(case: Case, cause: CauseFact) -> int | None:
    found = case.tools.deltas or case.facts.deltas
    for d in found.deltas if found else []:
        if d.name == cause.key and d.reference and d.reference.isdigit():
            n = int(d.reference)
            return n - 1 if "draft_tokens" in d.name else n
    return None


def _steps_command(launch: str | None, steps: int) -> str | None:
    if not launch:
        return None
    words = launch.split()
    out = []
    skip = False
    for i, w in enumerate(words):
        if skip:
            skip = False
            continue
        if w in ("--speculative-num-steps", "--speculative-num-draft-tokens") and i + 1 < len(words):
            out += [w, str(steps if w.endswith("steps") else steps + 1)]
            skip = True
            continue
        out.append(w)
    return " ".join(out) if out != words else None


def levers(case: Case) -> list[Lever]:
    """Every lever the run found a model for, biggest modelled gain first."""
    found = [x for x in (graph_lever(case), steps_lever(case), nccl_lever(case)) if x is not None]
    return sorted(found, key=lambda x: -x.gain_tps)
