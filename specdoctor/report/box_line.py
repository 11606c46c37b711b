"""The one-screen lines about the box: left as found (server + checkout) and the plan against what was done."""

from __future__ import annotations

from specdoctor.models.box import CheckoutProofFact, UserServerFact
from specdoctor.report import derive
from specdoctor.report.derive import BoxState
from specdoctor.report.model import Report

__all__ = ["box_left", "server_words", "checkout_words", "plan_vs_actual"]


def _h(x: str | None) -> str:
    return (x or "?")[:12]


def _tps(x: float | None) -> str:
    return "?" if x is None else f"{x:.1f}"


def server_words(s: UserServerFact) -> BoxState:
    """The user's server: not touched, back exactly as it was, or what was not verified and why."""
    port = f":{s.port}" if s.port else "(port unknown)"
    if not s.stopped:
        return BoxState(True, f"your server on {port} was never stopped")
    ok = s.left_as_found
    if ok is None:
        return BoxState(None, f"your server on {port} was stopped ({s.stop_consent or 'consent not recorded'}); "
                              f"its restart is not recorded{': ' + s.note if s.note else ''}")
    if ok:
        speed = ("throughput not lower (faster after the restart: the box's own drift, not a change)"
                 if s.faster_after else "throughput SAME" + (" (a first look re-measured)" if s.throughput_reason
                                                             and "re-measured" in s.throughput_reason else ""))
        return BoxState(True, f"server back on {port}, same identity (argv/env hash {_h(s.identity_after)}), "
                              f"{speed} ({_tps(s.tps_before)} → {_tps(s.tps_after)} tok/s)"
                              + (f" — {s.note}" if s.note else ""))  # e.g. where it is: its tmux session
    why = f": {s.throughput_reason}" if s.throughput_reason else ""
    if s.restarted and s.healthy and s.identity_before == s.identity_after and not s.differs \
            and s.outcome in ("UNKNOWN", None):
        # back and the same process, but the benchmark could not decide: unverified, not failed
        return BoxState(None, f"server back on {port}, same identity (argv/env hash {_h(s.identity_after)}), "
                              f"throughput not decided ({s.outcome or 'not compared'}: {_tps(s.tps_before)} → "
                              f"{_tps(s.tps_after)} tok/s{why})")
    missing = []
    if not s.restarted:
        missing.append("NOT restarted")
    elif not s.healthy:
        missing.append("restarted but not healthy")
    if s.restarted and s.differs:
        missing.append("identity differs: " + "; ".join(s.differs))
    elif s.restarted and s.identity_before != s.identity_after:
        missing.append(f"identity changed ({_h(s.identity_before)} → {_h(s.identity_after)})")
    if s.restarted and s.outcome != "SAME":
        missing.append(f"throughput {s.outcome or 'not compared'} ({_tps(s.tps_before)} → {_tps(s.tps_after)} tok/s"
                       f"{why})")
    note = f"; {s.note}" if s.note else ""
    return BoxState(False, f"your server on {port}: {', '.join(missing) or 'not verified'}{note}")


def checkout_words(c: CheckoutProofFact) -> BoxState:
    """The checkout's file-level manifest before and after: identical, different (which paths), or not compared."""
    if c.identical is True:
        return BoxState(True, f"checkout manifest identical ({_h(c.manifest_before)} before and after)")
    if c.identical is False:
        shown = ", ".join(c.differences[:3]) + (f" and {len(c.differences) - 3} more" if len(c.differences) > 3
                                                else "")
        return BoxState(False, f"checkout DIFFERS from its first manifest ({_h(c.manifest_before)} → "
                               f"{_h(c.manifest_after)}): {shown or 'paths not listed'}")
    why = c.note or ("no manifest taken at the end" if c.manifest_before else "no manifest taken")
    return BoxState(None, f"checkout manifest not compared: {why}")


def box_left(r: Report) -> BoxState:
    """Both halves in one line; a half that was not verified says so, and why, instead of passing silently."""
    parts: list[BoxState] = []
    box = r.box
    if box is not None and box.server is not None:
        parts.append(server_words(box.server))
    else:
        parts.append(BoxState(None, "your server not tracked by this run (no record of stopping or restarting it)"))
    if box is not None and box.checkout is not None:
        parts.append(checkout_words(box.checkout))
    else:
        parts.append(derive.left_as_found(r))  # the backup/restore hashes, when no manifest proof was recorded
    oks = [p.ok for p in parts]
    ok = False if False in oks else True if all(o is True for o in oks) else None
    lead = ("box left as found" if ok else "box NOT left as found" if ok is False else
            "box left as found, not fully verified")
    return BoxState(ok, f"{lead}: " + "; ".join(p.text for p in parts))


def plan_vs_actual(r: Report) -> str | None:
    """'expected N launches ≈ M min (worst case N′ ≈ M′ min); made K', or 'planned up to N …' when the plan had no
    expectation below its bound (None when the run neither planned nor launched anything)."""
    made = r.launches_made
    if r.plan is None:
        return None if not made else f"{made} launch{'es' if made != 1 else ''} made (no plan was computed)"
    minutes = f" ≈ {r.plan.box_minutes_max:.0f} min of box time" if r.plan.box_minutes_max is not None else ""
    planned = f"planned up to {r.plan.launches_max} launch{'es' if r.plan.launches_max != 1 else ''}{minutes}"
    exp = r.plan.launches_expected
    if exp is not None and round(exp) < r.plan.launches_max:  # the plan's expectation first, as Plan and cost says
        exp_min = (f" ≈ {r.plan.box_minutes_expected:.0f} min of box time"
                   if r.plan.box_minutes_expected is not None else "")
        worst = f" ≈ {r.plan.box_minutes_max:.0f} min" if r.plan.box_minutes_max is not None else ""
        planned = (f"expected {exp:.0f} launch{'es' if round(exp) != 1 else ''}{exp_min} "
                   f"(worst case {r.plan.launches_max}{worst})")
    if r.verdict == "plan-only":
        return f"{planned}; dry run: none made"
    if made is not None and made > r.plan.launches_max:  # a search sized only once its differences were known
        return (f"{planned}; made {made}, more than planned: a search that grows with what it found (the "
                "conditions in Plan and cost)")
    return f"{planned}; made {made if made is not None else '?'}"
