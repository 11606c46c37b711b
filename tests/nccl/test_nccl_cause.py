"""The promoted NCCL setting is named as the cause of the gap only when it closes it (nccl-upgrade: NCCL 2.26.2 →
2.27.3, NCCL_PROTO=LL restores) — never when the claims are already reproduced (nccl-win)."""

from __future__ import annotations

import json
import socket

from specdoctor.diagnosis.claims import claim_outcome
from specdoctor.engine.actions.nccl import nccl_cause
from specdoctor.engine.state import StateView
from specdoctor.host import open_host
from specdoctor.inference import get_engine
from specdoctor.models.delta import CauseFact
from specdoctor.toolkit import ToolContext, ToolResult, registry
from specdoctor.tools.nccl.nccl_promote import NcclPromotion, PromotedResult
from specdoctor.tools.serving.trial import LaunchConfig, measure, trial


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _stored(tool: str, output: dict) -> dict:
    return ToolResult(tool=tool, status="ok", summary="", output=output).model_dump(mode="json")  # type: ignore[arg-type]


def _investigate_nccl(name: str) -> tuple[StateView, NcclPromotion, dict | None]:
    """What investigate has when it reaches the promotion, built from real tool calls on the twin: today's
    fingerprint, the claims checked (the running server, a baseline launch), the A/B of NCCL_PROTO=LL vs the
    workers' setting."""
    with open_host(f"sim:{name}") as host:
        ctx = ToolContext(host=host, run_id=f"cause-{name}", auto_approve=True)
        fp = registry.call(ctx, "fingerprint", {"repo": host.hints.repo, "python": host.hints.python})
        port = get_engine("sglang").parse_launch(host.hints.launch).port
        bench = registry.call(ctx, "benchmark", {"port": port, "runs": 8, "warmup_runs": 1})
        # the user's server holds the GPUs (the twin enforces memory): stop it as investigate does, then launch
        found = registry.call(ctx, "find_server_processes", {"port": port})
        srv = found.output["servers"][0]
        info = registry.call(ctx, "inspect_user_server", {"pid": srv["main"]["pid"],
                                                         "pids": [w["pid"] for w in srv["workers"]], "port": port})
        stop = registry.call(ctx, "stop_user_server", {"pid": srv["main"]["pid"], "starttime": info.output["starttime"],
                                                      "pids": [w["pid"] for w in srv["workers"]], "grace_s": 5})
        assert stop.ok, stop.summary
        with trial(ctx, LaunchConfig(command=host.hints.launch, speculative=False, port=0, label="baseline")) as h:
            baseline = measure(h, runs=5)
        promo = registry.call(ctx, "nccl_promote", {
            "command": host.hints.launch, "candidates": [{"label": "PROTO=LL", "env": {"NCCL_PROTO": "LL"}}],
            "current": {}, "port": _free_port(), "runs": 5})
        good = json.loads(host.read(host.hints.good_fingerprint)) if host.hints.good_fingerprint else None
    assert fp.ok and bench.ok and promo.ok, (fp.summary, bench.summary, promo.summary)
    claims = {"spec": claim_outcome(bench.output["samples"], host.hints.expect["spec"]),
              "baseline": claim_outcome(baseline.samples, host.hints.expect["baseline"])}
    view = StateView({"params": {"expect": dict(host.hints.expect), "good_fingerprint": host.hints.good_fingerprint},
                      "facts": {"claims": claims}, "results": {"fingerprint": _stored("fingerprint", fp.output)}})
    return view, NcclPromotion.model_validate(promo.output), good


def test_an_nccl_upgrade_whose_old_choice_restores_the_claims_is_named_as_the_cause():
    view, promo, good = _investigate_nccl("nccl-upgrade")
    assert promo.best == "PROTO=LL"
    cause = nccl_cause(view, promo, {}, None, good)
    assert cause is not None, promo.model_dump_json()[:2000]
    assert cause.kind == "software" and cause.key == "nccl" and cause.confirmed and cause.method == "revert-trial"
    assert "2.26.2 → 2.27.3" in cause.name and "NCCL_PROTO=LL" in cause.name
    assert cause.fix == "env NCCL_PROTO=LL"
    assert cause.effect_tps is not None and cause.effect_tps < 0  # it slows the server
    assert cause.ci_low is not None and cause.ci_high is not None and cause.ci_low <= cause.effect_tps <= cause.ci_high
    CauseFact.model_validate(cause.model_dump())  # what the attribute step reads back


def test_a_winner_on_a_box_whose_claims_hold_is_a_tuning_not_a_cause():
    # must not fire: nccl-win's claims are reproduced today; NCCL_PROTO=LL is faster, but explains no gap
    view, promo, good = _investigate_nccl("nccl-win")
    assert promo.best == "PROTO=LL"
    assert nccl_cause(view, promo, {}, None, good) is None


