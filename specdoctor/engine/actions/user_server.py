"""The GPUs belong to the user's server: examine it read-only, stop it only with consent, bring it back exactly.

Steps: `examine_user_server` (read: what brings it back, its supervisor, whether it holds the GPUs, where it imports
sglang from), `take_gpus` (disrupt: benchmark it, keep its launch line and full env in the 0600 relaunch file,
stop it), `give_back_gpus` (restart it as it was, wait until healthy, benchmark, comparator against the first
measurement). The runner's cleanup and `specdoctor restore` call `bring_back` so that a failure, Ctrl-C or a crash
never leaves the user's server down.
"""

from __future__ import annotations

import dataclasses
import statistics
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from specdoctor.diagnosis.claims import near_but_loose
from specdoctor.diagnosis.facts import EngineOriginFact
from specdoctor.engine.actions import ActionOutcome, action, run_tool
from specdoctor.engine.actions.restart_check import identity_differences, judge_throughput
from specdoctor.engine.runs import Relaunch, load_relaunch, relaunch_path, save_relaunch, write_private
from specdoctor.engine.state import Decision, StateView
from specdoctor.models import MeasuredFact, MeasureFacts, ServerFact, UserServerFact
from specdoctor.models.run_params import RunParams
from specdoctor.stats.comparator import Comparison
from specdoctor.toolkit import ToolContext, ToolResult, registry
from specdoctor.tools.checkout.trial_tree import EngineOrigin, OriginInput, engine_origin
from specdoctor.tools.serving.launch import LaunchResult, launch_server, stop_server
from specdoctor.tools.serving.measure import BenchmarkResult, Workload, benchmark, default_workload, pooled
from specdoctor.tools.serving.port_hold import hold_port, release_port
from specdoctor.tools.serving.server import FindServersInput, ServerList, find_server_processes
from specdoctor.tools.serving.terminal_session import LOCATION_VARS, TerminalSession, session_state
from specdoctor.tools.serving.trial import LaunchConfig
from specdoctor.tools.serving.user_server import (
    StopUserInput,
    UserServerInput,
    UserServerRecord,
    capture,
    identity_hash,
    inspect_user_server,
    manual_step,
    stop_user_server,
)

__all__ = ["examine_user_server", "take_gpus", "give_back_gpus", "bring_back", "blocked_by_user_server",
           "OWN_ACTIONS", "Pending", "pending_path", "pending_for_host", "origin_outside_checkout", "host_key",
           "bring_back_pending", "cleanup_user_server", "retake_on_resume"]

OWN_ACTIONS = frozenset({"take_gpus", "give_back_gpus"})
_BEFORE_RUNS = 8  # runs are cheap next to a launch: enough for the restart's comparator to say SAME at 10 %
_TIGHTEN_RUNS = 16  # twice the first reading: a median's 99 % interval narrows about as 1/sqrt(n)
_HOLD_S = 3 * 3600  # the longest a forgotten placeholder keeps the user's port (a crash not followed by `restore`)


class Pending(BaseModel):
    """The marker of a stopped user's server (0600, beside the relaunch file): what `restore` needs to find it."""

    run_id: str
    host: str = Field(description="The host it runs on (host_key: the reopen spec, else the host's name).")
    port: int | None = None
    log_path: str | None = None
    user: str | None = None
    supervisor: str | None = None
    session: TerminalSession | None = Field(default=None, description="The tmux/screen session it ran in.")
    identity: str
    samples_before: list[float] = Field(default_factory=list)
    gpu_mib_before: int | None = Field(default=None, description="GPU memory its processes held when examined.")
    runs: int = 5
    requests_per_run: int = 3
    max_new_tokens: int = 128
    restarted: bool = False


def host_key(host: Any) -> str:
    """What names a host across processes: the spec that reopens it (a simulated host's sandbox), else its name."""
    return str(getattr(host, "reopen_spec", None) or host.name)


def pending_path(run_id: str) -> Path:
    return relaunch_path(run_id).with_name(f"{run_id}.user-server.json")


def _save_pending(p: Pending) -> None:
    write_private(pending_path(p.run_id), p.model_dump_json())


def _load_pending(run_id: str) -> Pending | None:
    path = pending_path(run_id)
    return Pending.model_validate_json(path.read_text()) if path.is_file() else None


