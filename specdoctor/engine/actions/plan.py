"""Plan and cost the run's launches before the first disruptive step (reads only)."""

from __future__ import annotations

import math
from typing import Any

from specdoctor.diagnosis.references import claims_for
from specdoctor.engine.actions import ActionOutcome, action, run_tool
from specdoctor.engine.actions.measure import good_run
from specdoctor.engine.budget import start_budget
from specdoctor.engine.gap import claim_held
from specdoctor.engine.identity import RUNNING_SERVER_KEYS, decide_identity
from specdoctor.engine.state import Decision, StateView
from specdoctor.models import Claims, ServerFact
from specdoctor.models.identity import IdentityFact
from specdoctor.stats.comparator import GROWING_CAP
from specdoctor.tools.checkout.commit_bisect import commit_bisect_phase
from specdoctor.tools.checkout.commits import CommitCatalog
from specdoctor.tools.checkout.repo import CatalogInput, catalog_diffs
from specdoctor.tools.serving.plan import PlannedPhase, plan_launches
from specdoctor.tools.serving.server import ServerList
from specdoctor.tools.serving.trial import PROFILE_RUNS
from specdoctor.tools.serving.user_server import UserServerRecord, inspect_user_server

__all__ = ["plan_run", "regression_phases", "bisect_expected", "gap_shown"]

PHASE_PROFILE_LAUNCHES = 2
"""At worst: both arms of the confirming comparison launched only to be profiled (no trial could profile them)."""
PHASE_PROFILE_COST = (f"the confirming comparison's two arms are profiled on the trials that ran them, while their "
                      f"servers are up ({PROFILE_RUNS} short runs without and {PROFILE_RUNS} with the engine's "
                      "profiler each, ~25 % slower while it is on: 27 % on a real H200)")
_PREFIX_LIMIT = 8  # stats.ddmin.prefix_search's default: culprits searched one by one at most


def _log2(n: int) -> int:
    return math.ceil(math.log2(n)) if n > 1 else 0


def bisect_expected(p: int) -> int:
    """The patch search's launches for P patches with the one culprit the plan expects: about 2·⌈log2 P⌉ — the
    slow/fast search's halvings and confirmation (3 to 5 launches for P = 8 across the corpus's one-culprit stories),
    or the effect search's 2·⌈log2 P⌉ + 2 when it confirms nobody. The culprit's phase profile, 2 launches until #46
    and carried by this estimate's + 2, is taken on its confirming trials' own servers: no launch."""
    return 2 * _log2(p) if p > 0 else 0


