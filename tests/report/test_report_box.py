"""The one-screen lines about the box, from hand-made `user_server` / `checkout_proof` facts and a plan."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from specdoctor.diagnosis.facts import RunFacts, checked_facts
from specdoctor.errors import ResultShapeError
from specdoctor.host.audit import AuditEntry
from specdoctor.models.box import BoxLeftFact, CheckoutProofFact, UserServerFact
from specdoctor.report.attribution_model import Attribution, Cause
from specdoctor.report.box_line import box_left, checkout_words, plan_vs_actual, server_words
from specdoctor.report.markdown import render_markdown
from specdoctor.report.model import LaunchPlan
from specdoctor.report.run_facts import add_run_facts
from specdoctor.report.show import MAX_WIDTH, print_report

from .report_builders import code_regression_report, seed_report

_BACK = dict(port=30000, identity_before="a1b2c3d4e5f6a7b8", identity_after="a1b2c3d4e5f6a7b8", stopped=True,
             stop_consent="approved", restarted=True, healthy=True, tps_before=61.0, tps_after=60.6, outcome="SAME")


def _answer(md: str) -> str:
    return md.split("## Verdict and what to do\n", 1)[1].split("\n## ", 1)[0]


def test_server_back_exactly_names_port_identity_and_throughput() -> None:
    st = server_words(UserServerFact(**_BACK))
    assert st.ok is True
    assert ":30000" in st.text and "a1b2c3d4e5f6" in st.text and "SAME" in st.text and "61.0 → 60.6" in st.text


@pytest.mark.parametrize(("change", "words"), [
    ({"identity_after": "ffff0000ffff0000"}, "identity changed (a1b2c3d4e5f6 → ffff0000ffff)"),
    ({"restarted": False, "healthy": None, "outcome": None}, "NOT restarted"),
    ({"healthy": False}, "restarted but not healthy"),
    ({"outcome": "DIFFERENT", "tps_after": 40.0}, "throughput DIFFERENT (61.0 → 40.0 tok/s)"),
    ({"outcome": "UNKNOWN", "identity_after": "ffff0000ffff0000"}, "throughput UNKNOWN"),
])
def test_server_not_back_says_what_failed(change: dict[str, object], words: str) -> None:
    st = server_words(UserServerFact(**{**_BACK, **change}))
    assert st.ok is False and words in st.text


@pytest.mark.parametrize("outcome", ["UNKNOWN", None])
def test_server_back_but_throughput_undecided_is_unverified_not_failed(outcome: str | None) -> None:
    st = server_words(UserServerFact(**{**_BACK, "outcome": outcome, "tps_after": 66.0}))
    assert st.ok is None and "server back on :30000, same identity" in st.text
    assert f"throughput not decided ({outcome or 'not compared'}: 61.0 → 66.0 tok/s)" in st.text


def test_server_never_stopped_and_restart_unrecorded() -> None:
    assert server_words(UserServerFact(port=30000)).ok is True
    unknown = server_words(UserServerFact(port=30000, stopped=True, stop_consent="yes-flag",
                                          note="run interrupted before the restart"))
    assert unknown.ok is None and "not recorded" in unknown.text and "interrupted" in unknown.text


def test_checkout_identical_differs_or_not_compared() -> None:
    same = checkout_words(CheckoutProofFact(repo="/r", manifest_before="abc123abc123ff", manifest_after="abc123abc123ff",
                                            identical=True))
    assert same.ok is True and "abc123abc123 before and after" in same.text
    diff = checkout_words(CheckoutProofFact(repo="/r", manifest_before="a" * 16, manifest_after="b" * 16,
                                            identical=False, differences=[".gitignore", "x", "y", "z"]))
    assert diff.ok is False and ".gitignore" in diff.text and "1 more" in diff.text
    none = checkout_words(CheckoutProofFact(repo="/r", manifest_before="a" * 16, note="the host was lost"))
    assert none.ok is None and "not compared: the host was lost" in none.text


def test_box_line_combines_both_and_never_passes_an_unverified_half() -> None:
    r = seed_report()
    r.box = BoxLeftFact(server=UserServerFact(**_BACK),
                        checkout=CheckoutProofFact(repo="/r", manifest_before="m" * 12, manifest_after="m" * 12,
                                                   identical=True))
    assert box_left(r).ok is True and box_left(r).text.startswith("box left as found: server back")
    r.box = BoxLeftFact(server=UserServerFact(**_BACK), checkout=CheckoutProofFact(repo="/r", identical=False))
    assert box_left(r).ok is False and box_left(r).text.startswith("box NOT left as found")
    r.box = None  # nothing recorded about the server: the line says so instead of a tick
    assert box_left(r).ok is None and "not tracked by this run" in box_left(r).text
    assert "restored byte-identical" in box_left(r).text          # the tree half from the backup/restore hashes


def test_facts_are_read_from_the_state_and_a_malformed_one_is_refused_when_read() -> None:
    r = seed_report()
    add_run_facts(r, checked_facts({"user_server": {**_BACK}, "checkout_proof": {"repo": "/r", "identical": True}}),
                  dry_run=False)
    assert r.box is not None and r.box.ok is True
    r2 = seed_report()
    add_run_facts(r2, RunFacts(), dry_run=False)
    assert r2.box is None and r2.verdict == "baseline-not-reproducible"
    # a fact of another shape never reaches the report: the record refuses it in one line, naming it
    with pytest.raises(ResultShapeError, match="user_server"):
        checked_facts({"user_server": {"port": "not a port"}})


def test_plan_vs_actual_counts_every_launch_in_the_audit() -> None:
    r = seed_report()
    assert plan_vs_actual(r) is None
    r.plan = LaunchPlan(text="up to 6 launches ≈ 41 min of box time", launches_max=6, box_minutes_max=40.2)
    r.commands += [AuditEntry(time=0, host="h", command=f"setsid nohup python3 -m sglang.launch_server --port {p}")
                   for p in (31000, 31001, 31002)]
    r.commands += [AuditEntry(time=0, host="h", command="cat trial.log", stdout_tail="setsid nohup in the output")]
    add_run_facts(r, RunFacts(), dry_run=False)
    assert r.launches_made == 3
    assert plan_vs_actual(r) == "planned up to 6 launches ≈ 40 min of box time; made 3"
    r.plan = LaunchPlan(text="up to 2 launches", launches_max=2)  # a bound the run went past says so
    assert plan_vs_actual(r).startswith("planned up to 2 launches; made 3, more than planned: a search")
    r.plan = LaunchPlan(text="up to 3 launches", launches_max=3)  # made == planned: no such words
    assert plan_vs_actual(r) == "planned up to 3 launches; made 3"
    add_run_facts(r, RunFacts(), dry_run=True)
    assert r.verdict == "plan-only" and not r.game_plan and plan_vs_actual(r).endswith("dry run: none made")


def test_one_screen_shows_causes_with_cis_the_rest_the_box_and_the_plan() -> None:
    r = code_regression_report()
    r.attribution = Attribution(metric="baseline", reference=82.0, measured=70.0, measured_ci_low=69.1,
                                measured_ci_high=70.8, causes=[
                                    Cause(name="local patch communicator.py", kind="code", delta=-9.5, ci_low=-10.4,
                                          ci_high=-8.6, fix="git -C /srv/sglang apply -R communicator.revert.patch"),
                                    Cause(name="NCCL_P2P_DISABLE=1 set by sitecustomize.py", kind="environment",
                                          delta=-1.5, ci_low=-2.3, ci_high=-0.7),
                                    Cause(name="pcie-link x8", kind="hardware", delta=-0.4, confirmed=False)])
    answer = _answer(render_markdown(r))
    assert "local patch communicator.py -9.5 [-10.4, -8.6]" in answer
    assert "NCCL_P2P_DISABLE=1 set by sitecustomize.py -1.5 [-2.3, -0.7]" in answer
    assert "pcie-link" not in answer                              # a candidate is never given as a cause
    assert "-1.0 tok/s not explained by a measured cause" in answer  # -12 - (-9.5 - 1.5)
    assert "✓ Box left as found: server back on :30000" in answer and "checkout manifest identical" in answer
    assert "Planned up to 6 launches ≈ 14 min of box time; made 2" in answer


def test_terminal_answer_fits_100_columns_with_the_new_lines() -> None:
    buf = io.StringIO()
    print_report(code_regression_report(), console=Console(file=buf, width=200, force_terminal=False,
                                                             color_system=None))
    out = buf.getvalue()
    assert max(len(line) for line in out.splitlines()) <= MAX_WIDTH
    assert "Box left as found" in out and "Plan and cost" in out


def test_a_server_back_faster_is_left_as_found_and_a_slower_one_is_not():
    """Seen on the real H200: the user's server measured 437 tok/s before the stop and 566 after the restart (same
    argv, env, checkout) — the box drifts between launches; only a server back *slower* is 'not as found'."""
    from specdoctor.models.box import UserServerFact
    from specdoctor.report.box_line import server_words

    base = dict(port=30000, identity_before="a" * 16, identity_after="a" * 16, stopped=True, restarted=True,
                healthy=True, outcome="DIFFERENT")
    faster = UserServerFact(**base, tps_before=437.1, tps_after=565.9)
    slower = UserServerFact(**base, tps_before=565.9, tps_after=437.1)
    assert faster.left_as_found is True and "faster after the restart" in server_words(faster).text
    assert slower.left_as_found is False and "throughput DIFFERENT" in server_words(slower).text
    changed = UserServerFact(**{**base, "identity_after": "b" * 16}, tps_before=437.1, tps_after=565.9)
    assert changed.left_as_found is False


def test_the_box_line_says_what_differs_and_why_throughput_reads_as_it_does():
    from specdoctor.models.box import UserServerFact
    from specdoctor.report.box_line import server_words

    base = dict(port=30000, stopped=True, restarted=True, healthy=True, identity_before="a" * 16,
                identity_after="a" * 16, tps_before=442.3, tps_after=440.1)
    warm = server_words(UserServerFact(**base, outcome="SAME", throughput_reason="the first look after the restart "
                                       "read 291.8 tok/s (-34.0 %), the fresh server still warming up; re-measured"))
    assert warm.ok is True and "re-measured" in warm.text
    moved = server_words(UserServerFact(**base, outcome="SAME", differs=["port :30000 → :30001"]))
    assert moved.ok is False and "identity differs: port :30000 → :30001" in moved.text
    undecided = server_words(UserServerFact(**base, outcome="UNKNOWN", throughput_reason="the re-measurement is "
                                            "undecided"))
    assert undecided.ok is None and "re-measurement is undecided" in undecided.text
    slow = server_words(UserServerFact(**base, outcome="DIFFERENT", throughput_reason="a slowdown that survives a "
                                       "re-measurement"))
    assert slow.ok is False and "survives a re-measurement" in slow.text