def pending_for_host(key: str) -> list[Pending]:
    """Stopped user's servers on this host that were never brought back (newest first)."""
    folder = relaunch_path("x").parent
    found = []
    for f in sorted(folder.glob("*.user-server.json"), key=lambda p: p.stat().st_mtime, reverse=True) \
            if folder.is_dir() else []:
        try:
            p = Pending.model_validate_json(f.read_text())
        except ValueError:
            continue
        if p.host == key and not p.restarted:
            found.append(p)
    return found


def _record(view: StateView) -> UserServerRecord | None:
    return view.fact("user_server_record", UserServerRecord)


def origin_outside_checkout(view: StateView) -> str | None:
    """Why local patches cannot explain anything (the engine is not imported from --repo), or None."""
    # a checkpoint written before the second engine keeps it as `sglang_origin` (RunFacts reads both names)
    o = view.run_facts.engine_origin
    if o is not None and not o.from_checkout:
        package = o.package or "the engine"
        return f"the server imports {package} from {o.where}, not from the --repo checkout {o.repo}"
    return None


def blocked_by_user_server(view: StateView) -> str | None:
    """Why a launching step must not run: the user's server holds the GPUs and was not (cannot be) stopped."""
    rec = _record(view)
    if rec is None or not rec.holds_gpus:
        return None
    fact = view.fact("user_server", UserServerFact)
    if fact is not None and fact.stopped:
        return None
    port = f" on :{rec.port}" if rec.port else ""
    if rec.restarts_it:
        return manual_step(rec.supervisor, rec.supervisor_detail, rec.port)
    if fact is not None and fact.note:
        return f"your server{port} holds the GPUs and was not stopped: {fact.note}"
    return (f"your server{port} holds the GPUs and stopping it was not approved: a second server would not fit "
            "(run with --yes or approve the stop to measure)")


# -- examine (read) ----------------------------------------------------------------------------------------------


@action("read")
def examine_user_server(deps, view: StateView, step, args: dict[str, Any]) -> ActionOutcome:
    """Read what would bring the user's server back, its supervisor, its GPU memory and where it imports sglang."""
    out = ActionOutcome()
    server = view.run_facts.server or ServerFact()
    if not server.running or not server.pid:
        out.status, out.summary = "skipped", "no running server: nothing of the user's to stop"
        return out
    found = view.latest(ServerList)
    workers = [w.pid for s in (found.servers if found else []) if s.main.pid == server.pid for w in s.workers]
    called = run_tool(deps, inspect_user_server, {"pid": server.pid, "pids": workers, "port": server.port},
                      out.results, key=step.id)
    res, rec = called.result, called.output
    if rec is None:
        out.status, out.summary = "error", res.summary
        out.decisions.append(Decision(step=step.id, title=step.title, status="error", checked="/proc of your server",
                                      found=res.summary, decided="launching steps will be skipped",
                                      why="nothing could be recorded to bring it back"))
        return out
    fact = UserServerFact(port=rec.port, pid_before=rec.pid, identity_before=rec.identity, supervisor=rec.supervisor)
    out.facts.user_server_record = rec
    _bench_running(deps, view, out, rec, fact, server)
    out.facts.user_server = fact
    out.decisions.append(_examined(step, rec, out))
    repo = view.params.repo
    o = run_tool(deps, engine_origin, OriginInput(pid=rec.pid, expect_under=repo or None), out.results,
                 key=f"{step.id}_origin").output
    if o is not None and repo:
        _note_origin(out, step, o, repo)
    out.summary = rec.summary_line()
    return out


def _bench_running(deps, view: StateView, out: ActionOutcome, rec: UserServerRecord, fact: UserServerFact,
                   server: ServerFact) -> None:
    """The first measurement, as it runs: what a restart is compared with, and the running server's throughput when
    the launching steps cannot run (no consent, a supervisor); a speculative server's also checks the claim."""
    from specdoctor.engine.actions.measure import fact_of

    p = view.params
    deps.view.progress(f"benchmarking your running server on port {rec.port}")
    first = _bench(deps, out.results, "bench_spec_running", int(rec.port or 0),
                   max(int(p.runs), _BEFORE_RUNS), p, _file_target(rec.stdout))
    if first is None:
        return
    fact.tps_before = first.median
    bench = fact_of(first, "spec (running server)")
    out.facts.user_server_bench = bench
    if any("speculative" in a for a in server.argv):
        _judge_running(deps, view, out, rec, fact, server, bench)


