"""nccl_promote: end-to-end A/B of promoted NCCL settings, with proof the variables reached every TP worker."""

from __future__ import annotations

import statistics
from typing import Any

from pydantic import BaseModel, Field

from specdoctor.errors import HostError, ToolRetry, Unresolved
from specdoctor.parsers.nccl import parse_nccl_debug
from specdoctor.stats.comparator import Comparison, compare
from specdoctor.stats.nearer import level_at, midpoint_looks
from specdoctor.stats.summary import median_ci
from specdoctor.stats.thresholds import LOW_THRESHOLD
from specdoctor.toolkit import ToolContext, tool
from specdoctor.tools.breakeven.breakeven_empirical import call_tool
from specdoctor.tools.nccl.nccl_grid import EXPERIMENT_NOTE, experiment_only
from specdoctor.tools.serving.measure import BenchmarkResult
from specdoctor.tools.serving.trial import LaunchConfig, TrialHandle, measure, trial

__all__ = ["PromoteCandidate", "PromoteInput", "planned_launches", "Propagation", "PromotedResult", "NcclPromotion", "nccl_promote",
           "WHERE_TO_SET", "NOT_SITECUSTOMIZE"]

DEBUG_ENV = {"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT,ENV"}
WHERE_TO_SET = ("Set it in the environment of the command that starts the server (`env NCCL_X=... python -m "
                "sglang.launch_server ...`), the `Environment=` lines of its systemd unit, or the env block of the "
                "launcher that starts it: the server process then passes it to every scheduler/TP worker it spawns, "
                "which /proc/<worker pid>/environ and NCCL's 'set by environment' lines confirm.")
NOT_SITECUSTOMIZE = ("Not sitecustomize.py: it runs inside every Python process on the host (unrelated ones too), "
                     "it is invisible in the launch command and in any record of how the server was started, it acts "
                     "only when Python imports it (after the launcher chose the environment), and it is what the "
                     "seed investigation tried without ever proving the workers saw the values.")
LAUNCHER_FIX = ("The launcher drops variables before the workers start: fix the launcher to pass the environment "
                "through (or set them where the worker itself reads them); until then /etc/nccl.conf is the one "
                "place every NCCL process reads regardless of its environment (host-wide: record it).")


class PromoteCandidate(BaseModel):
    """A configuration to measure end to end: variables set, and variables removed ("unset")."""

    label: str
    env: dict[str, str]
    unset: list[str] = Field(default_factory=list, description="Removed from the environment (env -u).")


class PromoteInput(BaseModel):
    """Arguments of nccl_promote."""

    command: str = Field(description="The engine's launch line to relaunch under each candidate's env.")
    candidates: list[PromoteCandidate] = Field(default_factory=list,
                                               description="Configurations the sweep's comparator called better.")
    python: str | None = None
    cwd: str | None = None
    port: int | None = None
    runs: int = Field(default=5, ge=2, le=50, description="Benchmark runs per launch (the comparator needs >= 5).")
    max_runs: int = Field(default=20, ge=2, le=100, description="Runs per candidate while the comparator is "
                          "undecided (looks at runs, doubling, then this cap); the reference is measured again up "
                          "to it only when nothing won and a candidate stayed undecided.")
    requests_per_run: int = Field(default=4, ge=1)
    max_new_tokens: int = Field(default=128, ge=1)
    warmup_runs: int = Field(default=1, ge=0)
    timeout_s: float = Field(default=900, gt=0)
    current: dict[str, str] = Field(default_factory=dict, description="The NCCL variables the running server's "
                                    "workers have now (/proc): the reference every candidate is compared with.")
    good: dict[str, str] | None = Field(default=None, description="The good run's workers' NCCL variables, when "
                                        "recorded: always a candidate ('as in the good run').")
    not_removable: list[str] = Field(default_factory=list, description="Current variables a relaunch cannot remove "
                                     "(set inside the process: sitecustomize.py, nccl.conf): no 'remove' trial.")
    reference_first: bool = Field(default=True, description="Measure the current setting first, so each candidate "
                                  "buys runs while undecided. False (the launcher is known to drop variables): the "
                                  "first candidate's launch is the proof, and nothing else is launched if it fails.")


class Propagation(BaseModel):
    """One variable: what the parent and each TP worker had, and whether NCCL logged it per process."""

    name: str
    expected: str
    parent: str | None = None
    workers: dict[str, str | None] = Field(default_factory=dict, description="Rank → value (None = missing).")
    logged_pids: list[int] = Field(default_factory=list, description="PIDs whose NCCL said 'set by environment'.")
    env_checked: bool = False
    ok: bool = False


