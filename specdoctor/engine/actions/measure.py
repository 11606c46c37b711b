"""Actions that find the server and reproduce the throughput figures the user claims."""

from __future__ import annotations

from typing import Any

from specdoctor.engine.actions import ActionOutcome, action, call_tool
from specdoctor.engine.state import Decision, StateView
from specdoctor.errors import UsageError
from specdoctor.inference import get_engine
from specdoctor.models import Fingerprint
from specdoctor.toolkit import ToolResult, registry
from specdoctor.tools.server import ProcessEnv, ServerList
from specdoctor.tools.trial import (
    AUTO_PORT,
    LaunchConfig,
    LaunchFailed,
    MeasureFailed,
    Measurement,
    measure,
    trial,
)
from specdoctor.tools.trial_code import WrongTree, check_origin, in_tree
from specdoctor.tools.trial_tree import TrialTree

__all__ = ["locate_server", "reproduce", "measure_config", "claim_outcome"]


def _fmt(x: Any, nd: int = 1) -> str:
    return "?" if x is None else f"{x:.{nd}f}"


@action("read")
def locate_server(deps, view: StateView, step, args: dict[str, Any]) -> ActionOutcome:
    """Find the running SGLang server (if any) and settle the launch command and topology to use."""
    out = ActionOutcome()
    port = args.get("port") or _launch_port(view.params.get("launch"))
    repo = view.params.get("repo")
    # Exactly the server the user means: the port of --port/--launch, else the one running from --repo, else the
    # only one; several and nothing says which → a one-line error listing them (never the first found).
    query: dict[str, Any] = {"exactly_one": True, **({"port": port} if port else {"repo": repo} if repo else {})}
    res = call_tool(deps, "find_server_processes", query, out.results, key=step.id)
    if res.status == "error" and res.retryable:
        raise UsageError(res.summary)
    found_servers = registry.typed_output(res, ServerList, where=step.id)
    servers = found_servers.servers if found_servers is not None else []
    server: dict[str, Any] = {"running": False}
    if len(servers) == 1:
        s = servers[0]
        argv = s.argv or s.main.cmdline
        server = {"running": True, "port": s.port, "pid": s.main.pid, "argv": argv, "args": s.args,
                  "workers": len(s.workers), "launch": " ".join(argv)}
        # Where it logs and runs, as the kernel sees it (find_server_processes read /proc/PID/fd and cwd).
        if s.log_path:
            server["log_path"] = s.log_path
        if s.cwd:
            server["cwd"] = s.cwd
    launch = view.params.get("launch") or server.get("launch")
    # Trial servers take a port the host has free at each launch (launch_server picks it: evidence there).
    out.facts = {"server": server, "launch": launch, "server_env": {}, "trial_port": AUTO_PORT}
    if server.get("pid"):
        env_res = call_tool(deps, "read_process_env", {"pid": server["pid"]}, out.results, key=f"{step.id}_env")
        penv = registry.typed_output(env_res, ProcessEnv, where=f"{step.id}_env")
        env = penv.env if penv is not None else {}
        # Relaunches reproduce the running server's tuning environment (never its redacted secrets, nor what the
        # engine forces itself: passing that again would hide what the engine does).
        engine = get_engine()
        out.facts["server_env"] = {k: v for k, v in env.items() if k.startswith(engine.relaunch_env_prefixes)
                                   and "REDACTED" not in v and k not in engine.forced_env_names}
    fp = view.result("fingerprint", Fingerprint) or Fingerprint()
    gpus = fp.gpus
    interconnect = fp.interconnect or fp.topology.get("interconnect")
    kind = (interconnect or "").lower()
    out.facts["topology"] = {"gpu_count": len(gpus), "detail": interconnect,
                             "interconnect": "nvlink" if "nvlink" in kind else "pcie" if "pcie" in kind else None}
    found = (f"server on port {server['port']} (pid {server['pid']}, {server['workers']} workers)"
             if server["running"] else res.summary if res.status == "no_data" else "no SGLang server running")
    out.summary = found
    out.decisions.append(Decision(
        step=step.id, title=step.title, status="ok", checked="running SGLang servers (/proc)", found=found,
        decided=f"use launch command: {launch}" if launch else "no launch command available",
        why="the user's --launch wins; otherwise the running server's own command line is the ground truth",
        evidence=[e.command for e in res.evidence]))
    return out


def _launch_port(launch: str | None) -> int | None:
    """The port a given launch line serves on: the server to examine when the user named one."""
    if not launch:
        return None
    try:
        return get_engine().parse_launch(launch).port
    except Exception:  # an unparsable line is reported later by the tools that need it
        return None


def _recorder(results: dict[str, Any]):
    def record(key: str, result: ToolResult) -> None:
        results[key] = result.model_dump(mode="json")

    return record


