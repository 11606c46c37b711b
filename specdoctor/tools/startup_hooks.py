"""Which start-up hook of the server's interpreter sets which environment variable, found by running them.

A variable a worker has and its launch shell did not was named from a fixed list of places (a regex over
sitecustomize.py); anything else was "injected after start-up (source not found)", which no trial can revert. Python
runs more at start-up than sitecustomize: every `.pth` file of every site directory (its `import` lines are code),
then sitecustomize, then usercustomize. This runs the server's own interpreter with `-S` and replays the `site`
machinery one stage at a time — each `.pth` file of the user and site directories in site's order, sitecustomize,
usercustomize — under a minimal environment (PATH, HOME), recording every variable a stage sets or changes and the
file that did it. It runs the same hooks any `python` on that box runs; nothing is written.
"""

from __future__ import annotations

import json

from pydantic import BaseModel, Field

from specdoctor.host.base import Host

__all__ = ["HookSet", "PROBE", "PROBE_SH", "StartupHooks", "observe_startup_hooks", "parse_hooks", "probe_env"]

PROBE = r'''
import importlib.util, json, os, site, sys
out = []
def stage(where, fn):
    before = dict(os.environ)
    try:
        fn()
    except BaseException as exc:
        out.append({"source": where, "error": type(exc).__name__ + ": " + str(exc)[:120]})
    after = dict(os.environ)
    for k in sorted(set(before) | set(after)):
        if before.get(k) != after.get(k):
            out.append({"source": where, "name": k, "value": after.get(k)})
known = site.removeduppaths()
if hasattr(site, "venv"):  # reads pyvenv.cfg and sets PREFIXES; its own addsitepackages call is replayed below
    real, site.addsitepackages = site.addsitepackages, lambda known_paths, prefixes=None: known_paths
    try:
        known = site.venv(known)
    finally:
        site.addsitepackages = real
if site.ENABLE_USER_SITE is None:
    site.ENABLE_USER_SITE = site.check_enableusersite()
dirs = ([site.getusersitepackages()] if site.ENABLE_USER_SITE else []) + list(site.getsitepackages())
for d in dirs:
    if not os.path.isdir(d):
        continue
    if os.path.normcase(d) not in known:
        sys.path.append(d)
        known.add(os.path.normcase(d))
    for name in sorted(n for n in os.listdir(d) if n.endswith(".pth") and not n.startswith(".")):
        stage(os.path.join(d, name), lambda d=d, name=name: site.addpackage(d, name, known))
for mod in ("sitecustomize", "usercustomize"):
    if mod == "usercustomize" and not site.ENABLE_USER_SITE:
        continue
    spec = importlib.util.find_spec(mod)
    if spec is not None and spec.origin:
        stage(spec.origin, lambda mod=mod: __import__(mod))
print("@@hooks-json " + json.dumps(out))
'''


class HookSet(BaseModel):
    """One variable a start-up hook set (value None: it removed it)."""

    name: str
    value: str | None
    source: str = Field(description="The file that set it: a .pth file, sitecustomize.py or usercustomize.py.")


class StartupHooks(BaseModel):
    """What the interpreter's start-up hooks do to the environment, stage by stage."""

    sets: list[HookSet] = Field(default_factory=list)
    problems: list[str] = Field(default_factory=list)

    def by_name(self) -> dict[str, HookSet]:
        """The last hook to set each variable wins, as in the process."""
        return {s.name: s for s in self.sets}


# A shell snippet for a host script whose environment holds probe_env(...) (the interpreter, PROBE, its PATH).
PROBE_SH = 'env -i PATH="${SD_PATH:-/usr/local/bin:/usr/bin:/bin}" HOME="$HOME" "$SD_PY" -S -c "$SD_PROBE" 2>&1; true'


def probe_env(python: str, path: str | None = None) -> dict[str, str]:
    """The variables PROBE_SH reads: the interpreter, the probe, and the PATH its hooks run with."""
    return {"SD_PY": python, "SD_PROBE": PROBE, **({"SD_PATH": path} if path else {})}


def parse_hooks(text: str) -> StartupHooks:
    """The probe's output (its `@@hooks-json` line) as StartupHooks; a problem when it did not run."""
    line = next((ln for ln in text.splitlines() if ln.startswith("@@hooks-json ")), None)
    if line is None:
        tail = text.strip()[-160:]
        return StartupHooks(problems=["start-up hooks not observed" + (f": {tail}" if tail else "")])
    out = StartupHooks()
    try:
        items = json.loads(line[len("@@hooks-json "):])
    except json.JSONDecodeError:
        return StartupHooks(problems=["start-up hooks not observed: unreadable probe output"])
    for item in items:
        if "error" in item:
            out.problems.append(f"{item['source']}: {item['error']}")
        elif "name" in item:
            out.sets.append(HookSet(name=item["name"], value=item.get("value"), source=item["source"]))
    return out


def observe_startup_hooks(host: Host, python: str, path: str | None = None) -> StartupHooks:
    """Run the interpreter's start-up hooks one at a time (see the module) and say which set what."""
    res = host.run(["sh", "-c", PROBE_SH], env=probe_env(python, path), check="ignore", timeout=60)
    return parse_hooks(res.stdout)