class PromotedResult(BaseModel):
    """One candidate's end-to-end result (only measured when its variables provably reached the workers)."""

    label: str
    env: dict[str, str]
    unset: list[str] = Field(default_factory=list)
    propagated: bool
    propagation: list[Propagation] = Field(default_factory=list)
    samples: list[float] = Field(default_factory=list)
    median: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    outcome: str | None = None
    verdict: str | None = None
    pct_change: float | None = None
    delta: float | None = None
    delta_ci: tuple[float, float] | None = None
    p_value: float | None = None
    experiment_only: list[str] = Field(default_factory=list)
    skipped: str | None = None


class NcclPromotion(BaseModel):
    """End-to-end tok/s of the promoted settings vs NCCL's defaults, the best one, and where to set it."""

    baseline_samples: list[float] = Field(default_factory=list)
    baseline_median: float | None = None
    baseline_ci: tuple[float, float] | None = None
    results: list[PromotedResult] = Field(default_factory=list)
    launcher_drops: bool = False
    launcher_report: str | None = None
    reference: str = Field(default="current", description="What every candidate was compared with: the workers' "
                           "current effective setting.")
    reference_env: dict[str, str] = Field(default_factory=dict)
    best: str | None = Field(default=None, description="The recommendation: the simplest setting the comparator "
                             "cannot tell from the best measured (None: keep what the workers run now).")
    best_env: dict[str, str] | None = None
    best_unset: list[str] = Field(default_factory=list, description="Variables the recommendation removes.")
    best_gain_pct: float | None = None
    best_delta_ci: tuple[float, float] | None = None
    where_to_set: str = WHERE_TO_SET
    not_sitecustomize: str = NOT_SITECUSTOMIZE
    notes: list[str] = Field(default_factory=list)

    def summary_line(self) -> str:
        if self.launcher_drops:
            return f"launcher drops NCCL variables for the workers: no tuning claim ({self.launcher_report})"
        if self.best:
            return (f"recommend {self.best}: {self.best_gain_pct or 0:+.1f} % tok/s vs {self.reference}, proven in "
                    "every worker")
        return f"no setting beat {self.reference} end to end"


def _check(ctx: ToolContext, env: dict[str, str], port: int | None, log_path: str | None, tp: int,
           unset: list[str] | None = None) -> list[Propagation]:
    """/proc/PID/environ of every worker (check_env_propagation) plus NCCL's own 'set by environment' lines;
    a removed variable must be absent from every worker (only /proc can show that)."""
    rows: dict[str, dict[str, Any]] = {}
    try:
        out = call_tool(ctx, "check_env_propagation", {"port": port, "names": sorted(set(env) | set(unset or []))})
        rows = {r["name"]: r for r in out.get("rows", [])}
    except (Unresolved, HostError):
        raise
    except Exception as exc:  # the tool may be missing or fail: the NCCL log is then the only proof
        ctx.say(f"check_env_propagation unavailable: {exc}")
    logged = parse_nccl_debug(ctx.host.read(log_path).decode("utf-8", "replace")) if log_path else None
    out_rows = []
    for name, value in env.items():
        r = rows.get(name)
        p = Propagation(name=name, expected=value)
        if r is not None:
            p.env_checked = True
            p.parent = r.get("parent")
            p.workers = {str(k): v for k, v in (r.get("workers") or {}).items()}
        if logged is not None:
            p.logged_pids = sorted(pid for pid, v in logged.env_by_pid(name).items() if v == value)
        env_ok = bool(p.workers) and all(v == value for v in p.workers.values())
        log_ok = len(p.logged_pids) >= tp
        p.ok = env_ok if p.env_checked else log_ok
        out_rows.append(p)
    for name in unset or []:
        r = rows.get(name)
        p = Propagation(name=name, expected=UNSET, env_checked=r is not None)
        if r is not None:
            p.parent = r.get("parent")
            p.workers = {str(k): v for k, v in (r.get("workers") or {}).items()}
        p.ok = p.env_checked and bool(p.workers) and all(v is None for v in p.workers.values())
        out_rows.append(p)
    return out_rows


UNSET = "(unset)"


def _label(env: dict[str, str], unset: list[str]) -> str:
    parts = [f"{k}={v}" for k, v in sorted(env.items())] + [f"{n} unset" for n in sorted(unset)]
    return " ".join(parts) or "NCCL defaults"


