"""The verdict: it follows the measured attribution, rule by rule in a fixed order (the first rule that applies decides).

code → code-regression; configuration/software/hardware → environment; nothing and the claims not reproduced →
baseline-not-reproducible; unmeasured or undecided → inconclusive. Each rule is a function of the `Case` and what
is already worked out from it (`_Reading`); none reads the host.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from specdoctor.diagnosis.attribution import attribution, cause_line
from specdoctor.diagnosis.causes import CODE_CLEARED
from specdoctor.diagnosis.facts import Case
from specdoctor.diagnosis.outcome import Verdict
from specdoctor.models import (
    AttributionFact,
    CauseFact,
    ClaimFact,
    MeasuredFact,
    MeasureFacts,
    SubtractionFact,
)
from specdoctor.tools.environment.gates import Gate

__all__ = ["decide_verdict", "enabled_gates", "good_news"]


def enabled_gates(case: Case) -> list[Gate]:
    """Feature gates the server's workers run with enabled although their default is off."""
    scan = case.tools.gates
    return [g for g in scan.gates if g.state == "ENABLED-at-runtime"] if scan else []


def _median(m: MeasuredFact | None) -> float | None:
    return m.median if m is not None else None


def _claim_median(c: ClaimFact, measure: MeasureFacts, key: str) -> float | None:
    """Today's figure the claim was judged against (its basis), else the benchmark's median."""
    return c.median if c.median is not None else _median(getattr(measure, key, None))


def _said(c: ClaimFact) -> str:
    """'claimed' (--expect) or 'the good run's' (its fingerprint's measurements stood in for claims)."""
    return "claimed" if c.source == "--expect" else "the good run's"


def _basis(c: ClaimFact) -> str:
    return ", prefill excluded" if c.basis == "decode" else ""


def _not_reproduced_words(claims: dict[str, ClaimFact], measure: MeasureFacts, *, capital: bool = False) -> str:
    """'the claimed speculative 84 tok/s (measured 77.7) and baseline 41.7 tok/s (measured 38.8)'."""
    words = {"spec": "speculative", "baseline": "baseline"}
    parts = []
    for k, c in claims.items():
        med = _claim_median(c, measure, k)
        parts.append(f"{words.get(k, k)} {c.claimed:g} {c.unit} (measured today: "
                     f"{'?' if med is None else f'{med:.1f}'}{_basis(c)})" if c.claimed is not None else k)
    return ("The" if capital else "the") + " claimed " + " and ".join(parts)


_CODE = ("code", "commit")
"""Cause kinds that are code: a local patch, or an upstream commit (the commit bisection's)."""


@dataclass
class _Reading:
    """What every rule reads, worked out once from the case."""

    case: Case
    measure: MeasureFacts
    claims: dict[str, ClaimFact]
    sub: SubtractionFact
    att: AttributionFact
    code: list[CauseFact]
    env: list[CauseFact]

    @classmethod
    def of(cls, case: Case) -> _Reading:
        att = attribution(case)
        confirmed = att.confirmed()
        return cls(case=case, measure=case.facts.measure or MeasureFacts(),
                   claims=(case.facts.claims.root if case.facts.claims else {}),
                   sub=case.facts.subtraction or SubtractionFact(), att=att,
                   code=[c for c in confirmed if c.kind in _CODE], env=[c for c in confirmed if c.kind not in _CODE])

    @property
    def env_lines(self) -> list[str]:
        return [cause_line(c, self.att) for c in self.env]

    @property
    def different(self) -> dict[str, ClaimFact]:
        """Claims not reached today (faster than claimed reproduces the claim)."""
        return {k: c for k, c in self.claims.items() if c.not_reached}

    @property
    def unknown(self) -> dict[str, ClaimFact]:
        return {k: c for k, c in self.claims.items() if c.outcome == "UNKNOWN"}

    def different_reasons(self) -> list[str]:
        return [f"claimed {k} {c.claimed} is DIFFERENT from today's measurement" for k, c in self.different.items()]


def _code_reasons(r: _Reading) -> list[str]:
    """How each named patch was established, in words true of what was measured: 'confirmed both ways' only for a
    set whose both checks were measured (the bisection's confirmed result), said of the set, not of each member."""
    out: list[str] = []
    bis = [c.key for c in r.code if c.kind == "code" and c.method == "bisection"]
    fitted = r.case.tools.bisect.culprit_effects if r.case.tools.bisect is not None else []
    if bis and len(fitted) > 1:  # independent culprits: each measured on its own, the set checked both ways
        out.append("bisection by effect sizes isolated " + " and ".join(
            f"{c.path} ({c.effect_tps:+.1f} tok/s [{c.ci_low:+.1f}, {c.ci_high:+.1f}], {c.share:.0%} of the gap)"
            for c in fitted) + " as independent culprits (measured: every other patch without them is fast, they "
            "alone on the essentials reproduce the gap, and their effects add up to it: no interaction)")
        bis = []
    if bis:
        one = len(bis) == 1
        out.append(f"bisection isolated {', '.join(bis)} (comparator DIFFERENT; confirmed both ways, measured: "
                   + (f"{bis[0]} alone on the essentials is slow, every other patch without it is fast)" if one else
                      "together on the essentials they are slow, every other patch without them is fast, and "
                      "without any one of them it is fast)"))
    tried = [c.key for c in r.code if c.kind == "code" and c.method != "bisection"]
    if tried:
        out.append(f"revert trials confirmed {', '.join(tried)} (the joint search over code and configuration)")
    return out


