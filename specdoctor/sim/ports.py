"""Ports for the twin's servers and sshd daemons: the scenario's own port when free, else one outside the kernel's
ephemeral range (an outgoing connection can take an ephemeral port between our check and the server's bind)."""

from __future__ import annotations

import os
import random
import socket

from specdoctor.errors import ScenarioError

__all__ = ["free_port"]

_RANGE = (10000, 19999)
"""Below the ephemeral range (32768-60999 on Linux) and below the 20000-29999 the trial launches pick from."""


def _bindable(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_port(preferred: int = 0) -> int:
    """`preferred` (shifted by SPECDOCTOR_SIM_PORT_OFFSET, so parallel test workers do not race for the same one)
    when it is free, else a random free port in 10000-19999."""
    offset = int(os.environ.get("SPECDOCTOR_SIM_PORT_OFFSET", "0") or 0)
    if preferred and 0 < preferred + offset < 65536 and _bindable(preferred + offset):
        return preferred + offset
    rng = random.Random()
    for _ in range(500):
        port = rng.randint(*_RANGE)
        if _bindable(port):
            return port
    raise ScenarioError("no free TCP port on 127.0.0.1 between 10000 and 19999")
