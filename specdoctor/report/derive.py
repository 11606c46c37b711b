"""What the report shows that it can work out from the Report itself: action commands, the state the box was left
in, the workers' NCCL row, and evidence for claims that carry none; the gap's attribution is the diagnosis' own.

Everything here prefers what the diagnosis filled in (`Action.command`) and derives only when it is missing.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import PurePosixPath

from specdoctor.diagnosis.causes import revert_patch_command as revert_command
from specdoctor.inference import engine_for_launch
from specdoctor.report.model import (
    Action,
    Attribution,
    Evidence,
    MetricComparison,
    NcclRow,
    Report,
)

__all__ = ["nccl_label", "attribution", "ranked_actions", "action_command", "left_as_found", "workers_nccl_row",
           "claim_evidence", "not_reproduced", "revert_command"]

_ENV_ASSIGN = re.compile(r"\b([A-Z][A-Z0-9_]{2,})=([^\s,;)]+)")
_REMOVE_WORDS = ("remove", "drop", "unset", "delete")


def attribution(r: Report) -> Attribution | None:
    """The attribution the diagnosis decided (the builder fills it, also when the run recorded none:
    `report/claimed_gap.py`)."""
    return r.attribution


def not_reproduced(r: Report) -> list[MetricComparison]:
    """Claims the box did not reproduce (comparator DIFFERENT, measured below the claim; above it reproduces it)."""
    return [c for c in r.claims if c.outcome == "DIFFERENT" and (c.pct_change is None or (
        c.pct_change < 0 if c.higher_is_better else c.pct_change > 0))]


def action_command(a: Action, r: Report) -> str | None:
    """The command that carries out an action: the diagnosis' own, else one derived from the report's data."""
    if a.command:
        return a.command
    title = a.title
    culprits = r.stash.culprits if r.stash else []
    hit = [c for c in culprits if c in title or PurePosixPath(c).name in title]
    if hit:
        return " && ".join(revert_command(r.meta.repo, c) for c in hit)
    low = title.lower()
    assigns = _ENV_ASSIGN.findall(title)
    if assigns:
        names = {n for n, _ in assigns}
        site = {e.name for e in r.env_propagation if e.from_sitecustomize and e.name in names}
        if site and any(w in low for w in _REMOVE_WORDS):
            path = r.meta.sitecustomize or "sitecustomize.py"
            return "; ".join(f"sed -i '/{n}/d' {shlex.quote(path)}" for n in sorted(site))
        env = " ".join(f"{n}={v}" for n, v in assigns)
        return f"env {env} {r.meta.launch}" if r.meta.launch else f"env {env} python -m sglang.launch_server …"
    if "without speculation" in low and r.meta.launch:
        engine = engine_for_launch(r.meta.launch)  # the launch line's own engine drops its speculative flags
        return shlex.join(engine.drop_speculative(r.meta.launch)) if engine else None
    return None


def ranked_actions(r: Report) -> list[Action]:
    """The game plan in the diagnosis' order (confirmed fixes, then the biggest cheap lever, measured or modelled);
    the advisor's additions after it, in their own order."""
    return sorted(r.game_plan, key=lambda a: a.llm_made)


@dataclass(frozen=True)
class BoxState:
    ok: bool | None
    text: str


def left_as_found(r: Report) -> BoxState:
    """Whether the user's working tree was put back, in words, with the hashes that prove it."""
    st = r.stash
    if st is None:
        return BoxState(None, "no trial touched the working tree (no backup was needed)")
    h = (st.hash_before or "")[:12]
    if st.restore_verified is True:
        same = st.hash_after is None or st.hash_after == st.hash_before
        return BoxState(same, f"working tree restored byte-identical (hash {h} before and after)"
                        if same else f"working tree restored but its hash changed ({h} → {(st.hash_after or '')[:12]})")
    if st.restore_verified is False:
        return BoxState(False, f"working tree NOT verified as restored; the backup is {st.backup_ref or st.backup_id}")
    return BoxState(None, f"restore not attempted; the backup is {st.backup_ref or st.backup_id or 'missing'}")


def _worker_env(r: Report) -> dict[str, str]:
    """The value every worker rank agrees on, per variable (ranks that differ are left out)."""
    out: dict[str, str] = {}
    for e in r.env_propagation:
        vals = {v for v in e.workers.values()}
        if len(vals) == 1:
            v = vals.pop()
            if v is not None:
                out[e.name] = v
    if not out and r.fingerprint:
        we = r.fingerprint.current.get("worker_env")
        if isinstance(we, dict):
            out = {str(k): str(v) for k, v in we.items() if v is not None}
    return out


def workers_nccl_row(r: Report) -> tuple[NcclRow, bool] | None:
    """The sweep row matching the workers' current NCCL settings (exact, or the closest), and whether exact."""
    n = r.nccl
    if n is None or not n.rows:
        return None
    env = _worker_env(r)
    swept = sorted({k for row in n.rows for k in row.env})

    def agree(row: NcclRow) -> int:
        return sum(row.env.get(k) == env.get(k) for k in swept)

    best = max(n.rows, key=lambda row: (agree(row), -len(row.env)))
    return best, agree(best) == len(swept)


def nccl_label(row: NcclRow, rows: list[NcclRow]) -> str:
    """A sweep row's name; the row with nothing set says so (it is NCCL's default, not necessarily the workers').

    Only when the sweep recorded env per row: without it an empty env says nothing."""
    return "NCCL_* unset (NCCL's own defaults)" if not row.env and any(x.env for x in rows) else row.config


def claim_evidence(c: MetricComparison, r: Report) -> Evidence | None:
    """A claim's evidence, or the evidence of the measurement it was compared with."""
    if c.evidence is not None:
        return c.evidence
    for m in r.measurements:
        if m.label == c.metric or m.label.split(" ")[0] == c.metric:
            return m.evidence
    return None
