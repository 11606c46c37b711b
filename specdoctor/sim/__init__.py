"""The simulated GPU host (the twin): scenarios, sandbox, stand-in SGLang/nvidia-smi/nccl-tests."""

from specdoctor.sim.host import SimHost, open_sim_host
from specdoctor.sim.predict import predict
from specdoctor.sim.sandbox import Sandbox, build_sandbox
from specdoctor.sim.scenario import Scenario, Truth, list_scenarios, load_scenario

__all__ = [
    "Sandbox",
    "Scenario",
    "SimHost",
    "Truth",
    "build_sandbox",
    "list_scenarios",
    "load_scenario",
    "open_sim_host",
    "predict",
]
