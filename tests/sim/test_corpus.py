"""The scenario corpus: every story loads, lays out, and its truth is what the twin's own model predicts.

For each scenario the noise-free model (`predict`) must give the truth's numbers, and undoing the truth's
causes (revert the culprit files, restore the good run's variable or flag, heal the hardware, measure with the
claims' workload) must bring the numbers back to the user's claims; each cause alone must close its share of
the gap. No full investigation runs here (benchmarks/diagnosis_accuracy.py does that).
"""

from __future__ import annotations

import json
import shlex
import subprocess
from collections import Counter
from pathlib import Path

import pytest

from specdoctor.sim import Sandbox, build_sandbox, list_scenarios, load_scenario, predict
from specdoctor.sim.predict import server_worker_env
from specdoctor.sim.scenario import Cause, Scenario

from .conftest import free_port

NAMES = [n for n, _ in list_scenarios(include_corpus=True)]
CHAT = {"prompt_tokens": 14, "output_tokens": 128}  # the shape of specdoctor's own benchmark requests


def test_corpus_has_24_stories_of_every_required_kind():
    assert len(NAMES) >= 24
    scs = [load_scenario(n) for n in NAMES]
    kinds = Counter(c.kind for sc in scs for c in sc.truth.causes)
    assert set(kinds) >= {"code", "env", "launch-flag", "software", "hardware", "workload"}
    code_causes = [sum(c.kind == "code" for c in sc.truth.causes) for sc in scs]
    assert 2 in code_causes and 3 in code_causes  # two and three interacting patches
    assert any({c.kind for c in sc.truth.causes} >= {"code", "env"} for sc in scs)  # two causes at once
    assert {sc.sglang.version for sc in scs} >= {"0.5.9", "0.5.23"}
    assert any(sc.other_servers for sc in scs) and any(sc.gpu_processes for sc in scs)
    assert any(sc.shell_profile for sc in scs) and any(sc.nccl_conf and sc.good_fingerprint for sc in scs)
    assert any(sc.sitecustomize and sc.good_fingerprint for sc in scs)
    assert any(not sc.hints.essential and any(p.essential for p in sc.sglang.patches) for sc in scs)
    sources = {c.source for sc in scs for c in sc.truth.causes}
    assert {"sitecustomize.py", "~/.bashrc", "/etc/nccl.conf"} <= sources
    flags = {c.name for sc in scs for c in sc.truth.causes if c.kind == "launch-flag"}
    assert len(flags) >= 3
    verdicts = Counter(sc.truth.verdict for sc in scs)
    assert all(verdicts[v] >= 2 for v in ("no-regression", "code-regression", "environment"))
    boxes = {(sc.hardware.gpu_name, sc.hardware.gpu_count, sc.server.model_path) for sc in scs}
    assert len(boxes) >= 6
    for sc in scs:  # every story says why its truth is the truth (the corpus' notes quote predict's numbers)
        assert sc.truth.notes.strip() or sc.name in {"seed", "no-regression", "nccl-win"}


def _subst(sb: Sandbox, text: str) -> str:
    for key, value in sb.context().items():
        text = text.replace("{" + key + "}", value)
    return text


def _heal_hardware(sb: Sandbox) -> None:
    """The box as it should be: full PCIe links, clocks at max, no power cap, no other GPU jobs."""
    path = sb.root / ".sim" / "twin.json"
    twin = json.loads(path.read_text())
    hw = twin["hardware"]
    for link in hw["pcie_per_gpu"].values():
        link["gen_current"], link["width_current"] = link["gen_max"], link["width_max"]
    hw["applications_clocks_mhz"] = None  # nvidia-smi -rac / -rgc: the card runs at its own boost again
    hw["clocks_mem_max_mhz"] = None
    hw["power_limit_w"] = hw.get("power_default_w") or hw["power_limit_w"]
    twin["gpu_processes"] = []
    path.write_text(json.dumps(twin))


def _undo(sb: Sandbox, sc: Scenario, causes: list[Cause]) -> dict:
    """Undo `causes` in the sandbox; return predict()'s keyword arguments for the undone state."""
    good = sc.good_fingerprint or {}
    env = server_worker_env(sb)
    kwargs: dict = dict(CHAT)
    for cause in causes:
        if cause.kind == "code":
            subprocess.run(["git", "-C", sb.repo, "checkout", "--", cause.source], check=True, capture_output=True)
        elif cause.kind == "commit":  # the upstream commit's change reversed in the working tree (HEAD stays)
            _unapply_commit(sb, next(c.subject for c in sc.sglang.history if c.id == cause.name))
        elif cause.kind == "env":
            value = (good.get("worker_env") or {}).get(cause.name)
            if value is not None:
                env[cause.name] = value
            elif "nccl.conf" in cause.source:
                env[cause.name] = ""  # an empty variable overrides the config file's line
            else:
                env.pop(cause.name, None)
        elif cause.kind == "launch-flag":
            kwargs["launch"] = _subst(sb, good["launch"])
        elif cause.kind == "software":
            env.update(sc.truth.nccl_win or {})  # the version stays; the measured workaround restores it
        elif cause.kind == "hardware":
            _heal_hardware(sb)
        elif cause.kind == "workload":
            w = good["workload"]
            kwargs.update(prompt_tokens=w["prompt_tokens"], output_tokens=w["output_tokens"],
                          prompt=w["prompt_example"], temperature=float(w["temperature"]))
    kwargs["worker_env"] = env
    return kwargs