def _judge_running(deps, view: StateView, out: ActionOutcome, rec: UserServerRecord, fact: UserServerFact,
                   server: ServerFact, bench: MeasuredFact) -> None:
    """The running speculative server's reading, judged against every claim it measures by itself; the facts get
    the reading once it is final (more runs pooled into it)."""
    p = view.params
    from specdoctor.diagnosis.references import judge_claims
    from specdoctor.engine.actions.measure import good_run

    workload = _claims_workload(deps, view, server)
    also = _bench_recorded_workload(deps, view, out, server, workload) if workload is not None else None
    # every claim the running speculative server measures by itself (tok/s, accept length, TPOT)
    # like for like: on the recorded workload's reading when the claims were measured with another one
    judged_on = also if also is not None and also.median is not None else bench
    on_also = judged_on is also
    expect, good = dict(p.expect or {}), good_run(deps, view)
    claims = judge_claims(expect, good, MeasureFacts(spec=judged_on), None)
    tight = _tighten(deps, view, out, rec, server, judged_on, workload if on_also else None) \
        if near_but_loose(claims) else None
    if tight is not None:
        judged_on = tight
        also, bench = (tight, bench) if on_also else (also, tight)
        fact.tps_before = bench.median
        claims = judge_claims(expect, good, MeasureFacts(spec=judged_on), None)
    if also is not None:
        bench = bench.with_also(also)  # user_server_bench holds it too: the reproduce step finds it there
    if claims.root:
        out.facts.claims = claims
    out.facts.user_server_bench = bench
    out.facts.measure = MeasureFacts(spec=bench.model_copy(deep=True))


def _tighten(deps, view: StateView, out: ActionOutcome, rec: UserServerRecord, server: ServerFact,
             reading: MeasuredFact, workload: Workload | None) -> MeasuredFact | None:
    """More runs on the running server (with `workload`, the one `reading` was taken with, when not today's),
    pooled with `reading`, when a claim judged on it is near but loose (`near_but_loose`): runs cost seconds, the
    trials a loose claim sets off cost launches. None when the runs failed (the first reading stands)."""
    from specdoctor.engine.actions.measure import bench_result, bench_running

    deps.view.progress(f"{_TIGHTEN_RUNS} more runs on your running server: its reading is near the claim but loose")
    if workload is not None:
        raw = bench_running(deps, view, server, out.results, key="spec_running_workload_more",
                            label=reading.label, workload=workload, runs=_TIGHTEN_RUNS)
        more = None if raw.error else bench_result(raw)
    else:
        more = _bench(deps, out.results, "bench_spec_running_more", int(rec.port or 0), _TIGHTEN_RUNS, view.params,
                      _file_target(rec.stdout))
    if more is None:
        return None
    # the claim is judged at the precision a claim has (about its runs)
    return MeasuredFact.model_validate({**reading.model_dump(mode="json"),
                                        **pooled(bench_result(reading), more).model_dump(mode="json"),
                                        "claim_runs": len(reading.samples)})


def _claims_workload(deps, view: StateView, server: ServerFact) -> Workload | None:
    """The workload recorded behind the claims, when it differs from today's benchmark and has prompts to send
    (None: no workload was recorded, it is today's, or the server has no port)."""
    from specdoctor.engine.actions.measure import recorded_workload

    found = recorded_workload(deps, view)
    if found is None or not server.port:
        return None
    workload = found[0]
    if not workload.differs_from(default_workload(view.params.max_new_tokens)) \
            or not workload.request_prompts():
        return None
    return workload


def _bench_recorded_workload(deps, view: StateView, out: ActionOutcome, server: ServerFact,
                             workload: Workload) -> MeasuredFact:
    """The running speculative server also measured with the workload recorded behind the claims: the claims are
    judged like for like on it (reproduce), where otherwise the speculative server would be launched again after
    the stop only to be measured with those prompts (one launch, the running server's own figure at hand)."""
    from specdoctor.engine.actions.measure import bench_running

    deps.view.progress("benchmarking your running server with the claims' workload")
    return bench_running(deps, view, server, out.results, key="spec_running_workload",
                         label="spec (running server, recorded workload)", workload=workload)


def _examined(step, rec: UserServerRecord, out: ActionOutcome) -> Decision:
    """What was read of the user's server and what that decides: ask before stopping, a manual step, or leave it."""
    decided = ("will ask before stopping it (the launches need its GPUs)" if rec.holds_gpus and not rec.restarts_it
               else manual_step(rec.supervisor, rec.supervisor_detail, rec.port) if rec.holds_gpus
               else "leave it running (it holds no GPU memory a launch needs)")
    return Decision(
        step=step.id, title=step.title, status="ok", checked="your server's argv, cwd, environment, user, log "
        "targets (/proc), supervisor (/proc/PID/cgroup, parent chain), GPU memory (nvidia-smi)",
        found=rec.summary_line() + f"; supervisor: {rec.supervisor_detail}" + (
            f"; its {rec.supervisor} session was not read ({rec.session_note}): a restart would be detached"
            if rec.session_note else ""), decided=decided,
        why="the box belongs to the user: examine first, stop only with consent, bring it back exactly",
        evidence=out.commands(6))


