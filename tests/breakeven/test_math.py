"""Break-even formulas against hand-computed cases and published figures."""

from __future__ import annotations

import pytest

from specdoctor.errors import UsageError
from specdoctor.tools.breakeven.breakeven import (
    BreakevenInput,
    accept_length,
    alpha_from_accept_length,
    analyze,
    leviathan_speedup,
)


def test_accept_length_closed_form():
    assert accept_length(0.0, 4) == 1.0
    assert accept_length(1.0, 4) == 5.0
    assert accept_length(0.5, 2) == pytest.approx(1 + 0.5 + 0.25)
    assert accept_length(0.8, 3) == pytest.approx(1 + 0.8 + 0.64 + 0.512)


@pytest.mark.parametrize("alpha,k", [(0.1, 1), (0.5247, 2), (0.7, 5), (0.95, 8)])
def test_alpha_inverts_accept_length(alpha, k):
    assert alpha_from_accept_length(accept_length(alpha, k), k) == pytest.approx(alpha, abs=1e-9)


def test_alpha_out_of_range():
    with pytest.raises(UsageError):
        alpha_from_accept_length(3.5, 2)
    assert alpha_from_accept_length(1.0, 3) == 0.0 and alpha_from_accept_length(4.0, 3) == 1.0


def test_leviathan_theorem_38_by_hand():
    # α = 0.8, γ = 3, c = 0.05: (1 − 0.8^4) / (0.2 · 1.15) = 0.5904 / 0.23
    assert leviathan_speedup(0.8, 3, 0.05) == pytest.approx(0.5904 / 0.23)
    # Corollary 3.9: at γ = 1 the improvement is (1 + α)/(1 + c)
    assert leviathan_speedup(0.6, 1, 0.1) == pytest.approx(1.6 / 1.1)


def test_analyze_reproduces_leviathan_in_its_special_case():
    # t_verify = t_decode, t_draft = c·t_decode, no overhead ⇒ speedup = τ/(γc + 1), τ* = γc + 1
    alpha, gamma, c, d = 0.8, 3, 0.05, 10.0
    tau = accept_length(alpha, gamma)
    a = analyze(BreakevenInput(decode_ms=d, verify_ms=d, draft_ms=c * d, steps=gamma, accept_len=tau))
    assert a.tau_star == pytest.approx(gamma * c + 1, abs=1e-4)
    assert a.speedup == pytest.approx(leviathan_speedup(alpha, gamma, c), abs=1e-3)
    assert a.alpha == pytest.approx(alpha, abs=1e-4)
    assert a.spec_tps_predicted and a.margin > 0 and "wins" in a.verdict


def test_seed_numbers_both_ways():
    short = analyze(BreakevenInput(baseline_tps=82, spec_tps=60, accept_len=1.8))
    comp = analyze(BreakevenInput(decode_ms=12.2, verify_ms=29, draft_ms=0.5, steps=2))
    assert short.tau_star == pytest.approx(1.8 * 82 / 60, abs=1e-3)
    assert comp.tau_star == pytest.approx((2 * 0.5 + 29) / 12.2, abs=1e-3)
    for a in (short, comp):
        assert abs(a.tau_star - 2.46) <= 0.01
    assert short.cycle_source == "throughput" and comp.cycle_source == "components"
    assert short.margin == pytest.approx(1.8 - 2.46, abs=1e-3) and "loses" in short.verdict
    assert short.steps_assumed and short.steps == 2
    assert comp.dominant_term == "verify" and comp.terms[1].share == pytest.approx(29 / 30, abs=1e-3)
    need = comp.targets[0]
    assert need.speedup == 1.0 and accept_length(need.alpha_needed, 2) == pytest.approx(need.tau_needed, abs=1e-3)
    assert comp.targets[2].alpha_needed is None  # 1.5× needs τ 3.69 > k+1 = 3


def test_sglang_published_eagle3_h100():
    # SGLang PR #4247, Llama-3.1-8B on 1×H100: 158.34 tok/s baseline, EAGLE-3 steps 8: 378.57 tok/s at τ 5.39
    a = analyze(BreakevenInput(baseline_tps=158.34, spec_tps=378.57, accept_len=5.39, steps=8))
    assert a.tau_star == pytest.approx(5.39 * 158.34 / 378.57, abs=1e-3)  # ≈ 2.254
    assert a.speedup == pytest.approx(378.57 / 158.34, abs=1e-3) and a.margin > 3
    assert accept_length(a.alpha, 8) == pytest.approx(5.39, abs=1e-3)


