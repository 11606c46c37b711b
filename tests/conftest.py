"""Session-wide test fixtures: a real OpenSSH server on loopback (`sshd`) and strict LangGraph checkpoints.

How to use `sshd` in your tests (it is session-scoped: one server for the whole run, start-up ~0.1 s):

    def test_something(sshd):
        with sshd.connect() as host:                     # an SSHHost, host key verified, key-only login
            assert host.run(["true"]).ok
        with sshd.connect(base_env={"PATH": ...}) as h:  # any SSHHost keyword can be added/overridden
            ...

Attributes of the yielded `specdoctor.testing.SSHServer`:
  .host ('127.0.0.1'), .port, .user (the unprivileged 'sdtest' when tests run as root, else you),
  .key_path (client private key), .host_key_path (server private key; '.pub' beside it),
  .known_hosts (a known_hosts file holding the server key for '[127.0.0.1]:PORT'),
  .workdir (a 0o777 temp folder the ssh user can write: put "remote" files there),
  .python (this interpreter, `sys.executable`, runnable by the ssh user),
  .ssh_argv(*opts) (OpenSSH client argv reaching the server, e.g. for GIT_SSH_COMMAND),
  .connect(**kw) -> SSHHost, .log_path (sshd's stderr, for debugging refused logins).

Notes: the ssh user's HOME is /tmp. `git config --system safe.directory '*'` is set, so the ssh user can
run git in repos your test created as root (make them readable: `tmp_path` is 0700, use `sshd.workdir`
or chmod). The remote side gets sshd's minimal environment (PATH=/usr/bin:/bin:...), not yours.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from collections.abc import Iterator

import pytest

from specdoctor.config import OPTION_ENV
from specdoctor.testing import SSHServer, start_sshd

# Nested pydantic models in checkpoints otherwise log warnings, which fail a warnings-as-errors run.
os.environ["LANGGRAPH_STRICT_MSGPACK"] = "true"

# The developer's own specdoctor config file and SPECDOCTOR_* defaults must not change what the tests see.
for _var in [*OPTION_ENV.values(), "SPECDOCTOR_CONFIG"]:
    os.environ.pop(_var, None)
os.environ["XDG_CONFIG_HOME"] = tempfile.mkdtemp(prefix="specdoctor-test-xdg-")
# Parallel workers (pytest-xdist, `-n`): each worker's simulated servers prefer their own port range.
if os.environ.get("PYTEST_XDIST_WORKER", "").startswith("gw"):
    _worker = int(os.environ["PYTEST_XDIST_WORKER"][2:])
    os.environ["SPECDOCTOR_SIM_PORT_OFFSET"] = str(100 * (_worker + 1))
    # ... and draw their random ports from disjoint stripes (a port is checked, not held, until its server binds it).
    os.environ["SPECDOCTOR_SIM_PORT_STRIPE"] = f"{_worker}/{os.environ.get('PYTEST_XDIST_WORKER_COUNT', '1')}"
atexit.register(shutil.rmtree, os.environ["XDG_CONFIG_HOME"], True)


@pytest.fixture
def trial_envs_reached():
    """Call after an investigation (SPECDOCTOR_HOME per test): asserts every revert trial's environment reached
    its workers at the reference value; returns how many trials were checked."""
    return _trial_envs_reached_the_workers


def _trial_envs_reached_the_workers() -> int:
    """The last run's revert trials: their workers had each reverted variable at its reference value, read in
    /proc (one the good run lacked: absent; one nccl.conf sets: NCCL's documented default, set at launch)."""
    from specdoctor.engine.graph import compile_playbook
    from specdoctor.engine.playbook_check import load_playbook
    from specdoctor.engine.runs import list_records, open_checkpointer

    rec = list_records()[-1]
    with open_checkpointer(rec.checkpoint or None) as saver:
        app = compile_playbook(load_playbook(rec.playbook), checkpointer=saver)
        values = dict(app.get_state({"configurable": {"thread_id": rec.run_id}}).values)
    lists = [r["output"]["deltas"] for r in (values.get("results") or {}).values()
             if isinstance(r.get("output"), dict) and isinstance(r["output"].get("deltas"), list)]
    deltas = {d["name"]: d for d in (lists[-1] if lists else []) if d["kind"] == "env"}
    checked = 0
    for key, res in (values.get("results") or {}).items():
        if not key.startswith("env_attr"):
            continue
        checked += 1
        assert res["status"] == "ok" and res["output"]["reached"], (key, res["summary"])
        assert not res["output"]["unreadable"], key
        for row in res["output"]["rows"]:
            d = deltas[row["name"]]
            set_at_launch = ((d.get("revert") or {}).get("env") or {}).get(row["name"])
            assert row["expected"] == d["reference"] or (d["reference"] is None and row["expected"] == set_at_launch)
            assert row["workers"] and set(row["workers"].values()) == {row["expected"]}, (key, row)
    return checked


@pytest.fixture(scope="session")
def sshd() -> Iterator[SSHServer]:
    """A real `sshd -D -e` on 127.0.0.1:<free port>, key-only auth, stopped by PID at the end of the session."""
    server = start_sshd()
    try:
        yield server
    finally:
        server.stop()


@pytest.hookimpl(trylast=True)  # after -k/-m deselection: the slices are of the tests that run
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under xdist, each worker's slice starts with its share of the slow tests (tests/xdist_order.py says why).
    Every worker computes the same order from the same collection, as xdist requires."""
    workers = int(getattr(config, "workerinput", {}).get("workercount", 0))  # set in xdist's workers only
    if workers < 2:
        return
    from xdist_order import arrange, load_weights  # tests/ is on sys.path (rootdir conftest, no __init__)

    units: dict[str, list[pytest.Item]] = {}
    for it in items:  # a module whose tests share a module- or class-scoped fixture is one unit
        info = getattr(it, "_fixtureinfo", None)
        shared = info is not None and any(defs and defs[-1].scope in ("module", "class", "package")
                                          for defs in info.name2fixturedefs.values())
        units.setdefault(it.nodeid.split("::")[0] if shared else it.nodeid, []).append(it)
    weights = load_weights()
    items[:] = arrange(list(units.values()), lambda it: weights.get(it.nodeid, 0.0), workers)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "packaging: builds the wheel and runs its CLI from a fresh venv (~30 s)")


@pytest.fixture
def free_gpus():
    """Call with a host before a tool launches a server: stops the user's running server through the tools, the way
    an embedding agent must on a box whose cards that server fills (a second one does not fit beside it)."""
    return _free_gpus


def _free_gpus(host) -> list[int]:
    from specdoctor.parsers.sglang import parse_launch_command
    from specdoctor.toolkit import ToolContext, registry

    ctx = ToolContext(host=host, run_id="free-gpus", auto_approve=True)
    port = parse_launch_command(host.hints.launch).port
    found = registry.call(ctx, "find_server_processes", {"port": port})
    assert found.ok, found.summary
    stopped: list[int] = []
    for s in found.output["servers"]:
        if s["port"] != port:
            continue
        pids = [w["pid"] for w in s["workers"]]
        rec = registry.call(ctx, "inspect_user_server", {"pid": s["main"]["pid"], "pids": pids, "port": port})
        assert rec.ok, rec.summary
        stop = registry.call(ctx, "stop_user_server", {"pid": rec.output["pid"], "starttime": rec.output["starttime"],
                                                       "pids": rec.output["pids"], "grace_s": 5})
        assert stop.ok, stop.summary
        stopped.append(rec.output["pid"])
    assert stopped, f"no server of the user's on port {port}"
    return stopped
