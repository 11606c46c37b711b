"""A promotion that overrode a difference is evidence for it: an nccl.conf line with no reverting value becomes
testable with the value the NCCL promotion measured in its place — only when that override alone won."""

from __future__ import annotations

from specdoctor.engine.actions.attribute_evidence import promoted_override
from specdoctor.models import Delta
from specdoctor.tools.nccl.nccl_promote import NcclPromotion, PromotedResult

CONF = Delta(kind="env", name="NCCL_P2P_LEVEL", reference=None, current="LOC", source="/etc/nccl.conf",
             revertible=False, impact="high")


CURRENT = {"NCCL_SHM_DISABLE": "1"}  # the workers' setting every candidate is compared with (and carries)


def _promo(*results: PromotedResult) -> NcclPromotion:
    return NcclPromotion(baseline_samples=[40.0, 41.0, 40.5], results=list(results), reference_env=CURRENT)


def _r(env: dict[str, str], outcome: str = "DIFFERENT", delta: float = 9.0) -> PromotedResult:
    return PromotedResult(label=" ".join(f"{k}={v}" for k, v in env.items()), env={**CURRENT, **env},
                          propagated=True, samples=[49.0, 50.0, 49.5], outcome=outcome, delta=delta, pct_change=22.4)


def test_a_conf_line_is_tested_with_the_value_the_promotion_won_with():
    d = promoted_override(CONF, _promo(_r({"NCCL_P2P_LEVEL": "SYS", "NCCL_MIN_NCHANNELS": "16"}),
                                       _r({"NCCL_P2P_LEVEL": "SYS"})))
    assert d is not None and d.revert is not None and d.revert.env == {"NCCL_P2P_LEVEL": "SYS"}
    assert d.revertible and "+22.4 %" in d.why and d.label == CONF.label


def test_no_override_without_a_decided_single_variable_win_or_for_other_sources():
    assert promoted_override(CONF, None) is None
    assert promoted_override(CONF, _promo(_r({"NCCL_P2P_LEVEL": "SYS"}, outcome="SAME", delta=0.3))) is None
    assert promoted_override(CONF, _promo(_r({"NCCL_P2P_LEVEL": "SYS", "NCCL_ALGO": "Ring"}))) is None
    assert promoted_override(CONF, _promo(_r({"NCCL_P2P_LEVEL": "SYS"}, delta=-2.0))) is None  # slower
    script = CONF.model_copy(update={"source": "launch shell"})
    assert promoted_override(script, _promo(_r({"NCCL_P2P_LEVEL": "SYS"}))) is None