def _note_origin(out: ActionOutcome, step, o: EngineOrigin, repo: str) -> None:
    """Whether the server imports the engine from the --repo checkout (else its patches cannot explain it)."""
    base = repo.rstrip("/")
    editable = (o.editable_from or "").removeprefix("file://").rstrip("/")
    from_checkout = bool(o.inside) or (bool(editable) and (editable == base or base.startswith(editable + "/")))
    where = o.origin or (o.locations[0] if o.locations else "nowhere (not importable)")
    out.facts.engine_origin = EngineOriginFact(from_checkout=from_checkout, where=where, repo=repo,
                                               editable_from=o.editable_from, package=o.package)
    out.decisions.append(Decision(
        step=step.id, title=f"Where the running server imports {o.package or 'the engine'} from", status="ok",
        checked=f"importlib.util.find_spec({o.package or 'the engine'!r}) and its PEP 610 install record, in the "
                "server's own interpreter, environment and cwd",
        found=f"{where}" + (f" (editable install of {o.editable_from})" if o.editable_from else ""),
        decided="the checkout's patches are what the server runs" if from_checkout else
        "LOCAL PATCHES CANNOT EXPLAIN THIS SERVER: the patch steps (subtraction, bisection) are skipped",
        why="only code the server imports can change its throughput",
        evidence=[e.command for e in out.results[f"{step.id}_origin"].evidence][:2]))


# -- stop (disrupt, with consent) ----------------------------------------------------------------------------------

def _bench(deps, results: dict[str, ToolResult], key: str, port: int, runs: int, p: RunParams,
           log_path: str | None) -> BenchmarkResult | None:
    return run_tool(deps, benchmark, {"port": port, "runs": runs, "requests_per_run": p.requests_per_run,
                                      "max_new_tokens": p.max_new_tokens, "warmup_runs": 1,
                                      "label": key, **({"log_path": log_path} if log_path else {})},
                    results, key=key).output


def _file_target(path: str) -> str | None:
    """A log file to append to (a tty, pipe, socket or deleted file cannot be reopened)."""
    return path if path.startswith("/") and not path.startswith("/dev/") and not path.endswith(" (deleted)") \
        else None