def test_predictions_and_linear_verify_model():
    a = analyze(BreakevenInput(decode_ms=10, verify_ms=20, draft_ms=1, steps=3, draft_tokens=4, accept_len=3.0,
                               verify_points=[{"draft_tokens": 8, "verify_ms": 28}]))
    assert a.verify_model.startswith("linear")
    by_k = {p.steps: p for p in a.predictions}
    # t_verify(N) = 12 + 2N: k=3 → N=4 → 20 ms; cycle = 3 + 20 = 23
    assert by_k[3].cycle_ms == pytest.approx(23.0) and by_k[3].accept_len == pytest.approx(3.0, abs=1e-3)
    assert by_k[7].cycle_ms == pytest.approx(7 + 12 + 2 * 8)
    assert a.best_steps == max(a.predictions, key=lambda p: p.tps).steps


def test_reference_run_says_verify_moved():
    a = analyze(BreakevenInput(decode_ms=12.2, verify_ms=29, draft_ms=0.5, steps=2, accept_len=1.8,
                               reference={"decode_ms": 11.2, "verify_ms": 19, "draft_ms": 0.5, "steps": 2}))
    assert a.moved_term == "verify"
    good_star = (1 + 19) / 11.2
    assert sum(c.delta_tau_star for c in a.changes) == pytest.approx(a.tau_star - good_star, abs=2e-3)


@pytest.mark.parametrize("kwargs,msg", [
    ({"spec_tps": 60}, "plain-decode"),
    ({"baseline_tps": 82, "spec_tps": 60}, "--accept-len"),
    ({"baseline_tps": 82, "decode_ms": 20, "spec_tps": 60, "accept_len": 1.8}, "disagree"),
    ({"decode_ms": 12, "verify_ms": 29, "draft_ms": 0.5}, "--steps"),
    ({"decode_ms": 12, "verify_ms": 29, "steps": 2, "accept_len": 3.5}, "cannot exceed"),
])
def test_bad_input_is_one_usage_error(kwargs, msg):
    with pytest.raises(UsageError, match=msg):
        analyze(BreakevenInput(**kwargs))


def test_tau_star_comes_from_the_measured_cycle_and_a_disagreeing_model_is_said():
    # real H100 story: baseline 574, spec 311 tok/s at τ 2.98; the profiled phases (4.29 ms) miss most of the
    # measured cycle (1000·2.98/311 = 9.58 ms): "wins" from the phases alone contradicted the measurement
    a = analyze(BreakevenInput(baseline_tps=574, spec_tps=311, accept_len=2.98, steps=3, draft_ms=0.5,
                               verify_ms=2.79))
    assert a.cycle_source == "throughput" and a.cycle_ms == pytest.approx(1000 * 2.98 / 311, abs=1e-3)
    assert a.tau_star == pytest.approx(2.98 * 574 / 311, abs=1e-3) and a.margin < 0 and "loses" in a.verdict
    assert a.speedup == pytest.approx(311 / 574, abs=1e-3) and a.model_disagrees
    assert a.host_ms == pytest.approx(a.cycle_ms - 4.29, abs=1e-3) and "model and measurement disagree" in a.verdict
    assert a.tau_star_components == pytest.approx(4.29 / (1000 / 574), abs=1e-3)
    by_k = {p.steps: p for p in a.predictions}
    assert by_k[3].tps == pytest.approx(311, rel=1e-3)  # the model at the measured k reproduces the measurement
    assert {t.name for t in a.terms} == {"draft", "verify", "overhead", "host"}


def test_a_model_that_agrees_with_the_measurement_says_nothing_more():
    a = analyze(BreakevenInput(baseline_tps=100, spec_tps=200, accept_len=3.0, steps=3, draft_ms=1.0, verify_ms=11.5))
    assert "wins" in a.verdict and not a.model_disagrees and "disagree" not in a.verdict
    assert a.host_ms == pytest.approx(0.5, abs=1e-3)  # 15 ms measured, 14.5 profiled
