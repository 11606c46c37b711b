"""`--dry-run`: which steps are cheap reads that still run, and the commands every other step would run.

A dry run is a plan, not a run: it reads the box (host facts, fingerprint, the running server, the local
changes, gates, propagation, the launch plan) and, for every step that would launch, benchmark, sweep,
mutate or take minutes, lists the exact commands as far as they are known before running — a command whose
inputs only an earlier result gives (the essential patches, the sweep's winners) says which result.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable
from typing import Any

from specdoctor.engine.state import StateView
from specdoctor.host.redact import redact_text
from specdoctor.models import ServerFact
from specdoctor.report.model import PlannedCommand, PlannedStep

__all__ = ["CHEAP_READS", "runs_in_dry_run", "plan_step"]

CHEAP_READS = frozenset({
    # tools: each reads files, /proc, git or nvidia-smi once; none launches, benchmarks or loops over configs
    "host_facts", "fingerprint", "fingerprint_diff", "catalog_diffs", "triage_diffs", "scan_feature_gates",
    "check_env_propagation", "find_server_processes", "read_process_env", "server_info", "engine_origin",
    "sglang_origin",  # engine_origin's deprecated name
    "launch_cost", "plan_launches", "nccl_inventory", "list_deltas", "breakeven",
    "catalog_commits",  # one git log of the range and a triage of its file names: the plan counts its bisection
    # actions built only from the reads above
    "locate_server", "plan_run", "replan_run",
})
"""What a dry run still runs. Everything else — mutate/disrupt steps, benchmarks, the NCCL sweep (a read that takes
minutes), the LLM, the verdict — is planned only. An allowlist, so a new tool is planned, never run, until it is
known to be a cheap read."""

_PORT = "PORT"  # placeholder for the free port launch_server picks at launch time
Preview = Callable[[StateView, dict[str, Any], str], list[PlannedCommand]]


def runs_in_dry_run(target: str) -> bool:
    return target in CHEAP_READS


def _launch_line(view: StateView, *, speculative: bool, env: dict[str, str] | None = None,
                 tree: str | None = None) -> PlannedCommand:
    """The trial server's launch line exactly as launch_server builds it; the port is picked at launch."""
    from specdoctor.tools.serving.launch import build_command

    launch = view.run_facts.launch or view.params.launch
    if not launch:
        return PlannedCommand(command="(launch line unknown: no running server found and no --launch)", known=False,
                              after="locate")
    try:
        argv = build_command(launch, python=view.params.python, drop_speculative=not speculative, port=1)
    except Exception as exc:  # an unparsable line is the launch tools' error to report; the plan says so
        return PlannedCommand(command=f"(launch line not parsable: {exc})", known=False)
    for i, tok in enumerate(argv):
        if tok == "--port" and i + 1 < len(argv):
            argv[i + 1] = _PORT
        elif tok.startswith("--port="):
            argv[i] = f"--port={_PORT}"
    inherited = view.run_facts.server_env or {}
    extra = " ".join(shlex.quote(f"{k}={v}") for k, v in sorted((env or {}).items()))
    cmd = "setsid nohup " + (f"env {extra} " if extra else "") + " ".join(shlex.quote(a) if a != _PORT else a
                                                                          for a in argv)
    notes = [f"{_PORT} = a free port picked at launch"]
    if inherited:
        notes.append(f"with the running server's {len(inherited)} environment variables")
    if tree:
        notes.append(f"imports the engine from {tree}")
    return PlannedCommand(command=cmd, note="; ".join(notes))


def _bench(view: StateView, port: Any, label: str) -> PlannedCommand:
    p = view.params
    runs, reqs, toks = p.runs, p.requests_per_run, p.max_new_tokens
    return PlannedCommand(command=f"POST http://127.0.0.1:{port}/generate × {reqs} per run, {runs} runs + 1 warm-up "
                          f"(max_new_tokens {toks}, temperature 0)", note=f"benchmark of {label}")


def _git(repo: str, *args: str) -> str:
    from specdoctor.tools.checkout.repo import git

    return shlex.join(git(repo, *args))


def _backup_id(view: StateView) -> str:
    bid = view.run_facts.backup_id
    if bid:
        return str(bid)
    run_id = view.record.run_id or "RUN"
    return "".join(c if c.isalnum() or c in "-_." else "-" for c in run_id)