def _promotion(current: list[float], winner: list[float], best_env: dict[str, str],
               best_unset: list[str] | None = None) -> NcclPromotion:
    from specdoctor.stats.comparator import compare

    c = compare(current, winner, unit="tok/s")
    res = PromotedResult(label="W", env=best_env, unset=best_unset or [], propagated=True, samples=winner,
                         outcome=c.outcome, verdict=c.verdict, pct_change=c.pct_change, delta=c.delta,
                         delta_ci=c.delta_ci)
    return NcclPromotion(baseline_samples=current, results=[res], best="W", best_env=best_env,
                         best_unset=best_unset or [], best_gain_pct=c.pct_change)


SLOW = [44.1, 44.8, 45.3, 44.6, 45.0, 44.4]
FAST = [51.2, 51.9, 52.3, 51.6, 52.0, 51.4]


def test_a_forced_variable_the_winner_replaces_is_an_env_cause():
    view = StateView({"params": {"expect": {"spec": 51.6}},
                      "facts": {"claims": {"spec": claim_outcome(SLOW, 51.6)}}})
    cause = nccl_cause(view, _promotion(SLOW, FAST, {}, ["NCCL_PROTO"]), {"NCCL_PROTO": "Simple"}, None, None)
    assert cause is not None and cause.kind == "env" and cause.key == "NCCL_PROTO"
    assert cause.fix == "env -u NCCL_PROTO" and "NCCL_PROTO=Simple" in cause.name


def test_variables_removed_together_are_one_unconfirmed_cause_until_a_trial_singles_one_out():
    """script-and-conf-harmless: the winner removed NCCL_CONF_FILE and NCCL_P2P_DISABLE at once; one trial cannot
    say which matters, so neither is confirmed by it (it named the alphabetically first, the innocent conf file).
    Once a revert trial confirms NCCL_P2P_DISABLE alone, the joint cause drops out; while none does, it stays,
    unconfirmed, and a lone replaced variable is still confirmed (test above)."""
    from specdoctor.diagnosis.attribution import without_split

    view = StateView({"params": {"expect": {"spec": 51.6}},
                      "facts": {"claims": {"spec": claim_outcome(SLOW, 51.6)}}})
    current = {"NCCL_CONF_FILE": "/etc/nccl.conf", "NCCL_P2P_DISABLE": "1"}
    joint = nccl_cause(view, _promotion(SLOW, FAST, {}, ["NCCL_CONF_FILE", "NCCL_P2P_DISABLE"]), current, None, None)
    assert joint is not None and not joint.confirmed and set(joint.key.split(",")) == set(current)
    assert "NCCL_CONF_FILE=/etc/nccl.conf" in joint.name and "NCCL_P2P_DISABLE=1" in joint.name
    alone = CauseFact(name="NCCL_P2P_DISABLE=1 set by launcher", kind="env", key="NCCL_P2P_DISABLE", confirmed=True)
    assert without_split([joint, alone]) == [alone]
    other = CauseFact(name="NCCL_P2P_LEVEL=LOC set by nccl.conf", kind="env", key="NCCL_P2P_LEVEL", confirmed=True)
    assert without_split([joint, other]) == [joint, other]  # no trial split it: kept, unconfirmed


def test_a_winner_that_does_not_reach_the_claims_is_not_the_cause():
    # must not fire: +4 % is a real gain, but the claimed 51.6 stays out of reach: something else explains the gap
    half = [x * 1.04 for x in SLOW]
    view = StateView({"params": {"expect": {"spec": 51.6}},
                      "facts": {"claims": {"spec": claim_outcome(SLOW, 51.6)}}})
    fp = {"nccl_version": "2.26.2"}
    assert nccl_cause(view, _promotion(SLOW, half, {"NCCL_PROTO": "LL"}), {}, None, fp) is None
    # and with nothing changed (same NCCL, no variable replaced or restored) there is nothing to name
    assert nccl_cause(view, _promotion(SLOW, FAST, {"NCCL_PROTO": "LL"}), {}, None, None) is None


def test_the_gap_is_read_with_todays_own_ci_before_it_is_called_out_of_reach():
    # today's 8 runs put the claim 8 % away at the median but only ~5 % at the CI's upper end; a winner whose gain
    # reaches +6..7 % closes it (nccl-upgrade, one seed in 3, was read as 'out of reach' on the median alone)
    today = [46.2, 49.8, 48.2, 50.2, 47.4, 47.7, 47.1, 47.5]
    trials = [47.9, 48.3, 48.0, 48.6, 48.1, 48.4]
    winner = [x * 1.062 for x in trials]
    view = StateView({"params": {"expect": {"spec": 51.6}},
                      "facts": {"claims": {"spec": claim_outcome(today, 51.6)}}})
    forced = {"NCCL_PROTO": "Simple"}  # the workers' setting, replaced by the winner
    cause = nccl_cause(view, _promotion(trials, winner, {"NCCL_PROTO": "LL"}), forced, None, None)
    assert cause is not None and cause.kind == "env" and cause.key == "NCCL_PROTO"
    assert any("at least" in e for e in cause.evidence)
    # must not fire: the same winner against a gap that even today's CI keeps at 15 % (SLOW) explains nothing
    far = StateView({"params": {"expect": {"spec": 51.6}},
                     "facts": {"claims": {"spec": claim_outcome(SLOW, 51.6)}}})
    assert nccl_cause(far, _promotion(trials, winner, {"NCCL_PROTO": "LL"}), forced, None, None) is None
