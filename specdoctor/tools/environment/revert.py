"""Put deltas back to their reference values for one trial: env, launch flags, a shadow sitecustomize, a trial tree.

    with reverted(ctx, cfg, revert, repo=repo, label="revert-all") as cfg2:
        with trial(ctx, cfg2) as h:
            m = measure(h)
    # the shadow sitecustomize and the trial tree written for it are gone here

Nothing is written to the user's checkout or to their sitecustomize.py: a revert that undoes what a sitecustomize
forces writes a shadow module under the run's folder (~/.specdoctor/runs/RUN/revert/LABEL) that runs the original
and then puts the named variables back, and puts that folder first on the trial server's PYTHONPATH.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Iterator
from contextlib import contextmanager

from specdoctor.errors import ToolRetry
from specdoctor.models import Revert
from specdoctor.parsers.sglang import FLAG_DEST, split_command
from specdoctor.toolkit import ToolContext
from specdoctor.tools.checkout.trial_tree import TreeInput, build_tree, prepare_source, remove_tree
from specdoctor.tools.serving.trial import LaunchConfig

__all__ = ["merge_reverts", "set_flags", "shadow_sitecustomize", "apply_revert", "remove_written", "reverted", "describe"]

_ENV_ASSIGN = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=")
_LABEL = re.compile(r"[^A-Za-z0-9._-]+")


def merge_reverts(reverts: list[Revert]) -> Revert:
    """Several deltas reverted in one trial: their parts together (a later revert wins on the same key)."""
    out = Revert()
    for r in reverts:
        out = Revert(env={**out.env, **r.env}, unset=list(dict.fromkeys([*out.unset, *r.unset])),
                     undo_sitecustomize=list(dict.fromkeys([*out.undo_sitecustomize, *r.undo_sitecustomize])),
                     argv_set={**out.argv_set, **r.argv_set},
                     drop_patches=list(dict.fromkeys([*out.drop_patches, *r.drop_patches])))
    return out


def _dest(flag: str) -> str:
    """The argparse dest of a flag spelling, with argparse's unique-prefix abbreviations of known flags."""
    if flag in FLAG_DEST:
        return FLAG_DEST[flag]
    hits = {d for f, d in FLAG_DEST.items() if f.startswith(flag)}
    return hits.pop() if len(hits) == 1 else flag[2:].replace("-", "_")


def _spelling(dest: str) -> str:
    return next((f for f, d in FLAG_DEST.items() if d == dest), "--" + dest.replace("_", "-"))


def _flags_start(tokens: list[str]) -> int:
    """Index of the first server flag (after env assignments, the interpreter and `-m module` / `serve`)."""
    for i, t in enumerate(tokens):
        if t.startswith("--"):
            return i
    return len(tokens)


def set_flags(command: str | list[str], values: dict[str, str | None]) -> list[str]:
    """The launch line with each flag (by dest name) set to its value: None removes it, '' leaves a bare switch.

    Every spelling of the flag (abbreviations, `--flag=value`, several values) is replaced; the flag keeps the
    spelling the line used, else the engine's canonical one.
    """
    tokens = split_command(command)
    start = _flags_start(tokens)
    head, flags = tokens[:start], tokens[start:]
    kept: list[str] = []
    seen: dict[str, str] = {}
    i = 0
    while i < len(flags):
        tok = flags[i]
        i += 1
        if not tok.startswith("--"):
            kept.append(tok)
            continue
        name, eq, _ = tok.partition("=")
        dest = _dest(name)
        if dest not in values:
            kept.append(tok)
            continue
        seen.setdefault(dest, name)
        if not eq:
            while i < len(flags) and not flags[i].startswith("--"):
                i += 1  # the flag's value(s)
    for dest, value in values.items():
        if value is None:
            continue
        flag = seen.get(dest) or _spelling(dest)
        kept += [flag] if value == "" else [flag, value]
    return head + kept


_SHADOW = '''"""specdoctor revert trial (removed after the trial): run the original sitecustomize (and usercustomize), then give {names} their launch values."""
import importlib.machinery as _sd_m
import os as _sd_os
import sys as _sd_sys

_sd_names = {names_json}
_sd_before = {{_n: _sd_os.environ.get(_n) for _n in _sd_names}}
try:  # the values the process was started with (the trial's launch): a .pth hook ran before this module
    with open("/proc/self/environ", "rb") as _sd_fh:
        _sd_start = dict(_kv.split(b"=", 1) for _kv in _sd_fh.read().split(b"\\0") if b"=" in _kv)
    _sd_before = {{_n: (_sd_start[_n.encode()].decode("utf-8", "surrogateescape") if _n.encode() in _sd_start else None)
                  for _n in _sd_names}}
except OSError:
    pass
_sd_here = _sd_os.path.dirname(_sd_os.path.abspath(__file__))
_sd_path = {hint}
if not (_sd_path and _sd_os.path.isfile(_sd_path)
        and _sd_os.path.dirname(_sd_os.path.abspath(_sd_path)) != _sd_here):
    _sd_spec = _sd_m.PathFinder.find_spec(
        "sitecustomize", [p for p in _sd_sys.path if _sd_os.path.abspath(p or ".") != _sd_here])
    _sd_path = _sd_spec.origin if _sd_spec is not None else None
if _sd_path:
    with open(_sd_path, encoding="utf-8") as _sd_fh:
        exec(compile(_sd_fh.read(), _sd_path, "exec"))
try:  # usercustomize runs next in site's order: run it now (site's own import is then a no-op), then restore
    import site as _sd_site
    if _sd_site.ENABLE_USER_SITE:
        import usercustomize  # noqa: F401
except ImportError:
    pass
for _sd_n, _sd_v in _sd_before.items():
    if _sd_v is None:
        _sd_os.environ.pop(_sd_n, None)
    else:
        _sd_os.environ[_sd_n] = _sd_v
'''


