"""The action catalogue: every composite step a playbook can name, in one explicit table.

An action is declared with `@action(effect, args)` in its topic's module; it becomes nameable by a playbook when it
is listed here. Nothing registers by being imported, so the actions package imports none of its modules and they
import it without an import circle. A test checks this list against every `@action` function.
"""

from __future__ import annotations

from specdoctor.engine.actions import (
    ActionSpec,
    action_spec,
    attribute,
    conclude,
    measure,
    nccl,
    plan,
    replan,
    subtract,
    user_server,
)

__all__ = ["ACTIONS"]


def _table(*fns: object) -> dict[str, ActionSpec]:
    specs = [action_spec(fn) for fn in fns]  # type: ignore[arg-type]
    missing = [getattr(fn, "__name__", fn) for fn, s in zip(fns, specs, strict=True) if s is None]
    if missing:
        raise TypeError(f"not declared with @action: {missing}")
    return {s.name: s for s in specs if s is not None}


ACTIONS: dict[str, ActionSpec] = _table(
    measure.locate_server, user_server.examine_user_server, plan.plan_run, replan.replan_run, user_server.take_gpus,
    measure.reproduce, subtract.subtract, nccl.promote_nccl, attribute.attribute, user_server.give_back_gpus,
    conclude.llm_explore, conclude.conclude,
)
"""Action name → its spec, in the order a regression playbook meets them."""
