"""Environment fingerprints and their ranked diff (tool output, engine input, report section)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import AliasChoices, BaseModel, ConfigDict, Field

from specdoctor.models.workload import Workload

__all__ = ["GpuFingerprint", "Fingerprint", "Impact", "Change", "FingerprintDiff"]


class GpuFingerprint(BaseModel):
    """One GPU's identity and the settings that change performance."""

    index: int
    name: str | None = None
    uuid: str | None = None
    bus_id: str | None = None
    sm_clock_mhz: float | None = None
    max_sm_clock_mhz: float | None = None
    mem_clock_mhz: float | None = None
    power_limit_w: float | None = None
    pcie_gen: int | None = None
    pcie_gen_max: int | None = None
    pcie_width: int | None = None
    pcie_width_max: int | None = None
    persistence_mode: str | None = None


class Fingerprint(BaseModel):
    """Everything about the box and the server that a tok/s figure depends on; stored with every measurement."""

    model_config = ConfigDict(populate_by_name=True)

    driver: str | None = None
    cuda_driver: str | None = Field(default=None, description="CUDA version the driver supports (nvidia-smi).")
    cuda_runtime: str | None = Field(default=None, description="torch.version.cuda.")
    nccl_version: str | None = None
    nccl_source: str | None = Field(default=None, description="torch | pip:nvidia-nccl-cu12 | libnccl path.")
    torch_version: str | None = None
    gpus: list[GpuFingerprint] = Field(default_factory=list)
    topology: dict[str, Any] = Field(default_factory=dict, description="links per GPU pair, link-kind counts.")
    interconnect: str | None = Field(default=None, description="NVLink | PCIe, from the topology matrix.")
    gpu_processes: list[dict[str, Any]] = Field(default_factory=list)
    cpu_governor: str | None = None
    worker_env: dict[str, str] = Field(default_factory=dict, description="NCCL_/CUDA_/SGLANG_/TORCH_NCCL_ env of "
                                       "the first TP worker (redacted).")
    worker_env_mismatch: list[str] = Field(default_factory=list, description="Names whose value differs between ranks.")
    parent_env: dict[str, str] = Field(default_factory=dict)
    engine: str | None = Field(default=None, description="The serving engine (sglang, vllm).")
    engine_version: str | None = Field(default=None, validation_alias=AliasChoices("engine_version", "sglang_version"),
                                       description="Its package's version (saved fingerprints say sglang_version).")
    server_version: str | None = None
    commit: str | None = None
    dirty_files: int | None = None
    code_digest: str | None = Field(default=None, description="sha256 of HEAD, the tracked files' diff and the "
                                    "untracked files (tools/environment/digests.py): equal digests are the same code.")
    launch_digest: str | None = Field(default=None, description="sha256 of the launch line without --port/--host.")
    env_digest: str | None = Field(default=None, description="sha256 of the workers' tuning variables (worker_env).")
    python: str | None = None
    launch: str | None = Field(default=None, description="The running server's launch line (redacted): a saved "
                               "fingerprint is then the reference for launch flags too (list_deltas reads it).")
    workload: Workload | None = Field(default=None, description="The workload its figures were measured on (prompt "
                                      "set, output length, temperature, concurrency): a later run compares like with "
                                      "like, or flags the difference.")
    measurements: dict[str, float] = Field(default_factory=dict, description="The figures measured with it "
                                           "(baseline_tps, spec_tps, accept_length).")
    problems: list[str] = Field(default_factory=list)

    def summary_line(self) -> str:
        gpu = f"{len(self.gpus)}x {self.gpus[0].name}" if self.gpus else "no GPUs"
        return (f"driver {self.driver}, CUDA {self.cuda_driver}, NCCL {self.nccl_version} ({self.nccl_source}), "
                f"{gpu} {self.interconnect or ''}, {self.engine or 'engine'} {self.engine_version or self.server_version}, "
                f"{len(self.worker_env)} worker env vars")


Impact = Literal["high", "medium", "low"]


class Change(BaseModel):
    """One difference between two fingerprints (a = earlier/good, b = now), ranked by suspicion."""

    key: str
    before: str | None = None
    after: str | None = None
    impact: Impact = "low"
    rank: int = Field(description="Lower = more suspicious.")
    why: str = ""

    def __str__(self) -> str:
        return f"{self.key}: {self.before!r} -> {self.after!r}"


class FingerprintDiff(BaseModel):
    """What changed between two fingerprints, most suspicious first."""

    changes: list[Change] = Field(default_factory=list)
    compared: list[str] = Field(default_factory=list, description="Top-level keys present on both sides.")

    def summary_line(self) -> str:
        if not self.changes:
            return "no differences in the compared fields"
        return f"{len(self.changes)} differences; first: {self.changes[0]}"
