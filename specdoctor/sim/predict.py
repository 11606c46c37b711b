"""What a scenario should measure: the stand-in's own performance model, evaluated on the controller.

Tests and benchmarks use it to check that the twin's numbers match the scenario's truth; specdoctor's
engine never calls it (it must measure, not read the model).
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path

from pydantic import BaseModel

from specdoctor.sim.sandbox import Sandbox
from specdoctor.sim.standin.sglang._twin import perf as _perf
from specdoctor.sim.standin.sglang._twin.args import parse_server_args, resolve

__all__ = ["Prediction", "predict"]


class Prediction(BaseModel):
    """Noise-free steady-state numbers for one launch."""

    tps: float
    t_decode_ms: float
    t_verify_ms: float
    t_draft_ms: float
    accept_length: float
    effects: list[str]
    present_patches: list[str]


def predict(sandbox: Sandbox, *, launch: str | None = None, worker_env: dict[str, str] | None = None,
            speculative: bool = True) -> Prediction:
    """Evaluate the model for `launch` (default: the scenario's) on the sandbox's current working tree."""
    twin = json.loads((sandbox.root / ".sim" / "twin.json").read_text())
    argv = shlex.split(launch or sandbox.launch)
    argv = argv[argv.index("sglang.launch_server") + 1:] if "sglang.launch_server" in argv else argv[2:]
    ns = parse_server_args(argv, twin["version"], "predict")
    if not speculative:
        ns.speculative_algorithm = None
    model_cfg = json.loads((Path(ns.model_path) / "config.json").read_text())
    args, _ = resolve(ns, twin["version"], (model_cfg.get("architectures") or ["x"])[0],
                      float(twin["hardware"]["memory_gb"]))
    env = dict(worker_env if worker_env is not None else sandbox.base_env)
    present = {p["id"] for p in twin["patches"] if _perf.patch_present(twin["repo"], p)}
    res = _perf.evaluate(twin, env, args, present)
    return Prediction(tps=_perf.expected_tps(res), t_decode_ms=res["t_decode_ms"], t_verify_ms=res["t_verify_ms"],
                      t_draft_ms=res["t_draft_ms"], accept_length=res["expected_accept_length"],
                      effects=res["effects"], present_patches=sorted(present))