@action("disrupt")
def take_gpus(deps, view: StateView, step, args: dict[str, Any]) -> ActionOutcome:
    """Stop the user's server (approved): benchmark it first, keep its exact launch in the 0600 relaunch file."""
    out = ActionOutcome()
    rec = _record(view)
    fact = view.fact("user_server", UserServerFact) or UserServerFact()
    if rec is None or not rec.holds_gpus or rec.restarts_it:
        fact.stop_consent = "not-needed" if rec is None or not rec.holds_gpus else None
        out.status, out.summary = "skipped", blocked_by_user_server(view) or "your server keeps running"
        out.facts.user_server = fact
        return out
    p = view.params
    run_id = deps.tool_ctx.run_id
    from specdoctor.engine.actions.measure import bench_result

    saved = view.run_facts.user_server_bench
    first = bench_result(saved) if saved is not None else None
    cap = capture(deps.host, rec.pid)
    ident = identity_hash(cap.argv, cap.env, cap.cwd, cap.user)
    if ident != rec.identity or cap.starttime != rec.starttime:
        fact.note = "your server changed since it was examined (restarted or reconfigured): not stopped"
        out.status, out.summary = "error", fact.note
        out.facts.user_server = fact
        out.decisions.append(Decision(step=step.id, title=step.title, status="error", checked="identity",
                                      found=fact.note, decided="launching steps skipped", why="never stop a stranger"))
        return out
    save_relaunch(Relaunch(run_id=run_id, argv=cap.argv, env=cap.env, cwd=cap.cwd))
    _save_pending(Pending(run_id=run_id, host=host_key(deps.host), port=rec.port, log_path=_file_target(rec.stdout),
                          user=rec.user, supervisor=rec.supervisor, session=rec.session, identity=rec.identity,
                          samples_before=list(first.samples) if first else [],
                          gpu_mib_before=sum(rec.gpu_mib.values()) if rec.gpu_mib else None,
                          runs=max(int(p.runs), _BEFORE_RUNS),
                          requests_per_run=int(p.requests_per_run),
                          max_new_tokens=int(p.max_new_tokens)))
    stop = run_tool(deps, stop_user_server, StopUserInput(pid=rec.pid, starttime=rec.starttime, pids=rec.pids),
                    out.results, key=step.id).result
    fact.stop_consent = "yes-flag" if deps.yes else "approved"
    fact.stopped = stop.ok
    held = ""
    if stop.ok and rec.port:
        # Nothing else may take its port while it is down: the restart at the end needs it.
        ctx = deps.tool_ctx
        hold = hold_port(deps.host, int(rec.port), deps.tool_ctx.engine_for(cap.argv).parse_launch(cap.argv).host or "127.0.0.1",
                         run_id=run_id, seconds=_HOLD_S, python=_python_of(cap.argv),
                         log=f"{ctx.run_dir}/port-hold-{rec.port}.log")
        fact.port_held = hold.held
        held = (f"; port :{rec.port} held for it (a placeholder answering 503 with the reason) until the restart"
                if hold.held else f"; port :{rec.port} NOT held while it is down ({hold.note})")
    if not stop.ok:
        fact.note = f"could not stop it: {stop.summary}"
        if _alive_pid(deps.host, rec.pid):  # still serving: nothing to bring back, and no restart on a busy port
            pending_path(run_id).unlink(missing_ok=True)
    out.facts.user_server = fact
    out.status = "ok" if stop.ok else "error"
    out.summary = stop.summary
    tps = f"{first.median:.1f} tok/s" if first else "not measured"
    out.decisions.append(Decision(
        step=step.id, title=step.title, status=out.status, checked="your server, benchmarked then stopped",
        found=f"{tps} before stopping; {stop.summary}{held}",
        decided="launch the trials on the freed GPUs; restart your server as it was at the end (also on failure "
                "or Ctrl-C; `specdoctor resume`/`restore` after a crash)" if stop.ok else "launching steps skipped",
        why=f"consent: {fact.stop_consent}; its argv, cwd and full environment are kept in a 0600 file",
        evidence=out.commands(12)))
    return out


def _python_of(argv: list[str]) -> str:
    """The interpreter the user's server runs (any Python runs the placeholder), else python3."""
    first = argv[0] if argv else ""
    return first if "/" in first and Path(first).name.startswith("python") else "python3"


def _alive_pid(host: Any, pid: int) -> bool:
    try:
        capture(host, pid)
    except Exception:  # noqa: BLE001 - gone or unreadable: not serving
        return False
    return True


# -- restart (at the end, and in every cleanup path) -------------------------------------------------------------

def bring_back(ctx: ToolContext, run_id: str, *, results: dict[str, ToolResult] | None = None,
               timeout_s: float = 600) -> tuple[UserServerFact | None, list[Decision]]:
    """Restart the user's server this run stopped (argv, cwd, full env, log target as recorded), wait until healthy,
    benchmark it and compare with the measurement taken before stopping. None when nothing is pending."""
    pending = _load_pending(run_id)
    if pending is None or pending.restarted:
        return None, []
    results = results if results is not None else {}
    if pending.port:  # the placeholder kept the port (a crashed run's too): the server's again, restarted or by hand
        release_port(ctx.host, int(pending.port))
    rel = load_relaunch(run_id)
    before = pending.samples_before
    fact = UserServerFact(port=pending.port, identity_before=pending.identity, supervisor=pending.supervisor,
                          stopped=True, restarted=False,
                          tps_before=float(statistics.median(before)) if before else None)
    if rel is None:
        fact.note = f"the relaunch record of run {run_id} is missing: start your server by hand"
        return fact, [Decision(step="user_server", status="error", checked="the relaunch record", found=fact.note,
                               decided="not restarted", why="nothing recorded to start it from")]
    inner = dataclasses.replace(ctx, auto_approve=True)
    launch, session, where = _relaunch(inner, ctx, pending, rel, timeout_s)
    results["restart_user_server"] = launch
    started = registry.typed_output(launch, LaunchResult, where="restart_user_server")
    if started is None:
        fact.note = f"your server did not come back: {launch.summary[:300]}"
        return fact, [Decision(step="user_server", status="error", checked="restart of your server",
                               found=fact.note, decided="start it by hand: " + " ".join(rel.argv)[:200],
                               why="the restart failed", evidence=[e.command for e in launch.evidence][:3])]
    pending.restarted = True
    _save_pending(pending)
    relaunch_path(run_id).unlink(missing_ok=True)  # the server is back: its environment is no longer kept at rest
    fact.restarted, fact.healthy, fact.pid_after = True, True, started.pids[0] if started.pids else None
    _identity_after(inner, pending, started, fact, results)
    comparison = _bench_after(inner, pending, started, fact, results)
    return fact, [_restarted(fact, pending, started, comparison, session, where, launch)]


