"""Turn a run's final state into the one `Report` model (the report package renders it; this only maps).

Every tool result is read through its output model (`StateView.latest` / `result`), every fact through its
fact model, so a producer that changes shape fails here with the step, tool and field, not in a renderer.
"""

from __future__ import annotations

import time
from typing import Any, Literal

from specdoctor import __version__
from specdoctor.diagnosis import PlanAction, RunFacts, Verdict
from specdoctor.diagnosis.verdict import good_news
from specdoctor.engine.plan_report import launch_plan
from specdoctor.engine.state import StateView
from specdoctor.host.audit import AuditEntry
from specdoctor.host.base import Host
from specdoctor.models import (
    CAUSE_KINDS,
    AttributionFact,
    BreakevenAnalysis,
    Claims,
    Decision,
    EnvRow,
    Fingerprint,
    FingerprintDiff,
    MeasuredFact,
    MeasureFacts,
    SubtractionFact,
)
from specdoctor.models.phases import PhaseTimes
from specdoctor.report import model as m
from specdoctor.report.attribution_model import Attribution, Cause
from specdoctor.report.claimed_gap import fill_claimed_gap
from specdoctor.report.run_facts import add_run_facts
from specdoctor.stats.phases import phase_stat
from specdoctor.tools.checkout.bisect import BisectResult, Essentials
from specdoctor.tools.checkout.repo import Triage
from specdoctor.tools.checkout.worktree import Backup, Restored
from specdoctor.tools.environment.gates import GateScan
from specdoctor.tools.nccl.nccl import NcclSweep
from specdoctor.tools.nccl.nccl_promote import NcclPromotion
from specdoctor.tools.serving.server import Propagation

__all__ = ["build_report", "nccl_section_of", "fill_workload"]


class _Commands:
    """Index of the audit log so evidence can cite command ids."""

    def __init__(self, host: Host):
        self.entries = list(host.audit.entries)
        self.index: dict[tuple[float, str], int] = {(e.time, e.command): i for i, e in enumerate(self.entries)}
        self.by_cmd: dict[str, list[int]] = {}
        for i, e in enumerate(self.entries):
            self.by_cmd.setdefault(e.command, []).append(i)

    def ids(self, evidence: list[AuditEntry]) -> list[int]:
        return [self.index[(e.time, e.command)] for e in evidence if (e.time, e.command) in self.index]

    def ids_for_commands(self, commands: list[str]) -> list[int]:
        return [self.by_cmd[c][0] for c in commands if self.by_cmd.get(c)]


class _Reader:
    """The state view plus the audit index: evidence for a stored tool call by its key."""

    def __init__(self, view: StateView, cmds: _Commands):
        self.v = view
        self.cmds = cmds

    def evidence(self, step: str, key: str | None = None) -> m.Evidence:
        tr = self.v.tool_result(key or step)
        if tr is None:
            return m.Evidence(step=step)
        return m.Evidence(tool=tr.tool, step=step, command_ids=self.cmds.ids(tr.evidence))


def _outcome(x: str | None) -> Literal["DIFFERENT", "SAME", "UNKNOWN"] | None:
    return x if x in ("DIFFERENT", "SAME", "UNKNOWN") else None  # type: ignore[return-value]


def build_report(values: dict[str, Any], *, rec: Any, host: Host, error: str | None, started: float,
                 playbook: Any = None) -> m.Report:
    """Map the state (results, facts, decisions) into the Report; missing parts stay empty."""
    v = StateView(values)
    r = _Reader(v, _Commands(host))
    facts = v.run_facts
    report = _head(facts.verdict, v, r, rec=rec, error=error, started=started)
    measure = facts.measure or MeasureFacts()
    _measurements(report, measure, r)
    _claims(report, facts.claims, measure)
    _findings(report, r, facts.verdict, measure)
    _suspects(report, r)
    _gates(report, r)
    _propagation(report, r)
    _fingerprint(report, r)
    _stash(report, r)
    _nccl(report, r)
    report.breakeven = v.latest(BreakevenAnalysis)
    # the phases step's (the running server's), not whichever trial arm was profiled last: the table says whose
    report.phase_times = _phase_times(v.result("phases", PhaseTimes) or v.latest(PhaseTimes), measure)
    for d in values.get("decisions") or []:
        dec = Decision.model_validate(d)
        report.decisions.append(dec.model_copy(update={"command_ids": r.cmds.ids_for_commands(dec.evidence)}))
    report.game_plan = [_action(a) for a in facts.game_plan or []]
    fill_workload(report, facts)
    report.attribution = _attribution(facts.attribution, v, r)
    _enrich(report, r)
    add_run_facts(report, facts, dry_run=bool(getattr(rec, "dry_run", False)))  # box left, launches, dry run
    fill_claimed_gap(report)  # no attribution recorded: the diagnosis reads one from the claims and the bisection
    return report


