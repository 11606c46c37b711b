"""Each example runs offline with `--demo` (exit 0), and an endpoint that refuses is one line (no traceback)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]


def _run(tmp_path: Path, name: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(REPO_ROOT / "examples" / f"{name}.py"), *args], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)


@pytest.mark.parametrize("name", ["openai_loop", "openai_responses_loop", "langgraph_agent"])
def test_example_runs_offline_with_demo(tmp_path: Path, name: str) -> None:
    proc = _run(tmp_path, name, "--demo")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "catalog_diffs: [ok]" in proc.stdout and "(demo model) catalog_diffs: " in proc.stdout, proc.stdout


def test_refused_model_endpoint_is_one_line(tmp_path: Path) -> None:
    import socket

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = _run(tmp_path, "openai_loop", "--base-url", f"http://127.0.0.1:{port}/v1")
    assert proc.returncode == 1
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"example: cannot reach the model at http://127.0.0.1:{port}/v1"), \
        proc.stderr[-2000:]
