"""Two SGLang servers on one box: every tool examines exactly the one meant (port, else checkout), never the first."""

from __future__ import annotations

import pytest

from specdoctor.host import open_host
from specdoctor.parsers.sglang import parse_launch_command
from specdoctor.toolkit import ToolContext, registry


@pytest.fixture(scope="module")
def two():
    """The seed box, plus a second stand-in server from another sandbox (its own checkout and port)."""
    with open_host("sim:seed") as a, open_host("sim:no-regression") as b:
        yield a, b


def _ctx(host) -> ToolContext:
    return ToolContext(host=host, run_id="identity", auto_approve=True)


def _port(host) -> int:
    port = parse_launch_command(host.hints.launch).port
    assert port is not None
    return port


def _main(host, **query) -> int:
    res = registry.call(_ctx(host), "find_server_processes", {**query, "exactly_one": True})
    assert res.ok, res.summary
    assert len(res.output["servers"]) == 1
    return res.output["servers"][0]["main"]["pid"]


def test_port_or_checkout_picks_exactly_that_server(two):
    a, b = two
    assert _port(a) != _port(b)
    by_port_a, by_port_b = _main(a, port=_port(a)), _main(a, port=_port(b))
    assert by_port_a != by_port_b
    assert _main(a, repo=a.hints.repo) == by_port_a  # the process whose cwd is the checkout
    assert _main(a, repo=b.hints.repo) == by_port_b
    cwd = registry.call(_ctx(a), "find_server_processes", {"port": _port(b)}).output["servers"][0]["cwd"]
    assert cwd == b.hints.repo


def test_several_and_no_hint_is_a_one_line_error_listing_them(two):
    a, b = two
    res = registry.call(_ctx(a), "find_server_processes", {"exactly_one": True})
    assert res.status == "error" and res.retryable
    assert "\n" not in res.summary and "nothing says which" in res.summary
    assert f"port {_port(a)} " in res.summary and f"port {_port(b)} " in res.summary
    listing = registry.call(_ctx(a), "find_server_processes", {})  # a plain listing still lists them all
    assert {_port(a), _port(b)} <= {s["port"] for s in listing.output["servers"]}


def test_no_server_on_that_port_or_checkout_says_so(two, tmp_path):
    a, _ = two
    res = registry.call(_ctx(a), "find_server_processes", {"port": 1, "exactly_one": True})
    assert res.status == "no_data" and "on port 1" in res.summary
    res = registry.call(_ctx(a), "find_server_processes", {"repo": str(tmp_path), "exactly_one": True})
    assert res.status == "no_data" and f"running from {tmp_path}" in res.summary


def test_propagation_gates_and_fingerprint_examine_the_server_meant(two):
    a, b = two
    main_b = _main(a, port=_port(b))
    prop = registry.call(_ctx(a), "check_env_propagation", {"repo": b.hints.repo})
    assert prop.ok and prop.output["main_pid"] == main_b and prop.output["port"] == _port(b)
    assert registry.call(_ctx(a), "check_env_propagation", {}).status == "error"  # which one? no guess
    gates = registry.call(_ctx(a), "scan_feature_gates", {"repo": b.hints.repo})
    assert gates.ok and gates.output["process_source"] == "find_server_processes"
    fp = registry.call(_ctx(a), "fingerprint", {"repo": b.hints.repo})
    assert fp.ok and fp.output["worker_env"] and not any("nothing says which" in p for p in fp.output["problems"])
    fp = registry.call(_ctx(a), "fingerprint", {})
    assert fp.ok and fp.output["worker_env"] == {}  # hardware facts still recorded, no server guessed
    assert any("nothing says which" in p for p in fp.output["problems"])
