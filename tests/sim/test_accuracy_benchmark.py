"""benchmarks/diagnosis_accuracy.py scores a report against a scenario's truth (no investigation runs here)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

_PATH = Path(__file__).resolve().parents[2] / "benchmarks" / "diagnosis_accuracy.py"
_spec = importlib.util.spec_from_file_location("diagnosis_accuracy", _PATH)
assert _spec and _spec.loader
acc = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(acc)


def test_causes_are_named_by_file_or_by_name_in_any_spelling():
    code = {"kind": "code", "name": "verify-sync", "source": "python/sglang/srt/speculative/eagle_worker.py"}
    assert acc.cause_named(code, "", ["python/sglang/srt/speculative/eagle_worker.py"])
    assert not acc.cause_named(code, "verify-sync is suspicious", [])  # only a blamed file names a code cause
    flag = {"kind": "launch-flag", "name": "attention_backend", "source": "launch line"}
    assert acc.cause_named(flag, "Relaunch with --attention-backend fa3", [])
    assert not acc.cause_named(flag, "the attention kernels look slow", [])
    env = {"kind": "env", "name": "NCCL_P2P_DISABLE", "source": "sitecustomize.py"}
    assert acc.cause_named(env, "nccl_p2p_disable=1 is set in every worker", [])


def test_confirmed_causes_that_name_no_truth_cause_are_listed():
    truth = [{"kind": "env", "name": "NCCL_P2P_LEVEL", "source": "tmux"},
             {"kind": "code", "name": "rope", "source": "python/sglang/srt/models/llama.py"}]
    report = {"attribution": {"causes": [
        {"name": "NCCL_P2P_LEVEL=LOC set in the tmux window", "kind": "environment", "confirmed": True},
        {"name": "--served-model-name llama70b (the good run)", "kind": "launch", "confirmed": True},
        {"name": "NCCL_DEBUG=WARN", "kind": "environment", "confirmed": False},  # a candidate: not a claim
        {"name": "python/sglang/srt/models/llama.py", "kind": "code", "confirmed": True}]}}
    assert acc.other_causes(report, truth) == ["--served-model-name llama70b (the good run)"]
    assert acc.other_causes({}, truth) == []


def test_rows_and_exit_status_follow_the_results(monkeypatch, capsys, tmp_path):
    monkeypatch.setenv("SPECDOCTOR_HOME", str(tmp_path))
    def fake(name: str, k: int) -> acc.Result:
        wrong = name == "single-culprit" and k == 1
        blamed = ["python/sglang/srt/layers/moe/topk.py"] if wrong else \
            (["python/sglang/srt/speculative/eagle_worker.py"] if name == "single-culprit" else [])
        truth = ["python/sglang/srt/speculative/eagle_worker.py"] if name == "single-culprit" else []
        return acc.Result(scenario=name, seed=k, verdict="code-regression" if name == "single-culprit" else "x",
                          truth_verdict="code-regression" if name == "single-culprit" else "x", verdict_ok=True,
                          blamed=blamed, truth_culprits=truth,
                          innocent_blamed=sorted(set(blamed) - set(truth)), launches=4, wall_s=1.0,
                          status="complete", tree_changed=name == "no-regression" and k == 1)

    monkeypatch.setattr(acc, "run_one", fake)
    assert acc.main(["--only", "seed", "--seeds", "2"]) == 0
    assert "checkouts not left as found 0; runs not complete 0" in capsys.readouterr().out
    assert acc.main(["--only", "no-regression", "--seeds", "2"]) == 1  # the checkout was changed at seed 1
    assert "checkouts not left as found 1" in capsys.readouterr().out
    assert acc.main(["--only", "single-culprit", "--seeds", "2"]) == 1  # an innocent file blamed at seed 1
    out = capsys.readouterr().out
    assert "| single-culprit | 2/2" in out and "topk.py" in out
    assert "culprit precision 0.50, recall 0.50; wrong culprits 1" in out
    assert acc.main(["--only", "nope"]) == 2


@pytest.mark.parametrize("bad", [["--seeds", "0"], ["--jobs", "0"]])
def test_bad_arguments_are_refused(bad):
    assert acc.main(bad) == 2


def test_spared_launches_are_counted_from_the_subtraction_notes_only():
    note = f"{acc.SPARED} (5 runs), no launch"  # the wording subtract writes
    report = {"decisions": [
        {"step": "subtract", "found": f"all patches 46.8 vs 50.5 → DIFFERENT; essentials only: {note}; "
                                      f"all patches in a trial tree: {note}"},
        {"step": "essentials", "found": note},  # another step's words are not a spared launch
        {"step": "subtract", "found": "essentials only: the essentials search's benchmark of the same tree was "
                                      "undecided (5 runs), so it was launched for more"}]}
    assert acc.spared_launches(report) == 2
    assert acc.spared_launches({}) == 0


def test_a_share_is_checked_against_the_culprits_confirming_trial():
    trials = [{"patches": ["a.py", "c.py"], "samples": [300.0, 302.0, 301.0]},
              {"patches": ["a.py"], "samples": [690.0, 688.0, 692.0]}]
    report = {"stash": {"culprits": ["c.py"]}, "bisection": trials,
              "attribution": {"causes": [{"name": "local patch c.py", "kind": "code", "delta": -389.0}]}}
    text, ok = acc.share_check(report)
    assert ok is True and "-389.0 vs -389.0" in text
    report["attribution"]["causes"][0]["delta"] = -138.6  # the essentials search's arms: the real bug
    assert acc.share_check(report)[1] is False
    assert acc.share_check({**report, "bisection": trials[:1]}) == ("no trial of the tree without the culprits", None)
    assert acc.share_check({}) == (None, None)
    # no all-patches trial: the subtraction's all-patches arm is the same tree
    stash = {"culprits": ["c.py"], "measurements": [{"label": "all patches", "samples": [300.0, 302.0, 301.0]}]}
    alone = {**report, "stash": stash, "bisection": trials[1:]}
    alone["attribution"] = {"causes": [{"name": "local patch c.py", "kind": "code", "delta": -389.0}]}
    assert acc.share_check(alone)[1] is True


def _effect(phase: str, delta: float, ci: tuple[float, float], moved: dict[str, bool], basis: str = "gpu",
            gpu_moved: bool = False) -> dict:
    rows = [{"phase": ph, "basis": basis, "moved": m} for ph, m in moved.items()]
    if basis == "host":  # a host stall's report also reads the GPU time of every phase
        rows += [{"phase": ph, "basis": "gpu", "moved": gpu_moved} for ph in moved]
    return {"phase": phase, "delta_ms": delta, "ci": list(ci), "basis": basis, "phases": rows,
            "source": "profiler-gpu: essentials + a.py vs every patch but a.py"}


def _report(*effects: dict) -> dict:
    return {"attribution": {"causes": [{"confirmed": True, "phase_effect": e} for e in effects]}}


def test_a_phase_effect_is_right_in_phase_size_interval_and_the_phase_left_alone():
    good = _effect("verify", 6.8, (6.5, 7.1), {"verify": True, "draft": False})
    assert acc.phase_check(_report(good), "verify", 7.0)[1]
    assert acc.phase_check(_report(good), "verify")[1]  # no size in the truth: phase, interval, others
    assert not acc.phase_check(_report(good), "draft", 7.0)[1]  # the wrong phase
    assert not acc.phase_check(_report(good), "verify", 12.0)[1]  # more than a quarter off the truth's size
    assert not acc.phase_check(_report(_effect("verify", 6.8, (7.0, 7.4), {"verify": True, "draft": False})),
                               "verify", 7.0)[1]
    assert not acc.phase_check(_report(_effect("verify", 6.8, (-0.5, 7.4), {"verify": True, "draft": False})),
                               "verify", 7.0)[1]
    both = _effect("verify", 6.8, (6.5, 7.1), {"verify": True, "draft": True})  # the other phase moved too
    assert not acc.phase_check(_report(both), "verify", 7.0)[1]
    alone = _effect("verify", 6.8, (6.5, 7.1), {"verify": True})  # no other phase read: nothing shown left alone
    assert not acc.phase_check(_report(alone), "verify", 7.0)[1]
    assert not acc.phase_check(_report({**good, "source": "cycle arithmetic"}), "verify", 7.0)[1]
    assert not acc.phase_check({}, "verify", 7.0)[1]  # nothing claimed where the truth has an effect
    assert acc.phase_check({}, "none")[1] and not acc.phase_check(_report(good), "none")[1]


def test_a_host_stall_is_read_on_host_time_with_no_gpu_time_moved():
    stall = _effect("verify", 3.0, (2.9, 3.1), {"verify": True, "draft": False}, basis="host")
    assert acc.phase_check(_report(stall), "verify", 3.0, "host")[1]
    assert not acc.phase_check(_report(stall), "verify", 3.0, "gpu")[1]  # a GPU story read on host time
    moved = _effect("verify", 3.0, (2.9, 3.1), {"verify": True, "draft": False}, basis="host", gpu_moved=True)
    assert not acc.phase_check(_report(moved), "verify", 3.0, "host")[1]


def test_the_report_states_the_effect_per_step_or_per_cycle():
    good = _effect("draft", 2.0, (1.9, 2.1), {"draft": True, "verify": False})
    line = "- eagle_worker.py: −13.5 tok/s (draft +2.0 ms [1.9, 2.1] per step, profiler-gpu)"
    assert acc.phase_check(_report(good), "draft", 2.0, md=line)[1]
    assert not acc.phase_check(_report(good), "draft", 2.0, md=line.replace("per step", "per cycle"))[1]
    assert not acc.phase_check(_report(good), "draft", 2.0, md="")[1]
