"""Did a trial's intended environment reach its workers? Each variable a trial changes, read in every TP worker.

A revert trial sets, unsets or shadows variables at launch; a launcher that drops them, a start-up hook that sets
them again or an engine that forces its own value can leave the workers as they were. Measured anyway, such a
trial reads as "this change does nothing". So before a trial is measured, each variable it meant to change is read
in every worker's /proc/PID/environ (a worker whose environ its process title overwrote: through the untitled
witness, as check_env_propagation does). A worker that cannot be read is said so, never counted as reached or not.
Secret-looking values are compared, never returned: the rows carry only the variables asked for.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from specdoctor.errors import NoData
from specdoctor.host.redact import REDACTED, is_secret_name
from specdoctor.toolkit import ToolContext, tool
from specdoctor.tools.serving.server import locate_servers, server_environs

__all__ = ["EnvReach", "TrialEnvCheck", "TrialEnvInput", "check_trial_env"]


class TrialEnvInput(BaseModel):
    """Arguments of check_trial_env: the server, and the environment its workers are meant to have."""

    port: int = Field(description="The trial server's port.")
    values: dict[str, str] = Field(default_factory=dict, description="Variables the workers must have, by value.")
    absent: list[str] = Field(default_factory=list, description="Variables the workers must not have.")


class EnvReach(BaseModel):
    """One variable: what the trial meant the workers to have, and what each readable worker has."""

    name: str
    expected: str | None = Field(description="The intended value (None: the variable absent).")
    workers: dict[str, str | None] = Field(default_factory=dict, description="Rank -> value (None: absent; a "
                                           "secret-looking one redacted); unreadable ranks are left out.")
    missed: dict[str, str | None] = Field(default_factory=dict, description="The readable workers whose value is "
                                          "not the intended one (compared before redaction).")

    def line(self) -> str:
        want = "unset" if self.expected is None else f"{self.name}={self.expected}"
        seen = ", ".join(f"{r}: {'unset' if v is None else v}" for r, v in sorted(self.missed.items()))
        return f"{self.name}: intended {want}, workers {seen}"


class TrialEnvCheck(BaseModel):
    """The intended variables of one trial as its workers have them."""

    reached: bool = Field(default=True, description="No readable worker contradicts the intended environment "
                          "(the unreadable ones are listed, never counted either way).")
    rows: list[EnvReach] = Field(default_factory=list)
    unreadable: list[str] = Field(default_factory=list, description="Ranks whose environment could not be read.")

    def summary(self) -> str:
        lost = [r.line() for r in self.rows if r.missed]
        if lost:
            return "the trial's environment did not reach the workers (/proc/PID/environ): " + "; ".join(lost)
        tail = f" (workers {', '.join(self.unreadable)} unreadable)" if self.unreadable else ""
        return f"trial environment reached every readable worker: {len(self.rows)} variables{tail}"


@tool(effect="read")
def check_trial_env(ctx: ToolContext, args: TrialEnvInput) -> TrialEnvCheck:
    """Check that a (trial) server's TP workers have the intended environment: each named variable at its value or
    absent, read in every worker's /proc/PID/environ. `reached` is false when a readable worker differs."""
    server = locate_servers(ctx.host, args.port, exactly_one=True).servers[0]
    envs = server_environs(ctx.host, server)
    workers = dict(envs.workers) or {"main": envs.main}  # a server without scheduler processes: the main is it
    out = TrialEnvCheck(unreadable=sorted(r for r, e in workers.items() if e is None))
    readable = {r: e for r, e in workers.items() if e is not None}
    if not readable:
        raise NoData("no worker's environment could be read" + "".join(f"; {n}" for n in envs.notes[:2]))
    expected: dict[str, str | None] = {**{n: None for n in args.absent}, **args.values}
    for name, value in sorted(expected.items()):
        seen = {r: e.get(name) for r, e in readable.items()}
        hide = (lambda v: REDACTED if v is not None else None) if is_secret_name(name) else (lambda v: v)
        out.rows.append(EnvReach(name=name, expected=hide(value), workers={r: hide(v) for r, v in seen.items()},
                                 missed={r: hide(v) for r, v in seen.items() if v != value}))
    out.reached = not any(r.missed for r in out.rows)
    return out
