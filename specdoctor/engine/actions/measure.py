"""Actions that find the server and reproduce the throughput figures the user claims."""

from __future__ import annotations

import statistics
from collections.abc import Callable
from typing import Any, Literal

from pydantic import ValidationError

from specdoctor.diagnosis.causes import workload_cause
from specdoctor.diagnosis.facts import RunFacts, WorkloadFact
from specdoctor.diagnosis.references import judge_claims, reference_figure
from specdoctor.engine.actions import ActionOutcome, action, run_tool
from specdoctor.engine.state import Decision, StateView
from specdoctor.errors import UsageError
from specdoctor.inference import engine_for_launch
from specdoctor.models import Claims, Fingerprint, ServerFact, TopologyFact
from specdoctor.models.facts import MeasuredFact, MeasureFacts
from specdoctor.models.phases import PhaseTimes
from specdoctor.toolkit import ToolResult
from specdoctor.tools.checkout.trial_code import WrongTree, check_origin, in_tree
from specdoctor.tools.checkout.trial_tree import TrialTree
from specdoctor.tools.environment.fingerprint import read_fingerprint
from specdoctor.tools.serving.measure import BenchmarkResult, Workload, benchmark, default_workload
from specdoctor.tools.serving.plan import Plan
from specdoctor.tools.serving.server import ReadEnvInput, find_server_processes, read_process_env
from specdoctor.tools.serving.trial import (
    AUTO_PORT,
    LaunchConfig,
    LaunchFailed,
    MeasureFailed,
    measure,
    profile,
    profiled,
    trial,
)

__all__ = ["locate_server", "reproduce", "measure_config", "recorded_workload", "good_run",
           "pooled", "reference_for", "same_within", "fact_of", "failed_fact", "bench_result"]


def _fmt(x: Any, nd: int = 1) -> str:
    return "?" if x is None else f"{x:.{nd}f}"


def _server_fact(servers: list[Any]) -> ServerFact:
    """The one running server as the facts keep it (`running: False` unless exactly one was found)."""
    if len(servers) != 1:
        return ServerFact(running=False)
    s = servers[0]
    argv = s.argv or s.main.cmdline
    # Where it logs and runs, as the kernel sees it (find_server_processes read /proc/PID/fd and cwd).
    return ServerFact(running=True, port=s.port, pid=s.main.pid, argv=argv, args=s.args, workers=len(s.workers),
                      launch=" ".join(argv), **({"log_path": s.log_path} if s.log_path else {}),
                      **({"cwd": s.cwd} if s.cwd else {}))


def _relaunch_env(deps, out: ActionOutcome, step, pid: int) -> dict[str, str]:
    """The running server's tuning environment, which relaunches reproduce (never its redacted secrets, nor what
    the engine forces itself: passing that again would hide what the engine does)."""
    penv = run_tool(deps, read_process_env, ReadEnvInput(pid=pid), out.results, key=f"{step.id}_env").output
    env = penv.env if penv is not None else {}
    engine = deps.tool_ctx.engine
    return {k: v for k, v in env.items() if k.startswith(engine.relaunch_env_prefixes)
            and "REDACTED" not in v and k not in engine.forced_env_names}


def _topology(view: StateView) -> TopologyFact:
    fp = view.result("fingerprint", Fingerprint) or Fingerprint()
    interconnect = fp.interconnect or fp.topology.get("interconnect")
    kind = (interconnect or "").lower()
    return TopologyFact(gpu_count=len(fp.gpus), detail=interconnect,
                        interconnect="nvlink" if "nvlink" in kind else "pcie" if "pcie" in kind else None)


def _engine_label(deps) -> str:
    """The run's engine as a user reads it; 'inference' while none is settled (asking would detect one)."""
    engine = getattr(deps.tool_ctx, "run_engine", None)
    return getattr(engine, "display_name", None) or "inference"


