"""nccl_promote: end-to-end A/B of promoted NCCL settings, with proof the variables reached every TP worker."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field
from specdoctor.tools.breakeven_empirical import call_tool
from specdoctor.tools.nccl_grid import EXPERIMENT_NOTE, experiment_only
from specdoctor.tools.trial import LaunchConfig, Measurement, TrialHandle, measure, trial

from specdoctor.errors import HostError, ToolRetry, Unresolved
from specdoctor.inference import get_engine
from specdoctor.parsers.nccl import parse_nccl_debug
from specdoctor.stats.comparator import compare
from specdoctor.toolkit import ToolContext, tool

__all__ = ["PromoteCandidate", "PromoteInput", "Propagation", "PromotedResult", "NcclPromotion", "nccl_promote",
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
    """A configuration the sweep promoted."""

    label: str
    env: dict[str, str]


class PromoteInput(BaseModel):
    """Arguments of nccl_promote."""

    command: str = Field(description="SGLang launch line to relaunch under each candidate's env.")
    candidates: list[PromoteCandidate] = Field(description="Configurations the sweep's comparator called better.")
    python: str | None = None
    cwd: str | None = None
    port: int | None = None
    runs: int = Field(default=5, ge=2, le=50, description="Benchmark runs per launch (the comparator needs >= 5).")
    requests_per_run: int = Field(default=4, ge=1)
    max_new_tokens: int = Field(default=128, ge=1)
    warmup_runs: int = Field(default=1, ge=0)
    timeout_s: float = Field(default=900, gt=0)


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
    best: str | None = None
    best_gain_pct: float | None = None
    best_delta_ci: tuple[float, float] | None = None
    where_to_set: str = WHERE_TO_SET
    not_sitecustomize: str = NOT_SITECUSTOMIZE
    notes: list[str] = Field(default_factory=list)

    def summary_line(self) -> str:
        if self.launcher_drops:
            return f"launcher drops NCCL variables for the workers: no tuning claim ({self.launcher_report})"
        if self.best:
            return (f"best {self.best}: {self.best_gain_pct:+.1f} % tok/s vs default, proven in every worker")
        return "no promoted setting beat NCCL's defaults end to end"


def _check(ctx: ToolContext, env: dict[str, str], port: int | None, log_path: str | None, tp: int) -> list[Propagation]:
    """/proc/PID/environ of every worker (check_env_propagation) plus NCCL's own 'set by environment' lines."""
    rows: dict[str, dict[str, Any]] = {}
    try:
        out = call_tool(ctx, "check_env_propagation", {"port": port, "names": sorted(env)})
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
    return out_rows


def _config(args: PromoteInput, label: str, env: dict[str, str]) -> LaunchConfig:
    return LaunchConfig(command=args.command, env={**DEBUG_ENV, **env}, label=label, timeout_s=args.timeout_s,
                        python=args.python, cwd=args.cwd, port=args.port)


def _bench(handle: TrialHandle, args: PromoteInput, label: str) -> Measurement:
    return measure(handle, runs=args.runs, requests_per_run=args.requests_per_run,
                   max_new_tokens=args.max_new_tokens, warmup_runs=args.warmup_runs, label=label)


def _simplest_equivalent(best: PromotedResult, measured: list[PromotedResult],
                         out: NcclPromotion) -> PromotedResult:
    """Among winners the comparator cannot tell apart from the best, recommend the one with the fewest knobs.

    Every extra NCCL variable is a debugging knob someone must revisit on the next upgrade; screening noise
    easily attaches a passenger (e.g. CHANNELS=16) to the variable that does the work (e.g. PROTO=LL).
    """
    choice = best
    for res in measured:
        if res is best or res.outcome != "DIFFERENT" or res.verdict != "better" or len(res.env) >= len(choice.env):
            continue
        if compare(best.samples, res.samples, unit="tok/s", higher_is_better=True).outcome != "DIFFERENT":
            choice = res
    if choice is not best:
        out.notes.append(f"{choice.label} is recommended over {best.label}: the comparator cannot tell their "
                         "end-to-end throughput apart, and it sets fewer NCCL variables")
    return choice


@tool(effect="disrupt")
def nccl_promote(ctx: ToolContext, args: PromoteInput) -> NcclPromotion:
    """End-to-end A/B of promoted NCCL settings: relaunch under each, prove every TP worker has it, then compare.

    Propagation is checked first (/proc/PID/environ of each worker, and NCCL_DEBUG=INFO 'set by environment'
    lines); when the launcher drops the variables, that is reported and no tok/s claim is made for them.
    """
    if not args.candidates:
        raise ToolRetry("no candidates: run nccl_sweep first and pass the configurations it promoted")
    tp = max(1, get_engine().parse_launch(args.command).tp_size)
    out = NcclPromotion()
    measured: list[PromotedResult] = []
    for cand in args.candidates:
        res = PromotedResult(label=cand.label, env=cand.env, propagated=False, experiment_only=experiment_only(cand.env))
        ctx.say(f"launching server ({cand.label})")
        with trial(ctx, _config(args, cand.label, cand.env)) as handle:
            res.propagation = _check(ctx, cand.env, handle.port, handle.log_path, tp)
            res.propagated = all(p.ok for p in res.propagation)
            if res.propagated:
                b = _bench(handle, args, cand.label)
                res.samples = [float(x) for x in b.samples]
                res.median, res.ci_low, res.ci_high = b.median, b.ci_low, b.ci_high
            else:
                lost = [f"{p.name} (workers: {', '.join(f'{k}={v}' for k, v in sorted(p.workers.items())) or 'none seen'}"
                        f"; parent: {p.parent})" for p in res.propagation if not p.ok]
                res.skipped = "not measured: the variables did not reach every TP worker: " + "; ".join(lost)
                out.launcher_drops = True
                out.launcher_report = res.skipped
        out.results.append(res)
        if res.propagated:
            measured.append(res)
    if out.launcher_drops:
        out.notes.append(LAUNCHER_FIX)
    if not measured:
        return out
    ctx.say("launching server (default)")
    with trial(ctx, _config(args, "default", {})) as handle:
        base = _bench(handle, args, "default")
    out.baseline_samples = [float(x) for x in base.samples]
    out.baseline_median = base.median
    out.baseline_ci = (base.ci_low, base.ci_high)
    best: PromotedResult | None = None
    for res in measured:
        if len(res.samples) < 2 or len(out.baseline_samples) < 2:
            continue
        c = compare(out.baseline_samples, res.samples, unit="tok/s", higher_is_better=True)
        res.outcome, res.verdict, res.p_value = c.outcome, c.verdict, c.p_value
        res.pct_change, res.delta, res.delta_ci = round(c.pct_change, 2), round(c.delta, 3), c.delta_ci
        if c.outcome == "DIFFERENT" and c.verdict == "better" and (best is None or (res.pct_change or 0) > (best.pct_change or 0)):
            best = res
    if best is not None:
        best = _simplest_equivalent(best, measured, out)
        out.best, out.best_gain_pct, out.best_delta_ci = best.label, best.pct_change, best.delta_ci
        if best.experiment_only:
            out.notes.append(f"{', '.join(best.experiment_only)}: {EXPERIMENT_NOTE}")
    return out