def _reproduce(view: StateView, args: dict[str, Any], step: str) -> list[PlannedCommand]:
    server = view.run_facts.server or ServerFact()
    out: list[PlannedCommand] = []
    if server.running and any("speculative" in a for a in server.argv):
        out.append(_bench(view, server.port, "the running speculative server (no launch)"))
    else:
        out += [_launch_line(view, speculative=True), _bench(view, _PORT, "the speculative server")]
    out += [_launch_line(view, speculative=False), _bench(view, _PORT, "the baseline server (no speculation)"),
            PlannedCommand(command="kill -TERM -PGID (each trial server's process group, when measured)")]
    return out


def _backup(view: StateView, args: dict[str, Any], step: str) -> list[PlannedCommand]:
    repo = str(args.get("repo") or view.params.repo or "REPO")
    bid = _backup_id(view)
    ref = f"refs/specdoctor/backups/{bid}"
    return [PlannedCommand(command=_git(repo, "rev-parse", "--verify", "-q", ref)),
            PlannedCommand(command=_git(repo, "commit-tree", "WORKTREE_TREE", "-p", "HEAD", "-p", "INDEX_COMMIT",
                                        "-m", "META"), known=False, after="the snapshot of the tree"),
            PlannedCommand(command=f"tar -czf ~/.specdoctor/backups/{bid}/state.tar.gz (the changed and untracked "
                           "files) && git diff --binary HEAD > worktree.patch"),
            PlannedCommand(command=_git(repo, "update-ref", "-m", f"specdoctor backup {bid}", ref, "COMMIT",
                                        "0" * 40), known=False, after="the commit above")]


def _restore(view: StateView, args: dict[str, Any], step: str) -> list[PlannedCommand]:
    repo = str(args.get("repo") or view.params.repo or "REPO")
    return [PlannedCommand(command=_git(repo, "reset", "-q", "--hard", "HEAD")),
            PlannedCommand(command=_git(repo, "clean", "-fdq")),
            PlannedCommand(command=f"git checkout-index from refs/specdoctor/backups/{_backup_id(view)} "
                           "+ tar -xzf state.tar.gz, then the manifest compared path by path",
                           note="the tree's own files, byte for byte")]


def _changed(view: StateView) -> list[str]:
    cat = view.get("catalog") or view.get("results.catalog.output") or {}
    files = [f.get("path") for f in (cat.get("files") or []) if isinstance(f, dict)]
    return [str(f) for f in files + list(cat.get("untracked") or []) if f]


def _essentials(view: StateView, args: dict[str, Any], step: str) -> list[PlannedCommand]:
    given = list(view.params.essential)
    if given:
        return [PlannedCommand(command="(none: the essential patches were given with --essential)")]
    changed = _changed(view)
    return [_launch_line(view, speculative=True, tree="a trial tree at HEAD (no patch)"),
            _bench(view, _PORT, "no patch, while that server is up, more runs while undecided against today's "
                   "(the subtraction takes it instead of a launch of the same tree)"),
            PlannedCommand(command="a trial tree with all patches, launched (start or not) only if HEAD alone does "
                           "not start", known=False, after="whether HEAD alone starts"),
            PlannedCommand(command=f"more launches over subsets of the {len(changed)} changed files "
                           "(start or not; no benchmark)", known=False, after="whether HEAD alone starts")]


def _subtract(view: StateView, args: dict[str, Any], step: str) -> list[PlannedCommand]:
    given = [str(f) for f in view.params.essential]
    return [PlannedCommand(command=f"build ~/.specdoctor/trees/RUN/essentials: HEAD + {given or 'ESSENTIALS'}",
                           known=bool(given), after="" if given else "essentials",
                           note="a trial tree: your checkout is only read"),
            _launch_line(view, speculative=True, tree="the trial tree with the essential patches only"),
            _bench(view, _PORT, "essentials only, more runs on the same server until the comparator decides"),
            PlannedCommand(command="build ~/.specdoctor/trees/RUN/all: HEAD (objects via alternates) + every changed "
                           "file from the backup", note="all patches = today's measurement, reused; launched "
                           "only to confirm a difference before bisecting"),
            PlannedCommand(command="(either launch is skipped when the essentials search benchmarked the very same "
                           "tree — same HEAD, files and hunks, no patch script — and those runs decide)",
                           known=False, after="essentials"),
            _launch_line(view, speculative=True, tree="the trial tree with all patches"),
            PlannedCommand(command="rm -rf ~/.specdoctor/trees/RUN/all ~/.specdoctor/trees/RUN/essentials")]


