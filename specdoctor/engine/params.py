"""The run's parameters from JSON: strict where a run starts (a wrong value is one usage line), lenient where a run
already recorded them (a checkpoint from an older version is resumed, restored and cleaned up as it was written)."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from specdoctor.errors import UsageError
from specdoctor.host.redact import redact_text
from specdoctor.models.run_params import RunParams

__all__ = ["run_params", "recorded_params"]


def run_params(values: dict[str, Any]) -> RunParams:
    """`values` typed; a value of the wrong kind is a one-line usage error naming the parameter."""
    try:
        return RunParams.model_validate(values)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = str(err["loc"][0]) if err["loc"] else "?"  # the parameter, not a union branch's name
        given = redact_text(repr(values.get(where, err.get("input"))))
        given = given if len(given) <= 200 else given[:197] + "..."
        raise UsageError(f"parameter {where}={given}: {err['msg']}") from None


def recorded_params(values: dict[str, Any]) -> RunParams:
    """Parameters a run already recorded: typed when they validate, else as written (a checkpoint of an older
    version may hold a value this one refuses at the start; resuming, restoring and the safety net must still run)."""
    try:
        return run_params(values)
    except UsageError:
        return RunParams.model_construct(_fields_set=set(values), **values)
