"""The run's parameters from JSON (the checkpoint's, the runner's): a wrong value is a one-line usage error."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from specdoctor.errors import UsageError
from specdoctor.models.run_params import RunParams

__all__ = ["RunParams", "run_params"]


def run_params(values: dict[str, Any]) -> RunParams:
    """`values` typed; a value of the wrong kind is a one-line usage error naming the parameter."""
    try:
        return RunParams.model_validate(values)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(x) for x in err["loc"])
        raise UsageError(f"parameter {where}={err.get('input')!r}: {err['msg']}") from None