def _code_regression(r: _Reading) -> Verdict | None:
    """A confirmed culprit patch decides (the bisection measured its own references: no reproduce step needed)."""
    culprits = list(dict.fromkeys(c.key for c in r.code if c.kind == "code"))
    commits = [c for c in r.code if c.kind == "commit"]
    if not culprits and not commits:
        return None
    reasons = _code_reasons(r)
    reasons += [f"commit bisection isolated {c.name} (confirmed both ways: it is slow and its parent fast, each "
                "with the essential local patches)" for c in commits]
    reasons += [cause_line(c, r.att) for c in r.code if c.effect_tps is not None]
    reasons += [f"also an environment cause: {line}" for line in r.env_lines]
    reasons += [f"gate {g.name} is ENABLED at runtime in the server's workers although its default is {g.default}"
                for g in enabled_gates(r.case)]
    also = f"; the environment adds to it: {'; '.join(c.name for c in r.env)}" if r.env else ""
    what = ([f"a local patch: {', '.join(culprits)}"] if culprits else []) + \
        ([f"an upstream commit: {'; '.join(c.name.removeprefix('upstream commit ') for c in commits)}"]
         if commits else [])
    return Verdict(verdict="code-regression", confidence=0.9 if not r.env else 0.85, culprits=culprits,
                   reasons=reasons,
                   sentence=(f"A local patch regressed speculative decoding: {', '.join(culprits)}{also}." if not commits
                             else f"Speculative decoding regressed with {' and with '.join(what)}{also}."))


def _nothing_measured(r: _Reading) -> Verdict | None:
    m, sub = r.measure, r.sub
    if any(x is not None and x.measured for x in (m.baseline, m.spec, sub.all_patches, sub.essentials_only)):
        return None
    return Verdict(verdict="inconclusive", confidence=0.2, sentence="Nothing could be measured on the box, "
                   "so no regression can be confirmed or ruled out.", reasons=["no throughput measurement"])


def _claims_unmeasured(r: _Reading) -> Verdict | None:
    failed = [f"{k}: {m.error}" for k, m in r.measure.items() if m.error]
    missing = [k for k in r.case.expect if k not in r.claims]
    if not failed and not missing:
        return None
    return Verdict(verdict="inconclusive", confidence=0.3,
                   reasons=[f"measurement failed: {f}" for f in failed]
                   + [f"claimed {k} could not be compared (no measurement)" for k in missing],
                   sentence="Part of what was claimed could not be measured, so no verdict is possible yet.")


def _environment(r: _Reading) -> Verdict | None:
    """Confirmed non-code causes decide, with how far reverting them gets."""
    if not r.env:
        return None
    att, reasons = r.att, list(r.env_lines)
    if att.restored is not None:
        reasons.append("reverting the confirmed causes " + ("reaches" if att.restored else "does not reach")
                       + f" the {att.reference_label} figure")
    if att.candidates:
        reasons.append(f"also tested, unresolved (not causes): {', '.join(att.candidates)}")
    diff = r.case.tools.fingerprint_diff
    if diff is not None and diff.changes:
        reasons.append(f"fingerprint diff vs the good run, first change: {diff.changes[0]}")
    measured_causes = [c for c in r.env if c.effect_tps is not None]
    conf = 0.9 if measured_causes and (att.restored is not False) else 0.8 if measured_causes else 0.75
    return Verdict(verdict="environment", confidence=conf, reasons=reasons,
                   sentence="The environment changed, not the code: " + "; ".join(r.env_lines) + ".")


def _patches_unpinned(r: _Reading) -> Verdict | None:
    """Removing the patches made it faster but no culprit was confirmed. With every claim reproduced, a subtraction
    difference that no bisection confirmed does not unsettle them."""
    if not (r.sub.made_faster and (r.different or r.unknown or not r.claims)):
        return None
    return Verdict(verdict="inconclusive", confidence=0.4,
                   reasons=["removing the non-essential patches made it faster, but no culprit was isolated"],
                   sentence="The local patches change the numbers, but the bisection did not pin the cause; "
                            "see the trials.")


def _candidates_undecided(r: _Reading) -> Verdict | None:
    if not (r.different and r.att.candidates):
        return None
    cands = ", ".join(r.att.candidates)
    return Verdict(verdict="inconclusive", confidence=0.4,
                   reasons=[*r.different_reasons(),
                            f"revert trials could not decide for: {cands} (candidates, not causes)"],
                   sentence=f"{_not_reproduced_words(r.different, r.measure)} were not reproduced; the differences "
                            f"{cands} may explain it, but the trials could not decide.")


