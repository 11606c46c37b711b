"""list_deltas and probe_hardware on the twin: every truth cause of the environment stories is a delta (with a Revert
that a real box honours where it can be reverted) and a measured cause where it cannot; healthy boxes show nothing."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import Any

import pytest

from specdoctor.models import DeltaList
from specdoctor.sim import SimHost, build_sandbox, load_scenario
from specdoctor.toolkit import ToolContext, registry
from specdoctor.tools.environment.hardware_probe import HardwareProbe

STORIES = ["sitecustomize-foreign", "nccl-conf-simple", "bashrc-launch-blocking", "attn-backend-flag",
           "draft-path-changed", "pcie-downtrained", "clocks-locked", "power-cap", "neighbor-training-job",
           "nccl-upgrade"]
HEALTHY = ["no-regression", "nccl-win", "seed", "single-culprit"]
PROBED = ["pcie-downtrained", "clocks-locked", "power-cap", "neighbor-training-job"]


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Examined:
    """One scenario's running box, examined the way the playbook does before list_deltas."""

    def __init__(self, name: str):
        self.sandbox = build_sandbox(load_scenario(name), start_server=False, port=_port())
        self.ctx = ToolContext(host=SimHost(self.sandbox), run_id="t", auto_approve=True)
        self.sandbox.start_server(self.ctx.host)
        sb = self.sandbox
        self.fingerprint = self._call("fingerprint", {"repo": sb.hints.repo, "port": sb.port})
        self.propagation = self._call("check_env_propagation", {"port": sb.port})
        self.catalog = self._call("catalog_diffs", {"repo": sb.hints.repo})

    def _call(self, tool: str, args: dict[str, Any]) -> dict[str, Any]:
        res = registry.call(self.ctx, tool, args)
        assert res.ok and res.output is not None, f"{tool}: {res.summary}"
        return res.output

    def deltas(self, **extra: Any) -> DeltaList:
        sb = self.sandbox
        args = {"good_fingerprint": sb.hints.good_fingerprint, "fingerprint": self.fingerprint, "launch": sb.launch,
                "propagation": self.propagation, "catalog": self.catalog, "max_new_tokens": 128, **extra}
        return DeltaList.model_validate(self._call("list_deltas", {k: v for k, v in args.items() if v is not None}))

    def probe(self, deltas: DeltaList) -> HardwareProbe:
        args = {"deltas": deltas.model_dump(), "fingerprint": self.fingerprint, "load_warmup_s": 0,  # at once
                "good_fingerprint": self.sandbox.hints.good_fingerprint}  # as the playbook passes it (#32)
        out = self._call("probe_hardware", {k: v for k, v in args.items() if v is not None})
        return HardwareProbe.model_validate(out)

    def close(self) -> None:
        self.sandbox.stop_all()
        self.sandbox.remove()


@pytest.fixture(scope="module")
def examined() -> Iterator[Any]:
    boxes: dict[str, Examined] = {}

    def get(name: str) -> Examined:
        if name not in boxes:
            boxes[name] = Examined(name)
        return boxes[name]

    yield get
    for box in boxes.values():
        box.close()


def _truth(name: str) -> list[Any]:
    return [c for c in load_scenario(name).truth.causes if c.kind in ("env", "launch-flag", "hardware", "software")]


@pytest.mark.parametrize("name", STORIES)
def test_every_truth_cause_is_a_delta_with_a_revert_where_revertible(examined, name):
    box = examined(name)
    deltas = box.deltas()
    causes = _truth(name)
    assert causes, f"{name} has no environment cause in its truth"
    for cause in causes:
        hits = [d for d in deltas.deltas if d.kind == cause.kind and d.name == cause.name]
        assert hits, f"{cause.kind}:{cause.name} not among {[d.label for d in deltas.deltas]}"
        d = hits[0]
        assert d.impact == "high", d
        assert d.current is not None and d.current != d.reference
        if cause.revertible:
            assert d.revertible and d.revert is not None and not d.revert.empty(), d
            r = d.revert
            if d.kind == "launch-flag":  # back to the good run's value, by dest name
                assert r.argv_set == {d.name: d.reference}
            elif "sitecustomize" in d.source:
                assert r.undo_sitecustomize == [d.name]
            elif "nccl.conf" in d.source:  # /etc/nccl.conf yields only to the environment: set the variable
                assert r.env.get(d.name) not in (None, d.current)
            else:  # exported by the launch environment (login profile): the trial drops it
                assert r.unset == [d.name] if d.reference is None else r.env == {d.name: d.reference}
        else:
            assert not d.revertible and d.revert is None
    assert deltas.deltas[0].impact == "high"  # ranked: a high-impact delta comes first