def regression_phases(*, changed: int, essential_given: bool, spec_running: bool, tp_size: int, runs: int,
                      max_runs: int, finalists: int, stops_user_server: bool,
                      identity: IdentityFact | None = None, gap_shown: bool = True) -> list[PlannedPhase]:
    """Each launching step of the regression playbook at its own cap (warm-up run included in `runs`), with the
    launches expected from what is known before the stop: `identity` (digests against the good run, claims held on
    the running server) spares whole steps, exactly as the playbook's predicates will; `gap_shown` (a claim not
    reached on the running server, or none judged there) says whether a search is expected at all."""
    ident = identity or IdentityFact()
    if ident.settled:  # the predicates skip every launching step: nothing is stopped, nothing is launched
        return []
    phases = [PlannedPhase(step="reproduce", launches=1 + (0 if spec_running else 1), runs=runs + 1,
                           decides="baseline and speculative tok/s on this box, against the claims")]
    code_open = bool(changed) and ident.code != "identical"
    config_differs = ident.launch == "differs" or ident.env == "differs"
    if code_open:  # the code trials run only when today's measurements leave a gap (engine/gap.py)
        if not essential_given:  # all, none, then per culprit: found alone, found + rest, binary search
            phases.append(PlannedPhase(
                step="essentials", launches=2 + min(changed, _PREFIX_LIMIT) * (2 + _log2(changed)),
                expected=1 if gap_shown else 0,
                condition="no --essential list given; the first (no patch) also runs "
                          f"{runs + 1} benchmark runs (not in the time: the subtraction's launch it spares "
                          "is); every patch and more only when HEAD alone does not start",
                decides="which patches the server cannot start without (start or not); the no-patch tree "
                        "benchmarked while up, for the subtraction to reuse"))
        # Essentials only: one server, sequential looks on it; every patch applied is today's measurement reused,
        # and relaunched in a trial tree only to confirm a difference before bisecting. A tree the essentials
        # search benchmarked already (same code, no script) is not launched again when its runs decide.
        phases.append(PlannedPhase(step="subtract", launches=3, runs=GROWING_CAP + 1,
                                   expected=0 if not (essential_given and gap_shown) else 2,
                                   condition="the tree has local changes; the second launch only to confirm a "
                                             "difference or decide an undecided one, the third only when still "
                                             "undecided; none for a tree the essentials search benchmarked",
                                   decides="do the non-essential patches change throughput?"))
        # One-at-a-time's count: adaptive bisection needs ~log2 of it, but interacting culprits (prefix search)
        # can need more; the plan says so rather than print a bound the search does not keep. Expected only when a
        # gap was shown and no flag or variable differs from the good run (then the configuration is the suspect).
        phases.append(PlannedPhase(step="bisect", launches=changed + 1 + PHASE_PROFILE_LAUNCHES, runs=max_runs + 1,
                                   expected=bisect_expected(changed) if gap_shown and not config_differs else 0,
                                   condition="only if subtraction changed performance; interacting culprits "
                                             f"can need more; the last {PHASE_PROFILE_LAUNCHES} only for a confirmed "
                                             f"culprit's arm no trial could profile: {PHASE_PROFILE_COST}",
                                   decides="which patch(es) cause the change"))
    if tp_size > 1:
        phases.append(PlannedPhase(step="nccl_promote", launches=2 * finalists, runs=runs + 1, expected=0,
                                   condition="only if the NCCL sweep finds a significantly better setting",
                                   decides="does the NCCL winner speed up decoding end to end?"))
    # The revert trials of the attribute step: a control of today's configuration and every difference reverted;
    # the differences are listed only later (list_deltas), so the search that follows a restore is a condition.
    # A real launch-flag run made 2 + 2 (the all-reverted trial, the cause alone again, then both arms launched only
    # to be profiled); the arms are now profiled on those two trials, so 2 are expected and the profile's 2 are the
    # worst case's.
    if not (ident.config_identical and not code_open):
        phases.append(PlannedPhase(step="attribute", launches=2 + PHASE_PROFILE_LAUNCHES, runs=max_runs + 1,
                                   expected=(2 if config_differs else 1 if ident.launch == "unknown" else 0)
                                   if gap_shown else 0,
                                   condition="when the box differs from the reference in something a relaunch can "
                                             f"revert; the last {PHASE_PROFILE_LAUNCHES} only for a confirmed "
                                             f"cause's arm no trial could profile: {PHASE_PROFILE_COST}; if "
                                             "reverting restores speed and D > 1 differences (known after "
                                             "list_deltas) are left, ~2·log2(D)+2 more per cause",
                                   decides="which differences (variables, flags, patches) explain the gap"))
    if stops_user_server:
        phases.append(PlannedPhase(step="restart", launches=1, runs=4, decides="your server back as it was "
                                   "(comparator SAME against the first measurement)"))
    return phases


def gap_shown(view: StateView) -> bool:
    """A claim not held (short, undecided or too imprecise) on the running server, or none judged there: a search is
    expected. When every claim judged there held, the rest (a baseline claim, which needs a launch) is expected to
    hold too: the explaining steps are then conditions, not expectations."""
    claims = (view.fact("claims", Claims) or Claims({})).root
    if not claims:
        return True
    return not all(claim_held(c)[0] for c in claims.values())


def _user_record(deps, view: StateView, out: ActionOutcome) -> UserServerRecord | None:
    """examine_user_server's record, else (a dry run, an examination that failed) the same /proc + nvidia-smi read,
    so that the plan says what the run will do: whether your server is stopped."""
    rec = view.fact("user_server_record", UserServerRecord)
    if rec is not None:
        return rec
    server = view.run_facts.server or ServerFact()
    found = view.latest(ServerList)
    workers = [w.pid for s in (found.servers if found else []) if s.main.pid == server.pid for w in s.workers]
    return run_tool(deps, inspect_user_server, {"pid": server.pid, "pids": workers, "port": server.port},
                    out.results, key="plan_user_server").output