def _bisect(view: StateView, args: dict[str, Any], step: str) -> list[PlannedCommand]:
    changed = _changed(view)
    return [PlannedCommand(command=f"launch + benchmark per trial over subsets of the {len(changed)} changed files "
                           "(same launch line as below, a trial tree per subset)", known=False,
                           after="subtract (runs only if removing the patches changed throughput)"),
            _launch_line(view, speculative=True, tree="one trial tree per subset")]


def _nccl_sweep(view: StateView, args: dict[str, Any], step: str) -> list[PlannedCommand]:
    from specdoctor.tools.nccl.nccl_grid import expand_grid

    server_args = (view.run_facts.server or ServerFact()).args
    tp = server_args.get("tp_size") or "TP"
    configs, _skipped = expand_grid(None)
    return [PlannedCommand(command=f"env NCCL_DEBUG=INFO [NCCL_*=…] all_reduce_perf -b MIN -e MAX -f 2 -g {tp} "
                           "-d bfloat16 -n 20 -w 5 -G 10", known=False, after="nccl_inventory (the decode/verify "
                           "message sizes from the model's hidden size)",
                           note=f"once per configuration: up to {len(configs)} NCCL settings, the finalists "
                           "repeated (torchrun allreduce_bench.py when all_reduce_perf is missing)")]


def _nccl_promote(view: StateView, args: dict[str, Any], step: str) -> list[PlannedCommand]:
    return [PlannedCommand(command="env NCCL_…=… " + _launch_line(view, speculative=True).command, known=False,
                           after="nccl (the sweep's significantly better settings)"),
            _bench(view, _PORT, "each promoted NCCL setting, A/B against the workers' current one")]


def _conclude(view: StateView, args: dict[str, Any], step: str) -> list[PlannedCommand]:
    return [PlannedCommand(command="(no command: the verdict and game plan are computed from the results)",
                           known=False, after="every measurement above")]


def _llm(view: StateView, args: dict[str, Any], step: str) -> list[PlannedCommand]:
    return [PlannedCommand(command="(read-only tools chosen by the LLM advisor, only with --llm)", known=False,
                           after="the advisor's choices")]


def _server(view: StateView) -> tuple[str, str]:
    server = view.run_facts.server or ServerFact()
    return str(server.pid or "PID"), str(server.port or "PORT")


def _examine_user_server(view: StateView, args: dict[str, Any], step: str) -> list[PlannedCommand]:
    pid, port = _server(view)
    return [PlannedCommand(command=f"cat /proc/{pid}/cmdline /proc/{pid}/environ /proc/{pid}/cgroup; readlink "
                           f"/proc/{pid}/cwd; nvidia-smi --query-compute-apps=pid,used_memory --format=csv",
                           note="what brings your server back, its supervisor, its GPU memory"),
            _bench(view, port, "your running server (the figure a restart is compared with)")]


def _take_gpus(view: StateView, args: dict[str, Any], step: str) -> list[PlannedCommand]:
    pid, port = _server(view)
    return [PlannedCommand(command=f"kill -TERM {pid}; then its workers; kill -KILL after the grace period",
                           note=f"only with your consent, and only if pid {pid} still has the identity examined; "
                           f"your server on :{port} is down until give_back")]


def _give_back_gpus(view: StateView, args: dict[str, Any], step: str) -> list[PlannedCommand]:
    pid, port = _server(view)
    server = view.run_facts.server or ServerFact()
    argv = " ".join(shlex.quote(a) for a in server.argv) or "ITS ARGV"
    return [PlannedCommand(command=f"setsid nohup env -i ITS_ENVIRONMENT {argv} >> ITS_LOG",
                           note="in its own cwd, its argv and full environment as recorded before stopping (kept "
                           "0600), only if this run stopped it"),
            _bench(view, port, "your restarted server, compared with the figure before stopping (SAME expected)")]


