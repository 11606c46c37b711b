"""Named `when` predicates for playbook steps: plain functions of the state, registered by name."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from specdoctor.engine.state import StateView
from specdoctor.models import DeltaList, MeasureFacts, ServerFact, SubtractionFact, TopologyFact
from specdoctor.tools.checkout.repo import Catalog
from specdoctor.tools.serving.server import Propagation

__all__ = ["Predicate", "PREDICATES", "predicate", "evaluate", "explain"]


@dataclass(frozen=True)
class Predicate:
    """A named condition with the sentence for each of its values (the decisions log says the one that held)."""

    name: str
    fn: Callable[[StateView], bool]
    description: str  # the sentence when it holds
    when_false: str  # the sentence when it does not
    detail: Callable[[StateView], str | None] | None = None  # what was measured, appended to either sentence

    def text(self, value: bool, view: StateView | None = None) -> str:
        """The sentence for `value`, with the measured detail when there is one."""
        base = self.description if value else self.when_false
        extra = self.detail(view) if (self.detail and view is not None) else None
        return f"{base} ({extra})" if extra else base


PREDICATES: dict[str, Predicate] = {}


def predicate(description: str, when_false: str, detail: Callable[[StateView], str | None] | None = None,
              ) -> Callable[[Callable[[StateView], bool]], Callable[[StateView], bool]]:
    def deco(fn: Callable[[StateView], bool]) -> Callable[[StateView], bool]:
        PREDICATES[fn.__name__] = Predicate(fn.__name__, fn, description, when_false, detail)
        return fn

    return deco


def evaluate(name: str, view: StateView) -> bool:
    return bool(PREDICATES[name].fn(view))


def explain(name: str, view: StateView) -> tuple[bool, str]:
    """The predicate's value and the sentence generated from it (never a fixed 'not the case: …')."""
    pred = PREDICATES[name]
    value = bool(pred.fn(view))
    return value, pred.text(value, view)


def _subtraction_detail(v: StateView) -> str | None:
    sub = v.fact("subtraction", SubtractionFact)
    if sub is None:
        return "no subtraction was measured"
    if sub.outcome is None:
        return sub.problem or "the comparison did not run"
    verdict = sub.comparison.verdict if sub.comparison is not None else None
    return f"comparator {sub.outcome}" + (f", {verdict}" if verdict else "")


@predicate("always true", "never false")
def always(v: StateView) -> bool:
    return True


@predicate("a speculative server is running on the host",
           "no speculative server is running on the host")
def server_running(v: StateView) -> bool:
    server = v.fact("server", ServerFact)
    return server is not None and server.running


@predicate("a launch command is known (given, or read from the running server)",
           "no launch command is known (none given, none read from a running server)")
def has_launch(v: StateView) -> bool:
    return bool(v.run_facts.launch)


@predicate("the host has a git checkout to inspect", "no git checkout was given (--repo)")
def has_repo(v: StateView) -> bool:
    return bool(v.params.repo)


@predicate("the user gave earlier figures (--expect)", "the user gave no earlier figures (--expect)")
def has_claims(v: StateView) -> bool:
    return bool(v.params.expect)


@predicate("the checkout has local changes", "the checkout has no local changes")
def has_changes(v: StateView) -> bool:
    cat = v.latest(Catalog)
    return cat is not None and bool(cat.files or cat.untracked)


@predicate("a backup of the working tree exists for this run",
           "no backup of the working tree exists for this run", lambda v: _origin_detail(v))
def has_backup(v: StateView) -> bool:
    return bool(v.run_facts.backup_id)


@predicate("both throughputs were measured", "the baseline and speculative throughputs were not both measured")
def has_measurements(v: StateView) -> bool:
    m = v.fact("measure", MeasureFacts)
    return m is not None and all(x is not None and x.measured for x in (m.baseline, m.spec))


@predicate("removing the non-essential patches made it faster",
           "removing the non-essential patches did not make it faster", _subtraction_detail)
def subtraction_changed_performance(v: StateView) -> bool:
    sub = v.fact("subtraction", SubtractionFact)
    return sub is not None and sub.made_faster


@predicate("the box is multi-GPU over PCIe, or NCCL variables did not reach the workers",
           "the box is not multi-GPU over PCIe and every NCCL variable reached the workers")
def needs_nccl_sweep(v: StateView) -> bool:
    topo = v.fact("topology", TopologyFact) or TopologyFact()
    prop = v.latest(Propagation)
    dropped = prop is not None and any(r.status == "dropped-for-workers" for r in prop.rows)
    return (topo.gpu_count > 1 and topo.interconnect == "pcie") or dropped


@predicate("a fingerprint of an earlier good run is available",
           "no fingerprint of an earlier good run was given")
def has_good_fingerprint(v: StateView) -> bool:
    return bool(v.params.good_fingerprint)


def _hardware_names(v: StateView) -> list[str]:
    deltas = v.latest(DeltaList)
    return [] if deltas is None else [d.label for d in deltas.deltas if d.kind == "hardware"]