@action("read")
def locate_server(deps, view: StateView, step, args: dict[str, Any]) -> ActionOutcome:
    """Find the running engine server (if any) and settle the launch command and topology to use."""
    out = ActionOutcome()
    port = args.get("port") or _launch_port(view.params.launch)
    repo = view.params.repo
    # Exactly the server the user means: the port of --port/--launch, else the one running from --repo, else the
    # only one; several and nothing says which → a one-line error listing them (never the first found).
    query: dict[str, Any] = {"exactly_one": True, **({"port": port} if port else {"repo": repo} if repo else {})}
    called = run_tool(deps, find_server_processes, query, out.results, key=step.id)
    res, found_servers = called.result, called.output
    if res.status == "error" and res.retryable:
        raise UsageError(res.summary)
    server = _server_fact(found_servers.servers if found_servers is not None else [])
    launch = view.params.launch or server.launch
    # Trial servers take a port the host has free at each launch (launch_server picks it: evidence there).
    out.facts = RunFacts(server=server, launch=launch, server_env={}, trial_port=AUTO_PORT)
    if server.pid:
        out.facts.server_env = _relaunch_env(deps, out, step, server.pid)
    out.facts.topology = _topology(view)
    found = (f"server on port {server.port} (pid {server.pid}, {server.workers} workers)"
             if server.running else res.summary if res.status == "no_data"
             else f"no {_engine_label(deps)} server running")
    out.summary = found
    out.decisions.append(Decision(
        step=step.id, title=step.title, status="ok", checked=f"running {_engine_label(deps)} servers (/proc)",
        found=found,
        decided=f"use launch command: {launch}" if launch else "no launch command available",
        why="the user's --launch wins; otherwise the running server's own command line is the ground truth",
        evidence=[e.command for e in res.evidence]))
    return out


def _launch_port(launch: str | None) -> int | None:
    """The port a given launch line serves on (read by the engine its entry point names): the server to examine
    when the user named one."""
    engine = engine_for_launch(launch) if launch else None
    if engine is None or launch is None:
        return None
    try:
        return engine.parse_launch(launch).port
    except Exception:  # an unparsable line is reported later by the tools that need it
        return None


def fact_of(bench: BenchmarkResult, label: str, env: dict[str, str] | None = None) -> MeasuredFact:
    """A benchmark's output as the fact keeps it, under the configuration's label (and the env it launched with)."""
    return MeasuredFact.model_validate({**bench.model_dump(mode="json"), "label": label,
                                        **({"env": env} if env is not None else {})})


def failed_fact(error: str, status: str | None = None, label: str | None = None) -> MeasuredFact:
    """A configuration that could not be measured, and why."""
    return MeasuredFact.model_validate({"error": error, **({"status": status} if status is not None else {}),
                                        **({"label": label} if label is not None else {})})


def bench_result(m: MeasuredFact) -> BenchmarkResult:
    """The benchmark output a measured fact holds (its own keys, such as `also` or `claim_runs`, left out)."""
    return BenchmarkResult.model_validate({k: v for k, v in m.model_dump(mode="json").items()
                                           if k in BenchmarkResult.model_fields})


def _recorder(results: dict[str, ToolResult]):
    def record(key: str, result: ToolResult) -> None:
        results[key] = result

    return record


def measure_config(deps, view: StateView, *, label: str, speculative: bool, results: dict[str, ToolResult],
                   env: dict[str, str] | None = None, runs: int | None = None,
                   tree: TrialTree | None = None, also: Workload | None = None,
                   more: Callable[[list[float]], int] | None = None, phases: bool = False) -> MeasuredFact:
    """Launch a server (spec or baseline), benchmark it, stop it; its measurement, or why it has none (`error`).

    With `tree` the server imports the engine from that trial tree (checked in its own environment first).
    `also`: benchmark the same server a second time with this workload (no second launch), under 'also'.
    `more(samples)`: after each look, how many more runs to make on the same server (0: stop) — a sequential
    comparison decides within one launch instead of paying a relaunch per round.
    `phases`: also the engine profiler's phase times on the same server before it stops (`phases` of the fact),
    where the engine profiles a server launched as it is (a profile that fails leaves it None)."""
    launch = view.run_facts.launch
    if not launch:
        raise UsageError("no launch command: pass --launch or start the server first")
    p = view.params
    config = LaunchConfig(command=launch, python=p.python, speculative=speculative, label=label,
                          env={**(view.run_facts.server_env or {}), **(env or {})}, port=AUTO_PORT,
                          timeout_s=p.launch_timeout_s)
    config = in_tree(config, tree) if tree is not None else config
    try:
        with trial(deps.tool_ctx, config, record=_recorder(results)) as handle:
            if tree is not None:
                check_origin(handle, tree)
            m = measure(handle, runs=runs or p.runs, requests_per_run=p.requests_per_run,
                        max_new_tokens=p.max_new_tokens, warmup_runs=1)
            looks = 1
            while more is not None and (extra_runs := more([float(x) for x in m.samples])) > 0:
                looks += 1
                nxt = measure(handle, runs=extra_runs, requests_per_run=p.requests_per_run,
                              max_new_tokens=p.max_new_tokens, warmup_runs=0,
                              key=f"bench_{label}_look{looks}")
                m = pooled(m, nxt)
            extra: MeasuredFact | None = None
            if also is not None:
                try:
                    w = measure(handle, runs=runs or p.runs, requests_per_run=p.requests_per_run,
                                max_new_tokens=also.output_tokens or p.max_new_tokens, warmup_runs=1,
                                prompts=also.request_prompts(), temperature=also.temperature or 0.0,
                                label=f"{label}-recorded-workload", key=f"bench_{label}_recorded_workload")
                    extra = fact_of(w, f"{label} (recorded workload)", env or {})
                except MeasureFailed as exc:
                    extra = failed_fact(exc.result.summary, exc.result.status, label)
            times = None
            if phases and profiled(deps.tool_ctx, config) == config:
                times, _why = profile(handle, requests_per_run=p.requests_per_run, max_new_tokens=p.max_new_tokens,
                                      key=f"phases_{label}")
    except (LaunchFailed, MeasureFailed) as exc:
        return failed_fact(exc.result.summary, exc.result.status, label)
    except WrongTree as exc:
        return failed_fact(str(exc), "unresolved", label)
    data = fact_of(m, label, env or {}).model_copy(update={"phases": times})
    return data.with_also(extra) if extra is not None else data


