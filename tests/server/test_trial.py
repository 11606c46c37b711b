"""The trial primitive against real fake-SGLang processes on LocalHost: launch → healthy → measure → stop."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from specdoctor.toolkit import ToolResult, registry
from specdoctor.tools.serving.trial import LaunchConfig, LaunchFailed, measure, trial

from .helpers import FAKE, PYTHON

LAUNCH = ("python3 -m sglang.launch_server --model /m --tp 2 --port 30000 --attention-backend triton "
          "--speculative-algo EAGLE3 --speculative-draft /d --speculative-num-steps 3")


def _alive(pids: list[int]) -> list[int]:
    """Pids still running (zombies count as gone)."""
    out = []
    for pid in pids:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, IndexError):
            continue
        if state not in ("Z", "X"):
            out.append(pid)
    return out


def test_trial_launches_on_a_free_port_measures_and_stops(local_ctx):
    seen: dict[str, ToolResult] = {}
    config = LaunchConfig(command=LAUNCH, python=PYTHON, port=0, speculative=False, label="base",
                          env={"NCCL_PROTO": "LL"}, timeout_s=30)
    with trial(local_ctx, config, record=seen.__setitem__) as handle:
        assert handle.port != 30000 and handle.ready_seconds is not None and _alive(handle.pids)
        assert "--speculative-algorithm" not in " ".join(handle.launch.argv) and "--speculative" not in \
            " ".join(handle.launch.argv)
        m = measure(handle, runs=2, requests_per_run=1, max_new_tokens=8)
        pids = handle.pids
    assert len(m.samples) == 2 and m.median > 0 and m.port == handle.port
    assert list(seen) == ["launch_base", "bench_base", "stop_base"] and seen["stop_base"].ok
    assert not _alive(pids)


@pytest.mark.parametrize("exc", [RuntimeError, KeyboardInterrupt])
def test_trial_stops_the_server_whatever_happens(local_ctx, exc):
    seen: dict[str, ToolResult] = {}
    config = LaunchConfig(command=LAUNCH, python=PYTHON, port=0, label="boom", timeout_s=30)
    pids: list[int] = []
    with pytest.raises(exc):
        with trial(local_ctx, config, record=seen.__setitem__) as handle:
            pids = handle.pids
            raise exc("the caller failed mid-trial")
    assert pids and not _alive(pids)
    assert seen["stop_boom"].ok


def test_a_failed_start_raises_launch_failed_with_the_evidence(local_ctx):
    config = LaunchConfig(command=LAUNCH, python=PYTHON, port=0, env={"FAKE_CRASH": "1"}, label="crash",
                          timeout_s=30)
    with pytest.raises(LaunchFailed) as info:
        with trial(local_ctx, config):
            pytest.fail("the body must not run when the server did not start")
    assert info.value.result.status == "unresolved" and "fake start-up failure" in info.value.result.summary
    assert info.value.result.evidence  # the launch command is on record


def test_a_tree_config_makes_the_server_import_the_engine_from_that_tree(local_ctx, tmp_path):
    tree = tmp_path / "trial-tree"
    shutil.copytree(FAKE / "sglang", tree / "python" / "sglang")
    main = tree / "python" / "sglang" / "launch_server.py"
    main.write_text(main.read_text().replace("def main() -> None:\n",
                                             "def main() -> None:\n    print('imported from', __file__, flush=True)\n",
                                             1))
    config = LaunchConfig(command=LAUNCH, python=PYTHON, port=0, tree=str(tree), label="tree", timeout_s=30)
    with trial(local_ctx, config) as handle:
        log = local_ctx.host.read(handle.log_path).decode()
        env = registry.call(local_ctx, "read_process_env", {"pid": handle.pids[0]}).output["env"]
    assert f"imported from {tree}/python/sglang/launch_server.py" in log
    assert env["PYTHONPATH"].split(os.pathsep)[0] == f"{tree}/python"
    # default stays today's behaviour: no PYTHONPATH added, no cwd
    plain = LaunchConfig(command=LAUNCH).launch_args()
    assert "PYTHONPATH" not in plain["env"] and "cwd" not in plain


def _environ(pid: int) -> dict[str, str]:
    items = Path(f"/proc/{pid}/environ").read_bytes().decode().split("\0")
    return dict(i.split("=", 1) for i in items if "=" in i)


def test_a_running_server_described_as_a_config_starts_again_exactly_as_it_was(local_ctx, tmp_path):
    workdir = tmp_path / "work"
    workdir.mkdir()
    first = LaunchConfig(command=LAUNCH, python=PYTHON, port=0, cwd=str(workdir), label="user", timeout_s=30,
                         env={"NCCL_ALGO": "Ring"})
    with trial(local_ctx, first) as handle:
        found = registry.call(local_ctx, "find_server_processes", {"port": handle.port})
        s = found.output["servers"][0]
        assert s["log_path"] == handle.log_path and s["cwd"] == str(workdir)
        env = _environ(s["main"]["pid"])  # what a restart needs (unredacted: never stored by specdoctor)
        before = Path(handle.log_path).read_text()
        again = LaunchConfig.from_running(s["argv"], env=env, cwd=s["cwd"], log_path=s["log_path"], timeout_s=30)
    assert again.replace_env and again.port is None  # the port is the one in its own argv
    with trial(local_ctx, again) as second:
        s2 = registry.call(local_ctx, "find_server_processes", {"port": second.port}).output["servers"][0]
        env2 = _environ(s2["main"]["pid"])
    assert second.port == handle.port and s2["argv"] == s["argv"] and s2["cwd"] == str(workdir)
    assert env2 == env  # env -i: exactly its own environment, nothing of the launching shell added
    assert second.log_path == handle.log_path and Path(second.log_path).read_text().startswith(before)
    assert len(Path(second.log_path).read_text()) > len(before)  # appended, not truncated
