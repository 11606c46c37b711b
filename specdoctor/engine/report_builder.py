"""Turn a run's final state into the one `Report` model (the report package renders it; this only maps)."""

from __future__ import annotations

import time
from typing import Any

from specdoctor import __version__
from specdoctor.engine.state import StateView, pick
from specdoctor.host.base import Host
from specdoctor.report import model as m
from specdoctor.report.from_state import enrich_from_state

__all__ = ["build_report"]



class _Commands:
    """Index of the audit log so evidence can cite command ids."""

    def __init__(self, host: Host):
        self.entries = list(host.audit.entries)
        self.index: dict[tuple[float, str], int] = {(e.time, e.command): i for i, e in enumerate(self.entries)}
        self.by_cmd: dict[str, list[int]] = {}
        for i, e in enumerate(self.entries):
            self.by_cmd.setdefault(e.command, []).append(i)

    def ids(self, evidence: list[dict[str, Any]] | None) -> list[int]:
        out = []
        for e in evidence or []:
            key = (e.get("time"), e.get("command"))
            if key in self.index:
                out.append(self.index[key])  # type: ignore[index]
        return out

    def ids_for_commands(self, commands: list[str]) -> list[int]:
        out: list[int] = []
        for c in commands:
            ids = self.by_cmd.get(c)
            if ids:
                out.append(ids[0])
        return out


def _evidence(step: str, result: dict[str, Any] | None, cmds: _Commands, **numbers: Any) -> m.Evidence:
    return m.Evidence(tool=pick(result, "tool"), step=step, command_ids=cmds.ids(pick(result, "evidence", default=[])),
                      numbers={k: v for k, v in numbers.items() if isinstance(v, (int, float, str))})


def _measurement(label: str, d: dict[str, Any] | None, ev: m.Evidence | None = None) -> m.Measurement | None:
    if not d or d.get("median") is None:
        return None
    return m.Measurement(label=label, samples=[float(x) for x in d.get("samples") or []], median=d.get("median"),
                         ci_low=d.get("ci_low"), ci_high=d.get("ci_high"), tpot_ms=d.get("tpot_ms"),
                         accept_length=d.get("accept_length"), cuda_graph=d.get("cuda_graph"), evidence=ev)


def _outcome(x: Any) -> Any:
    return x if x in ("DIFFERENT", "SAME", "UNKNOWN") else None