def _head(verdict: Verdict | None, v: StateView, r: _Reader, *, rec: Any, error: str | None,
          started: float) -> m.Report:
    """The verdict line and the run's metadata (an unfinished run reads inconclusive, with its error)."""
    status = "complete" if not error else ("interrupted" if "SIGINT" in error else "error")
    report = m.Report(
        verdict=verdict.verdict if verdict is not None else "inconclusive",
        confidence=verdict.confidence if verdict is not None else None,
        summary=verdict.sentence if verdict is not None else (error or ""),
        meta=m.RunMeta(run_id=rec.run_id, host=rec.host, repo=v.params.repo, playbook=rec.playbook,
                       started=started, finished=time.time(), specdoctor_version=__version__, status=status,
                       error=error, engine=getattr(rec, "engine", None)),
        commands=r.cmds.entries)
    narrative = v.run_facts.narrative
    if narrative is not None:
        report.findings.append(m.Finding(title="LLM narrative", detail=narrative.summary, llm_made=True))
        report.meta.advisor = narrative.model
    return report


def _measurements(report: m.Report, measure: MeasureFacts, r: _Reader) -> None:
    for key, mf in measure.items():
        bench_key = f"bench_{key}" if r.v.tool_result(f"bench_{key}") or key != "spec" else "bench_spec_running"
        mm = mf.as_reported(mf.label or key, r.evidence("reproduce", bench_key))
        if mm:
            report.measurements.append(mm)


def _claims(report: m.Report, claims: Claims | None, measure: MeasureFacts) -> None:
    """Each claim against the reading it was judged in (prefill excluded when its basis is decode)."""
    for key, c in (claims.root if claims else {}).items():
        if c.unit != "tok/s":  # a time or an accept length: judged on its own samples (c.measured_by)
            report.claims.append(m.MetricComparison(
                metric=key, unit=c.unit, claimed=c.claimed, median=c.median, ci_low=c.ci_low, ci_high=c.ci_high,
                pct_change=c.pct_change, outcome=c.outcome, p_value=c.p_value, source=c.source,
                higher_is_better=c.higher_is_better, measured_by=c.measured_by))
            continue
        mf = getattr(measure, key, None) or MeasuredFact()
        decode = c.basis == "decode" and bool(mf.decode_samples)
        report.claims.append(m.MetricComparison(
            metric=key, claimed=c.claimed, samples=mf.decode_samples if decode else mf.samples,
            median=c.median if decode else mf.median, ci_low=c.ci_low if decode else mf.ci_low,
            ci_high=c.ci_high if decode else mf.ci_high, pct_change=c.pct_change, outcome=c.outcome,
            p_value=c.p_value, basis="decode" if decode else "end-to-end", source=c.source))


def _action(a: PlanAction) -> m.Action:
    mg = a.modelled
    return m.Action(title=a.title, gain=a.gain_tps, basis="measured" if a.basis == "measured" else "modelled",
                    cost=a.cost, risk=a.risk, command=a.command,
                    detail=(a.expected_gain + ("; " if a.detail else "") + a.detail).strip("; "),
                    lever=a.lever, gain_low=mg.low if mg else None, gain_high=mg.high if mg else None,
                    modelled_gain=mg.point if mg else None, measured_gain=a.measured_gain_tps,
                    assumptions=list(mg.assumptions) if mg else [])


def _attribution(att: AttributionFact | None, v: StateView, r: _Reader) -> Attribution | None:
    """The attribute step's fact as the report's attribution; members of one interacting set become one cause."""
    if att is None or att.reference_tps is None or att.measured_tps is None:
        return None
    trials = v.record.decisions
    ids = sorted({i for d in trials if d.step == "attribute" for i in r.cmds.ids_for_commands(d.evidence)})
    return Attribution(metric=att.metric, reference=att.reference_tps, reference_label=att.reference_label,
                       measured=att.measured_tps, measured_ci_low=att.measured_ci_low,
                       measured_ci_high=att.measured_ci_high, causes=report_causes(att, ids))