def _identity_after(inner: ToolContext, pending: Pending, started: LaunchResult, fact: UserServerFact,
                    results: dict[str, ToolResult]) -> None:
    """Identity first: the restarted server read as the first one was (argv, cwd, env, user by hash; GPU memory
    held; port), and what differs in `fact.differs`."""
    fact.gpu_mib_before = pending.gpu_mib_before
    if not started.pids:
        fact.note = (fact.note + "; " if fact.note else "") + "identity not read: the restart recorded no pid"
        return
    called = registry.call_fn(inner, inspect_user_server, UserServerInput(
        pid=started.pids[0], pids=list(started.pids[1:]), port=started.port), where="inspect_user_server_after")
    res, rec = called.result, called.output
    results["inspect_user_server_after"] = res
    if rec is None:
        fact.note = (fact.note + "; " if fact.note else "") + f"identity not read: {res.summary[:200]}"
        return
    fact.identity_after = rec.identity
    fact.gpu_mib_after = sum(rec.gpu_mib.values())
    fact.differs = identity_differences(identity=(pending.identity, rec.identity), port=(pending.port, started.port),
                                        gpu_mib=(pending.gpu_mib_before, fact.gpu_mib_after))
    if pending.supervisor and rec.supervisor != pending.supervisor:  # where it runs, said in the note below
        fact.note = (fact.note + "; " if fact.note else "") + \
            f"supervisor read {pending.supervisor} before, {rec.supervisor} after the restart"


def _relaunch(inner: ToolContext, ctx: ToolContext, pending: Pending, rel: Relaunch,
              timeout_s: float) -> tuple[ToolResult, TerminalSession | None, str]:
    """launch_server with the recorded argv, cwd, full env and log file: in a new window of its tmux/screen session
    when it ran in one (detached when that is refused), else detached. The launch, the session used and why."""
    session, where = _where_back(ctx, pending)
    # A server that ran in a session: the new window's own $TMUX_PANE/$STY... replace the recorded ones, and a
    # detached fallback carries none (it is in no session). Any other server gets its environment verbatim.
    env = {k: v for k, v in rel.env.items() if k not in LOCATION_VARS} if pending.session else rel.env
    # the one description of a server to start (tools/serving/trial.py): the user's as it ran; own=False, it stays up
    config = LaunchConfig.from_running(rel.argv, env=env, cwd=rel.cwd, log_path=pending.log_path or None,
                                       label="user-server", timeout_s=timeout_s)
    args = {**config.launch_args(), "own": False}
    if session is not None:
        launch = registry.call_fn(inner, launch_server, {**args, "session": session.model_dump(mode="json"),
                                                         "new_session": where == "session-gone"}).result
        if launch.status != "error":
            return launch, session, where
        # tmux/screen refused the window (the server itself never ran): detached
        where = f"{session.kind} refused a new window: {launch.summary[:160]}"
    return registry.call_fn(inner, launch_server, args).result, None, where


def _bench_after(inner: ToolContext, pending: Pending, started: LaunchResult, fact: UserServerFact,
                 results: dict[str, ToolResult]) -> Comparison | None:
    """Benchmark the restarted server against the runs taken before stopping it (restart_check: the benchmark's
    warm-up handling, the sequential comparator, a slower first look re-measured); outcome and tok/s in `fact`."""
    looks: list[int] = []

    def measure(n: int) -> list[float] | None:
        called = registry.call_fn(inner, benchmark, {
            "port": started.port, "runs": n, "requests_per_run": pending.requests_per_run,
            "max_new_tokens": pending.max_new_tokens, "warmup_runs": 1, "label": "user-server-after",
            **({"log_path": pending.log_path} if pending.log_path else {})}, where="bench_user_server_after")
        res, b = called.result, called.output
        results[f"bench_user_server_after_{len(looks)}"] = res
        looks.append(n)
        if b is None:
            fact.healthy = False
            fact.note = (fact.note + "; " if fact.note else "") + f"benchmark after restart failed: {res.summary}"
            return None
        return [float(x) for x in b.samples]

    judged = judge_throughput(pending.samples_before, pending.runs, measure)
    if judged.samples:
        fact.tps_after = float(statistics.median(judged.samples))
    fact.outcome = judged.outcome
    fact.throughput_reason = judged.reason
    return judged.comparison