def _expand(args: PromoteInput) -> list[PromoteCandidate]:
    """The candidates, each relative to what the workers run now; plus 'unset' (each variable the workers have,
    and all of them) and 'as in the good run', always. Duplicates (same effective setting, `_effective`) measured
    once; one that is today's setting not at all."""
    cur = dict(args.current)
    out: list[PromoteCandidate] = []
    for c in args.candidates:
        out.append(PromoteCandidate(label=c.label, env={**{k: v for k, v in cur.items() if k not in c.unset}, **c.env},
                                    unset=[n for n in c.unset if n not in c.env]))
    removable = sorted(n for n in cur if n not in args.not_removable)
    if removable:  # "unset": NCCL's own choice for every variable a relaunch can remove
        out.append(PromoteCandidate(label="remove " + ", ".join(removable),
                                    env={k: v for k, v in cur.items() if k not in removable}, unset=removable))
    if args.good is not None:
        out.append(PromoteCandidate(label="as in the good run (" + _label(args.good, []) + ")", env=dict(args.good),
                                    unset=sorted(set(cur) - set(args.good))))
    seen: set[tuple[tuple[tuple[str, str], ...], tuple[str, ...]]] = {(tuple(sorted(cur.items())), ())}
    unique = []
    for c in out:
        key = _effective(c, cur, set(args.not_removable))
        if key not in seen:
            seen.add(key)
            unique.append(c)
    return unique


def _effective(c: PromoteCandidate, cur: dict[str, str], fixed: set[str]
               ) -> tuple[tuple[tuple[str, str], ...], tuple[str, ...]]:
    """The setting a relaunch under `c` really gives the workers, as a key: removing a variable that is set inside
    every process (sitecustomize.py, nccl.conf: `not_removable`) leaves today's value.

    Why a candidate with the same key is not launched (#46): it runs exactly the configuration of one launched
    before it (or of the current setting), so it can decide nothing new — and when it removes a variable
    sitecustomize.py sets, its launch even ends unmeasured ("removing it from the launch env does not remove
    it"). E.g. 'as in the good run (NCCL defaults)' where only sitecustomize's variables remain: today's setting.
    A candidate that sets a value, or removes a variable a relaunch can remove, keeps its own key and runs."""
    kept = {n: cur[n] for n in c.unset if n in fixed and n in cur}
    return (tuple(sorted({**kept, **c.env}.items())), tuple(sorted(n for n in c.unset if n not in fixed)))


def planned_launches(args: PromoteInput) -> int:
    """What a promotion is expected to launch: the current setting once, then each candidate once (a reference
    measured again when nothing won costs one more); one launch when the launcher is known to drop variables (the
    first candidate's launch proves it, and nothing more is launched)."""
    n = len(_expand(args))
    if not args.reference_first:  # the launcher drops variables: the first launch is the proof, and the end
        return 1 if n else 0
    return n + 1 if n else 0


def _config(args: PromoteInput, label: str, env: dict[str, str], unset: list[str] | None = None) -> LaunchConfig:
    return LaunchConfig(command=args.command, env={**DEBUG_ENV, **env}, label=label, timeout_s=args.timeout_s,
                        python=args.python, cwd=args.cwd, port=args.port, unset=list(unset or []))


def _bench(handle: TrialHandle, args: PromoteInput, label: str, runs: int | None = None,
           warm: bool = True) -> BenchmarkResult:
    """Benchmark runs on a launched server (`warm`: its first benchmark, which warms it up first)."""
    return measure(handle, runs=runs or args.runs, requests_per_run=args.requests_per_run,
                   max_new_tokens=args.max_new_tokens, warmup_runs=args.warmup_runs if warm else 0, label=label)


def _judge(reference: list[float], res: PromotedResult, looks: list[int], last: bool = False,
           first: bool = False) -> Comparison:
    """The comparator at this look (alpha spent over the candidate's looks, stats.sequential); kept on `res`."""
    level = level_at(looks[-1] if last else looks[0] if first else len(res.samples), looks, alpha=LOW_THRESHOLD)
    c = compare(reference, res.samples, unit="tok/s", higher_is_better=True, t_level=level)
    res.outcome, res.verdict, res.p_value = c.outcome, c.verdict, c.p_value
    res.pct_change, res.delta, res.delta_ci = round(c.pct_change, 2), round(c.delta, 3), c.delta_ci
    return c