def report_causes(att: AttributionFact, ids: list[int]) -> list[Cause]:
    """The attribution's causes as the report lists them: the members of a set confirmed together (`together`)
    become one cause with the set's one effect, so the gap counts it once."""
    causes: list[Cause] = []
    sets: dict[tuple[str, frozenset[str]], Cause] = {}  # (metric, members) -> the set's one cause
    for c in att.causes:
        if c.effect_tps is None:
            continue
        same = sets.get(c.set_key) if c.set_key else None
        if same is not None:  # one set confirmed together: one share of the gap, not one per member
            same.name = f"{same.name} + {c.name}"
            same.fix = same.fix if c.fix in (None, same.fix) else " && ".join(x for x in (same.fix, c.fix) if x)
            continue
        causes.append(Cause(name=c.name, kind=CAUSE_KINDS[c.kind].report, delta=c.effect_tps, ci_low=c.ci_low,
                            ci_high=c.ci_high, confirmed=c.confirmed, fix=c.fix,
                            command_ids=ids if c.method == "revert-trial" else [],
                            metric=c.metric if c.metric != att.metric else None, phase_effect=c.phase_effect,
                            share_from=c.share_from or None))
        if c.set_key:
            sets[c.set_key] = causes[-1]
    return causes


def _enrich(report: m.Report, r: _Reader) -> None:
    """The bisection's trials, the launch line and the sitecustomize path, for the one-screen answer and plots."""
    bis = r.v.result("bisect", BisectResult)
    if bis is not None:
        report.bisection = [m.BisectTrial(index=i, patches=t.patches, outcome=t.outcome, median=t.median,
                                          samples=t.samples, purpose=t.purpose, cause=t.cause)
                            for i, t in enumerate(bis.trials, 1)]
    launch = r.v.run_facts.launch
    if launch:
        report.meta.launch = launch
    report.plan = launch_plan(r.v)
    prop = r.v.result("propagation", Propagation)
    if prop is not None and prop.sitecustomize:
        report.meta.sitecustomize = prop.sitecustomize


def _phase_times(p: PhaseTimes | None, measure: MeasureFacts) -> PhaseTimes | None:
    """The profiled phases, with plain decode derived from the baseline runs when no trace timed it (a speculative
    server runs no plain decode)."""
    base = measure.baseline.samples if measure.baseline is not None else []
    if p is None or p.decode_ms is not None or not base:
        return p
    return p.model_copy(update={"decode_ms": phase_stat([1000.0 / x for x in base if x > 0],
                                                        "derived: 1000 / baseline tok/s (batch 1)")})


def _findings(report: m.Report, r: _Reader, verdict: Verdict | None, measure: MeasureFacts) -> None:
    severity = "info" if verdict is None or verdict.verdict == "no-regression" else "warning"
    good = good_news(verdict) if verdict else []
    for reason in verdict.reasons if verdict else []:  # good news (a suspect cleared, the figure reached) is info
        report.findings.append(m.Finding(title=reason, severity="info" if reason in good else severity))
    for title in measure.spec.finding_texts() if measure.spec else []:
        report.findings.append(m.Finding(title=title, severity="warning",
                                         evidence=[r.evidence("reproduce", "bench_spec_running")]))
    scan = r.v.latest(GateScan)
    for g in scan.gates if scan else []:
        report.findings.append(m.Finding(
            title=f"gate {g.name}: default {g.default}, {g.state} "
                  f"(checked /proc/PID/environ of {len(g.values)} server processes)",
            severity="critical" if g.state == "ENABLED-at-runtime" else "info",
            evidence=[r.evidence("gates", r.v.latest_key(GateScan))]))
    sub = r.v.fact("subtraction", SubtractionFact) or SubtractionFact()
    for line in sub.ambiguous:
        report.findings.append(m.Finding(title=f"ambiguous patch-script output: {line}", severity="warning",
                                         detail="a SKIP/WARN line means the patch may not be what you think",
                                         evidence=[r.evidence("subtract")]))
    triage = r.v.latest(Triage)
    ess = r.v.latest(Essentials)  # the one source of "essential" when the step ran; triage only guesses
    for s in triage.rows if triage else []:
        ev = [r.evidence("triage", r.v.latest_key(Triage))]
        if s.logging_only:
            report.findings.append(m.Finding(title=f"{s.path} only adds logging: {s.reason}", evidence=ev))
        elif ess is not None and s.essential and s.path not in ess.essential:
            report.findings.append(m.Finding(
                title=f"{s.path} looked essential to triage, but the essentials step does not need it",
                detail=f"triage: {s.reason}", evidence=ev + [r.evidence("essentials", r.v.latest_key(Essentials))]))
        elif (s.path in ess.essential) if ess is not None else s.essential:
            why = s.reason if ess is None else f"the essentials step needs it ({ess.summary_line()})"
            report.findings.append(m.Finding(title=f"{s.path} is essential: {why}", evidence=ev))
        elif s.on_hot_path is False:
            report.findings.append(m.Finding(title=f"{s.path} is off the hot path: {s.reason}", evidence=ev))