def test_sources_are_read_from_proc_and_files(examined):
    site = next(d for d in examined("sitecustomize-foreign").deltas().deltas if d.name == "NCCL_P2P_DISABLE")
    assert site.source.endswith("sitecustomize.py")
    conf = next(d for d in examined("nccl-conf-simple").deltas().deltas if d.name == "NCCL_PROTO")
    assert conf.source.endswith("nccl.conf") and conf.current == "Simple"
    assert conf.revert is not None and conf.revert.env == {"NCCL_PROTO": "LL,LL128,Simple"}  # NVLink: LL128 on by default
    profile = next(d for d in examined("bashrc-launch-blocking").deltas().deltas if d.name == "CUDA_LAUNCH_BLOCKING")
    assert profile.source == "~/.bashrc"
    lost = {d.name: d for d in examined("lost-nccl-env").deltas().deltas if d.kind == "env"}
    assert lost["NCCL_PROTO"].current is None and lost["NCCL_PROTO"].revert is not None
    assert lost["NCCL_PROTO"].revert.env == {"NCCL_PROTO": lost["NCCL_PROTO"].reference}  # the launcher dropped it
    forced = lost["CUDA_MODULE_LOADING"]  # SGLang 0.5.9 sets it itself: no relaunch can take it away
    assert forced.source == "engine-forced" and not forced.revertible and forced.revert is None


@pytest.mark.parametrize("name", HEALTHY)
def test_healthy_boxes_have_no_high_impact_environment_delta(examined, name):
    deltas = examined(name).deltas()
    loud = [d.label for d in deltas.deltas if d.kind in ("env", "launch-flag", "hardware") and d.impact == "high"]
    assert loud == []


def test_acceptance_and_numbers_compare_as_values(examined):
    box = examined("no-regression")
    good = dict(box.fingerprint)
    good["gpus"] = [{**g, "max_sm_clock_mhz": int(g["max_sm_clock_mhz"]), "power_limit_w": f"{g['power_limit_w']}"}
                    for g in good["gpus"]]
    good["worker_env"] = dict(box.fingerprint["worker_env"])
    good["launch"] = box.sandbox.launch.replace("--tp-size 4", "--tp 4")
    good["measurements"] = {"accept_length": 2.7}
    same = box.deltas(good_fingerprint=good, measure={"spec": {"accept_length": 2.70}})
    assert [d.label for d in same.deltas if d.kind != "code"] == []
    dropped = box.deltas(good_fingerprint=good, measure={"spec": {"accept_length": 2.18}})
    acc = next(d for d in dropped.deltas if d.kind == "acceptance")
    assert (acc.reference, acc.current, acc.impact, acc.revertible) == ("2.7", "2.18", "high", False)


@pytest.mark.parametrize("name", PROBED)
def test_probe_confirms_the_hardware_cause(examined, name):
    box = examined(name)
    probe = box.probe(box.deltas())
    keys = {c.key for c in probe.causes if c.confirmed and c.method == "targeted-measurement"}
    assert keys == {c.name for c in _truth(name)}, probe.summary_line()


@pytest.mark.parametrize("name", ["no-regression", "nccl-upgrade"])
def test_probe_confirms_nothing_on_a_healthy_gpu_state(examined, name):
    probe = examined(name).probe(examined(name).deltas())
    assert probe.clocks and not [c.name for c in probe.causes if c.confirmed]