def build_report(values: dict[str, Any], *, rec: Any, host: Host, error: str | None, started: float,
                 playbook: Any = None) -> m.Report:
    """Map the state (results, facts, decisions) into the Report; missing parts stay empty."""
    v = StateView(values)
    cmds = _Commands(host)
    res = values.get("results") or {}
    facts = values.get("facts") or {}
    verdict = facts.get("verdict") or {}
    status = "complete" if not error else ("interrupted" if "SIGINT" in error else "error")
    report = m.Report(
        verdict=verdict.get("verdict", "inconclusive") if not error or verdict else "inconclusive",
        confidence=verdict.get("confidence"), summary=verdict.get("sentence", error or ""),
        meta=m.RunMeta(run_id=rec.run_id, host=rec.host, repo=v.params.get("repo"), playbook=rec.playbook,
                       started=started, finished=time.time(), specdoctor_version=__version__, status=status,
                       error=error),
        commands=cmds.entries)
    narrative = facts.get("narrative")
    if narrative:
        report.findings.append(m.Finding(title="LLM narrative", detail=narrative.get("summary", ""), llm_made=True))
        report.meta.advisor = narrative.get("model")
    measure = facts.get("measure") or {}
    for key in ("baseline", "spec"):
        d = measure.get(key) or {}
        ev = _evidence("reproduce", res.get(f"bench_{key}") or (res.get("bench_spec_running") if key == "spec"
                                                                 else None), cmds)
        mm = _measurement(d.get("label", key), d, ev)
        if mm:
            report.measurements.append(mm)
    for key, c in (facts.get("claims") or {}).items():
        d = measure.get(key) or {}
        report.claims.append(m.MetricComparison(
            metric=key, claimed=c.get("claimed"), samples=d.get("samples") or [], median=d.get("median"),
            ci_low=d.get("ci_low"), ci_high=d.get("ci_high"), pct_change=pick(c, "pct_change"),
            outcome=_outcome(c.get("outcome")), p_value=pick(c, "p_value")))
    _findings(report, v, facts, res, cmds)
    _suspects(report, v, res, cmds)
    _gates(report, v, res, cmds)
    _propagation(report, v, res, cmds)
    _fingerprint(report, v, res, cmds)
    _stash(report, v, facts, res, cmds)
    _nccl(report, v, res, cmds)
    be = v.output("breakeven")
    if be:
        try:
            report.breakeven = be
        except ValueError as exc:  # a malformed analysis must not cost the whole report
            report.findings.append(m.Finding(title=f"break-even analysis could not be shown: {exc}"[:300]))
    for d in values.get("decisions") or []:
        report.decisions.append(m.Decision(
            step=d.get("step", ""), tool=d.get("tool"), status=d.get("status", "ok"), checked=d.get("checked", ""),
            found=d.get("found", ""), decided=d.get("decided", ""), why=d.get("why", ""),
            command_ids=cmds.ids_for_commands(d.get("evidence") or []), llm_made=bool(d.get("llm_made"))))
    for a in facts.get("game_plan") or []:
        report.game_plan.append(m.Action(
            title=a["title"], gain=a.get("gain_tps"), basis="measured" if a.get("basis") == "measured" else "modelled",
            cost=a.get("cost", ""), risk=a.get("risk", ""),
            detail=(a.get("expected_gain", "") + ("; " if a.get("detail") else "") + a.get("detail", "")).strip("; ")))
    enrich_from_state(report, values)
    return report


def _findings(report: m.Report, v: StateView, facts: dict, res: dict, cmds: _Commands) -> None:
    verdict = facts.get("verdict") or {}
    severity = "info" if verdict.get("verdict") in ("no-regression", None) else "warning"
    for reason in verdict.get("reasons", []):
        report.findings.append(m.Finding(title=reason, severity=severity))
    spec = (facts.get("measure") or {}).get("spec") or {}
    for f in spec.get("findings") or []:
        title = (f.get("message") or f.get("title") or str(f)) if isinstance(f, dict) else str(f)
        report.findings.append(m.Finding(title=title,
                                         severity="warning",
                                         evidence=[_evidence("reproduce", res.get("bench_spec_running"), cmds)]))
    gates = pick(v.output("gates"), "gates", default=[]) or []
    for g in gates:
        procs = pick(g, "values", "processes", default={}) or {}
        n = len(procs)
        report.findings.append(m.Finding(
            title=f"gate {g.get('name')}: default {g.get('default')}, {g.get('state')} "
                  f"(checked /proc/PID/environ of {n} server processes)",
            severity="critical" if "ENABLED" in str(g.get("state", "")).upper() else "info",
            evidence=[_evidence("gates", res.get("gates"), cmds)]))
    sub = facts.get("subtraction") or {}
    for line in sub.get("ambiguous") or []:
        report.findings.append(m.Finding(title=f"ambiguous patch-script output: {line}", severity="warning",
                                         detail="a SKIP/WARN line means the patch may not be what you think",
                                         evidence=[_evidence("subtract", res.get("subtract"), cmds)]))
    for s in pick(v.output("triage"), "rows", "files", default=[]) or []:
        if s.get("logging_only"):
            report.findings.append(m.Finding(title=f"{s.get('path')} only adds logging: {s.get('reason', '')}",
                                             evidence=[_evidence("triage", res.get("triage"), cmds)]))
        elif s.get("essential"):
            report.findings.append(m.Finding(title=f"{s.get('path')} is essential: {s.get('reason', '')}",
                                             evidence=[_evidence("triage", res.get("triage"), cmds)]))
        elif s.get("on_hot_path") is False:
            report.findings.append(m.Finding(title=f"{s.get('path')} is off the hot path: {s.get('reason', '')}",
                                             evidence=[_evidence("triage", res.get("triage"), cmds)]))