def _simplest_equivalent(best: PromotedResult, measured: list[PromotedResult],
                         out: NcclPromotion) -> PromotedResult:
    """The setting with the fewest NCCL variables that the comparator cannot tell from the best (the reference
    — what the workers run now — and the 'remove' candidates included).

    Every extra NCCL variable is a debugging knob someone must revisit on the next upgrade; screening noise
    easily attaches a passenger (e.g. CHANNELS=16) to the variable that does the work (e.g. PROTO=LL).
    """
    choice = best
    for res in measured:
        if res is best or len(res.samples) < 2 or len(res.env) >= len(choice.env):
            continue
        winner = res.outcome == "DIFFERENT" and res.verdict == "better"
        c = compare(best.samples, res.samples, unit="tok/s", higher_is_better=True).outcome
        # among winners "not DIFFERENT" is enough; any other setting (removing a variable, the reference itself)
        # must be SAME as the best — UNKNOWN is "undecided", never a reason to drop what may be helping
        if (winner and c != "DIFFERENT") or c == "SAME":
            choice = res
    if choice is not best:
        out.notes.append(f"{choice.label} is recommended over {best.label}: the comparator cannot tell their "
                         "end-to-end throughput apart, and it sets fewer NCCL variables")
    return choice


def _measure_reference(ctx: ToolContext, args: PromoteInput, out: NcclPromotion) -> None:
    """One launch under the workers' current setting: the reference samples."""
    ctx.say("launching server (current setting)")
    with trial(ctx, _config(args, "current", dict(args.current))) as handle:
        out.baseline_samples = [float(x) for x in _bench(handle, args, "current").samples]


def _measure_sequential(handle: TrialHandle, args: PromoteInput, res: PromotedResult, looks: list[int],
                        out: NcclPromotion) -> None:
    """Sequential: judge at each look and buy more runs while the comparator is undecided (capped)."""
    for look in looks if out.baseline_samples else looks[:1]:
        if look > len(res.samples):
            b = _bench(handle, args, res.label, runs=look - len(res.samples), warm=not res.samples)
            res.samples += [float(x) for x in b.samples]
        if not out.baseline_samples or _judge(out.baseline_samples, res, looks).outcome != "UNKNOWN":
            break
    res.median = statistics.median(res.samples)
    res.ci_low, res.ci_high = median_ci(res.samples)


def _not_propagated(res: PromotedResult, out: NcclPromotion) -> None:
    """Why the candidate is not measured; a variable that never reached the workers means the launcher drops it."""
    lost = [f"{p.name} (workers: {', '.join(f'{k}={v}' for k, v in sorted(p.workers.items())) or 'none seen'}"
            f"; parent: {p.parent})" for p in res.propagation if not p.ok]
    if all(p.expected == UNSET for p in res.propagation if not p.ok):
        # still there although the launch removed it: set inside the process (sitecustomize, engine)
        res.skipped = "not measured: removing it from the launch env does not remove it: " + "; ".join(lost)
    else:
        res.skipped = "not measured: the variables did not reach every TP worker: " + "; ".join(lost)
        out.launcher_drops = True
        out.launcher_report = res.skipped


def _try_candidate(ctx: ToolContext, args: PromoteInput, cand: PromoteCandidate, tp: int, looks: list[int],
                   out: NcclPromotion) -> PromotedResult:
    """Launch under the candidate, prove its variables reached every TP worker, and only then measure it."""
    res = PromotedResult(label=cand.label, env=cand.env, unset=cand.unset, propagated=False,
                         experiment_only=experiment_only(cand.env))
    ctx.say(f"launching server ({cand.label})")
    with trial(ctx, _config(args, cand.label, cand.env, cand.unset)) as handle:
        res.propagation = _check(ctx, cand.env, handle.port, handle.log_path, tp, cand.unset)
        res.propagated = all(p.ok for p in res.propagation)
        if res.propagated:
            _measure_sequential(handle, args, res, looks, out)
        else:
            _not_propagated(res, out)
    return res


def _measure_reference_again(ctx: ToolContext, args: PromoteInput, out: NcclPromotion,
                             measured: list[PromotedResult], looks: list[int]) -> None:
    """Nothing won yet and the reference is the imprecise side: measure it again (one launch), then judge the
    undecided candidates' runs once more at the last look's level."""
    undecided = [r for r in measured if r.outcome == "UNKNOWN"]
    if not (undecided and not any(r.verdict == "better" for r in measured)
            and len(out.baseline_samples) < looks[-1]):
        return
    ctx.say("launching server (current setting, more runs)")
    with trial(ctx, _config(args, "current-again", dict(args.current))) as handle:
        more = _bench(handle, args, "current-again", runs=looks[-1] - len(out.baseline_samples))
    out.baseline_samples += [float(x) for x in more.samples]
    out.notes.append(f"the reference was measured again ({len(out.baseline_samples)} runs): "
                     f"{len(undecided)} candidate(s) were undecided against {looks[0]} runs")
    for r in undecided:
        _judge(out.baseline_samples, r, looks, last=True)