@action("read", args=("stop_user_server",))
def plan_run(deps, view: StateView, step, args: dict[str, Any]) -> ActionOutcome:
    """Print and record the plan: configurations to launch, launches at most, box time measured on this box."""
    out = ActionOutcome()
    server = view.run_facts.server or ServerFact()
    if not server.running or not server.pid:
        out.status, out.summary = "skipped", "no running server: no launch to time on this box"
        out.decisions.append(Decision(step=step.id, title=step.title, status="skipped", checked="a running server",
                                      found="none", decided="no plan printed",
                                      why="the launch time is measured from the running server's own start-up"))
        return out
    p = view.params
    changed = 0
    repo = p.repo
    if repo:
        c = run_tool(deps, catalog_diffs, CatalogInput(repo=repo, max_hunk_chars=0), out.results,
                     key="plan_catalog").output
        changed = len({f.path for f in c.files} | set(c.untracked)) if c is not None else 0
    # What the good run's digests and the running server settle: recorded, so the predicates read the same.
    good = good_run(deps, view)
    claimed, _src = claims_for(dict(p.expect or {}), good)
    ident = decide_identity(view, good, set(claimed))
    budget = start_budget(view)  # box time counts from here: the last read before your server may be stopped
    if budget is not None:
        budget.host = getattr(deps.tool_ctx.host, "name", None) or budget.host
        out.facts.budget = budget
    # The launches need the GPUs the user's server holds (examine_user_server read nvidia-smi), unless told.
    rec = _user_record(deps, view, out)
    if view.run_facts.user_server_record is None and claimed and set(claimed) <= RUNNING_SERVER_KEYS:
        ident.notes.append("not benchmarked yet (a dry run benchmarks nothing): if every claim holds on your running "
                           "server, the run ends there, with no stop and no launch")
    out.facts.identity = ident
    stops = bool(args["stop_user_server"]) if "stop_user_server" in args else \
        rec is not None and rec.holds_gpus and not rec.restarts_it and not ident.settled
    args_ = server.args
    phases = regression_phases(
        changed=changed, essential_given=bool(p.essential),
        spec_running=any("speculative" in a for a in server.argv),
        tp_size=int(args_.get("tp_size") or 1), runs=int(p.runs),
        max_runs=15, finalists=3, stops_user_server=stops, identity=ident, gap_shown=(gap := gap_shown(view)))
    upstream = view.latest(CommitCatalog)  # HEAD moved since the good run's commit: the commit bisection's row
    if upstream is not None and upstream.commits:
        row = commit_bisect_phase(len(upstream.commits), int(p.runs))
        row.expected = row.expected if gap else 0  # as the step's predicate: no commit is searched when every claim held
        phases.insert(next(i for i, ph in enumerate(phases) if ph.step == "attribute"), row)
    res = run_tool(deps, plan_launches, {
        "pid": server.pid, "port": server.port or 0, "log_path": server.log_path,
        "phases": [ph.model_dump() for ph in phases], "requests_per_run": p.requests_per_run,
        "max_new_tokens": p.max_new_tokens, "stops_user_server": stops}, out.results, key=step.id).result
    out.status = "ok" if res.ok else "error"
    out.summary = res.summary
    if res.ok:
        out.facts.plan = res.output  # the live view prints the summary: the plan's one line
    out.decisions.append(Decision(
        step=step.id, title=step.title, status=out.status, checked="the running server's start-up (its log, "
        "/proc/PID/stat) and the launching steps ahead", found=res.summary,
        decided="; ".join(f"{ph.step}: expected {ph.launches if ph.expected is None else ph.expected:g}, "
                          f"≤ {ph.launches}" + (f" ({ph.condition})" if ph.condition else "")
                          for ph in phases) + ("; " if phases else "no launch; ") + "; ".join(ident.notes),
        why="every launch costs box time, and the user's server may have to give up its GPUs for it",
        evidence=out.commands(20)))
    return out
