"""Named `when` predicates for playbook steps: plain functions of the state, registered by name."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from specdoctor.engine.state import StateView

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
    return bool(v.get("facts.server.running"))


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
    cat = v.output("catalog") or {}
    return bool(cat.get("files") or cat.get("untracked"))


@predicate("a backup of the working tree exists for this run")
def has_backup(v: StateView) -> bool:
    return bool(v.get("facts.backup_id"))


@predicate("both throughputs were measured")
def has_measurements(v: StateView) -> bool:
    return v.get("facts.measure.baseline.median") is not None and v.get("facts.measure.spec.median") is not None


@predicate("removing the non-essential patches made it faster (comparator DIFFERENT, better)")
def subtraction_changed_performance(v: StateView) -> bool:
    return (v.get("facts.subtraction.outcome") == "DIFFERENT"
            and v.get("facts.subtraction.comparison.verdict") == "better")


@predicate("the box is multi-GPU over PCIe, or NCCL variables did not reach the workers")
def needs_nccl_sweep(v: StateView) -> bool:
    gpus = v.get("facts.topology.gpu_count", 0) or 0
    pcie = v.get("facts.topology.interconnect") == "pcie"
    rows = (v.output("propagation") or {}).get("rows") or []
    dropped = any("dropped" in str(r.get("status", "")) for r in rows)
    return bool((gpus > 1 and pcie) or dropped)


@predicate("a fingerprint of an earlier good run is available")
def has_good_fingerprint(v: StateView) -> bool:
    return bool(v.params.get("good_fingerprint"))