def _isolated(v: StateView) -> list[str]:
    """Culprits only when the bisection isolated them (an unresolved search's candidate set is not a verdict)."""
    out = v.output("bisect") or {}
    return list(out.get("culprits") or []) if out.get("verdict") in ("culprit", "interaction") else []


def _suspects(report: m.Report, v: StateView, res: dict, cmds: _Commands) -> None:
    culprits = set(_isolated(v))
    candidates = set((v.output("bisect") or {}).get("culprits") or []) - culprits
    essentials = set(pick(v.output("essentials"), "essential", default=[]) or [])
    gated = {g.get("file"): g.get("name") for g in pick(v.output("gates"), "gates", default=[]) or []}
    bisected = v.output("bisect") is not None
    for s in pick(v.output("triage"), "rows", "files", default=[]) or []:
        path = s.get("path", "")
        outcome = ("culprit" if path in culprits or s.get("patch_id") in culprits else
                   "essential" if path in essentials or s.get("essential") else
                   "unresolved" if path in candidates else "cleared" if bisected else "untested")
        report.suspects.append(m.Suspect(
            path=path, subsystem=" / ".join(x for x in (s.get("subsystem"), s.get("detail")) if x) or None,
            on_hot_path=s.get("on_hot_path"), reason=s.get("reason", ""),
            gated=gated.get(path), logging_only=bool(s.get("logging_only")), priority=s.get("priority"),
            bisection=outcome, evidence=_evidence("triage", res.get("triage"), cmds)))


def _gates(report: m.Report, v: StateView, res: dict, cmds: _Commands) -> None:
    for g in pick(v.output("gates"), "gates", default=[]) or []:
        values = pick(g, "values", "processes", default={}) or {}
        if isinstance(values, list):
            values = {str(p.get("label") or p.get("pid")): p.get("value") for p in values}
        report.gates.append(m.FeatureGate(name=g.get("name", "?"), default=None if g.get("default") is None else
                                          str(g.get("default")), reader=g.get("reader"), file=g.get("file"),
                                          state=g.get("state"), values=values,
                                          evidence=_evidence("gates", res.get("gates"), cmds)))


def _propagation(report: m.Report, v: StateView, res: dict, cmds: _Commands) -> None:
    for r in pick(v.output("propagation"), "rows", default=[]) or []:
        report.env_propagation.append(m.EnvRow(
            name=r.get("name", "?"), shell=r.get("shell"), parent=r.get("parent"), workers=r.get("workers") or {},
            forced_by_sglang=bool(r.get("forced_by_sglang")), from_sitecustomize=bool(r.get("from_sitecustomize")),
            from_nccl_conf=bool(r.get("from_nccl_conf")), status=r.get("status", ""),
            evidence=_evidence("propagation", res.get("propagation"), cmds)))


def _fingerprint(report: m.Report, v: StateView, res: dict, cmds: _Commands) -> None:
    fp = v.output("fingerprint")
    diff = v.output("fingerprint_diff")
    if not fp and not diff:
        return
    changes = []
    for c in pick(diff, "changes", default=[]) or []:
        impact = c.get("impact") or c.get("severity") or "low"
        changes.append(m.FingerprintChange(key=str(c.get("key") or c.get("path") or c.get("name")),
                                           before=None if c.get("before") is None else str(c.get("before")),
                                           after=None if c.get("after") is None else str(c.get("after")),
                                           impact=impact if impact in ("high", "medium", "low") else "low"))
    report.fingerprint = m.FingerprintSection(current=fp or {}, previous_run=v.params.get("good_fingerprint"),
                                              changes=changes,
                                              evidence=_evidence("fingerprint", res.get("fingerprint"), cmds))


