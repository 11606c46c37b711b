"""Ports for the twin's servers and sshd daemons: the scenario's own port when free, else one outside the kernel's
ephemeral range (an outgoing connection can take an ephemeral port between our check and the server's bind).

A port is only checked here, not held: the caller binds it later. So a port handed out is never handed out again by
this process (a fleet picks its sshd and server ports before starting any), and parallel test workers draw from
disjoint stripes of the range (SPECDOCTOR_SIM_PORT_STRIPE="i/n")."""

from __future__ import annotations

import os
import random
import socket
import threading

from specdoctor.errors import ScenarioError

__all__ = ["free_port"]

_RANGE = (10000, 19999)
"""Below the ephemeral range (32768-60999 on Linux) and below the 20000-29999 the trial launches pick from."""

_given: set[int] = set()
_lock = threading.Lock()


def _bindable(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _stripe() -> tuple[int, int]:
    """(i, n): this process takes the ports p with p % n == i; (0, 1) outside parallel tests."""
    raw = os.environ.get("SPECDOCTOR_SIM_PORT_STRIPE", "")
    try:
        i, n = (int(x) for x in raw.split("/"))
    except ValueError:
        return 0, 1
    return (i % n, n) if n > 0 else (0, 1)


def _take(port: int) -> bool:
    with _lock:
        if port in _given or not _bindable(port):
            return False
        _given.add(port)
        return True


def free_port(preferred: int = 0) -> int:
    """`preferred` (shifted by SPECDOCTOR_SIM_PORT_OFFSET, so parallel test workers do not race for the same one)
    when it is free and not handed out before, else a random such port in 10000-19999 (in this worker's stripe)."""
    offset = int(os.environ.get("SPECDOCTOR_SIM_PORT_OFFSET", "0") or 0)
    if preferred and 0 < preferred + offset < 65536 and _take(preferred + offset):
        return preferred + offset
    i, n = _stripe()
    rng = random.Random()
    for _ in range(500):
        port = rng.randint(*_RANGE)
        port -= (port - i) % n
        if port >= _RANGE[0] and _take(port):
            return port
    raise ScenarioError("no free TCP port on 127.0.0.1 between 10000 and 19999")