@predicate("list_deltas found a GPU link, clock, power or process state that differs from the reference",
           "list_deltas found no GPU link, clock, power or process state that differs from the reference",
           detail=lambda v: ", ".join(_hardware_names(v)) or None)
def has_hardware_deltas(v: StateView) -> bool:
    return bool(_hardware_names(v))


def _user_server_detail(v: StateView) -> str | None:
    from specdoctor.engine.actions.user_server import blocked_by_user_server

    return blocked_by_user_server(v)


@predicate("your server holds the GPUs the launches need and can be stopped (with your consent)",
           "your server need not or must not be stopped", _user_server_detail)
def user_server_holds_gpus(v: StateView) -> bool:
    rec = v.run_facts.user_server_record
    return rec is not None and rec.holds_gpus and not rec.restarts_it


def _origin_detail(v: StateView) -> str | None:
    from specdoctor.engine.actions.user_server import origin_outside_checkout

    return origin_outside_checkout(v)


@predicate("the checkout has local changes and the server imports the engine from it",
           "no local change of the checkout can matter", _origin_detail)
def has_served_changes(v: StateView) -> bool:
    from specdoctor.engine.actions.user_server import origin_outside_checkout

    return has_changes(v) and origin_outside_checkout(v) is None


# -- box time: what the reference settles before the stop (engine/identity.py decides, the plan step records it) --


def _settled_detail(v: StateView) -> str | None:
    from specdoctor.engine.identity import identity_of

    notes = identity_of(v).notes
    return notes[-1] if notes else None


@predicate("your server holds the GPUs the launches need, and something is left to decide on them",
           "your server need not or must not be stopped", _user_server_detail)
def must_stop_user_server(v: StateView) -> bool:
    from specdoctor.engine.identity import identity_of

    return user_server_holds_gpus(v) and not identity_of(v).settled


@predicate("a launch command is known and the claims are not settled on the running server",
           "no launch is needed: no launch command, or every claim held on the running server", _settled_detail)
def reproduce_needed(v: StateView) -> bool:
    from specdoctor.engine.identity import identity_of

    return has_launch(v) and not identity_of(v).settled


def _code_detail(v: StateView) -> str | None:
    from specdoctor.engine.gap import read_gap
    from specdoctor.engine.identity import identity_of

    ident = identity_of(v)
    if ident.code == "identical":
        return "the checkout's content digest equals the good run's"
    if (gap := read_gap(v)).held:
        return gap.why
    return _settled_detail(v) if ident.settled else _origin_detail(v)


@predicate("the served checkout has local changes that may differ from the good run's",
           "no code trial is needed (no served local change, the same code as the good run, or nothing to explain)",
           _code_detail)
def code_trials_needed(v: StateView) -> bool:
    from specdoctor.engine.identity import identity_of

    ident = identity_of(v)
    return has_served_changes(v) and ident.code != "identical" and not ident.settled and gap_to_explain(v)


def _gap_detail(v: StateView) -> str | None:
    from specdoctor.engine.gap import read_gap

    return read_gap(v).why


@predicate("today's measurements leave a gap to the claims (or none was judged yet)",
           "every claim held today, a material shortfall ruled out: no trial has a gap to explain", _gap_detail)
def gap_to_explain(v: StateView) -> bool:
    from specdoctor.engine.gap import read_gap

    return not read_gap(v).held


@predicate("the NCCL sweep is needed and today's measurements leave a gap to explain",
           "no NCCL A/B: no sweep was needed, or every claim held today (the sweep's winner stays a modelled lever)",
           _gap_detail)
def nccl_promotion_needed(v: StateView) -> bool:
    return needs_nccl_sweep(v) and gap_to_explain(v)


@predicate("the good run's commit is known (its fingerprint, or good_ref)",
           "no reference commit: neither a good fingerprint nor good_ref was given")
def has_reference_commit(v: StateView) -> bool:
    return bool(v.params.good_fingerprint or v.params.good_ref)


def _range_detail(v: StateView) -> str | None:
    from specdoctor.tools.checkout.commits import CommitCatalog

    cat = v.latest(CommitCatalog)
    return None if cat is None else cat.summary_line()


@predicate("HEAD has moved since the good run's commit and the server imports the engine from this checkout",
           "HEAD is the good run's commit (or the server does not import the engine from this checkout)", _range_detail)
def upstream_moved(v: StateView) -> bool:
    from specdoctor.engine.actions.user_server import origin_outside_checkout
    from specdoctor.tools.checkout.commits import CommitCatalog

    cat = v.latest(CommitCatalog)
    return cat is not None and bool(cat.commits) and has_launch(v) and origin_outside_checkout(v) is None


@predicate("HEAD has moved since the good run's commit, the server imports it, and today leaves a gap to explain",
           "no commit bisection: HEAD is the good run's commit, the server does not import this checkout, or every "
           "claim held today", lambda v: _gap_detail(v) if upstream_moved(v) else _range_detail(v))
def commit_trials_needed(v: StateView) -> bool:
    return upstream_moved(v) and gap_to_explain(v)
