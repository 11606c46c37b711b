"""A patch script whose output is ambiguous leaves the trial unresolved unless the essentials were verified."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specdoctor.engine.runner import InvestigateOptions, investigate
from specdoctor.sim import open_sim_host

PLAYBOOK = """
name: subtract-only
steps:
  - {id: locate, action: locate_server}
  - {id: user_server, action: examine_user_server, when: server_running}
  - {id: free_gpus, action: take_gpus, when: user_server_holds_gpus}
  - {id: catalog, tool: catalog_diffs, args: {repo: $params.repo}}
  - {id: backup, tool: backup_worktree, args: {repo: $params.repo}, save: {backup_id: backup_id}}
  - {id: subtract, action: subtract, when: has_backup}
  - {id: give_back, action: give_back_gpus, approval: never}
  - {id: conclude, action: conclude}
"""


@pytest.fixture(autouse=True)
def _home(tmp_path, monkeypatch):
    monkeypatch.setenv("SPECDOCTOR_HOME", str(tmp_path / "home"))


def _subtraction(tmp_path: Path, essential: list[str]) -> tuple[dict, dict]:
    pb = tmp_path / "pb.yaml"
    pb.write_text(PLAYBOOK)
    with open_sim_host("seed") as host:
        host.hints.essential = essential
        before = host.run(["git", "-C", host.hints.repo, "diff", "HEAD"]).stdout
        out = investigate(InvestigateOptions(host="sim:seed", playbook=str(pb), yes=True, out=str(tmp_path / "o"),
                                             params={"runs": 3}), host=host)
        assert host.run(["git", "-C", host.hints.repo, "diff", "HEAD"]).stdout == before
    report = json.loads(Path(out.files["json"]).read_text())
    return report, [d for d in report["decisions"] if d["step"] == "subtract"][0]


def test_script_alone_with_warn_lines_is_unresolved(tmp_path):
    report, decision = _subtraction(tmp_path, essential=[])
    assert decision["status"] == "unresolved"
    assert "trial unresolved" in decision["decided"] and "WARN - could not find class definition" in decision["why"]


def test_script_warnings_do_not_void_a_trial_whose_essentials_were_verified(tmp_path):
    report, decision = _subtraction(tmp_path, essential=["python/sglang/srt/models/kimi_k25.py"])
    assert decision["status"] == "ok"
    assert "applied from the backup and verified" in decision["why"]
    assert any("WARN" in f["title"] for f in report["findings"])


def test_a_warning_cannot_void_a_trial_when_the_search_found_no_essential_patch(tmp_path):
    """The real H200 code-regression story, on another box (L40S, 0.5.9): a bash patch script warns about a patch the
    essentials-only tree lacks, and the essentials search launched the server with no patch at all, so no essential
    can be missing — the trial stands and the culprit is found (it ended inconclusive on the real box)."""
    with open_sim_host("shell-script-warn") as host:
        out = investigate(InvestigateOptions(host="sim:shell-script-warn", yes=True, out=str(tmp_path / "o")),
                          host=host)
    report = json.loads(Path(out.files["json"]).read_text())
    (decision,) = [d for d in report["decisions"] if d["step"] == "subtract"]
    assert decision["status"] == "ok" and "the essentials search found none" in decision["why"]
    assert "WARN rope experiment not present" in decision["why"]  # quoted, and ran under bash (no SyntaxError)
    assert report["verdict"] == "code-regression"
    assert [s["path"] for s in report["suspects"] if s.get("bisection") == "culprit"] == ["python/sglang/srt/models/llama.py"]
