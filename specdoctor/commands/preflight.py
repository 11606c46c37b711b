"""Read-only checks of `investigate`'s inputs before the playbook starts (so before any server is launched)."""

from __future__ import annotations

import math
import re
from typing import Any

from specdoctor.errors import RepoRefused, ToolRetry, UsageError

__all__ = ["check_inputs", "parse_expect", "parse_params"]

_PARAM_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]*$")


def parse_expect(text: str | None) -> dict[str, float]:
    """`baseline=89,spec=94,verify_ms=19` → {'baseline': 89.0, …}: tok/s, ms or an accept length, each finite and
    above zero (the keys: specdoctor.diagnosis.references.CLAIM_KEYS)."""
    from specdoctor.diagnosis.references import CLAIM_KEYS

    out: dict[str, float] = {}
    for part in (text or "").split(","):
        if not part.strip():
            continue
        key, sep, value = part.partition("=")
        if not sep or key.strip() not in CLAIM_KEYS:
            raise UsageError(f"--expect takes {'=N,'.join(CLAIM_KEYS)}=N (tok/s, ms, tokens), got {part.strip()!r}")
        try:
            number = float(value)
        except ValueError:
            raise UsageError(f"--expect: {value.strip()!r} is not a number") from None
        if not math.isfinite(number) or number <= 0:
            raise UsageError(f"--expect: {key.strip()}={value.strip()} must be a finite number above zero")
        if key.strip() in out:
            raise UsageError(f"--expect gives {key.strip()} twice")
        out[key.strip()] = number
    return out


def parse_params(items: list[str] | None) -> dict[str, Any]:
    """`NAME=VALUE` pairs; VALUE is read as JSON when it parses (numbers, lists), else kept as text."""
    import json

    out: dict[str, Any] = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not _PARAM_NAME.match(key):
            raise UsageError(f"--param takes NAME=VALUE (NAME: letters, digits, _ . -), got {item!r}")
        if key in out:
            raise UsageError(f"--param {key} is given twice")
        try:
            out[key] = json.loads(value)
        except json.JSONDecodeError:
            out[key] = value
    return out


def _check_launch(launch: str) -> None:
    from specdoctor.parsers.sglang import parse_launch_command

    args = parse_launch_command(launch)  # UsageError itself on unbalanced quotes
    if args.problems:
        raise UsageError(f"--launch: {args.problems[0]}" + (f" (and {len(args.problems) - 1} more)"
                                                             if len(args.problems) > 1 else ""))
    if not args.model_path:
        raise UsageError("--launch does not start an SGLang server with a model (no --model-path): "
                         f"{' '.join(launch.split())[:200]!r}")


def _check_repo(host: Any, repo: str) -> None:
    from specdoctor.toolkit import ToolContext
    from specdoctor.tools.checkout.repo import repo_state

    ctx = ToolContext(host=host, run_id="preflight")
    try:
        head, _branch, _gdir, busy = repo_state(ctx, repo)
    except ToolRetry:
        raise RepoRefused(f"--repo {repo} is not a git checkout on {host.name}") from None
    if busy:
        raise RepoRefused(f"{repo}: a {busy[0]} is in progress; finish or abort it before running specdoctor")
    if head is None:
        raise RepoRefused(f"{repo}: HEAD has no commit yet")


def _check_python(host: Any, python: str) -> None:
    res = host.run([python, "-c", "import sys"], check="ignore", timeout=60)
    if not res.ok:
        raise UsageError(f"--python {python} does not run on {host.name}: "
                         f"{(res.stderr or res.stdout).strip().splitlines()[-1:] or ['exit ' + str(res.exit)]}")


def check_inputs(host: Any, *, repo: str | None, python: str | None, launch: str | None) -> None:
    """Refuse, before anything runs, a launch line that cannot start SGLang, a --python that does not run,
    and a repo that is missing or mid-merge/rebase/cherry-pick/bisect. Read-only: nothing on the host changes."""
    hints = getattr(host, "hints", None)
    if launch:
        _check_launch(launch)
    if python:
        _check_python(host, python)
    target = repo or (hints.repo if hints else None)
    if target:
        _check_repo(host, target)