def _patches_not_cleared(r: _Reading) -> Verdict | None:
    """The local patches were tested and not cleared: they stay candidates, never exonerated by default."""
    sub = r.sub
    if not (r.different and sub.outcome in ("UNKNOWN", "UNRESOLVED")):
        return None
    why = sub.problem or ("the comparator could not decide" if sub.outcome == "UNKNOWN" else
                          "the trial could not be trusted")
    return Verdict(verdict="inconclusive", confidence=0.4,
                   reasons=[*r.different_reasons(),
                            f"subtraction {sub.outcome}: {why}; the local patches are candidates, not cleared"],
                   sentence=f"{_not_reproduced_words(r.different, r.measure, capital=True)} were not reproduced; "
                            "removing the local patches neither clearly restored speed nor clearly changed "
                            f"nothing ({why}), so they stay candidates: rerun with more runs (--param runs=10).")


def _not_reproducible(r: _Reading) -> Verdict | None:
    """Claims not reached, and no difference a trial reverted explains the gap."""
    if not r.different:
        return None
    reasons: list[str] = []
    for k, c in r.different.items():
        med = _claim_median(c, r.measure, k)
        reasons.append(f"{_said(c)} {k} {c.claimed} is DIFFERENT from measured "
                       f"{med if med is not None else float('nan'):.1f} {c.unit}{_basis(c)}")
    sub = r.sub
    if sub.outcome == "SAME":
        reasons.append("removing every non-essential patch changes nothing (comparator SAME)")
        conf = 0.9
    else:
        reasons.append(f"subtraction outcome: {sub.outcome or 'not run'}")
        conf = 0.7 if sub.outcome == "DIFFERENT" else 0.6 if sub.outcome in (None, "UNKNOWN") else 0.5
    if r.att.untested:
        reasons += [f"not tested: {u}" for u in r.att.untested]
        conf = min(conf, 0.7)
    return Verdict(verdict="baseline-not-reproducible", confidence=conf, reasons=reasons,
                   sentence=f"{_not_reproduced_words(r.different, r.measure, capital=True)} were not reproduced on "
                            "this box today, and no difference that a trial reverted (local patches, variables, "
                            "launch flags) explains the gap: no code regressed.")


def _claim_held(k: str, c: ClaimFact) -> str:
    """'claimed spec 80 is within noise of the measurement' (+ the end-to-end reading of a decode-basis claim)."""
    line = (f"{_said(c)} {k} {c.claimed} is within noise of the measurement" if c.outcome == "SAME" else
            f"{_said(c)} {k} {c.claimed} is bettered today ({(c.pct_change or 0.0):+.1f} %)"
            if not c.higher_is_better else
            f"{_said(c)} {k} {c.claimed} is exceeded today ({(c.pct_change or 0.0):+.1f} %)")
    e2e = c.end_to_end
    if c.basis == "decode" and e2e is not None and e2e.median is not None and e2e.pct_change is not None:
        line += (" with the prefill excluded (end to end it reads "
                 f"{e2e.median:.1f}, {e2e.pct_change:+.1f} %: the claim's definition)")
    return line


def _no_regression(r: _Reading) -> Verdict | None:
    if not r.claims or r.unknown:
        return None
    reasons: list[str] = []
    if r.sub.made_faster:
        reasons.append("removing the non-essential patches measured faster, but no patch was confirmed by the "
                       "bisection (candidates at most): the claims hold either way")
    reasons += [_claim_held(k, c) for k, c in r.claims.items()]
    return Verdict(verdict="no-regression", confidence=0.85, reasons=reasons,
                   sentence="The box performs as claimed: no regression.")


def _undecided(r: _Reading) -> Verdict:
    reasons = [f"comparator could not decide for {k} within its cap" for k in r.unknown]
    if r.att.candidates:
        reasons.append(f"candidates (unresolved, not causes): {', '.join(r.att.candidates)}")
    return Verdict(verdict="inconclusive", confidence=0.3, reasons=reasons or ["no claims to compare with"],
                   sentence="The evidence does not support a verdict; see the measurements and findings.")


_RULES: tuple[Callable[[_Reading], Verdict | None], ...] = (
    _code_regression, _nothing_measured, _claims_unmeasured, _environment, _patches_unpinned,
    _candidates_undecided, _patches_not_cleared, _not_reproducible, _no_regression)


def decide_verdict(case: Case) -> Verdict:
    """The first rule that applies decides; none applying leaves the run inconclusive."""
    r = _Reading.of(case)
    for rule in _RULES:
        verdict = rule(r)
        if verdict is not None:
            return verdict
    return _undecided(r)


def good_news(v: Verdict) -> list[str]:
    """The verdict's reasons that are good news for the user (a suspect cleared by the subtraction, the claimed figure
    reached by reverting the causes): the report shows them as information, not warnings."""
    return [x for x in v.reasons if x.startswith("reverting the confirmed causes reaches") or x.endswith(CODE_CLEARED)
            or x.startswith("removing every non-essential patch changes nothing")]
