"""Keep the user's port for the user's server while it is stopped: nothing else on the box takes it meanwhile.

While specdoctor runs its trials on the freed GPUs, the user's port is free; anything started then (another user's
server on SGLang's default port, a cron job) would take it, and the restart at the end would fail. A placeholder
process listens on the port and answers every request with a 503 that says why (a client sees "down, and why", never
a hang or a stranger's server), and is released just before the restart. It is tied to nothing on the controller: a crash leaves it, and `restore`/`resume`
release it before they bring the server back; a forgotten one exits by itself at its deadline. Its argv says what it
is (`ps` shows `... specdoctor-port-hold :PORT (for your server; ...)`).
"""

from __future__ import annotations

import posixpath
import shlex
import time

from pydantic import BaseModel, Field

from specdoctor.host.base import Host, Raw
from specdoctor.tools.remote import remote_text

__all__ = ["MARKER", "PortHold", "hold_port", "release_port", "holders"]

MARKER = "specdoctor-port-hold"

# Listens (so that no other server can bind the port, SO_REUSEADDR or not) and answers every connection with a 503
# that says why, so a client sees "down, and why" rather than a hang (then waits for the client to close first, so no
# TIME_WAIT is left on the port for the restart); its own session; exits at the deadline.
_HOLDER = remote_text("port_holder.py")


class PortHold(BaseModel):
    """The placeholder on the user's port, or why there is none."""

    port: int
    held: bool = False
    pid: int | None = None
    until: float | None = Field(default=None, description="Epoch seconds when it exits by itself.")
    note: str = ""


def _label(port: int, run_id: str) -> str:
    return f"{MARKER} :{port} (for your server; run {run_id}: specdoctor restore releases it)"


def holders(host: Host, port: int) -> list[int]:
    """Pids of the placeholders on `port` (by their argv, whoever started them: a crashed run's included)."""
    # The marker is assembled by the shell, so that this command's own argv (or a wrapping shell's) never matches.
    res = host.run(Raw(f"m={MARKER}; p={int(port)}; for d in /proc/[0-9]*; do [ \"${{d#/proc/}}\" = \"$$\" ] && continue; "
                       "c=$(tr '\\0' ' ' < $d/cmdline 2>/dev/null) || continue; "
                       "case \"$c\" in *\" $m :$p \"*) echo ${d#/proc/};; esac; done; true"), check="ignore")
    return [int(x) for x in res.stdout.split() if x.isdigit()]


def hold_port(host: Host, port: int, bind: str, *, run_id: str, seconds: float, python: str = "python3",
              log: str | None = None) -> PortHold:
    """Start the placeholder on `bind:port` (the user's server's own --host) for at most `seconds`; held=False with
    a note when the port could not be bound (already taken) or no interpreter runs it — the run goes on. A `log`
    given in a folder of its own (the run's, which may not exist yet) gets that folder made first."""
    until = time.time() + seconds
    out = PortHold(port=port, until=round(until, 1))
    if log and (folder := posixpath.dirname(log)):
        host.run(["mkdir", "-p", folder], check="ignore")
    log = log or f"/tmp/{MARKER}-{port}-{run_id}.log"
    why = (f"your inference server on this port is stopped while specdoctor run {run_id} measures on its GPUs; "
           "it is restarted as it was at the end (or by `specdoctor restore`)")
    # The label is an argument of its own (an interpreter shim may re-exec and drop an `exec -a` name).
    cmd = (f"nohup {shlex.quote(python)} -c {shlex.quote(_HOLDER)} {shlex.quote(_label(port, run_id))} "
           f"{shlex.quote(bind)} {int(port)} {until:.1f} {shlex.quote(why)} > {shlex.quote(log)} 2>&1 < /dev/null "
           "& echo $!")
    res = host.run(Raw(cmd), check="ignore")
    pid = int(res.stdout.split()[0]) if res.ok and res.stdout.split() and res.stdout.split()[0].isdigit() else None
    deadline = time.monotonic() + 10
    while pid is not None and time.monotonic() < deadline:
        text = host.run(["cat", log], check="ignore").stdout
        if "held" in text.split():
            out.held, out.pid = True, pid
            return out
        if not host.run(["kill", "-0", str(pid)], check="ignore").ok:
            out.note = "could not bind it: " + (text.strip().splitlines() or ["the placeholder exited"])[-1][:200]
            return out
        time.sleep(0.1)
    out.note = "the placeholder did not start" if pid is None else "the placeholder did not report within 10 s"
    if pid is not None:
        host.run(["kill", "-KILL", str(pid)], check="ignore")
    return out


def release_port(host: Host, port: int) -> list[int]:
    """Stop every placeholder on `port` and wait until the port is free of them; the pids released."""
    pids = holders(host, port)
    if not pids:
        return []
    host.run(["kill", "-TERM", *[str(p) for p in pids]], check="ignore")
    for _ in range(50):
        if not holders(host, port):
            break
        time.sleep(0.1)
    else:
        host.run(["kill", "-KILL", *[str(p) for p in holders(host, port)]], check="ignore")
    return pids
