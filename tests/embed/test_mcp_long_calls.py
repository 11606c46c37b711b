"""Long MCP calls through the official SDK client: progress arrives, a cancel stops the tool (no orphan
process), and a client killed mid-call leaves no server, no simulated host and no changed tree behind."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import anyio

from .conftest import child_env
from .test_mcp import session

# ~2000 requests: minutes on the simulated host; a progress message (a cancel point) every 10 requests
LONG = {"runs": 200, "requests_per_run": 10, "warmup_runs": 0}


def _procs_mentioning(text: str) -> set[int]:
    """PIDs whose command line mentions `text` (a sandbox path), this test's own process excluded."""
    out = set()
    for d in Path("/proc").iterdir():
        if not d.name.isdigit() or int(d.name) == os.getpid():
            continue
        try:
            if text.encode() in (d / "cmdline").read_bytes().replace(b"\0", b" "):
                out.add(int(d.name))
        except OSError:
            continue
    return out


def _sandbox(repo: str) -> str:
    """The simulated host's sandbox root (…/specdoctor-sim-NAME-XXXX) from its repo path."""
    parts = Path(repo).parts
    return str(Path(*parts[: next(i for i, p in enumerate(parts) if p.startswith("specdoctor-sim-")) + 1]))


def test_progress_then_cancel_stops_the_tool(tmp_path: Path, home: Path) -> None:
    env = child_env(home)

    async def main() -> None:
        async with session(["--host", "sim:seed"], env, tmp_path) as (s, _):
            hints = json.loads((await s.read_resource("specdoctor://host/hints")).contents[0].text)
            # this sandbox's server (other servers may run on the machine: other tests, other users)
            found = await s.call_tool("find_server_processes", {"repo": hints["repo"], "exactly_one": True})
            port = found.structured_content["output"]["servers"][0]["port"]
            box = _sandbox(hints["repo"])
            before = _procs_mentioning(box)
            assert before  # the simulated server's processes

            seen: list[tuple[float, str | None]] = []

            async def record(progress: float, total: float | None, message: str | None) -> None:
                seen.append((progress, message))

            res = await s.call_tool("benchmark", {"port": port, "runs": 3}, progress_callback=record)
            assert res.structured_content["status"] == "ok"
            with anyio.move_on_after(10):  # notifications may be handled just after the response
                while not any("run 3/3" in (m or "") for _, m in seen):
                    await anyio.sleep(0.05)
            assert any("run 3/3" in (m or "") for _, m in seen), seen
            assert [p for p, _ in seen] == sorted(p for p, _ in seen) and len(seen) >= 3
            # a short text for the agent; the whole result only as structured content
            assert len(res.content) == 1 and len(res.content[0].text) < 600
            assert res.content[0].text.startswith(f"[ok] {res.structured_content['summary']}")
            assert res.structured_content["output"]["runs"] or res.structured_content["output"]

            started = time.monotonic()
            progressed = anyio.Event()
            messages: list[str | None] = []

            async def watch(progress: float, total: float | None, message: str | None) -> None:
                messages.append(message)
                if messages:
                    progressed.set()

            async with anyio.create_task_group() as tg:
                async def long_call() -> None:
                    await s.call_tool("benchmark", {"port": port, **LONG}, progress_callback=watch)

                tg.start_soon(long_call)
                with anyio.fail_after(120):
                    await progressed.wait()
                tg.cancel_scope.cancel()  # the SDK sends notifications/cancelled for the request
            # the server answers the next call at once: the cancelled benchmark no longer holds the host
            with anyio.fail_after(90):
                facts = await s.call_tool("host_facts", {})
            assert facts.structured_content["status"] == "ok"
            assert time.monotonic() - started < 100  # the long call alone takes minutes
            deadline = time.monotonic() + 10
            while _procs_mentioning(box) - before and time.monotonic() < deadline:
                await anyio.sleep(0.2)
            assert _procs_mentioning(box) <= before, "the cancelled call left a process behind"

    try:
        anyio.run(main)
    finally:  # on a failure pytest shows this with the captured output
        print((tmp_path / "mcp-stderr.log").read_text()[-3000:])
    log = (tmp_path / "mcp-stderr.log").read_text()
    assert "Traceback" not in log and "cancelled" in log


_CLIENT = textwrap.dedent("""
    import json, sys, anyio
    from mcp import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    async def main():
        params = StdioServerParameters(command=sys.argv[1], args=["mcp", "--host", "sim:seed", "--allow-mutations"])
        with open(sys.argv[2], "w") as errlog:
            async with stdio_client(params, errlog=errlog) as (r, w), ClientSession(r, w) as s:
                await s.initialize()
                hints = json.loads((await s.read_resource("specdoctor://host/hints")).contents[0].text)
                found = await s.call_tool("find_server_processes", {"repo": hints["repo"], "exactly_one": True})
                port = found.structured_content["output"]["servers"][0]["port"]
                st = await s.call_tool("stash_all", {"repo": hints["repo"]})
                print(json.dumps({"repo": hints["repo"], "stash": st.structured_content["status"]}), flush=True)
                async def progress(p, t, m):
                    print(json.dumps({"progress": m}), flush=True)
                await s.call_tool("benchmark", {"port": port, "runs": 200, "requests_per_run": 50},
                                  progress_callback=progress)
    anyio.run(main)
""")


def test_killed_client_leaves_no_server_and_no_changed_tree(tmp_path: Path, home: Path) -> None:
    from .conftest import SPECDOCTOR

    script = tmp_path / "client.py"
    script.write_text(_CLIENT)
    errlog = tmp_path / "server-stderr.log"
    client = subprocess.Popen([sys.executable, str(script), SPECDOCTOR, str(errlog)], stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, env=child_env(home), cwd=tmp_path, text=True,
                              start_new_session=True)
    try:
        assert client.stdout is not None
        first = json.loads(client.stdout.readline())
        assert first["stash"] == "ok", errlog.read_text()[-2000:]
        box = _sandbox(first["repo"])
        status = subprocess.run(["git", "-C", first["repo"], "status", "--porcelain"], capture_output=True, text=True)
        assert status.stdout.strip() == ""  # stashed: the tree really changed while the client lived
        assert "progress" in json.loads(client.stdout.readline())  # the long call is running
        servers = [p for p in _procs_mentioning("mcp --host sim:seed --allow-mutations")]
        assert servers
    finally:
        client.send_signal(signal.SIGKILL)  # the client dies; its server (own session) sees stdin close
        client.wait(timeout=10)
        assert client.stdout is not None
        client.stdout.close()
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline and (_procs_mentioning(box) or any(Path(f"/proc/{p}").exists()
                                                                           for p in servers)):
        time.sleep(0.5)
    log = errlog.read_text()
    assert not any(Path(f"/proc/{p}").exists() for p in servers), log[-3000:]  # the MCP server exited
    assert not _procs_mentioning(box), log[-3000:]  # no simulated server process left
    assert "cleanup restore_worktree" in log and "verified" in log, log[-3000:]  # the tree was put back first
    assert not Path(box).exists() or subprocess.run(
        ["git", "-C", first["repo"], "stash", "list"], capture_output=True, text=True).stdout.strip() == ""
