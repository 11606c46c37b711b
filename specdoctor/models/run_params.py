"""The run's parameters, typed: what the actions read, with the defaults they read them with, in one place.

A run's parameters are the playbook's declared defaults, then what the host knows (`--host` hints), then
`--param NAME=VALUE`, then the named options (`specdoctor.engine.runner._params`). Each action used to read them
from a JSON dict with its own default (`p.get("runs", 5)` in a dozen places); here every parameter an action reads is
a field, and a playbook's own extra parameters are kept as given (`extra="allow"`). The checkpoint keeps the values
that were given (`to_json`), so a `$params.x` reference resolves exactly as it did over the dict.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["RunParams"]


class RunParams(BaseModel):
    """Every parameter an action or predicate reads (defaults: the playbooks' own)."""

    # a sha given as `--param good_ref=1234567` parses as a number: text fields take numbers as text
    model_config = ConfigDict(extra="allow", coerce_numbers_to_str=True)

    repo: str | None = Field(default=None, description="The engine checkout on the host.")
    python: str | None = Field(default=None, description="The interpreter that runs the engine.")
    launch: str | None = Field(default=None, description="The server's launch line, when none runs.")
    port: int | None = Field(default=None, description="The running server's port.")
    expect: dict[str, float] = Field(default_factory=dict, description="Claimed figures (`--expect`).")
    essential: list[str] = Field(default_factory=list, description="Patches every trial keeps.")
    patch_script: str | None = None
    good_fingerprint: str | dict[str, Any] | None = Field(
        default=None, description="A saved fingerprint of a good run: its path on the host, or its JSON.")
    good_ref: str | None = Field(default=None, description="The good run's commit, tag or date.")
    workload: Any = Field(default=None, description="The workload the claims were measured with (as given).")
    runs: int = Field(default=5, ge=1, description="Benchmark runs per configuration.")
    requests_per_run: int = Field(default=3, ge=1)
    max_new_tokens: int = Field(default=128, ge=1)
    launch_timeout_s: float = Field(default=600, gt=0)
    budget_minutes: float | None = Field(default=None, gt=0, description="`--budget`: box minutes.")
    promote_port: int | None = None
    grid: Any = None
    repeats: int = Field(default=5, ge=1)
    tp: int | None = None
    hidden_size: int | None = None
    draft_tokens: int | None = None

    def to_json(self) -> dict[str, Any]:
        """The parameters that were given (defaults left out), as JSON: the checkpoint's and `$params`' view."""
        return self.model_dump(mode="json", exclude_unset=True, warnings=False)  # as written, even if older