def pooled(first: BenchmarkResult, later: BenchmarkResult) -> BenchmarkResult:
    """Two looks at one server as one measurement: runs pooled, median and CI recomputed, newest other fields."""
    from specdoctor.stats.summary import summarize

    samples = list(first.samples) + list(later.samples)
    decode = list(first.decode_samples) + list(later.decode_samples) \
        if first.decode_samples and later.decode_samples else []
    s = summarize(samples)
    acc = [(m.accept_length, len(m.samples)) for m in (first, later) if m.accept_length is not None and m.samples]
    return later.model_copy(update={
        "samples": samples, "decode_samples": decode, "runs": list(first.runs) + list(later.runs), "median": s.median, "ci_low": s.ci_low,
        "ci_high": s.ci_high, "mean": s.mean, "stdev": s.stdev or 0.0, "cv": s.cv,
        "accept_length": sum(a * n for a, n in acc) / sum(n for _, n in acc) if acc else later.accept_length,
        "warmup_runs": first.warmup_runs,
        "warmup_discarded": list(first.warmup_discarded) + list(later.warmup_discarded),
        "findings": list(first.findings) + [f for f in later.findings if f not in first.findings]})


def good_run(deps, view: StateView) -> dict[str, Any] | None:
    """The good run's fingerprint as data: given as a dict, or read from its JSON file on the host (None when there
    is none or it cannot be read; fingerprint_diff reports why)."""
    good = view.params.good_fingerprint
    if isinstance(good, dict):
        return good
    if not isinstance(good, str) or not good:
        return None
    return read_fingerprint(deps.tool_ctx, good)


def recorded_workload(deps, view: StateView) -> tuple[Workload, str] | None:
    """The workload behind the claims, when recorded: the user's (`workload` parameter), else the good run's
    (its fingerprint's `workload`). None when neither recorded one (or it does not parse)."""
    good = good_run(deps, view)
    for raw, source in ((view.params.workload, "you"),
                        (good.get("workload") if isinstance(good, dict) else None, "the good run")):
        if isinstance(raw, dict) and raw:
            try:
                return Workload.model_validate(raw), source
            except ValidationError:
                continue
    return None


def bench_running(deps, view: StateView, server: ServerFact, results: dict[str, ToolResult], *, key: str,
                   label: str, workload: Workload | None = None, runs: int | None = None) -> MeasuredFact:
    """Benchmark the user's running server (no launch), with today's prompts or a recorded workload."""
    args: dict[str, Any] = {
        "port": server.port, "runs": runs or view.params.runs,
        "requests_per_run": view.params.requests_per_run,
        "max_new_tokens": view.params.max_new_tokens, "warmup_runs": 1, "label": key,
        "log_path": server.log_path}
    if workload is not None:
        args.update(prompts=workload.request_prompts(), temperature=workload.temperature or 0.0)
        if workload.output_tokens:
            args["max_new_tokens"] = workload.output_tokens
    called = run_tool(deps, benchmark, args, results, key=f"bench_{key}")
    bench, bres = called.result, called.output
    return fact_of(bres, label) if bres is not None else failed_fact(bench.summary)


