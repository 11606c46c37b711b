"""Run a playbook end to end: open the host, run the graph with approvals, keep the tree safe, write the report."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from langgraph.types import Command
from pydantic import BaseModel, Field

from specdoctor.engine.checkout_guard import CheckoutGuard
from specdoctor.engine.context import NullView, RunDeps
from specdoctor.engine.graph import compile_playbook
from specdoctor.engine.params import recorded_params, run_params
from specdoctor.engine.playbook import Playbook
from specdoctor.engine.playbook_check import check_references, load_playbook
from specdoctor.engine.predicates import evaluate, explain
from specdoctor.engine.runs import RunRecord, new_run_id, open_checkpointer, save_record
from specdoctor.engine.state import Decision, RunState, StateView, StepUpdate
from specdoctor.errors import BackupError, SpecdoctorError, UsageError
from specdoctor.host import AuditLog, Host, open_host
from specdoctor.host.redact import redact_text
from specdoctor.inference import EngineName, InferenceEngine, engine_for_launch, get_engine
from specdoctor.models.run_params import RunParams
from specdoctor.toolkit import ToolContext
from specdoctor.toolkit.context import run_engine_on
from specdoctor.toolkit.safety import restore_hint, safety_net
from specdoctor.tools.serving.launch import StopResult

__all__ = ["InvestigateOptions", "RunInterrupted", "RunOutcome", "investigate", "resume"]

Approver = Callable[[dict[str, Any]], bool]


class InvestigateOptions(BaseModel):
    """Everything `specdoctor investigate` accepts (and the Python API's `investigate()`)."""

    host: str
    repo: str | None = None
    python: str | None = None
    launch: str | None = None
    port: int | None = None
    expect: dict[str, float] = Field(default_factory=dict)
    essential: list[str] = Field(default_factory=list)
    patch_script: str | None = None
    good_fingerprint: str | None = None
    playbook: str = "regression"
    params: dict[str, Any] = Field(default_factory=dict)
    yes: bool = False
    dry_run: bool = False
    out: str | None = None
    checkpoint: str | None = None
    llm: str | None = None
    llm_base_url: str | None = None
    accept_new_host_key: bool = False
    known_hosts: str | None = None
    identity_files: list[str] = Field(default_factory=list)
    engine: EngineName | None = Field(default=None, description="The serving engine (None: found on the host once, "
                                      "from the launch line or the running server's process).")


class RunOutcome(BaseModel):
    """Where the report went and what it says."""

    run_id: str
    out_dir: str
    verdict: str
    status: str
    files: dict[str, str] = Field(default_factory=dict)
    results: dict[str, Any] = Field(default_factory=dict, exclude=True,
                                    description="Every step's tool result by step id (in memory only).")


class RunInterrupted(KeyboardInterrupt):
    """Ctrl-C, after the clean-up: the partial report is written; `outcome` says where (the face prints it)."""

    def __init__(self, outcome: RunOutcome):
        super().__init__(f"run {outcome.run_id} interrupted")
        self.outcome = outcome


def _host_options(o: InvestigateOptions) -> dict[str, Any]:
    return {"accept_new_host_key": o.accept_new_host_key, "known_hosts": o.known_hosts,
            "identity_files": o.identity_files or None}


def _params(o: InvestigateOptions, host: Host, playbook) -> RunParams:
    hints = host.hints
    params: dict[str, Any] = {k: p.default for k, p in playbook.parameters.items()}
    from_hints = {
        "repo": hints.repo if hints else None, "python": hints.python if hints else None,
        "launch": hints.launch if hints else None, "expect": dict(hints.expect) if hints else {},
        "essential": list(hints.essential) if hints else [], "patch_script": hints.patch_script if hints else None,
        "good_fingerprint": hints.good_fingerprint if hints else None, "port": None}
    named = {"repo": o.repo, "python": o.python, "launch": o.launch, "expect": o.expect, "essential": o.essential,
             "patch_script": o.patch_script, "good_fingerprint": o.good_fingerprint, "port": o.port}
    # Precedence: named options, then --param NAME=VALUE, then what the host knows, then playbook defaults.
    for key, hint in from_hints.items():
        params[key] = named[key] or o.params.get(key) or hint
    params.update({k: v for k, v in o.params.items() if k not in named})
    return run_params(params)


def _advisor(o: InvestigateOptions):
    if not o.llm:
        return None
    from specdoctor.advisor.llm import LLMAdvisor

    return LLMAdvisor(model=o.llm, base_url=o.llm_base_url)


def _drive(app, first_input: Any, cfg: dict[str, Any], deps: RunDeps, approver: Approver | None) -> dict[str, Any]:
    """Invoke the graph, answering interrupts (approvals) until it finishes."""
    # durability="sync": each step's checkpoint is on disk before the next step starts, so a SIGKILL at any moment
    # leaves a checkpoint that names the step to re-run (the default writes it in the background).
    result = app.invoke(first_input, cfg, context=deps, durability="sync")
    while isinstance(result, dict) and result.get("__interrupt__"):
        payload = result["__interrupt__"][0].value
        answer = bool(approver(payload)) if approver else False
        result = app.invoke(Command(resume=answer), cfg, context=deps, durability="sync")
    return app.get_state(cfg).values


def _safety_net(deps: RunDeps, values: dict[str, Any]) -> list[Decision]:
    """Whatever happened: stop the servers this run started and put the tree back (verified).

    The same net as the embed Client's close() (specdoctor.toolkit.safety); here its steps become decisions.
    """
    view = StateView(values)
    backup_id = view.run_facts.backup_id
    repo = view.params.repo
    backups = {repo: backup_id} if backup_id and repo else {}
    decisions: list[Decision] = []
    for st in safety_net(deps.tool_ctx, backups):
        if st.tool == "stop_server":
            if not st.ok and st.status == "error":
                decisions.append(Decision(step="cleanup", tool="stop_server", status="error", checked="stop servers",
                                          found=st.summary, evidence=st.evidence))
            elif st.ok and st.output is not None and StopResult.model_validate(st.output).stopped:
                decisions.append(Decision(step="cleanup", tool="stop_server", checked="servers started by this run",
                                          found=st.summary, decided="stopped them (by recorded PID only)",
                                          why="never leave orphans", evidence=st.evidence))
        elif st.tool == "restore_worktree" and st.repo:
            hint = restore_hint(st.repo, backups[st.repo])
            decisions.append(Decision(step="cleanup", tool="restore_worktree", status="ok" if st.ok else "error",
                                      checked="the working tree matches the backup", found=st.summary,
                                      decided="restored and verified" if st.ok else f"RESTORE FAILED — {hint}",
                                      why="the user's working tree is put back byte-identical on every path",
                                      evidence=st.evidence))
    return decisions


def _bring_back_user_server(deps: RunDeps, values: dict[str, Any]) -> dict[str, Any]:
    """After the safety net freed the GPUs: restart the user's server if this run stopped it and has not restarted
    it (failure, Ctrl-C, a step that raised). engine.actions.user_server keeps the record; this only calls it."""
    from specdoctor.engine.actions.user_server import cleanup_user_server

    timeout = float(recorded_params(values.get("params") or {}).launch_timeout_s)
    return cleanup_user_server(deps.tool_ctx, {**values, "run_id": values.get("run_id") or deps.tool_ctx.run_id},
                               timeout_s=timeout)


def _finish(rec: RunRecord, deps: RunDeps, values: dict[str, Any], error: str | None, started: float,
            host: Host, guard: CheckoutGuard | None = None) -> RunOutcome:
    from specdoctor.engine.report_builder import build_report
    from specdoctor.report.writer import write_report

    extra = _safety_net(deps, values)
    values = _bring_back_user_server(deps, values)
    values = _with_proof(dict(values), guard, extra)
    values["decisions"] = list(values.get("decisions", [])) + [d.model_dump() for d in extra]
    if error:
        values["decisions"].append(Decision(step="run", status="error", checked="the run", found=redact_text(error),
                                            decided="verdict inconclusive", why="the run did not finish").model_dump())
    report = build_report(values, rec=rec, host=host, error=error, started=started, playbook=deps.playbook)
    files = write_report(report, Path(rec.out_dir))
    restore_failed = any(d.tool == "restore_worktree" and d.status == "error" for d in extra)
    rec.status = "needs-restore" if restore_failed else "error" if error else "finished"
    rec.verdict = report.verdict
    rec.finished = time.time()
    save_record(rec)
    return RunOutcome(run_id=rec.run_id, out_dir=rec.out_dir, verdict=report.verdict, status=rec.status,
                      files={k: str(v) for k, v in files.items()}, results=dict(values.get("results") or {}))


def _with_proof(values: dict[str, Any], guard: CheckoutGuard | None, extra: list[Decision]) -> dict[str, Any]:
    """After the safety net: the checkout's manifest again, compared with the first (facts.checkout_proof)."""
    proof = guard.prove() if guard is not None else None
    if proof is not None:
        values["facts"] = {**(values.get("facts") or {}), "checkout_proof": proof.model_dump()}
        extra.append(guard.decision(proof))  # type: ignore[union-attr]
    return values


def _guard(host: Host, run_id: str, repo: str | None, *, resuming: bool) -> CheckoutGuard:
    """Lock the checkout (refused while another live run holds it), then its manifest before anything."""
    guard = CheckoutGuard(ToolContext(host=host, run_id=run_id), repo, run_id)
    guard.acquire()
    try:
        guard.take_before(resuming=resuming)
    except BaseException:
        guard.release()
        raise
    return guard


def _engine_on_port(host: Host, port: int) -> InferenceEngine | None:
    """The engine of the server on `port`, from its own command line: a box may run an SGLang and a vLLM server side
    by side, and then every process together cannot say which one `--port` means (None: no server of this user
    there; the host's look decides, and says why when it cannot)."""
    from specdoctor.tools.serving.server import locate_servers

    try:
        servers = locate_servers(host, port).servers
    except SpecdoctorError:
        return None
    if len(servers) != 1:
        return None
    return get_engine(servers[0].engine) if servers[0].engine else engine_for_launch(servers[0].argv)


def _run_engine(rec: RunRecord, host: Host, first_input: Any) -> InferenceEngine:
    """The run's engine, resolved once: `--engine`, else the launch line the run was given, else the server on
    `--port`, else what runs on the host (its server's process); a run that cannot tell stops here with a one-line
    error."""
    params = recorded_params(first_input.get("params") or {}) if isinstance(first_input, dict) else RunParams()
    found = engine_for_launch(params.launch) if params.launch and not rec.engine else None
    if found is None and not rec.engine and params.port:
        found = _engine_on_port(host, params.port)
    engine = found or run_engine_on(host, rec.engine)
    rec.engine = engine.name
    return engine


def _run(rec: RunRecord, playbook: Playbook, host: Host, first_input: Any, view: Any, approver: Approver | None,
         advisor: Any, dry_run: bool, guard: CheckoutGuard | None = None) -> RunOutcome:
    try:
        return _run_graph(rec, playbook, host, first_input, view, approver, advisor, dry_run, guard)
    finally:
        if guard is not None:
            guard.release()


def _run_graph(rec: RunRecord, playbook: Playbook, host: Host, first_input: Any, view: Any,
               approver: Approver | None, advisor: Any, dry_run: bool, guard: CheckoutGuard | None) -> RunOutcome:
    ctx = ToolContext(host=host, run_id=rec.run_id,
                      progress=guard.beating(view.progress) if guard is not None else view.progress,
                      run_engine=_run_engine(rec, host, first_input))
    deps = RunDeps(host=host, tool_ctx=ctx, view=view, advisor=advisor, out_dir=Path(rec.out_dir), yes=rec.yes,
                   dry_run=dry_run, playbook=playbook)
    cfg = {"configurable": {"thread_id": rec.run_id}}
    started = time.time()
    values: dict[str, Any] = {}
    with open_checkpointer(rec.checkpoint) as saver:
        app = compile_playbook(playbook, checkpointer=saver)
        if hasattr(view, "start"):
            view.start([(s.id, s.title or s.id, s.tool or s.action or "", "") for s in playbook.steps])
        try:
            values = _drive(app, first_input, cfg, deps, approver)
        except KeyboardInterrupt:
            values = app.get_state(cfg).values
            outcome = _finish(rec, deps, values, f"interrupted (SIGINT): partial report; `specdoctor resume "
                              f"{rec.run_id}` continues the run", started, host, guard)
            rec.status = "interrupted"
            save_record(rec)
            detach = getattr(host, "detach", None)
            if callable(detach):  # keep what `resume` reattaches to (a simulated host's sandbox)
                detach()
            raise RunInterrupted(outcome.model_copy(update={"status": "interrupted"})) from None
        except Exception as exc:  # any failure still ends in a written report
            values = app.get_state(cfg).values
            return _finish(rec, deps, values, f"{type(exc).__name__}: {exc}", started, host, guard)
        return _finish(rec, deps, values, None, started, host, guard)


def investigate(options: InvestigateOptions, *, view: Any = None, approver: Approver | None = None,
                host: Host | None = None) -> RunOutcome:
    """Run a playbook against a host and write report.md/json/html + audit.jsonl under the out folder.

    `host` lets a caller pass an already open Host (it stays open; `options.host` is then only its name).
    """
    os.environ.setdefault("LANGGRAPH_STRICT_MSGPACK", "true")
    view = view or NullView()
    run_id = new_run_id()
    out_dir = Path(options.out or Path("specdoctor-runs") / run_id).resolve()
    out_dir.mkdir(parents=True, exist_ok=True)
    audit = AuditLog(out_dir / "audit.jsonl")
    playbook = load_playbook(options.playbook)
    check_references(playbook)
    own_host = host is None
    if host is None:
        host = open_host(options.host, audit=audit, **_host_options(options))
    else:
        host.audit = audit
    try:
        params = _params(options, host, playbook)
        view_state = StateView(RunState(run_id=run_id, params=params))
        missing = [p for p in playbook.prerequisites if not evaluate(p, view_state)]
        if missing:
            raise UsageError("prerequisites not met: " + "; ".join(explain(m, view_state)[1] for m in missing))
        rec = RunRecord(run_id=run_id, host=options.host, reopen=getattr(host, "reopen_spec", None) or options.host,
                        host_options=_host_options(options), playbook=options.playbook, out_dir=str(out_dir),
                        checkpoint=options.checkpoint or "", yes=options.yes, dry_run=options.dry_run,
                        llm=options.llm, llm_base_url=options.llm_base_url, engine=options.engine)
        # A dry run only reads: it neither waits for nor blocks a real run on the same checkout.
        guard = None if options.dry_run else _guard(host, run_id, params.repo, resuming=False)
        save_record(rec)
        first = {"run_id": run_id, "params": params.to_json(), "results": {}, "facts": {}, "decisions": [], "done": []}
        return _run(rec, playbook, host, first, view, approver, _advisor(options), options.dry_run, guard)
    finally:
        if own_host:
            host.close()


def _retake_gpus(rec: RunRecord, playbook: Playbook, deps: RunDeps, values: dict[str, Any]) -> None:
    """The interruption's cleanup restarted the user's server: stop it again before the remaining launches, written
    into the checkpoint as if the last finished step had recorded it (the interrupted step re-runs next)."""
    from specdoctor.engine.actions.user_server import retake_on_resume

    retaken = retake_on_resume(deps, values)
    if retaken is None:
        return
    with open_checkpointer(rec.checkpoint or None) as saver:
        app = compile_playbook(playbook, checkpointer=saver)
        app.update_state({"configurable": {"thread_id": rec.run_id}},
                         {k: v for k, v in StepUpdate(results=retaken.results, facts=retaken.facts,
                                                      decisions=retaken.decisions).to_checkpoint().items()
                          if k != "done"}, as_node=values["done"][-1])


def resume(run_id: str, *, view: Any = None, approver: Approver | None = None, yes: bool | None = None) -> RunOutcome:
    """Continue a run after a crash, SIGINT or dropped connection: clean up, then finish the remaining steps."""
    from specdoctor.engine.runs import load_record

    os.environ.setdefault("LANGGRAPH_STRICT_MSGPACK", "true")
    rec = load_record(run_id)
    if yes is not None:
        rec.yes = yes
    view = view or NullView()
    audit = AuditLog(Path(rec.out_dir) / "audit.jsonl")
    host = open_host(rec.reopen, audit=audit, **{k: v for k, v in rec.host_options.items() if v is not None})
    try:
        with open_checkpointer(rec.checkpoint or None) as saver:
            playbook = load_playbook(rec.playbook)
            check_references(playbook)
            app = compile_playbook(playbook, checkpointer=saver)
            snapshot = app.get_state({"configurable": {"thread_id": run_id}})
        values = snapshot.values
        if not values:
            raise UsageError(f"run {run_id} has no checkpoint to resume")
        # A step whose writes were saved before the kill shows as a task, not in `next`: that run is not finished.
        if rec.status == "finished" or not (snapshot.next or snapshot.tasks):
            raise UsageError(f"run {run_id} already finished (report: {rec.out_dir}); nothing to resume")
        guard = None if rec.dry_run else _guard(host, run_id, recorded_params(values.get("params") or {}).repo,
                                                 resuming=True)
        # The interrupted step re-runs from a clean world: our servers stopped, the tree put back.
        ctx = ToolContext(host=host, run_id=run_id, progress=view.progress)
        try:
            cleanup = _safety_net(RunDeps(host=host, tool_ctx=ctx), values)
            if any(d.tool == "restore_worktree" and d.status == "error" for d in cleanup):
                raise BackupError(f"run {run_id}: could not put the tree back before resuming: {cleanup[-1].found}")
            _retake_gpus(rec, playbook, RunDeps(host=host, tool_ctx=ctx, view=view, yes=rec.yes, playbook=playbook),
                         values)
        except BaseException:
            if guard is not None:
                guard.release()
            raise
        rec.status = "running"
        save_record(rec)
        advisor = _advisor(InvestigateOptions(host=rec.host, llm=rec.llm, llm_base_url=rec.llm_base_url))
        return _run(rec, playbook, host, None, view, approver, advisor, rec.dry_run, guard)
    finally:
        host.close()
