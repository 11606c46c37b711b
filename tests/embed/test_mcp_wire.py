"""The raw wire, started exactly as examples/mcp_config.json says: stdout carries nothing but JSON-RPC.

The client here is hand-written JSON lines speaking the handshake-era protocol (2025-06-18), as Claude
Desktop / Cursor do; the SDK-driven tests are in test_mcp.py.
"""

from __future__ import annotations

import json
import selectors
import shutil
import subprocess
import time
from pathlib import Path

from specdoctor.toolkit import registry

from .conftest import REPO_ROOT, SPECDOCTOR, child_env


def _exchange(proc: subprocess.Popen[bytes]) -> tuple[list[bytes], bytes]:
    """Send the requests, read replies until the last one arrives, then close stdin and drain both pipes."""
    assert proc.stdin and proc.stdout and proc.stderr
    requests = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "wire-test", "version": "0"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
        {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "host_facts", "arguments": {}}},
    ]
    proc.stdin.write(b"".join(json.dumps(r).encode() + b"\n" for r in requests))
    proc.stdin.flush()
    lines: list[bytes] = []
    deadline = time.monotonic() + 60
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ)
        while time.monotonic() < deadline and not any(b'"id":3' in ln for ln in lines):
            if sel.select(timeout=1):
                line = proc.stdout.readline()
                if not line:
                    break
                lines.append(line)
    proc.stdin.close()
    lines += proc.stdout.read().splitlines(keepends=True)
    err = proc.stderr.read()
    proc.wait(timeout=30)
    return lines, err


def test_the_example_config_serves_only_json_rpc_on_stdout(tmp_path: Path, home: Path) -> None:
    server = json.loads((REPO_ROOT / "examples" / "mcp_config.json").read_text())["mcpServers"]["specdoctor"]
    env = child_env(home, **server.get("env", {}))
    command = shutil.which(server["command"], path=env["PATH"])
    assert command == SPECDOCTOR, "the config's command must be the installed console script"
    assert server["args"] == ["mcp", "--host", "sim:seed"]
    with subprocess.Popen([command, *server["args"], "-v"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, env=env, cwd=tmp_path) as proc:
        lines, err = _exchange(proc)
    messages = [json.loads(ln) for ln in lines if ln.strip()]  # every stdout line must be JSON ...
    assert messages and all(m.get("jsonrpc") == "2.0" for m in messages), (lines, err[-2000:])  # JSON-RPC
    by_id = {m["id"]: m for m in messages if "id" in m}
    assert by_id[1]["result"]["protocolVersion"] == "2025-06-18"
    assert by_id[1]["result"]["serverInfo"]["name"] == "specdoctor"
    assert {t["name"] for t in by_id[2]["result"]["tools"]} == {s.name for s in registry.all(["read"])}
    facts = by_id[3]["result"]
    assert facts["isError"] is False and facts["structuredContent"]["status"] == "ok"
    assert proc.returncode == 0, err.decode()
    assert b"call host_facts" in err  # -v logs go to stderr