def _workload_finding(recorded: Workload, source: str, diffs: list[str], today: MeasuredFact | None,
                      like: MeasuredFact) -> dict[str, Any]:
    """The workload difference as a finding on the like-for-like measurement (the report lists it)."""
    def fig(m: MeasuredFact | None) -> str:
        tau = f", accept length {m.accept_length:.2f}" if m is not None and m.accept_length else ""
        return f"{_fmt(m.median if m is not None else None)} tok/s{tau}"

    return {"kind": "workload", "message": (
        f"workload: the claims were measured with another workload than today's benchmark (recorded by {source}: "
        + "; ".join(diffs) + f"). With that workload the server gives {fig(like)}; with today's prompts "
        f"{fig(today)}. The claims are compared with the like-for-like measurement.")}


def _measure_both(deps, view: StateView, out: ActionOutcome, like: Workload | None) -> MeasureFacts:
    """Speculative (the running server's own figure when it is speculative, else a launch) and baseline tok/s;
    each also with the claims' workload when `like` is given."""
    server = view.run_facts.server or ServerFact()
    spec_running = server.running and any("speculative" in a for a in server.argv)
    before_stop = view.fact("user_server_bench", MeasuredFact)  # measured just before your server was stopped
    kept_arm = _kept_arm_wanted(view)
    also_before = before_stop.also_measured() if before_stop is not None else None
    if spec_running and before_stop is not None and (like is None or (also_before is not None
                                                                       and also_before.median is not None)):
        spec = before_stop  # with the recorded workload's too, when it differs (taken before the stop)
    elif spec_running and before_stop is None:
        deps.view.progress(f"benchmarking the running server on port {server.port}")
        spec = bench_running(deps, view, server, out.results, key="spec_running", label="spec (running server)")
        if like is not None:
            deps.view.progress("benchmarking the running server with the claims' workload")
            spec = spec.with_also(bench_running(deps, view, server, out.results, key="spec_running_workload",
                                                label="spec (running server, recorded workload)", workload=like))
    else:
        deps.view.progress("launching the speculative server")
        spec = measure_config(deps, view, label="spec", speculative=True, results=out.results, also=like,
                              phases=kept_arm)
    deps.view.progress("launching the baseline server (no speculation)")
    baseline = measure_config(deps, view, label="baseline", speculative=False, results=out.results, also=like,
                              phases=kept_arm)
    return MeasureFacts(spec=spec, baseline=baseline)


def _kept_arm_wanted(view: StateView) -> bool:
    """Profile reproduce's own launches while up: they are the revert search's "every difference kept" arm
    (`attribute_evidence.control_is_trial`), which a confirmed difference's phase effect needs — when the plan in
    force expects that search. A few short runs here, against launching the arm again later (minutes); never
    where no revert search is expected (the runs cost box time too)."""
    plan = view.fact("plan", Plan)
    return plan is not None and any(ph.step == "attribute" and (ph.expected or 0) > 0 for ph in plan.phases)


def _by_name(measure: MeasureFacts) -> list[tuple[str, MeasuredFact]]:
    """The configurations measured, in the order the step measures them (speculative first)."""
    return [(k, m) for k, m in (("spec", measure.spec), ("baseline", measure.baseline)) if m is not None]


def _like_for_like(out: ActionOutcome, measure: MeasureFacts, found_wl: tuple[Workload, str] | None,
                   today_wl: Workload, diffs: list[str], like: Workload | None) -> MeasureFacts:
    """With a recorded workload that differs from today's, the claims are judged on its measurements (today's
    are kept as `measure_today_workload`, the difference as a finding and, when it matters, a cause)."""
    if like is not None and found_wl is not None:
        today = MeasureFacts(**{k: m.with_also(None) for k, m in _by_name(measure)})
        alike = MeasureFacts(**{k: m.also_measured() or failed_fact("not measured with the recorded workload")
                                for k, m in _by_name(measure)})
        if alike.spec is not None and alike.spec.median is not None:
            alike.spec.findings.insert(0, _workload_finding(found_wl[0], found_wl[1], diffs, today.spec, alike.spec))
        out.facts.measure_today_workload = today
        out.facts.workload = WorkloadFact(recorded=found_wl[0], source=found_wl[1], today=today_wl,
                                          differences=diffs)
        cause = workload_cause(today.spec.samples if today.spec is not None else [],
                               alike.spec.samples if alike.spec is not None else [], diffs, found_wl[1])
        if cause is not None:
            out.facts.workload_cause = cause
        return alike
    if found_wl is not None and not diffs:
        out.facts.workload = WorkloadFact(recorded=found_wl[0], source=found_wl[1], today=today_wl,
                                          differences=[])
    return measure


