"""What a tool sends to the host is its script file under specdoctor/tools/remote/, byte for byte.

The files are read here straight from the source tree (not through the loader the tools use), and the commands are
caught by a host that records every call, so a loader that trimmed or re-encoded a script would fail here.
"""

from __future__ import annotations

import contextlib
import shlex
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from specdoctor.host.mock import MockHost
from specdoctor.inference import get_engine
from specdoctor.toolkit import ToolContext

REMOTE = Path(__file__).resolve().parents[2] / "specdoctor" / "tools" / "remote"


def _file(name: str) -> str:
    """The script as a reader sees it; a one-line shell script is sent without its file's final newline."""
    text = (REMOTE / name).read_text()
    return text.removesuffix("\n") if name.endswith(".sh") else text


def _sent(call: Callable[[ToolContext], Any]) -> list[str]:
    """Every piece of text the call sent: whole commands, argv items and environment values."""
    seen: list[tuple[list[str] | str, dict[str, str]]] = []

    def handler(cmd: list[str] | str, env: dict[str, str], cwd: str | None) -> str:
        seen.append((cmd, env))
        return ""

    ctx = ToolContext(host=MockHost(handler), auto_approve=True, run_engine=get_engine("sglang", "0.5.9"))
    with contextlib.suppress(Exception):  # the empty answers may fail the tool after it sent its script
        call(ctx)
    out: list[str] = []
    for cmd, env in seen:
        out += [cmd] if isinstance(cmd, str) else list(cmd)
        out += list(env.values())
    return out


def _fingerprint(ctx: ToolContext) -> None:
    from specdoctor.tools.environment.fingerprint import FingerprintInput, fingerprint

    fingerprint(ctx, FingerprintInput(repo="/srv/sglang", python="python3"))


def _box_state(ctx: ToolContext) -> None:
    from specdoctor.tools.environment.deltas import read_box_state

    read_box_state(ctx)


def _lock(ctx: ToolContext) -> None:
    from specdoctor.tools.checkout.checkout_lock import acquire_lock

    acquire_lock(ctx, "/srv/sglang", "run-1")


def _port_hold(ctx: ToolContext) -> None:
    from specdoctor.tools.serving.port_hold import hold_port

    hold_port(ctx.host, 30000, "127.0.0.1", run_id="run-1", seconds=5)


def _origin(ctx: ToolContext) -> None:
    from specdoctor.tools.serving.server import resolve_origin

    resolve_origin(ctx.host, "python3", {}, None, "sglang")


def _injected(ctx: ToolContext) -> None:
    from specdoctor.tools.serving.server import _injected as injected

    injected(ctx.host, "python3", None)


def _hooks(ctx: ToolContext) -> None:
    from specdoctor.tools.environment.startup_hooks import observe_startup_hooks

    observe_startup_hooks(ctx.host, "python3")


def _gpu_readings(ctx: ToolContext) -> None:
    from specdoctor.tools.environment.hardware_probe import _read_gpus

    _read_gpus(ctx)


CASES: list[tuple[str, Callable[[ToolContext], Any]]] = [
    ("gpu_readings.sh", _gpu_readings),
    ("fingerprint.sh", _fingerprint), ("python_facts.py", _fingerprint), ("box_state.sh", _box_state),
    ("lock_acquire.sh", _lock), ("port_holder.py", _port_hold), ("engine_origin.py", _origin),
    ("injected_env.sh", _injected), ("startup_hooks_probe.py", _injected), ("startup_hooks_probe.sh", _hooks),
    ("startup_hooks_probe.py", _hooks),
]


@pytest.mark.parametrize(("name", "call"), CASES, ids=[f"{n}-{c.__name__}" for n, c in CASES])
def test_the_tool_sends_its_script_file_byte_for_byte(name: str, call: Callable[[ToolContext], Any]) -> None:
    script = _file(name)
    sent = _sent(call)
    # as the command, an argv item or an env value; or quoted whole inside a command line (`python -c '...'`)
    assert any(script == s or shlex.quote(script) in s for s in sent), f"remote/{name} was not sent as in its file"


def test_a_script_that_holds_another_holds_it_verbatim() -> None:
    # fingerprint.sh runs the code digest inline, and the injected-env script ends with the start-up hook probe:
    # one round-trip each, so the included text is a copy that must not drift from its own file
    assert "(" + _file("code_digest.sh") + ")" in _file("fingerprint.sh")
    assert _file("injected_env.sh").endswith("echo @@hooks; " + _file("startup_hooks_probe.sh"))


def test_the_query_fields_the_parsers_read_are_the_ones_the_scripts_ask_for() -> None:
    from specdoctor.tools.environment.deltas import _GPU_FIELDS
    from specdoctor.tools.environment.fingerprint import _QUERY
    from specdoctor.tools.environment.hardware_probe import _Q, _R, _R_OLD

    readings = _file("gpu_readings.sh")
    assert "--query-gpu=" + ",".join(_Q) + " " in readings
    assert "--query-gpu=index," + ",".join(_R) + " " in readings and ",".join(_R_OLD) + " " in readings

    assert "--query-gpu=" + ",".join(_QUERY) + " " in _file("fingerprint.sh")
    assert "--query-gpu=" + ",".join(_GPU_FIELDS) + " " in _file("box_state.sh")
