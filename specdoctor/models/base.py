"""The strict base of the shared models: unknown keys are errors and assignments are validated."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

__all__ = ["StrictModel", "str_keys"]


class StrictModel(BaseModel):
    """Unknown keys are rejected and assignments validated, so a producer's mistake fails where it is made."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)


def str_keys(value: Any) -> Any:
    """Ranks and PIDs arrive as ints; JSON object keys are strings, so store them as strings."""
    if isinstance(value, dict):
        return {str(k): v for k, v in value.items()}
    return value