def _unapply_commit(sb: Sandbox, subject: str) -> None:
    sha = subprocess.run(["git", "-C", sb.repo, "log", "--first-parent", "--format=%H", "--fixed-strings",
                          f"--grep={subject}", "-1"], check=True, capture_output=True, text=True).stdout.strip()
    diff = subprocess.run(["git", "-C", sb.repo, "diff", f"{sha}^1", sha], check=True, capture_output=True).stdout
    subprocess.run(["git", "-C", sb.repo, "apply", "-R", "-"], input=diff, check=True, capture_output=True)


def _snapshot(sb: Sandbox) -> tuple[dict[str, str], str]:
    repo = Path(sb.repo)
    files = subprocess.run(["git", "-C", sb.repo, "ls-files", "-m", "-o", "--exclude-standard"], check=True,
                           capture_output=True, text=True).stdout.split()
    return {f: (repo / f).read_text() for f in files}, (sb.root / ".sim" / "twin.json").read_text()


def _restore(sb: Sandbox, snap: tuple[dict[str, str], str]) -> None:
    now = subprocess.run(["git", "-C", sb.repo, "ls-files", "-m", "-o", "--exclude-standard"], check=True,
                         capture_output=True, text=True).stdout.split()
    for rel in [f for f in now if f not in snap[0]]:  # changed by an undo (a commit reversed): back to HEAD
        subprocess.run(["git", "-C", sb.repo, "checkout", "--", rel], check=False, capture_output=True)
    for rel, text in snap[0].items():
        (Path(sb.repo) / rel).write_text(text)
    (sb.root / ".sim" / "twin.json").write_text(snap[1])


@pytest.fixture(scope="module")
def sandboxes():
    made: dict[str, Sandbox] = {}

    def get(name: str) -> Sandbox:
        if name not in made:
            made[name] = build_sandbox(load_scenario(name), start_server=False, port=free_port())
        return made[name]

    yield get
    for sb in made.values():
        sb.remove()


def _claims(sc: Scenario) -> dict[str, float]:
    """The user's claims, else the good run's measured figures (what investigate takes as claims without --expect)."""
    if sc.hints.expect:
        return dict(sc.hints.expect)
    meas = (sc.good_fingerprint or {}).get("measurements") or {}
    return {k: float(meas[f]) for k, f in (("spec", "spec_tps"), ("baseline", "baseline_tps")) if f in meas}


@pytest.mark.parametrize("name", NAMES)
def test_truth_is_what_the_model_predicts(sandboxes, name):
    sb = sandboxes(name)
    sc = sb.scenario
    truth, claims = sc.truth, _claims(sc)
    now = predict(sb, **CHAT)
    base = predict(sb, speculative=False, **CHAT)
    if truth.spec_tps is not None:
        assert now.tps == pytest.approx(truth.spec_tps, rel=0.02)
    if truth.baseline_tps is not None:
        assert base.tps == pytest.approx(truth.baseline_tps, rel=0.02)
    if truth.accept_length is not None:
        assert now.accept_length == pytest.approx(truth.accept_length, abs=0.03)
    assert set(truth.culprits) <= set(now.present_patches)
    assert sorted({p.file for p in sc.sglang.patches if p.id in truth.culprits}) == sorted(truth.culprit_files)

    reproduced = now.tps == pytest.approx(claims["spec"], rel=0.03) and \
        ("baseline" not in claims or base.tps == pytest.approx(claims["baseline"], rel=0.03))
    if truth.verdict == "baseline-not-reproducible":
        assert not reproduced and not truth.causes
        return
    if truth.verdict == "no-regression" and not truth.causes:
        assert reproduced
        return
    assert truth.causes and not reproduced

    snap = _snapshot(sb)
    try:  # undo every cause: the claims come back
        kwargs = _undo(sb, sc, truth.causes)
        fixed = predict(sb, **kwargs)
        assert fixed.tps == pytest.approx(claims["spec"], rel=0.03)
        if not any(c.kind == "workload" for c in truth.causes) and "baseline" in claims:
            fixed_base = predict(sb, **{**kwargs, "speculative": False})
            assert fixed_base.tps == pytest.approx(claims["baseline"], rel=0.03)
    finally:
        _restore(sb, snap)
    gap = claims["spec"] - now.tps
    for cause in truth.causes:  # each cause alone closes its share of the gap
        try:
            alone = predict(sb, **_undo(sb, sc, [cause]))
        finally:
            _restore(sb, snap)
        assert alone.tps - now.tps >= 0.5 * cause.share * gap - 0.5, cause


def test_launch_line_of_every_scenario_parses_for_its_version(sandboxes):
    """The launch lines use each version's real spelling (argparse of the stand-in exits 2 otherwise)."""
    from specdoctor.sim.predict import vllm_server_args
    from specdoctor.sim.standin.sglang._twin.args import parse_server_args

    for name in NAMES:
        sc = load_scenario(name)
        argv = shlex.split(sc.server.launch.replace("{port}", "30000"))
        if sc.engine == "vllm":  # vLLM's flags, read as its stand-in reads them (exits 2 on a bad line)
            assert vllm_server_args(argv)["model_path"], name
            continue
        argv = argv[argv.index("sglang.launch_server") + 1:] if "sglang.launch_server" in argv else argv[2:]
        parse_server_args(argv, sc.sglang.version, name)