def _isolated(r: _Reader) -> list[str]:
    """Culprits only when the bisection isolated them (an unresolved search's candidate set is not a verdict)."""
    out = r.v.latest(BisectResult)
    return list(out.culprits) if out is not None and out.verdict in ("culprit", "interaction") else []


def _tried_culprits(r: _Reader) -> list[str]:
    """Patches the attribute step's revert trials confirmed both ways (the joint search over code and config)."""
    att = r.v.fact("attribution", AttributionFact)
    return [c.key for c in att.confirmed() if c.kind == "code" and c.method == "revert-trial"] if att else []


def _named_code_causes(r: _Reader) -> set[str]:
    """The patches the diagnosis names (the verdict's culprits, the attribution's confirmed code causes): the one
    record the suspects table reads too, so a named cause is never shown 'cleared'."""
    verdict = r.v.run_facts.verdict
    att = r.v.fact("attribution", AttributionFact)
    named = set(verdict.culprits if verdict is not None else [])
    return named | {c.key for c in (att.confirmed() if att else []) if c.kind == "code"}


def _suspects(report: m.Report, r: _Reader) -> None:
    bisect = r.v.latest(BisectResult)
    culprits = set(_isolated(r)) | _named_code_causes(r)
    # an unresolved search's candidates are not cleared: the suspects table says what the bisection said
    candidates = (set(bisect.culprits) | set(bisect.candidates) if bisect else set()) - culprits
    ess = r.v.latest(Essentials)  # the step's list (measured, or the user's) overrules triage's guess
    scan = r.v.latest(GateScan)
    gated = {g.file: g.name for g in scan.gates} if scan else {}
    triage = r.v.latest(Triage)
    for s in triage.rows if triage else []:
        outcome: Literal["culprit", "cleared", "untested", "unresolved", "essential"] = (
            "culprit" if s.path in culprits else
            "essential" if (s.path in ess.essential if ess is not None else s.essential) else
            "unresolved" if s.path in candidates else "cleared" if bisect is not None else "untested")
        report.suspects.append(m.Suspect(
            path=s.path, subsystem=" / ".join(x for x in (s.subsystem, s.detail) if x) or None,
            on_hot_path=s.on_hot_path, reason=s.reason, gated=gated.get(s.path), logging_only=s.logging_only,
            priority=s.priority, bisection=outcome, evidence=r.evidence("triage", r.v.latest_key(Triage))))


def _gates(report: m.Report, r: _Reader) -> None:
    scan = r.v.latest(GateScan)
    for g in scan.gates if scan else []:
        report.gates.append(m.FeatureGate(name=g.name, default=g.default, reader=g.reader, file=g.file,
                                          state=g.state, values=g.values,
                                          evidence=r.evidence("gates", r.v.latest_key(GateScan))))


def _propagation(report: m.Report, r: _Reader) -> None:
    prop = r.v.latest(Propagation)
    for row in prop.rows if prop else []:
        report.env_propagation.append(EnvRow.model_validate(
            {**row.model_dump(), "evidence": r.evidence("propagation", r.v.latest_key(Propagation))}))


def fill_workload(report: m.Report, facts: RunFacts) -> None:
    """The workload behind every figure (the benchmark's own record), and the claims' when one was recorded."""
    measure = facts.measure or MeasureFacts()
    report.workload = next((mf.workload for _, mf in measure.items() if mf.workload is not None), None)
    wl = facts.workload
    if wl is not None and wl.recorded is not None:
        report.claims_workload, report.claims_workload_source = wl.recorded, wl.source
        report.workload_differences = list(wl.differences)
        if report.workload is not None and report.workload.prompts == wl.recorded.request_prompts():
            # measured like for like: the figures ran the claims' own prompts; name their dataset
            report.workload = report.workload.model_copy(update={"dataset": wl.recorded.dataset,
                                                                 "prompt_tokens": wl.recorded.prompt_tokens})


def _fingerprint_record(fp: Fingerprint, facts: RunFacts) -> dict[str, Any]:
    """The fingerprint as a reference to save: with the figures measured beside it and their workload."""
    measure = facts.measure or MeasureFacts()
    meas = {k: v for k, v in (("baseline_tps", measure.baseline.median if measure.baseline else None),
                              ("spec_tps", measure.spec.median if measure.spec else None),
                              ("accept_length", measure.spec.accept_length if measure.spec else None))
            if v is not None}
    wl = next((mf.workload for _, mf in measure.items() if mf.workload is not None), None)
    return fp.model_copy(update={"workload": fp.workload or wl,
                                 "measurements": fp.measurements or meas}).model_dump(mode="json")