def _restarted(fact: UserServerFact, pending: Pending, started: LaunchResult, comparison: Any,
               session: TerminalSession | None, where: str, launch: ToolResult) -> Decision:
    """The restart's decision: where it is back, identity, throughput before → after; the session note in `fact`."""
    same_id = fact.identity_after == fact.identity_before and not fact.differs
    mem = f", {fact.gpu_mib_after} MiB on the GPUs" if fact.gpu_mib_after is not None else ""
    found = (f"back on :{started.port} (pid {fact.pid_after}, ready in {started.ready_seconds or 0:.1f}s), identity "
             f"{'unchanged' if same_id else 'CHANGED: ' + '; '.join(fact.differs or ['argv/env hash'])}{mem}, "
             f"{fact.tps_before or 0:.1f} → {fact.tps_after or 0:.1f} tok/s "
             f"({fact.outcome}{f', {comparison.pct_change:+.1f} %' if comparison else ''}"
             f"{f': {fact.throughput_reason}' if fact.throughput_reason else ''})")
    if session is not None:
        back_in = f"back in a new window of its {session.kind} session {session.name!r}: " \
                  f"`{session.attach_hint()}` shows it"
        found += f", {back_in}"
        fact.note = (fact.note + "; " if fact.note else "") + back_in
    elif pending.supervisor in ("tmux", "screen"):
        fact.note = (fact.note + "; " if fact.note else "") + f"restarted detached, not inside its " \
            f"{pending.supervisor} session ({where}; its output goes to the same file)"
    return Decision(step="user_server", title="Your server, restarted as it was", status="ok",
                    checked="argv, cwd, full environment and log file as recorded; health; identity read again "
                            "(/proc hash, GPU memory, port); a benchmark after the same warm-up handling against the "
                            "one before stopping, a slower first look re-measured",
                    found=found, decided="box left as found" if fact.left_as_found else "see the note",
                    why="the box belongs to the user", evidence=[e.command for e in launch.evidence][:2])


def _where_back(ctx: ToolContext, pending: Pending) -> tuple[TerminalSession | None, str]:
    """The session to restart it in (None: detached) and why: its session alive, ended (a new one of the same name
    on the same tmux server), or the tmux server / screen gone (detached), or none recorded."""
    s = pending.session
    if s is None:
        return None, ("its session was not recorded" if pending.supervisor in ("tmux", "screen") else "no session")
    state = session_state(ctx.host, s)
    if state == "server-gone":
        return None, f"the {s.kind} server of {s.where()} is gone"
    return s, state


def _merge(fact: UserServerFact, before: UserServerFact | None) -> UserServerFact:
    if before is None:
        return fact
    keep = before.model_dump()
    keep.update({k: v for k, v in fact.model_dump().items() if v not in (None, "", False) or k in ("restarted",
                                                                                                  "healthy")})
    return UserServerFact.model_validate(keep)


@action("disrupt")
def give_back_gpus(deps, view: StateView, step, args: dict[str, Any]) -> ActionOutcome:
    """Restart the user's server exactly as it was and prove it (healthy, identity, throughput SAME)."""
    out = ActionOutcome()
    fact, decisions = bring_back(deps.tool_ctx, deps.tool_ctx.run_id, results=out.results,
                                 timeout_s=float(view.params.launch_timeout_s))
    if fact is None:
        out.status, out.summary = "skipped", "your server was not stopped by this run: nothing to restart"
        return out
    fact = _merge(fact, view.fact("user_server", UserServerFact))
    out.facts.user_server = fact
    for d in decisions:
        d.step, d.title = step.id, step.title
    out.decisions = decisions
    out.status = "ok" if fact.restarted else "error"
    out.summary = decisions[0].found if decisions else ""
    return out


def _consent_refused(values: dict[str, Any]) -> dict[str, Any]:
    """The user declined the stop (the graph skipped take_gpus before it ran): say so in the user_server fact."""
    declined = any(d.get("status") == "declined" and d.get("checked") == "approval for take_gpus"
                   for d in values.get("decisions") or [])
    raw = (values.get("facts") or {}).get("user_server")
    if not declined or not raw:
        return values
    fact = UserServerFact.model_validate(raw)
    if fact.stopped:
        return values
    fact.stop_consent = "refused"
    fact.note = fact.note or "you declined stopping it: the launching steps were skipped; it kept running untouched"
    return {**values, "facts": {**values["facts"], "user_server": fact.model_dump(mode="json")}}


