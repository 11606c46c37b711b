"""The tmux or screen session a server runs in: what names it, whether it still exists, how to start in it again."""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from typing import Literal

from pydantic import BaseModel, Field

from specdoctor.host.base import Host, Raw

__all__ = ["TerminalSession", "LOCATION_VARS", "session_of", "session_state", "start_in_session_script",
           "SessionState"]

# Variables that say WHERE a process runs (which tmux pane, which screen window), not what it is: a server started
# again in a new window carries the new window's values, and its identity ignores them.
LOCATION_VARS = ("TMUX", "TMUX_PANE", "STY", "WINDOW")

SessionState = Literal["alive", "session-gone", "server-gone"]


class TerminalSession(BaseModel):
    """Where a server's terminal lives: tmux (socket, session, window) or screen (socket folder, STY, window)."""

    kind: Literal["tmux", "screen"]
    socket: str = Field(description="tmux: the server's socket path (from $TMUX); screen: $SCREENDIR, '' for "
                                    "screen's default socket folder.")
    session: str = Field(description="tmux: the session name; screen: $STY (PID.NAME).")
    window: str | None = Field(default=None, description="tmux: the window index; screen: $WINDOW.")
    server_pid: int | None = Field(default=None, description="The tmux server / SCREEN process (an ancestor).")

    @property
    def name(self) -> str:
        """The name the user attaches with (`tmux attach -t NAME`, `screen -r NAME`)."""
        return self.session.split(".", 1)[1] if self.kind == "screen" and "." in self.session else self.session

    def client(self) -> str:
        """The client command that reaches this session's server, as a shell prefix."""
        if self.kind == "tmux":
            return f"tmux -S {shlex.quote(self.socket)}"
        return (f"SCREENDIR={shlex.quote(self.socket)} " if self.socket else "") + "screen"

    def attach_hint(self) -> str:
        """How the user finds it again."""
        if self.kind == "tmux":
            default = self.socket.endswith("/default")  # tmux's own socket: a plain `tmux attach` reaches it
            return f"tmux {'' if default else '-S ' + shlex.quote(self.socket) + ' '}attach -t {shlex.quote(self.name)}"
        return f"{self.client()} -r {shlex.quote(self.session)}"

    def where(self) -> str:
        return f"{self.kind} session {self.name!r}" + (f" (window {self.window})" if self.window else "")


def session_of(host: Host, kind: str, env: Mapping[str, str], ancestors: set[int]) -> tuple[TerminalSession | None,
                                                                                            str]:
    """(the session, '') read from the server's own variables ($TMUX/$TMUX_PANE, $STY/$WINDOW) — or (None, why).

    Read-only. The variable must name a tmux server / SCREEN process that is one of the server's ancestors: a value
    inherited from elsewhere (a shell started inside tmux, then detached with nohup) does not make it a tmux server.
    """
    if kind == "tmux":
        tmux, pane = env.get("TMUX", ""), env.get("TMUX_PANE", "")
        parts = tmux.split(",")
        if len(parts) < 2 or not parts[1].isdigit() or not pane:
            return None, "its environment names no tmux pane ($TMUX, $TMUX_PANE)"
        if int(parts[1]) not in ancestors:
            return None, f"$TMUX names tmux pid {parts[1]}, not one of its parents"
        res = host.run(["tmux", "-S", parts[0], "display-message", "-p", "-t", pane,
                        "#{session_name}\t#{window_index}"], check="ignore", timeout=30)
        name, _, window = res.stdout.strip().partition("\t")
        if not res.ok or not name:
            return None, f"tmux did not answer for pane {pane}: {(res.stderr or res.stdout).strip()[:120]}"
        return TerminalSession(kind="tmux", socket=parts[0], session=name, window=window or None,
                               server_pid=int(parts[1])), ""
    if kind == "screen":
        sty = env.get("STY", "")
        pid, _, name = sty.partition(".")
        if not pid.isdigit() or not name:
            return None, "its environment names no screen session ($STY)"
        if int(pid) not in ancestors:
            return None, f"$STY names SCREEN pid {pid}, not one of its parents"
        found = TerminalSession(kind="screen", socket=env.get("SCREENDIR", ""), session=sty,
                                window=env.get("WINDOW") or None, server_pid=int(pid))
        if session_state(host, found) != "alive":  # e.g. another user's screen: this user's `screen -ls` lacks it
            return None, f"`{found.client()} -ls` does not list {sty} for this user"
        return found, ""
    return None, f"{kind} is not a terminal session"


def session_state(host: Host, s: TerminalSession) -> SessionState:
    """alive (a window can be added), session-gone (tmux server up, the session ended), server-gone."""
    c = s.client()
    if s.kind == "tmux":
        target = shlex.quote("=" + s.session)
        script = (f"if {c} has-session -t {target} 2>/dev/null; then echo alive; "
                  f"elif {c} list-sessions >/dev/null 2>&1; then echo session-gone; else echo server-gone; fi")
    else:  # one SCREEN process per session: the session gone is its server gone
        script = (f"if {c} -ls {shlex.quote(s.session)} 2>/dev/null | grep -qF {shlex.quote(s.session)}; "
                  "then echo alive; else echo server-gone; fi")
    out = host.run(Raw(script), check="ignore", timeout=30).stdout.strip()
    return out if out in ("alive", "session-gone") else "server-gone"  # type: ignore[return-value]


def start_in_session_script(s: TerminalSession, launcher: str, cwd: str | None, *, new_session: bool,
                            pidfile: str) -> Raw:
    """A script that runs `sh LAUNCHER` in a new window of the session (or a new session of the same name) and
    prints the window's pid. The new window becomes the current one: `tmux attach` / `screen -r` shows it."""
    c = s.client()
    at = f" -c {shlex.quote(cwd)}" if cwd else ""
    if s.kind == "tmux":
        how = (f"new-session -d -s {shlex.quote(s.name)}" if new_session
               else f"new-window -t {shlex.quote('=' + s.session + ':')}")
        start = f"{c} {how}{at} -P -F '#{{pane_pid}}' {shlex.quote('exec sh ' + shlex.quote(launcher))}"
    else:
        start = f"{c} -S {shlex.quote(s.session)} -X screen -t {shlex.quote(s.name)} sh {shlex.quote(launcher)}"
    # The launcher writes its own pid ($$, kept through its exec) once it has deleted itself: screen prints nothing
    # about the window it made, and a tmux pane_pid alone does not say the launcher was read.
    f = shlex.quote(pidfile)
    return Raw(f"{start} && i=0 && while [ ! -s {f} ] && [ $i -lt 100 ]; do i=$((i+1)); sleep 0.1; done; "
               f"cat {f} && rm -f {f}")
