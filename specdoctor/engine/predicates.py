"""Named `when` predicates for playbook steps: plain functions of the state, registered by name."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from specdoctor.engine.state import StateView
from specdoctor.models import MeasureFacts, ServerFact, SubtractionFact, TopologyFact
from specdoctor.tools.repo import Catalog
from specdoctor.tools.server import Propagation

__all__ = ["Predicate", "PREDICATES", "predicate", "evaluate"]


@dataclass(frozen=True)
class Predicate:
    """A named condition with the sentence the decisions log uses when it is false."""

    name: str
    fn: Callable[[StateView], bool]
    description: str


PREDICATES: dict[str, Predicate] = {}


def predicate(description: str) -> Callable[[Callable[[StateView], bool]], Callable[[StateView], bool]]:
    def deco(fn: Callable[[StateView], bool]) -> Callable[[StateView], bool]:
        PREDICATES[fn.__name__] = Predicate(fn.__name__, fn, description)
        return fn

    return deco


def evaluate(name: str, view: StateView) -> bool:
    return bool(PREDICATES[name].fn(view))


@predicate("always true")
def always(v: StateView) -> bool:
    return True


@predicate("a speculative server is running on the host")
def server_running(v: StateView) -> bool:
    server = v.fact("server", ServerFact)
    return server is not None and server.running


@predicate("a launch command is known (given, or read from the running server)")
def has_launch(v: StateView) -> bool:
    return bool(v.get("facts.launch"))


@predicate("the host has a git checkout to inspect")
def has_repo(v: StateView) -> bool:
    return bool(v.params.get("repo"))


@predicate("the user gave earlier figures (--expect)")
def has_claims(v: StateView) -> bool:
    return bool(v.params.get("expect"))


@predicate("the checkout has local changes")
def has_changes(v: StateView) -> bool:
    cat = v.latest(Catalog)
    return cat is not None and bool(cat.files or cat.untracked)


@predicate("a backup of the working tree exists for this run")
def has_backup(v: StateView) -> bool:
    return bool(v.get("facts.backup_id"))


@predicate("both throughputs were measured")
def has_measurements(v: StateView) -> bool:
    m = v.fact("measure", MeasureFacts)
    return m is not None and all(x is not None and x.measured for x in (m.baseline, m.spec))


@predicate("removing the non-essential patches made it faster (comparator DIFFERENT, better)")
def subtraction_changed_performance(v: StateView) -> bool:
    sub = v.fact("subtraction", SubtractionFact)
    return sub is not None and sub.made_faster


@predicate("the box is multi-GPU over PCIe, or NCCL variables did not reach the workers")
def needs_nccl_sweep(v: StateView) -> bool:
    topo = v.fact("topology", TopologyFact) or TopologyFact()
    prop = v.latest(Propagation)
    dropped = prop is not None and any(r.status == "dropped-for-workers" for r in prop.rows)
    return (topo.gpu_count > 1 and topo.interconnect == "pcie") or dropped


@predicate("a fingerprint of an earlier good run is available")
def has_good_fingerprint(v: StateView) -> bool:
    return bool(v.params.get("good_fingerprint"))
