"""What the report derives from the Report itself: attribution, action commands, box state, NCCL row, pruning."""

from __future__ import annotations

import shlex

from specdoctor.report import derive, render_markdown
from specdoctor.report.doc import Table, build, prune_columns
from specdoctor.report.model import (
    Action,
    Attribution,
    Cause,
    EnvRow,
    Finding,
    NcclPoint,
    NcclRow,
    NcclSection,
)

from .report_builders import code_regression_report, seed_report

LAUNCH = ("python -m sglang.launch_server --model-path /m --tp-size 8 --speculative-algorithm EAGLE3 "
          "--speculative-num-steps=2 --speculative-draft-model-path /d --port 30000")


def test_attribution_derived_from_the_bisection_trials() -> None:
    r = code_regression_report()
    att = derive.attribution(r)
    assert att is not None and att.derived and att.metric == "baseline"
    (cause,) = att.causes
    assert cause.kind == "code" and cause.delta < -8 and cause.ci_low is not None and cause.ci_high is not None
    assert cause.ci_low <= cause.delta <= cause.ci_high
    assert "git -C /srv/sglang diff HEAD -- communicator.py" in (cause.fix or "")
    assert "apply -R communicator.revert.patch" in (cause.fix or "")
    assert abs(att.unexplained - (att.gap - cause.delta)) < 1e-9


def test_attribution_from_the_diagnosis_wins_and_no_culprit_means_no_cause() -> None:
    r = seed_report()
    att = derive.attribution(r)
    assert att is not None and att.causes == []           # no culprit was isolated: nothing is explained
    given = Attribution(metric="spec", reference=94.0, measured=58.0, causes=[
        Cause(name="NCCL_PROTO=LL set by sitecustomize.py", kind="environment", delta=-20.0, ci_low=-22.0,
              ci_high=-18.0)])
    r.attribution = given
    assert derive.attribution(r) is given
    md = render_markdown(r)
    assert "NCCL_PROTO=LL set by sitecustomize.py -20.0 [-22.0, -18.0]" in md
    assert "-16.0 tok/s not explained" in md


def test_the_report_derives_no_attribution_and_a_saved_one_without_it_reads_as_before(tmp_path) -> None:
    from specdoctor.report.writer import load_report

    r = code_regression_report()
    want = r.attribution
    assert want is not None and want.derived  # the builder's step: the diagnosis read it from claims and trials
    r.attribution = None
    assert derive.attribution(r) is None  # the renderers derive nothing themselves
    (tmp_path / "report.json").write_text(r.model_dump_json())
    assert load_report(tmp_path).attribution == want  # a report.json written before the builder filled it


def test_action_commands() -> None:
    r = code_regression_report()
    r.meta.launch = LAUNCH
    r.meta.sitecustomize = "/usr/lib/python3/sitecustomize.py"
    r.env_propagation = [EnvRow(name="NCCL_PROTO", workers={"0": "LL"}, from_sitecustomize=True)]
    culprit = Action(title="Drop or fix the communicator.py patch")
    assert "apply -R" in (derive.action_command(culprit, r) or "")
    drop = Action(title="Remove NCCL_PROTO=LL from the workers' environment")
    assert derive.action_command(drop, r) == "sed -i '/NCCL_PROTO/d' /usr/lib/python3/sitecustomize.py"
    setit = Action(title="Set NCCL_ALGO=Ring where the workers inherit it")
    assert derive.action_command(setit, r) == f"env NCCL_ALGO=Ring {LAUNCH}"
    plain = derive.action_command(Action(title="Serve without speculation until τ > τ*"), r)
    assert plain is not None and "--speculative" not in plain and "EAGLE3" not in plain and "/d" not in shlex.split(plain)
    assert "--tp-size" in plain and "30000" in plain
    assert derive.action_command(Action(title="Record a fingerprint with every benchmark"), r) is None
    assert derive.action_command(Action(title="anything", command="echo given"), r) == "echo given"


def test_box_state_in_words() -> None:
    r = code_regression_report()
    assert derive.left_as_found(r).ok is True and "byte-identical" in derive.left_as_found(r).text
    assert r.stash is not None
    r.stash.hash_after = "bb22"
    assert derive.left_as_found(r).ok is False
    r.stash.restore_verified = False
    assert "NOT verified" in derive.left_as_found(r).text
    r.stash = None
    assert derive.left_as_found(r).ok is None