def _attribute(view: StateView, args: dict[str, Any], step: str) -> list[PlannedCommand]:
    """One trial per revertible delta list_deltas found (it ran: a cheap read), each the launch line with its revert."""
    from specdoctor.models.delta import DeltaList

    deltas = view.latest(DeltaList) or view.fact("deltas", DeltaList)
    if deltas is None:
        return [PlannedCommand(command="one launch + benchmark per revertible difference from the reference",
                               known=False, after="deltas (list_deltas)")]
    out: list[PlannedCommand] = []
    for d in deltas.revertible():
        r = d.revert
        assert r is not None  # revertible() keeps only deltas with a revert
        env = {**r.env}
        line = _launch_line(view, speculative=True, env=env)
        unset = " ".join(f"-u {shlex.quote(v)}" for v in [*r.unset, *r.undo_sitecustomize])
        cmd = line.command.replace("setsid nohup ", f"setsid nohup env {unset} " if unset else "setsid nohup ", 1)
        parts = [f"reverts {d.label}"]
        if r.argv_set:
            parts.append("with " + ", ".join(f"--{k.replace('_', '-')} {v}" if v else f"without --{k.replace('_', '-')}"
                                             for k, v in r.argv_set.items()))
        if r.drop_patches:
            parts.append(f"a trial tree without {', '.join(r.drop_patches)}")
        out += [PlannedCommand(command=cmd, note="; ".join(parts)), _bench(view, _PORT, d.name)]
    if not out:
        return [PlannedCommand(command="(no revertible difference: no trial; the non-revertible ones are quantified "
                               "by the probe)")]
    out.append(PlannedCommand(command="more trials (subsets of the reverts, confirmed both ways)", known=False,
                              after="these trials' outcomes"))
    return out


def _short(value: Any) -> str:
    """An argument as a reader needs it in a plan: scalars as they are, structures by their size."""
    if isinstance(value, dict):
        return f"<{len(value)} fields>"
    if isinstance(value, list) and not all(isinstance(x, str | int | float) for x in value):
        return f"<{len(value)} items>"
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "…"


def _probe(view: StateView, args: dict[str, Any], step: str) -> list[PlannedCommand]:
    from specdoctor.models.delta import DeltaList

    deltas = view.latest(DeltaList) or view.fact("deltas", DeltaList)
    hardware = [d.label for d in (deltas.deltas if deltas else []) if d.kind == "hardware"]
    what = "; ".join(hardware) or "none found today"
    return [PlannedCommand(command="nvidia-smi --query-gpu=… read repeatedly under a load, per GPU state that differs",
                           note=f"targeted measurements of what a trial cannot revert: {what}")]


def _generic(target: str, args: dict[str, Any]) -> list[PlannedCommand]:
    shown = ", ".join(f"{k}={_short(v)}" for k, v in args.items() if v not in (None, [], {}, ""))
    return [PlannedCommand(command=f"{target}({shown})", known=False, after="it runs",
                           note="its shell commands are known only when the tool runs")]


_PREVIEWS: dict[str, Preview] = {
    "attribute": _attribute, "probe_hardware": _probe,
    "examine_user_server": _examine_user_server, "take_gpus": _take_gpus, "give_back_gpus": _give_back_gpus,
    "reproduce": _reproduce, "backup_worktree": _backup, "restore_worktree": _restore,
    "find_essential_patches": _essentials, "subtract": _subtract, "bisect_patches": _bisect,
    "nccl_sweep": _nccl_sweep, "promote_nccl": _nccl_promote, "conclude": _conclude, "llm_explore": _llm,
}


def plan_step(step: Any, view: StateView, args: dict[str, Any], effect: str) -> PlannedStep:
    """What `step` would do and run, without running it."""
    from specdoctor.engine.predicates import explain

    target = step.tool or step.action or ""
    preview = _PREVIEWS.get(target)
    commands = preview(view, args, step.id) if preview is not None else _generic(target, args)
    # a launch line can carry --api-key or a token: the plan is printed and written, so it is redacted like the audit
    commands = [c.model_copy(update={"command": redact_text(c.command), "note": redact_text(c.note)})
                for c in commands]
    condition = ""
    if step.when:
        holds, said = explain(step.when, view)
        condition = f"runs only if {step.when}" + ("" if holds else f" (today: {said})")
    why = ("changes the box" if effect in ("mutate", "disrupt") else
           "writes the verdict" if target == "conclude" else "takes longer than a read")
    return PlannedStep(step=step.id, title=step.title, target=target, effect=effect, condition=condition,
                       commands=commands, why=f"not run in a dry run: {why}")