def shadow_sitecustomize(names: list[str], original: str | None) -> str:
    """The shadow module's text: it runs `original` (else the next sitecustomize on sys.path) and then gives
    each of `names` back the value it had before (removed when it had none)."""
    return _SHADOW.format(names=", ".join(names), names_json=json.dumps(list(names)), hint=repr(original))


def _original_sitecustomize(ctx: ToolContext, cfg: LaunchConfig) -> str | None:
    """Where the server's interpreter finds sitecustomize today (None: it has none)."""
    python = cfg.python or "python3"
    env = [f"PYTHONPATH={cfg.env['PYTHONPATH']}"] if cfg.env.get("PYTHONPATH") else []
    res = ctx.host.run(["env", *env, python, "-c",
                        "import importlib.util as u; s = u.find_spec('sitecustomize'); print(s.origin if s else '')"],
                       check="ignore", timeout=60)
    path = res.stdout.strip().splitlines()[-1] if res.ok and res.stdout.strip() else ""
    return path or None


def _edit_env_prefix(tokens: list[str], env: dict[str, str], unset: list[str]) -> list[str]:
    """A launch line's own leading `K=V` assignments would undo the trial's env/unset: edit them the same way."""
    start = _flags_start(tokens)
    out: list[str] = []
    for i, t in enumerate(tokens):
        m = _ENV_ASSIGN.match(t) if i < start else None
        if m and m.group(1) in unset:
            continue
        if m and m.group(1) in env:
            t = f"{m.group(1)}={env[m.group(1)]}"
        out.append(t)
    return out


def apply_revert(cfg: LaunchConfig, revert: Revert, ctx: ToolContext, *, repo: str | None = None,
                 label: str = "revert", written: list[str] | None = None) -> LaunchConfig:
    """`cfg` with `revert` applied; what it writes on the host is appended to `written` (see `remove_written`)."""
    written = written if written is not None else []
    safe = _LABEL.sub("-", label).strip(".-")[:80] or "revert"
    env = {k: v for k, v in cfg.env.items() if k not in revert.unset}
    env.update(revert.env)
    unset = list(dict.fromkeys([*cfg.unset, *revert.unset]))
    unset = [u for u in unset if u not in revert.env]
    command: str | list[str] = cfg.command
    if revert.argv_set or revert.env or revert.unset:
        command = _edit_env_prefix(set_flags(cfg.command, revert.argv_set), revert.env, unset)
    tree = cfg.tree
    if revert.drop_patches:
        if not repo:
            raise ToolRetry("reverting a patch needs the repository (--repo) to build a trial tree from")
        src = prepare_source(ctx, repo)
        drop = set(revert.drop_patches)
        unknown = sorted(drop - set(src.changes_paths()))
        if unknown:
            raise ToolRetry(f"not changes of {repo}: {', '.join(unknown[:5])}")
        built = build_tree(ctx, TreeInput(repo=repo, name=safe, files=[p for p in src.changes_paths() if p not in drop]))
        written.append(f"tree:{built.name}")
        tree = built.path
    if revert.undo_sitecustomize:
        folder = f"{ctx.run_dir}/revert/{safe}"
        original = _original_sitecustomize(ctx, cfg)
        ctx.host.run(["mkdir", "-p", "--", folder])
        written.append(folder)
        ctx.host.put(shadow_sitecustomize(revert.undo_sitecustomize, original).encode(), f"{folder}/sitecustomize.py",
                     mode=0o644)
        env["PYTHONPATH"] = f"{folder}:{env['PYTHONPATH']}" if env.get("PYTHONPATH") else folder
    return cfg.model_copy(update={"command": command, "env": env, "unset": unset, "tree": tree,
                                  "label": f"{cfg.label}-{safe}" if cfg.label else safe})


def remove_written(ctx: ToolContext, written: list[str]) -> list[str]:
    """Remove what `apply_revert` wrote (only below the run's folder and trees); the paths removed."""
    gone: list[str] = []
    base = ctx.run_dir.rstrip("/") + "/revert/"
    for item in reversed(written):
        if item.startswith("tree:"):
            gone += remove_tree(ctx, item[5:]).removed
        elif item.startswith(base) and ".." not in item:
            ctx.host.run(["rm", "-rf", "--", item], check="ignore")
            gone.append(item)
    written.clear()
    return gone


@contextmanager
def reverted(ctx: ToolContext, cfg: LaunchConfig, revert: Revert, *, repo: str | None = None,
             label: str = "revert") -> Iterator[LaunchConfig]:
    """`apply_revert` for the length of a `with` block; what it wrote is removed afterwards, whatever happens."""
    written: list[str] = []
    try:
        yield apply_revert(cfg, revert, ctx, repo=repo, label=label, written=written)
    finally:
        remove_written(ctx, written)


def describe(revert: Revert) -> str:
    """One line: what a trial changes (for decisions and reports)."""
    parts = [f"{k}={shlex.quote(v)}" for k, v in revert.env.items()]
    parts += [f"unset {k}" for k in revert.unset]
    parts += [f"undo {k} from sitecustomize" for k in revert.undo_sitecustomize]
    parts += [f"{_spelling(d)} removed" if v is None else f"{_spelling(d)} {v}".rstrip() for d, v in revert.argv_set.items()]
    parts += [f"without {p}" for p in revert.drop_patches]
    return ", ".join(parts) or "nothing"