def _nccl(rows: list[tuple[str, dict[str, str]]]) -> NcclSection:
    return NcclSection(rows=[NcclRow(config=c, env=e, points=[NcclPoint(size_bytes=1024, latency_us=10.0)])
                             for c, e in rows])


def test_workers_nccl_row_exact_closest_and_unset() -> None:
    r = seed_report()
    r.env_propagation = [EnvRow(name="NCCL_PROTO", workers={"0": "LL", "1": "LL"}),
                         EnvRow(name="NCCL_ALGO", workers={"0": "Ring", "1": "Ring"})]
    r.nccl = _nccl([("default", {}), ("PROTO=LL", {"NCCL_PROTO": "LL"}),
                    ("PROTO=LL ALGO=Ring", {"NCCL_PROTO": "LL", "NCCL_ALGO": "Ring"})])
    row, exact = derive.workers_nccl_row(r) or (None, False)
    assert row is not None and row.config == "PROTO=LL ALGO=Ring" and exact
    r.nccl = _nccl([("default", {}), ("PROTO=LL", {"NCCL_PROTO": "LL"}), ("ALGO=Tree", {"NCCL_ALGO": "Tree"})])
    row, exact = derive.workers_nccl_row(r) or (None, True)
    assert row is not None and row.config == "PROTO=LL" and not exact
    r.env_propagation = []
    r.fingerprint = None
    row, exact = derive.workers_nccl_row(r) or (None, False)
    assert row is not None and row.config == "default" and exact      # nothing set: NCCL's defaults


def test_prune_columns_drops_only_empty_ones() -> None:
    t = Table(["a", "b", "c"], [[["x"], ["—"], ["1"]], [["y"], [""], ["—"]]])
    assert prune_columns(t).headers == ["a", "c"]
    t = Table(["a", "b"], [[["—"], ["—"]]])
    assert prune_columns(t).headers == ["a"]                  # the first column always stays


def test_findings_that_repeat_a_suspect_row_are_dropped_but_warnings_stay() -> None:
    r = seed_report()
    s = r.suspects[0]
    r.findings = [Finding(title=f"{s.path} is off the hot path: {s.reason}"),
                  Finding(title=f"{s.path} is off the hot path: {s.reason}", severity="warning"),
                  Finding(title=f"{s.path} changed", detail="other")]
    items = [b for b in next(x for x in build(r).sections if x.id == "findings").blocks]
    texts = ["".join(str(sp) for sp in item) for b in items for item in getattr(b, "items", [])]
    assert len(texts) == 2 and texts[0].startswith("[warning]")


def test_the_unset_nccl_row_says_so_only_when_rows_carry_their_env() -> None:
    with_env = _nccl([("default", {}), ("PROTO=LL", {"NCCL_PROTO": "LL"})]).rows
    assert derive.nccl_label(with_env[0], with_env).startswith("NCCL_* unset")
    assert derive.nccl_label(with_env[1], with_env) == "PROTO=LL"
    no_env = _nccl([("default", {}), ("PROTO=LL", {})]).rows
    assert [derive.nccl_label(r, no_env) for r in no_env] == ["default", "PROTO=LL"]


def test_a_cause_measured_on_another_figure_is_shown_apart_from_the_gap() -> None:
    r = seed_report()
    r.attribution = Attribution(metric="baseline", reference=27.8, measured=24.8, causes=[
        Cause(name="NCCL_P2P_DISABLE=1 set by serve.sh", kind="environment", delta=-3.0, ci_low=-3.3, ci_high=-2.6),
        Cause(name="local patch llama.py", kind="code", delta=-4.2, ci_low=-5.3, ci_high=-0.8, metric="spec")])
    md = render_markdown(r)
    assert "Explained by NCCL_P2P_DISABLE=1 set by serve.sh -3.0 [-3.3, -2.6]; +0.0 tok/s not explained" in md
    assert "measured on another figure (not part of this gap): local patch llama.py -4.2 [-5.3, -0.8] (spec tok/s)" in md
    assert "local patch llama.py (measured on spec tok/s: not part of this gap)" in md