def test_a_cause_key_is_not_taken_for_a_secret():
    """Checkpoints remember values under secret-looking names; a record's `key` field (the delta's name) is not one."""
    from specdoctor.host.redact import is_secret_name

    assert not is_secret_name("key") and is_secret_name("api_key") and is_secret_name("HF_TOKEN")


def _apply(sandbox: Any, revert: Any, shadow_dir: Any) -> tuple[str, dict[str, str]]:
    """What a revert trial launches: the line with each flag put back (by dest name) and the workers' environment
    of a server started with the revert's env, unsets and shadow sitecustomize (a real interpreter start-up)."""
    from specdoctor.sim.predict import server_worker_env
    from tests.sim.test_reverts import SHADOW

    line = sandbox.launch
    for dest, value in revert.argv_set.items():
        flag = "--" + dest.replace("_", "-")
        words = line.split()
        i = words.index(flag)
        words[i + 1: i + 2] = [value] if value else []
        line = " ".join(words)
    extra = dict(revert.env)
    if revert.undo_sitecustomize:
        (shadow_dir / "sitecustomize.py").write_text(SHADOW.format(names=revert.undo_sitecustomize))
        extra["PYTHONPATH"] = str(shadow_dir)
    env = server_worker_env(sandbox, extra)
    for name in revert.unset:
        env.pop(name, None)
    return line, env


@pytest.mark.parametrize("name", [n for n in STORIES if any(c.revertible for c in _truth(n))])
def test_the_truth_causes_revert_gives_the_good_runs_numbers_back(examined, name, tmp_path):
    """The model the twin measures with: today's launch predicts today's figure, the truth cause's Revert the good
    run's (so a revert trial can confirm it)."""
    from specdoctor.sim.predict import predict

    box = examined(name)
    sc = box.sandbox.scenario
    good = float(sc.good_fingerprint["measurements"]["spec_tps"])
    assert predict(box.sandbox).tps == pytest.approx(sc.truth.spec_tps, rel=0.02)
    for cause in _truth(name):
        d = next(d for d in box.deltas().deltas if d.kind == cause.kind and d.name == cause.name)
        line, env = _apply(box.sandbox, d.revert, tmp_path)
        assert predict(box.sandbox, launch=line, worker_env=env).tps == pytest.approx(good, rel=0.02), d.label


def test_a_path_flag_reverts_to_what_exists_on_this_box(examined):
    box = examined("draft-path-changed")
    models = str(box.sandbox.root / "models")
    good = box.sandbox.scenario.good_fingerprint or {}
    line = str(good["launch"]).replace("{models}", "/mnt/other-models")  # the good run's box mounted them elsewhere
    moved = box.deltas(good_fingerprint={**good, "launch": line})
    d = next(d for d in moved.deltas if d.name == "speculative_draft_model_path")
    assert d.revert is not None and d.revert.argv_set == {d.name: f"{models}/EAGLE3-LLaMA3.3-Instruct-70B"}
    assert not [x for x in moved.deltas if x.name == "model_path"]  # same model, another mount: not a difference
    gone = box.deltas(good_fingerprint={**good, "launch": line.replace("LLaMA3.3", "LLaMA3.2")})
    d = next(d for d in gone.deltas if d.name == "speculative_draft_model_path")
    assert not d.revertible and d.revert is None and "not on this box" in d.why


def test_without_a_benchmark_the_link_probe_says_so_and_confirms_nothing(examined):
    box = examined("pcie-downtrained")
    bench = box.sandbox.root / "bin" / "all_reduce_perf"
    hidden = bench.with_name(".all_reduce_perf")
    bench.rename(hidden)  # a box without nccl-tests (and no python given for torchrun)
    try:
        probe = box.probe(box.deltas())
    finally:
        hidden.rename(bench)
    assert [p.problem for p in probe.links] and "no all-reduce benchmark" in str(probe.links[0].problem)
    assert "pcie-link" not in {c.key for c in probe.causes}
