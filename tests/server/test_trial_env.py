"""A trial's intended environment, read in its workers (/proc): reached, dropped by the launcher, forced by the
engine; a revert trial whose environment did not reach its workers is unresolved, never measured as "no change"."""

from __future__ import annotations

from types import SimpleNamespace

from specdoctor.engine.actions import ActionOutcome
from specdoctor.engine.actions.attribute import _RevertTrials
from specdoctor.engine.state import StateView
from specdoctor.models import Delta, Revert
from specdoctor.toolkit import registry
from specdoctor.tools.environment.trial_env import TrialEnvCheck
from specdoctor.tools.serving.trial import LaunchConfig, trial

from .helpers import PYTHON

LAUNCH = "python3 -m sglang.launch_server --model /m --tp 2 --port 30000 --attention-backend triton"


def _check(ctx, port: int, **args) -> TrialEnvCheck:
    res = registry.call(ctx, "check_trial_env", {"port": port, **args})
    assert res.ok, res.summary
    return TrialEnvCheck.model_validate(res.output)


def test_the_check_reads_every_worker_and_names_what_did_not_reach(local_ctx):
    env = {"NCCL_PROTO": "LL", "NCCL_ALGO": "Ring", "FAKE_DROP": "NCCL_ALGO", "HF_TOKEN": "hf_" + "x" * 20}
    with trial(local_ctx, LaunchConfig(command=LAUNCH, python=PYTHON, port=0, speculative=False, env=env,
                                       timeout_s=30)) as h:
        ok = _check(local_ctx, h.port, values={"NCCL_PROTO": "LL", "HF_TOKEN": env["HF_TOKEN"]},
                    absent=["NCCL_IB_DISABLE"])
        assert ok.reached and sorted(ok.rows[0].workers) == ["TP0", "TP1"] and not ok.unreadable
        assert env["HF_TOKEN"] not in ok.model_dump_json()  # compared, never returned
        dropped = _check(local_ctx, h.port, values={"NCCL_ALGO": "Ring"})  # the launcher dropped it
        assert not dropped.reached and dropped.rows[0].missed == {"TP0": None, "TP1": None}
        assert "NCCL_ALGO: intended NCCL_ALGO=Ring, workers TP0: unset, TP1: unset" in dropped.summary()
        forced = _check(local_ctx, h.port, absent=["NCCL_CUMEM_ENABLE"])  # the engine sets it in its workers
        assert not forced.reached and forced.rows[0].missed == {"TP0": "0", "TP1": "0"}


def test_a_revert_trial_whose_env_did_not_reach_is_unresolved_and_not_measured(local_ctx):
    """The good run had NCCL_ALGO=Ring; today's launcher drops it. Exporting it at launch cannot bring it back:
    measured, the trial would say "reverting it changes nothing" and clear the real cause."""
    delta = Delta(kind="env", name="NCCL_ALGO", reference="Ring", current=None, source="launcher",
                  revertible=True, revert=Revert(env={"NCCL_ALGO": "Ring"}), impact="high")
    view = StateView({"params": {"python": PYTHON, "launch_timeout_s": 30, "runs": 2},
                      "facts": {"server_env": {"FAKE_DROP": "NCCL_ALGO"}}})
    deps = SimpleNamespace(tool_ctx=local_ctx, view=SimpleNamespace(progress=lambda msg: None))
    out = ActionOutcome()
    trials = _RevertTrials(deps, view, SimpleNamespace(id="attribute", title="Attribute"), out, [delta], "baseline",
                           [100.0, 101.0, 99.0], LAUNCH)
    t = trials.run(frozenset(), "every revertible delta reverted", lambda s: "same")
    assert t.samples == [] and t.outcome == "unresolved"
    assert t.cause and "did not reach the workers" in t.cause and "NCCL_ALGO" in t.cause
    assert not any(k.startswith("bench_") for k in out.results)  # never measured
    assert out.decisions[-1].status == "unresolved" and "never counted" in out.decisions[-1].decided
    # the same trial on a launcher that passes it on is measured
    view = StateView({"params": view.params, "facts": {"server_env": {}}})
    trials = _RevertTrials(deps, view, SimpleNamespace(id="attribute", title="Attribute"), out, [delta], "baseline",
                           [100.0, 101.0, 99.0], LAUNCH)
    t = trials.run(frozenset(), "every revertible delta reverted", lambda s: "same")
    assert t.cause is None and len(t.samples) == 2 and t.outcome == "same"
