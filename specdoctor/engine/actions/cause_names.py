"""How the attribution names a confirmed delta as a cause: a flag with its values, a patch, a variable and its source."""

from __future__ import annotations

from specdoctor.models import Delta

__all__ = ["cause_name"]


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