def _fingerprint(report: m.Report, r: _Reader) -> None:
    fp = r.v.latest(Fingerprint)
    diff = r.v.latest(FingerprintDiff)
    if fp is None and diff is None:
        return
    changes = [m.FingerprintChange(key=c.key, before=c.before, after=c.after, impact=c.impact)
               for c in (diff.changes if diff else [])]
    report.fingerprint = m.FingerprintSection(
        current=_fingerprint_record(fp, r.v.run_facts) if fp else {}, previous_run=r.v.params.good_fingerprint,
        changes=changes, evidence=r.evidence("fingerprint", r.v.latest_key(Fingerprint)))


def _stash(report: m.Report, r: _Reader) -> None:
    backup = r.v.latest(Backup)
    sub = r.v.fact("subtraction", SubtractionFact)
    if backup is None and sub is None:
        return
    sub = sub or SubtractionFact()
    restore = r.v.latest(Restored)
    lines = []
    for a in sub.ambiguous:
        level: Literal["warn", "error", "skip"] = ("warn" if "WARN" in a.upper() else
                                                   "error" if "ERROR" in a.upper() else "skip")
        lines.append(m.ScriptLine(text=a, level=level))
    meas = [x for x in ((sub.all_patches.as_reported("all patches") if sub.all_patches else None),
                        (sub.essentials_only.as_reported("essentials only") if sub.essentials_only else None))
            if x]
    comp = sub.comparison
    report.stash = m.StashRecord(
        backup_id=backup.backup_id if backup else None, backup_ref=backup.ref if backup else None,
        patch_path=backup.dir if backup else None, hash_before=backup.hash if backup else None,
        applied=sub.applied, script=r.v.params.patch_script, script_lines=lines, measurements=meas,
        comparison=m.MetricComparison(metric="essentials only vs all patches", samples=[],
                                      pct_change=comp.pct_change, outcome=_outcome(comp.outcome),
                                      p_value=comp.p_value) if comp else None,
        culprits=list(dict.fromkeys([*_isolated(r), *_tried_culprits(r)])),
        restore_verified=restore.verified if restore else None, hash_after=restore.actual_hash if restore else None,
        evidence=r.evidence("backup", r.v.latest_key(Backup)))


def nccl_section_of(sweep: NcclSweep, promo: NcclPromotion | None) -> m.NcclSection:
    """The sweep's table as the report shows it: every row's latencies and time per cycle; promoted = in the A/B."""
    in_ab = {a.label for a in (promo.results if promo else []) if not a.skipped}
    rows = []
    for c in sweep.results:
        pts = [m.NcclPoint(size_bytes=p.size, latency_us=p.latency_us) for p in c.points if p.latency_us is not None]
        rows.append(m.NcclRow(config=c.label or "default", env=c.env, points=pts, promoted=c.label in in_ab,
                              cycle_us=c.cycle_us))
    ab = [m.MetricComparison(metric=a.label or "promoted", samples=a.samples, median=a.median, ci_low=a.ci_low,
                             ci_high=a.ci_high, pct_change=a.pct_change, outcome=_outcome(a.outcome),
                             p_value=a.p_value)
          for a in (promo.results if promo else []) if not a.skipped]
    weighting = (" + ".join(f"{w.per_cycle:g} × {w.size} B ({w.phase})" for w in sweep.weights)
                 + " per cycle") if sweep.weights else None
    return m.NcclSection(tp=sweep.tp, rows=rows, ab=ab, weighting=weighting)


def _nccl(report: m.Report, r: _Reader) -> None:
    sweep = r.v.latest(NcclSweep)
    if sweep is None:
        return
    promo = r.v.latest(NcclPromotion)
    section = nccl_section_of(sweep, promo)
    propagated: bool | None = None
    if promo is not None:
        propagated = all(a.propagated for a in promo.results) if promo.results else None
        if promo.launcher_drops:
            propagated = False
    report.nccl = section.model_copy(update={"propagated": propagated,
                                             "evidence": r.evidence("nccl", r.v.latest_key(NcclSweep))})
    if promo is None:
        return
    ev = [r.evidence("nccl_promote", r.v.latest_key(NcclPromotion))]
    if promo.launcher_report:
        report.findings.append(m.Finding(title=promo.launcher_report, severity="critical", evidence=ev))
    if promo.best:
        report.findings.append(m.Finding(
            title=f"NCCL setting {promo.best} wins end to end ({promo.best_gain_pct or 0:+.1f} % tok/s); "
                  f"{promo.where_to_set}", detail=promo.not_sitecustomize, evidence=ev))