def measure_config(deps, view: StateView, *, label: str, speculative: bool, results: dict[str, Any],
                   env: dict[str, str] | None = None, runs: int | None = None,
                  tree: TrialTree | None = None) -> dict[str, Any]:
    """Launch a server (spec or baseline), benchmark it, stop it; a measurement dict or {'error': ...}.

    With `tree` the server imports the engine from that trial tree (checked in its own environment first)."""
    launch = view.get("facts.launch")
    if not launch:
        raise UsageError("no launch command: pass --launch or start the server first")
    p = view.params
    config = LaunchConfig(command=launch, python=p.get("python"), speculative=speculative, label=label,
                          env={**(view.get("facts.server_env") or {}), **(env or {})}, port=AUTO_PORT,
                          timeout_s=p.get("launch_timeout_s", 600))
    config = in_tree(config, tree) if tree is not None else config
    try:
        with trial(deps.tool_ctx, config, record=_recorder(results)) as handle:
            if tree is not None:
                check_origin(handle, tree)
            m = measure(handle, runs=runs or p.get("runs", 5), requests_per_run=p.get("requests_per_run", 3),
                        max_new_tokens=p.get("max_new_tokens", 128), warmup_runs=1)
    except (LaunchFailed, MeasureFailed) as exc:
        return {"error": exc.result.summary, "status": exc.result.status, "label": label}
    except WrongTree as exc:
        return {"error": str(exc), "status": "unresolved", "label": label}
    data = m.model_dump(mode="json")
    data["label"] = label
    data["env"] = env or {}
    return data


def claim_outcome(samples: list[float], claimed: float) -> dict[str, Any]:
    from specdoctor.stats.comparator import compare_to_claim

    c = compare_to_claim(samples, claimed)
    data = c.model_dump() if hasattr(c, "model_dump") else dict(c)
    data["claimed"] = claimed
    return data


@action("disrupt")
def reproduce(deps, view: StateView, step, args: dict[str, Any]) -> ActionOutcome:
    """Measure baseline and speculative tok/s with repeats and compare them with the user's claims."""
    out = ActionOutcome()
    measure: dict[str, Any] = {}
    server = view.get("facts.server") or {}
    spec_running = server.get("running") and any("speculative" in a for a in server.get("argv", []))
    before_stop = view.get("facts.user_server_bench")  # measured just before the user's server was stopped
    if spec_running and before_stop:
        measure["spec"] = before_stop
    elif spec_running:
        deps.view.progress(f"benchmarking the running server on port {server['port']}")
        bench = call_tool(deps, "benchmark", {
            "port": server["port"], "runs": view.params.get("runs", 5),
            "requests_per_run": view.params.get("requests_per_run", 3),
            "max_new_tokens": view.params.get("max_new_tokens", 128), "warmup_runs": 1, "label": "spec-running",
            "log_path": server.get("log_path")},
            out.results, key="bench_spec_running")
        bres = registry.typed_output(bench, Measurement, where="bench_spec_running")
        measure["spec"] = (dict(bres.model_dump(mode="json"), label="spec (running server)") if bres is not None
                           else {"error": bench.summary})
    else:
        deps.view.progress("launching the speculative server")
        measure["spec"] = measure_config(deps, view, label="spec", speculative=True, results=out.results)
    deps.view.progress("launching the baseline server (no speculation)")
    measure["baseline"] = measure_config(deps, view, label="baseline", speculative=False, results=out.results)
    out.facts["measure"] = measure
    claims: dict[str, Any] = {}
    for key, claimed in (view.params.get("expect") or {}).items():
        m = measure.get(key) or {}
        if m.get("samples"):
            claims[key] = claim_outcome(m["samples"], float(claimed))
    out.facts["claims"] = claims
    b, s = measure.get("baseline", {}), measure.get("spec", {})
    errors = [f"{k}: {v.get('error')}" for k, v in measure.items() if v.get("error")]
    out.status = "error" if errors else "ok"
    found = (f"baseline {_fmt(b.get('median'))} tok/s [{_fmt(b.get('ci_low'))}, {_fmt(b.get('ci_high'))}], "
             f"speculative {_fmt(s.get('median'))} tok/s [{_fmt(s.get('ci_low'))}, {_fmt(s.get('ci_high'))}], "
             f"accept length {_fmt(s.get('accept_length'), 2)}")
    claim_txt = "; ".join(f"claimed {k} {c['claimed']:g} → {c.get('outcome')} ({_fmt(c.get('pct_change'))} %)"
                          for k, c in claims.items())
    out.summary = found + (f"; {claim_txt}" if claim_txt else "") + (f"; errors: {errors}" if errors else "")
    out.decisions.append(Decision(
        step=step.id, title=step.title, status=out.status, checked="throughput with and without speculation, "
        f"{view.params.get('runs', 5)} runs each (one value per run)", found=out.summary,
        decided="compare every later measurement with these, not with the claims",
        why="a regression can only be diagnosed against numbers re-measured on this box today",
        evidence=out.commands(40)))
    return out
