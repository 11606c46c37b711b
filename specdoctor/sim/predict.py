"""What a scenario should measure: the stand-in's own performance model, evaluated on the controller.

Tests and benchmarks use it to check that the twin's numbers match the scenario's truth; specdoctor's
engine never calls it (it must measure, not read the model).
"""

from __future__ import annotations

import json
import shlex
import subprocess
from pathlib import Path

from pydantic import BaseModel

from specdoctor.sim.sandbox import Sandbox
from specdoctor.sim.standin.sglang._twin import perf as _perf
from specdoctor.sim.standin.sglang._twin.args import parse_server_args, resolve
from specdoctor.sim.standin.vllm._front.args import parse_args as parse_vllm_args

__all__ = ["Prediction", "predict", "server_worker_env", "vllm_server_args"]


class Prediction(BaseModel):
    """Noise-free steady-state numbers for one launch."""

    tps: float
    t_decode_ms: float
    t_verify_ms: float
    t_draft_ms: float
    accept_length: float
    effects: list[str]
    present_patches: list[str]
    verify_cuda_graph: bool
    decode_cuda_graph: bool
    gpus: list[int]
    link_factor: float
    hw_factor: float


def vllm_server_args(argv: list[str], speculative: bool = True) -> dict:
    """The vLLM stand-in's resolved args for a `vllm serve` / api_server line (the twin model's names)."""
    if "serve" in argv:
        entry, rest = "serve", argv[argv.index("serve") + 1:]
    else:
        entry, rest = "api_server", argv[argv.index("vllm.entrypoints.openai.api_server") + 1:]
    args = parse_vllm_args(rest, entry)
    if not speculative:
        for key in ("speculative_algorithm", "speculative_draft_model_path", "speculative_num_steps",
                    "speculative_eagle_topk", "speculative_num_draft_tokens"):
            args[key] = None
    return args


def server_worker_env(sandbox: Sandbox, extra: dict[str, str] | None = None) -> dict[str, str]:
    """The TP workers' environment of the scenario's server: login env + its launch env, after sitecustomize
    ran in the parent (a real interpreter run in the sandbox), minus/plus the launcher's rules."""
    sc = sandbox.scenario
    env = {**sandbox.base_env, **sc.server.running_env, **(extra or {})}
    out = subprocess.run([sandbox.python, "-c", "import json, os; print(json.dumps(dict(os.environ)))"],
                         env=env, capture_output=True, text=True, check=True).stdout
    worker = json.loads(out)
    for name in sc.server.worker_env_drop:
        worker.pop(name, None)
    worker.update(sc.server.worker_env_set)
    return worker


def predict(sandbox: Sandbox, *, launch: str | None = None, worker_env: dict[str, str] | None = None,
            speculative: bool = True, prompt_tokens: int = 0, output_tokens: int = 0, prompt: str = "",
            temperature: float = 0.0, tree: str | None = None) -> Prediction:
    """Evaluate the model for `launch` (default: the scenario's) on the sandbox's current working tree.

    The workload (prompt/output tokens, prompt text, temperature) defaults to an empty context at
    temperature 0; `tree` is the checkout the server imports (default: the scenario's repo).
    """
    twin = json.loads((sandbox.root / ".sim" / "twin.json").read_text())
    argv = shlex.split(launch or sandbox.launch)
    if twin.get("engine") == "vllm":
        args = vllm_server_args(argv, speculative)
    else:
        argv = argv[argv.index("sglang.launch_server") + 1:] if "sglang.launch_server" in argv else argv[2:]
        ns = parse_server_args(argv, twin["version"], "predict")
        if not speculative:
            ns.speculative_algorithm = None
        model_cfg = json.loads((Path(ns.model_path) / "config.json").read_text())
        args, _ = resolve(ns, twin["version"], (model_cfg.get("architectures") or ["x"])[0],
                          float(twin["hardware"]["memory_gb"]))
    env = dict(worker_env if worker_env is not None else server_worker_env(sandbox))
    present = {p["id"] for p in twin["patches"] if _perf.patch_present(tree or twin["repo"], p)}
    res = _perf.evaluate(twin, env, args, present, _perf.live_contention(str(sandbox.root), twin))
    tau = _perf.accept_length(_perf.alpha_for_request(res, prompt, temperature), max(res["draft_tokens"] - 1, 0)) \
        if res["speculative"] else 1.0
    return Prediction(tps=_perf.expected_tps(res, prompt_tokens, output_tokens, prompt=prompt, temperature=temperature),
                      t_decode_ms=res["t_decode_ms"], t_verify_ms=res["t_verify_ms"], t_draft_ms=res["t_draft_ms"],
                      accept_length=tau, effects=res["effects"], present_patches=sorted(present),
                      verify_cuda_graph=res["verify_cuda_graph"], decode_cuda_graph=res["decode_cuda_graph"],
                      gpus=res["gpus"], link_factor=res["link_factor"], hw_factor=res["hw_factor"])
