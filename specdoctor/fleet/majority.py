"""The fleet's majority fingerprint and launch line (a field-by-field vote) and each host's departures from it."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from typing import Any

from specdoctor.fleet.models import FieldDeviation, HostSurvey
from specdoctor.models import Change, Fingerprint
from specdoctor.tools.environment.fingerprint import diff_fingerprints

__all__ = ["vote", "majority_fingerprint", "majority_launch", "deviations"]

_ENV_MAPS = ("worker_env", "parent_env")
_UNVOTED = {"gpus", "topology", "gpu_processes", "problems", "worker_env_mismatch", *_ENV_MAPS}
# Launch flags a majority says nothing about: the address a server listens on is not a performance setting.
_NOT_COMPARED_FLAGS = {"port", "host"}
_LAUNCH_RANK = 15  # after the worker NCCL env and the NCCL version, before the driver: a flag picks the kernels


def _key(v: Any) -> str:
    return json.dumps(v, sort_keys=True, default=str)


def vote(values: Iterable[Any]) -> tuple[Any, int, int, bool]:
    """(most common value, its count, how many voted, strict majority?) — None is a value like any other."""
    vals = list(values)
    if not vals:
        return None, 0, 0, False
    counts = Counter(_key(v) for v in vals)
    (top, n), *rest = counts.most_common()
    strict = n * 2 > len(vals)
    return json.loads(top), n, len(vals), strict


def _vote_fields(dumps: list[dict[str, Any]], out: dict[str, Any], split: list[str]) -> None:
    """The scalar fields: the strict majority's value, else None (a non-None plurality names the field split)."""
    for field in Fingerprint.model_fields:
        if field in _UNVOTED:
            continue
        value, _, _, strict = vote(d.get(field) for d in dumps)
        if not strict and value is not None:
            split.append(field)
        out[field] = value if strict else None


def _vote_env_maps(dumps: list[dict[str, Any]], out: dict[str, Any], split: list[str]) -> None:
    """The env maps, variable by variable (absent is a value; a majority for absent keeps it out)."""
    for field in _ENV_MAPS:
        env: dict[str, str] = {}
        for name in sorted(set().union(*(d.get(field) or {} for d in dumps))):
            value, _, _, strict = vote((d.get(field) or {}).get(name) for d in dumps)
            if strict and value is not None:
                env[name] = value
            elif not strict:
                split.append(f"{field}.{name}")
        out[field] = env


def _vote_gpus(dumps: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The GPUs, when a strict majority agrees on their count: each GPU's fields voted over the hosts that have it."""
    count, _, _, strict = vote(len(d.get("gpus") or []) for d in dumps)
    gpus = []
    if strict:
        for i in range(count):
            rows = [d["gpus"][i] for d in dumps if len(d.get("gpus") or []) > i]
            gpu: dict[str, Any] = {"index": i}
            for field in rows[0]:
                if field == "index":
                    continue
                value, _, _, ok = vote(r.get(field) for r in rows)
                gpu[field] = value if ok else None
            gpus.append(gpu)
    return gpus


def majority_fingerprint(fps: list[Fingerprint]) -> tuple[Fingerprint | None, list[str]]:
    """Each field's most common value across the hosts (a strict majority), and the fields with none."""
    if not fps:
        return None, []
    dumps = [fp.model_dump(mode="json") for fp in fps]
    out: dict[str, Any] = {}
    split: list[str] = []
    _vote_fields(dumps, out, split)
    _vote_env_maps(dumps, out, split)
    out["gpus"] = _vote_gpus(dumps)
    for field in ("topology", "gpu_processes"):  # voted whole
        value, _, _, strict = vote(d.get(field) for d in dumps)
        out[field] = value if strict else ([] if field == "gpu_processes" else {})
    return Fingerprint.model_validate(out), split


def majority_launch(launches: list[dict[str, str]]) -> tuple[dict[str, str], list[str]]:
    """Each launch flag's most common value (absent counts as a value); flags with no strict majority."""
    out: dict[str, str] = {}
    split: list[str] = []
    for flag in sorted(set().union(*launches)) if launches else []:
        if flag in _NOT_COMPARED_FLAGS:
            continue
        value, _, _, strict = vote(ln.get(flag) for ln in launches)
        if strict and value is not None:
            out[flag] = value
        elif not strict:
            split.append(f"launch.{flag}")
    return out, split


_Changes = dict[str, dict[str, Change]]  # host -> fingerprint key -> its change from the majority


def _field_deviations(row: HostSurvey, fps: list[HostSurvey], changes: _Changes,
                      skip: set[str]) -> list[FieldDeviation]:
    """The host's fingerprint fields that differ from the majority, with who agrees and who shares its value."""
    devs: list[FieldDeviation] = []
    for key, ch in changes[row.name].items():
        if key in skip or key.split(".", 1)[0] in skip:
            continue
        agree = sum(1 for r in fps if key not in changes[r.name])
        shared = [r.name for r in fps if r.name != row.name and key in changes[r.name]
                  and changes[r.name][key].after == ch.after]
        devs.append(FieldDeviation(key=key, value=ch.after, majority=ch.before, impact=ch.impact, rank=ch.rank,
                                   agree=agree, of=len(fps), shared_with=shared, why=ch.why))
    return devs


def _launch_deviations(row: HostSurvey, measured: list[HostSurvey], launch: dict[str, str],
                       skip: set[str]) -> list[FieldDeviation]:
    """The host's launch flags that differ from the majority launch line (none when its launch is unknown)."""
    devs: list[FieldDeviation] = []
    for flag in sorted(set(row.launch) | set(launch)) if row.launch else []:
        if flag in _NOT_COMPARED_FLAGS or f"launch.{flag}" in skip or row.launch.get(flag) == launch.get(flag):
            continue
        agree = sum(1 for r in measured if r.launch.get(flag) == launch.get(flag))
        shared = [r.name for r in measured if r.name != row.name and r.launch.get(flag) == row.launch.get(flag)]
        devs.append(FieldDeviation(key=f"launch.{flag}", value=row.launch.get(flag), majority=launch.get(flag),
                                   impact="high", rank=_LAUNCH_RANK, agree=agree, of=len(measured),
                                   shared_with=shared, why="launch flag differs from the fleet's"))
    return devs


def deviations(fleet: list[HostSurvey], majority: Fingerprint, launch: dict[str, str],
               split: list[str] | None = None) -> dict[str, list[FieldDeviation]]:
    """Each host's fields that differ from the majority, ranked as the fingerprint diff ranks them (worker NCCL
    env, NCCL, launch flags, driver/CUDA, GPUs and links, ...), with how many hosts agree and who shares it.
    Fields in `split` (no strict majority) name no deviant."""
    skip = set(split or [])
    fps = [r for r in fleet if r.fingerprint is not None]
    changes = {r.name: {c.key: c for c in diff_fingerprints(majority, r.fingerprint).changes}
               for r in fps if r.fingerprint is not None}
    measured = [r for r in fleet if r.launch]
    return {row.name: _field_deviations(row, fps, changes, skip) + _launch_deviations(row, measured, launch, skip)
            for row in fps}
