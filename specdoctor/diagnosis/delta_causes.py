"""A delta the revert trials confirmed, written as a cause: its name (a flag with its values, a patch, a variable and
its source), the exact edit that removes it for good, and the CauseFact the attribution keeps.

The attribute step runs the trials and measures; what a confirmed delta is called and how it is fixed is decided
here, from the delta and what the run recorded (the checkout, the user's launch line). Pure: no host, no I/O.
"""

from __future__ import annotations

import shlex

from specdoctor.diagnosis.causes import revert_patch_command
from specdoctor.models import CauseFact, Delta, Revert
from specdoctor.models.phases import PhaseEffect
from specdoctor.tools.environment.revert import describe, set_flags

__all__ = ["cause_name", "fix_command", "reverted_cause"]


def _flag_value(v: str | None) -> str:
    """A launch flag's value as a cause names it: absent, set (a switch given without a value), or the value."""
    return "absent" if v is None else "set" if v == "" else v


def cause_name(d: Delta) -> str:
    """'NCCL_P2P_DISABLE=1 set by sitecustomize.py', '--attention-backend triton (good run: fa3)'."""
    if d.kind == "launch-flag":
        flag = "--" + d.name.replace("_", "-")
        cur, ref = _flag_value(d.current), _flag_value(d.reference)
        if d.current == "":  # a switch (store_true) reads '--disable-cuda-graph (good run: absent)'
            return f"{flag} ({d.reference_label}: {ref})"
        return f"{flag} {cur} ({d.reference_label}: {ref})"
    if d.kind == "code":
        return f"local patch {d.name}"
    if d.current is None:
        where = f"; {d.source}" if d.source else ""
        return f"{d.name} unset today ({d.reference_label}: {d.reference}{where})"
    return f"{d.name}={d.current}" + (f" set by {d.source}" if d.source else "")


def fix_command(d: Delta, *, repo: str | None, launch: str | None) -> str:
    """The exact edit that removes a confirmed delta for good (`repo`: the checkout its patches are in; `launch`:
    the user's launch line, which a flag's fix is written as)."""
    r = d.revert or Revert()
    src = d.source or ""
    if r.drop_patches:
        return " && ".join(revert_patch_command(repo, p) for p in r.drop_patches)
    if r.undo_sitecustomize and src.endswith(".pth"):  # a .pth start-up hook: its `import` line is the code
        return "; ".join(f"remove the line setting {n} from {src} (a .pth start-up hook: every Python process of "
                         "that interpreter runs it), then relaunch" for n in r.undo_sitecustomize)
    if r.undo_sitecustomize:
        path = src if src.endswith(".py") and "/" in src else "sitecustomize.py"
        return "; ".join(f'remove `os.environ["{n}"] = ...` from {path}' for n in r.undo_sitecustomize)
    if r.argv_set:
        if launch:  # the command to run, not a description of it: the user's launch line with the flags put back
            return shlex.join(set_flags(launch, r.argv_set))
        parts = [f"without --{k.replace('_', '-')}" if v is None else f"with --{k.replace('_', '-')} {v}".rstrip()
                 for k, v in r.argv_set.items()]
        return "relaunch " + " and ".join(parts)
    files = [f.strip() for f in src.split(",") if f.strip().startswith(("/", "~"))]
    if d.kind == "env" and files:  # set by a file the user owns (a shell profile, nccl.conf, a launch script)
        also = (" (the trial ran with " + " ".join(f"{k}={v}" for k, v in r.env.items()) + ")") if r.env else ""
        return f"remove the line setting {d.name} from {' or '.join(files)}, then relaunch{also}"
    if r.unset:
        where = f" in {src}" if src and src not in ("launch line", "launcher") else ""
        return "; ".join(f"unset {n}{where}" for n in r.unset)
    if r.env:
        return "relaunch with " + " ".join(f"{k}={v}" for k, v in r.env.items())
    return describe(r)


def reverted_cause(d: Delta, *, metric: str, effect: tuple[float, float, float], together: list[Delta],
                   repo: str | None, launch: str | None, evidence: list[str],
                   phase_effect: PhaseEffect | None) -> CauseFact:
    """A delta the revert trials confirmed both ways, as a cause: `effect` is (today − reverted, CI low, CI high)
    of the set it was reverted with; `together`: the set's other members (they interact: the effect is the set's)."""
    eff, lo, hi = effect
    return CauseFact(
        name=cause_name(d), kind=d.kind, key=d.name, metric=metric, effect_tps=round(eff, 2),
        ci_low=round(lo, 2), ci_high=round(hi, 2), confirmed=True, method="revert-trial",
        fix=fix_command(d, repo=repo, launch=launch), evidence=evidence, phase_effect=phase_effect,
        together=[x.name for x in together],
        detail=(f"reverted together with {', '.join(x.label for x in together)} (they interact; the effect is the set's)")
        if together else d.why)