def cleanup_user_server(ctx: ToolContext, values: dict[str, Any], timeout_s: float = 600) -> dict[str, Any]:
    """The runner's cleanup: bring the user's server back if this run stopped it and did not restart it yet."""
    run_id = values.get("run_id") or ctx.run_id
    values = _consent_refused(values)
    try:
        fact, decisions = bring_back(ctx, run_id, timeout_s=timeout_s)
    except Exception as exc:  # noqa: BLE001 - the report must still be written; the failure is in it
        fact, decisions = None, [Decision(step="cleanup", status="error", checked="restart of your server",
                                          found=f"{type(exc).__name__}: {exc}"[:300], decided="start it by hand",
                                          why="cleanup failed")]
    if fact is None and not decisions:
        return values
    values = dict(values)
    facts = dict(values.get("facts") or {})
    if fact is not None:
        before = facts.get("user_server")
        facts["user_server"] = _merge(fact, UserServerFact.model_validate(before) if before else None).model_dump(
            mode="json")
    values["facts"] = facts
    values["decisions"] = list(values.get("decisions", [])) + [
        dict(d.model_dump(), step="cleanup") for d in decisions]
    return values


def retake_on_resume(deps, values: dict[str, Any]) -> ActionOutcome | None:
    """Resume after an interruption whose cleanup restarted the user's server, with launching steps still to run:
    stop it again (the run's consent stands) exactly as the first time, else the launches would fail beside it on
    its cards. It came back changed: not stopped, and the launching steps are skipped. None: nothing to take."""
    view = StateView(values)
    fact, old = view.fact("user_server", UserServerFact), _record(view)
    done = set(values.get("done") or [])
    pending = _load_pending(deps.tool_ctx.run_id)
    step = next((st for st in deps.playbook.steps if st.action == "take_gpus"), None) if deps.playbook else None
    if (step is None or step.id not in done or fact is None or old is None or not fact.stopped or not old.port
            or "give_back" in done or pending is None or not pending.restarted):
        return None  # never stopped, already given back, or still down (nothing restarted it)
    out = ActionOutcome()
    found = run_tool(deps, find_server_processes, FindServersInput(port=old.port), out.results,
                     key="retake_find").output
    server = next((s for s in (found.servers if found else []) if s.port == old.port), None)
    if server is None:
        return None  # not serving on its port: nothing holds its cards
    rec = run_tool(deps, inspect_user_server, UserServerInput(pid=server.main.pid, pids=[w.pid for w in server.workers],
                                                              port=old.port), out.results, key="retake_inspect").output
    if rec is None or rec.identity != old.identity:
        fact = fact.model_copy(update={"stopped": False, "note": "it came back from the interruption's restart "
                                       "changed, or could not be read: not stopped again"})
        out.facts.user_server = fact
        out.status, out.summary = "error", fact.note
        out.decisions.append(Decision(step=step.id, title=step.title, status="error", checked="identity", found=fact.note,
                                      decided="launching steps skipped", why="never stop a stranger"))
        return out
    taken = take_gpus(deps, StateView({**values, "facts": {**(values.get("facts") or {}),
                                                            "user_server_record": rec.model_dump(mode="json")}}),
                      step, {})
    taken.results = {**out.results, **taken.results}
    taken.facts.user_server_record = rec
    return taken


def bring_back_pending(ctx: ToolContext) -> list[str]:
    """`specdoctor restore`: restart every user's server a crashed run stopped on this host; one line each."""
    lines = []
    for p in pending_for_host(host_key(ctx.host)):
        run_ctx = dataclasses.replace(ctx, run_id=p.run_id, auto_approve=True)
        # The crashed run's own trial servers first (recorded by process group): they hold the GPUs now.
        stopped = registry.call_fn(run_ctx, stop_server, {}).result
        if not stopped.ok and stopped.status == "error":
            lines.append(f"run {p.run_id}: could not stop its trial servers: {stopped.summary}")
        fact, decisions = bring_back(run_ctx, p.run_id)
        if fact is None:
            continue
        lines.append(f"your server stopped by run {p.run_id}: " + (decisions[0].found if decisions else fact.note))
    return lines
