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
from specdoctor.tools.remote import remote_command, remote_text

__all__ = ["HookSet", "PROBE", "PROBE_SH", "StartupHooks", "observe_startup_hooks", "parse_hooks", "probe_env"]

PROBE = remote_text("startup_hooks_probe.py")


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
PROBE_SH = remote_command("startup_hooks_probe.sh")


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