def _reproduce_summary(measure: MeasureFacts, claims: Claims, diffs: list[str],
                       like: Workload | None) -> tuple[str, list[str]]:
    """The step's one line (both figures, the claims' outcomes) and the configurations that failed."""
    b, s = measure.baseline or MeasuredFact(), measure.spec or MeasuredFact()
    errors = [f"{k}: {v.error}" for k, v in _by_name(measure) if v.error]
    found = (f"baseline {_fmt(b.median)} tok/s [{_fmt(b.ci_low)}, {_fmt(b.ci_high)}], "
             f"speculative {_fmt(s.median)} tok/s [{_fmt(s.ci_low)}, {_fmt(s.ci_high)}], "
             f"accept length {_fmt(s.accept_length, 2)}"
             + (f" with the recorded workload ({'; '.join(diffs)})" if like is not None else ""))
    claim_txt = "; ".join(f"{'claimed' if c.source == '--expect' else 'good run'} {k} "
                          f"{c.claimed:g} → {c.outcome} ({_fmt(c.pct_change)} %"
                          + (", prefill excluded" if c.basis == "decode" else "") + ")"
                          for k, c in claims.root.items())
    return found + (f"; {claim_txt}" if claim_txt else "") + (f"; errors: {errors}" if errors else ""), errors


@action("disrupt")
def reproduce(deps, view: StateView, step, args: dict[str, Any]) -> ActionOutcome:
    """Measure baseline and speculative tok/s with repeats and compare them with the user's claims.

    When the good run or the user recorded the workload behind the claims and it differs from today's benchmark,
    each configuration is also measured with that workload (same server, no extra launch) and the claims are
    compared with those like-for-like measurements; the difference is a finding.
    """
    out = ActionOutcome()
    found_wl = recorded_workload(deps, view)
    today_wl = default_workload(view.params.max_new_tokens)
    diffs = found_wl[0].differs_from(today_wl) if found_wl else []
    like = found_wl[0] if found_wl and diffs and found_wl[0].request_prompts() else None
    measure = _like_for_like(out, _measure_both(deps, view, out, like), found_wl, today_wl, diffs, like)
    out.facts.measure = measure
    # --expect, else the good run's recorded measurements; times and accept length judged on their own samples
    claims = judge_claims(dict(view.params.expect or {}), good_run(deps, view), measure, view.latest(PhaseTimes))
    out.facts.claims = claims
    out.summary, errors = _reproduce_summary(measure, claims, diffs, like)
    out.status = "error" if errors else "ok"
    out.decisions.append(Decision(
        step=step.id, title=step.title, status=out.status, checked="throughput with and without speculation, "
        f"{view.params.runs} runs each (one value per run)"
        + (", also with the workload recorded behind the claims" if like is not None else ""), found=out.summary,
        decided="compare every later measurement with these, not with the claims",
        why="a regression can only be diagnosed against numbers re-measured on this box today"
            + ("; the claims were measured with another workload, so they are compared like with like"
               if like is not None else ""),
        evidence=out.commands(40)))
    return out


def reference_for(view: StateView, metric: str) -> tuple[float | None, str]:
    """The figure a metric is judged against (the diagnosis decides: `reference_figure`), from the run's claims,
    today's measurement and the good fingerprint."""
    claim = (view.fact("claims", Claims) or Claims({})).root.get(metric)
    measured = getattr(view.fact("measure", MeasureFacts) or MeasureFacts(), metric, None) \
        if claim is not None and claim.claimed is not None else None
    return reference_figure(metric, claim, measured, view.params.good_fingerprint)


def same_within(view: StateView, metric: Literal["spec", "baseline"], today: list[float]) -> float | None:
    """The change a trial must rule out to call it SAME (tok/s): half the gap between today and the reference
    (claims, else the good run), at least 5 % of today. A difference that cannot explain the gap is settled in a few
    runs even on a noisy figure; None (the comparator's default) when there is no reference."""
    reference, _ = reference_for(view, metric)
    if reference is None or not today:
        return None
    med = statistics.median(today)
    return max(0.05 * med, 0.5 * abs(reference - med))
