"""One environment variable across the launch shell, the server's parent and every worker rank."""

from __future__ import annotations

from typing import Literal

from pydantic import AliasChoices, ConfigDict, Field, field_validator

from specdoctor.models.base import StrictModel, str_keys
from specdoctor.models.evidence import Evidence

__all__ = ["EnvStatus", "EnvRow"]

EnvStatus = Literal["propagated", "dropped-for-workers", "differs", "forced-by-sglang", "only-in-workers",
                    "missing-in-parent", "only-in-shell"]


class EnvRow(StrictModel):
    """One variable's value in the launch shell, the main (parent) process and each worker."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True, populate_by_name=True)

    name: str
    shell: str | None = None
    parent: str | None = None
    workers: dict[str, str | None] = Field(default_factory=dict, description="Rank -> value (None: unset).")
    forced_by_engine: bool = Field(default=False, validation_alias=AliasChoices("forced_by_engine", "forced_by_sglang"),
                                   description="The serving engine writes it itself before starting its workers "
                                               "(saved runs say forced_by_sglang).")
    from_sitecustomize: bool = False
    from_nccl_conf: bool = False
    nccl_conf_value: str | None = None
    status: str = Field(default="", description="check_env_propagation says one of EnvStatus "
                        "(e.g. 'propagated', 'dropped-for-workers'); hand-made rows may say 'ok', 'unset'.")
    note: str = ""
    evidence: Evidence | None = None

    _keys = field_validator("workers", mode="before")(str_keys)

    @property
    def dropped(self) -> bool:
        """Set in the shell or the parent but absent in the workers."""
        return "dropped" in self.status