def _stash(report: m.Report, v: StateView, facts: dict, res: dict, cmds: _Commands) -> None:
    backup = v.output("backup")
    sub = facts.get("subtraction") or {}
    if not backup and not sub:
        return
    restore = v.output("restore") or sub.get("restore") or {}
    lines = []
    for a in sub.get("ambiguous") or []:
        level = "warn" if "WARN" in a.upper() else "error" if "ERROR" in a.upper() else "skip"
        lines.append(m.ScriptLine(text=a, level=level))
    meas = [x for x in (_measurement("all patches", sub.get("all_patches")),
                        _measurement("essentials only", sub.get("essentials_only"))) if x]
    comp = sub.get("comparison") or {}
    rec = m.StashRecord(
        backup_id=pick(backup, "backup_id", "id"), backup_ref=pick(backup, "ref"),
        patch_path=pick(backup, "patch_path", "dir", "tarball"), hash_before=pick(backup, "hash", "state_hash"),
        applied=sub.get("applied") or [], script=v.params.get("patch_script"), script_lines=lines, measurements=meas,
        comparison=m.MetricComparison(metric="essentials only vs all patches", samples=[],
                                      pct_change=pick(comp, "pct_change"), outcome=_outcome(comp.get("outcome")),
                                      p_value=pick(comp, "p_value")) if comp else None,
        culprits=_isolated(v),
        restore_verified=pick(restore, "verified", "ok"), hash_after=pick(restore, "actual_hash", "hash"),
        evidence=_evidence("backup", res.get("backup"), cmds))
    report.stash = rec


def _nccl(report: m.Report, v: StateView, res: dict, cmds: _Commands) -> None:
    sweep = v.output("nccl")
    if not sweep:
        return
    rows = []
    for r in pick(sweep, "results", "rows", default=[]) or []:
        pts = [m.NcclPoint(size_bytes=int(p["size"]), latency_us=float(p["latency_us"]))
               for p in r.get("points") or [] if p.get("size") is not None and p.get("latency_us") is not None]
        rows.append(m.NcclRow(config=str(r.get("label") or "default"), env=r.get("env") or {}, points=pts,
                              promoted=bool(r.get("promote"))))
    promo = v.output("nccl_promote") or {}
    ab = []
    for a in pick(promo, "results", default=[]) or []:
        if a.get("skipped"):
            continue
        ab.append(m.MetricComparison(metric=str(a.get("label") or "promoted"), samples=a.get("samples") or [],
                                     median=a.get("median"), ci_low=a.get("ci_low"), ci_high=a.get("ci_high"),
                                     pct_change=a.get("pct_change"), outcome=_outcome(a.get("outcome")),
                                     p_value=a.get("p_value")))
    results = pick(promo, "results", default=[]) or []
    propagated = all(a.get("propagated") for a in results) if results else None
    if promo.get("launcher_drops"):
        propagated = False
    report.nccl = m.NcclSection(tp=pick(sweep, "tp"), rows=rows, ab=ab, propagated=propagated,
                                evidence=_evidence("nccl", res.get("nccl"), cmds))
    if promo.get("launcher_report"):
        report.findings.append(m.Finding(title=promo["launcher_report"], severity="critical",
                                         evidence=[_evidence("nccl_promote", res.get("nccl_promote"), cmds)]))
    if promo.get("best"):
        report.findings.append(m.Finding(
            title=f"NCCL setting {promo['best']} wins end to end ({promo.get('best_gain_pct', 0):+.1f} % tok/s); "
                  f"{promo.get('where_to_set', '')}",
            detail=promo.get("not_sitecustomize", ""),
            evidence=[_evidence("nccl_promote", res.get("nccl_promote"), cmds)]))