def _best_winner(measured: list[PromotedResult], out: NcclPromotion) -> PromotedResult | None:
    """The candidate the comparator calls DIFFERENT and better by the largest gain (None: nothing won)."""
    best: PromotedResult | None = None
    for res in measured:
        if len(res.samples) < 2 or len(out.baseline_samples) < 2 or res.outcome is None:
            continue
        if res.outcome == "DIFFERENT" and res.verdict == "better" and (best is None or (res.pct_change or 0) > (best.pct_change or 0)):
            best = res
    return best


def _recommend(args: PromoteInput, out: NcclPromotion, measured: list[PromotedResult],
               best: PromotedResult | None) -> None:
    """The simplest setting the comparator cannot tell from the best; none when that is the current setting."""
    # Nothing beat the current setting: the best is the current setting itself, and a simpler one that the
    # comparator cannot tell from it (e.g. removing the variable) is still the recommendation.
    current = PromotedResult(label=out.reference, env=dict(args.current), propagated=True,
                             samples=list(out.baseline_samples), median=out.baseline_median)
    top = best or current
    choice = _simplest_equivalent(top, [*measured, current], out)
    if choice is not current:
        out.best, out.best_env, out.best_unset = choice.label, dict(choice.env), list(choice.unset)
        out.best_gain_pct, out.best_delta_ci = choice.pct_change, choice.delta_ci
        if choice.experiment_only:
            out.notes.append(f"{', '.join(choice.experiment_only)}: {EXPERIMENT_NOTE}")


@tool(effect="disrupt")
def nccl_promote(ctx: ToolContext, args: PromoteInput) -> NcclPromotion:
    """End-to-end A/B of promoted NCCL settings: relaunch under each, prove every TP worker has it, then compare.

    The reference is what the workers run now (`current`, from /proc); removing each of those variables and the
    good run's setting are always candidates; the recommendation is the simplest setting the comparator cannot
    tell from the best (possibly "remove NCCL_X"), or none when that is the current setting itself.
    Propagation is checked first (/proc/PID/environ of each worker, and NCCL_DEBUG=INFO 'set by environment'
    lines); when the launcher drops the variables, that is reported and no tok/s claim is made for them.
    """
    if not args.candidates and not args.current and args.good is None:
        raise ToolRetry("no candidates: run nccl_sweep first and pass the configurations it promoted (or the "
                        "workers' current NCCL setting, or the good run's)")
    tp = max(1, ctx.engine_for(args.command).parse_launch(args.command).tp_size)
    out = NcclPromotion(reference=f"what the workers run now ({_label(args.current, [])})",
                        reference_env=dict(args.current))
    looks = midpoint_looks(args.runs, max(args.max_runs, args.runs))
    candidates = _expand(args)
    if not candidates:
        out.notes.append("nothing to launch: every setting to try gives the workers today's setting (a relaunch "
                         "cannot remove what sitecustomize.py or nccl.conf sets inside every process)")
    measured: list[PromotedResult] = []
    if candidates and args.reference_first:  # then every candidate's runs are judged against it as they come
        _measure_reference(ctx, args, out)
    for cand in candidates:
        res = _try_candidate(ctx, args, cand, tp, looks, out)
        out.results.append(res)
        if res.propagated:
            measured.append(res)
        if out.launcher_drops:
            break  # the launcher loses variables: no tuning claim at all, so no further launch
    if out.launcher_drops:
        out.notes.append(LAUNCHER_FIX)
    if not measured or out.launcher_drops:
        return out
    if not out.baseline_samples:
        _measure_reference(ctx, args, out)
        for r in measured:
            _judge(out.baseline_samples, r, looks, first=True)
    _measure_reference_again(ctx, args, out, measured, looks)
    out.baseline_median = statistics.median(out.baseline_samples)
    lo, hi = median_ci(out.baseline_samples)
    out.baseline_ci = (lo, hi)
    _recommend(args, out, measured, _best_winner(measured, out))
    return out
