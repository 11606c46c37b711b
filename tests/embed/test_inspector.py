"""The official MCP Inspector CLI (npm `@modelcontextprotocol/inspector`) lists and calls our tools.

`bash .ci/run` installs it from the npm registry and names its binary in SPECDOCTOR_INSPECTOR; without
it (a developer who did not run .ci/run, or no Node.js/npm) the test is skipped with that reason.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from specdoctor.toolkit import registry

from .conftest import SPECDOCTOR, child_env

INSPECTOR = os.environ.get("SPECDOCTOR_INSPECTOR", "")

pytestmark = pytest.mark.skipif(not (INSPECTOR and os.access(INSPECTOR, os.X_OK)),
                                reason="MCP Inspector CLI not installed: bash .ci/run installs it from npm and "
                                       "sets SPECDOCTOR_INSPECTOR")


def _inspect(home: Path, cwd: Path, *method: str) -> dict:
    # the Inspector's 15 s connect default is shorter than sim:seed's start on a loaded CI box (seen there)
    proc = subprocess.run([INSPECTOR, "--cli", "--connect-timeout", "180000", SPECDOCTOR, "mcp", "--host", "sim:seed", "--method", *method],
                          capture_output=True, text=True, timeout=240, env=child_env(home), cwd=cwd)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout)


def test_inspector_lists_and_calls_tools(tmp_path: Path, home: Path) -> None:
    listed = _inspect(home, tmp_path, "tools/list")
    assert {t["name"] for t in listed["tools"]} == {s.name for s in registry.all(["read"])}
    called = _inspect(home, tmp_path, "tools/call", "--tool-name", "host_facts")
    assert called["structuredContent"]["status"] == "ok" and called.get("isError") in (False, None)
    assert called["content"][0]["text"].startswith("[ok] ")
