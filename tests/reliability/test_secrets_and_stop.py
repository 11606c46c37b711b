"""Secrets planted in server environments never leak; specdoctor only ever signals process groups it started."""

from __future__ import annotations

import os
import re
import signal
import time
from pathlib import Path

from specdoctor.host import LocalHost
from specdoctor.toolkit import ToolContext, registry

from .secrets_campaign import run_host_folder_campaign, run_secret_campaign, start_decoy

ROOT = Path(__file__).resolve().parents[2]


def test_secrets_in_server_env_never_reach_reports_audit_checkpoints_or_terminal(tmp_path: Path):
    run = run_secret_campaign(tmp_path)
    assert run.exit_code == 0 and run.verdict, run
    assert run.read_env, "the run never read a process environment: the test would prove nothing"
    assert run.places_searched >= 6  # terminal, report.md/json/html, audit.jsonl, checkpoint sqlite, run record
    assert not run.leaks, run.leaks
    assert run.decoy_alive, "a process titled like an SGLang scheduler, not started by specdoctor, was killed"


def test_no_planted_secret_anywhere_on_disk_run_folder_controller_and_host_specdoctor_folders(tmp_path: Path):
    run = run_host_folder_campaign(tmp_path)
    assert run.exit_code == 0 and run.verdict, run
    assert run.read_env, "the host's ~/.specdoctor was not searched: the test would prove nothing"
    assert run.places_searched >= 8
    assert not run.leaks, run.leaks


def test_stop_server_never_signals_a_group_it_did_not_start(tmp_path: Path):
    decoy = start_decoy()
    try:
        for _ in range(100):  # until the decoy has renamed itself
            if Path(f"/proc/{decoy.pid}/comm").read_text().startswith("sglang::"):
                break
            time.sleep(0.05)
        ctx = ToolContext(host=LocalHost(base_env={"HOME": str(tmp_path)}), run_id="stoptest", auto_approve=True)
        r = registry.call(ctx, "stop_server", {})
        assert r.ok and r.output["stopped"] == []
        refused = registry.call(ctx, "stop_server", {"pgid": os.getpgid(decoy.pid)})
        assert refused.status == "error" and "not started by specdoctor" in refused.summary
        assert not any("kill" in e.command for e in refused.evidence)
        assert decoy.poll() is None
        comm = Path(f"/proc/{decoy.pid}/comm").read_text().strip()
        assert comm.startswith("sglang::")  # the decoy really looks like a scheduler by name
    finally:
        os.killpg(decoy.pid, signal.SIGKILL)
        decoy.wait(timeout=10)


def test_no_code_path_kills_by_name():
    """pkill/killall/`kill $(pgrep ...)` would hit other people's servers: none in the package or tools."""
    pattern = re.compile(r"\b(pkill|killall)\b|kill[^\n]*\$\(\s*pgrep")
    hits = [f"{p}:{i}" for p in (ROOT / "specdoctor").rglob("*.py")
            for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
            if pattern.search(line) and "never" not in line]
    assert not hits, hits
