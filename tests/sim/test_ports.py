"""The twin's port picker: a port is checked, not held, until its server binds it — so it must never hand out the
same port twice (a fleet picks its sshd and server ports before starting any), and parallel workers stay apart."""

from __future__ import annotations

import socket

from specdoctor.sim.ports import free_port


def test_a_port_is_never_handed_out_twice_even_unbound():
    picked = [free_port() for _ in range(300)]
    assert len(set(picked)) == len(picked)
    assert all(10000 <= p <= 19999 for p in picked)


def test_the_preferred_port_once_then_another(monkeypatch):
    monkeypatch.setenv("SPECDOCTOR_SIM_PORT_OFFSET", "0")
    with socket.socket() as s:  # a port surely free now: let the kernel find one, then release it
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    first, second = free_port(port), free_port(port)
    assert first == port and second != port and 10000 <= second <= 19999


def test_random_ports_stay_in_this_workers_stripe(monkeypatch):
    monkeypatch.setenv("SPECDOCTOR_SIM_PORT_STRIPE", "3/7")
    picked = [free_port() for _ in range(50)]
    assert {p % 7 for p in picked} == {3}
    monkeypatch.setenv("SPECDOCTOR_SIM_PORT_STRIPE", "garbage")
    assert 10000 <= free_port() <= 19999
